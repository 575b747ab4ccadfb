"""`make run` runs the autoscaler loop: it leads, decides for the embedded deployment's
policy (setup_demo's, min 1 and max 1) and records why it holds, from the first ticks."""

import re
import urllib.request

import pytest

from foundation.embedded_redis import free_port
from inference.worker_command import EMBEDDED_MODEL
from tests.sims import SimProcess
from tests.test_make_run import Launcher
from tests.waiting import wait_until

pytestmark = pytest.mark.live


@pytest.fixture
def sim():
    process = SimProcess(model=EMBEDDED_MODEL)
    yield process
    process.stop()


def metric(port: int, pattern: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_make_run_runs_the_autoscaler_which_holds_the_demo_deployment_and_says_why(sim, tmp_path):
    # The embedded model's worker is a simulator here (a vLLM start takes minutes on CPU):
    # registered by SLUICE_WORKERS as the launcher registers its own vLLM worker.
    launcher = Launcher(
        tmp_path / "var",
        free_port(),
        SLUICE_EMBEDDED_WORKER="0",
        SLUICE_WORKERS=f"{EMBEDDED_MODEL}@{sim.url}",
        AUTOSCALE_TICK_S="1",
    )
    try:
        launcher.wait_for(r"autoscaler \| autoscaler: local actuator, tick 1 s", timeout=120)
        launcher.wait_for(r"Sluice is ready")
        held = launcher.wait_for(
            rf"autoscaler \| {re.escape(EMBEDDED_MODEL)}: hold 1->1 within band: (.*)",
            timeout=60,
        )
        assert "on 1 serving" in held.group(1)
        ticks = wait_until(
            lambda: metric(launcher.port, r"^sluice_autoscaler_ticks_total (\S+)$"),
            10,
            "/metrics to count the loop's ticks",
        )
        holds = metric(
            launcher.port,
            rf'^sluice_autoscaler_decisions_total\{{action="hold",'
            rf'deployment="{EMBEDDED_MODEL}"\}} (\S+)$',
        )
        assert ticks >= 1 and holds >= 1
        # Only the simulator serves: the loop started nothing beside it.
        assert not [line for line in launcher.seen if re.search(r"autoscaler \|.*: up ", line)]
    finally:
        launcher.stop()
