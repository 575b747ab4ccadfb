"""The chaos run, short (about a minute, a subset of the faults), so a regression in any of
its invariants fails CI: `manage.py chaos` as a user runs it (docs/reliability.md), against
this test run's database. Its own stack: Redis 8 with AOF, two gateways, Celery and beat,
the scraper, four simulator workers, a batch; a worker killed mid-stream, Redis restarted
(AOF replay) and a gateway SIGTERMed (the drain). Every check must pass: one usage
record per reply, no orphans, no quota overshoot in any window, no 500 and errors only in
fault windows, every stream ended, idle sockets kept, each batch line once and billed
once."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, child_env

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
FAULTS = "worker-kill,redis-restart,gateway-term"


def test_a_short_chaos_run_keeps_every_invariant(redis_url: str, tmp_path: Path) -> None:
    command = [
        sys.executable,
        "manage.py",
        "chaos",
        "--duration-s",
        "60",
        "--schedule",
        "compressed",
        "--faults",
        FAULTS,
        "--batch-lines",
        "300",
        "--idle-s",
        "30",
        "--grace-s",
        "10",
        "--run-dir",
        str(tmp_path),
    ]
    env = child_env(redis_url, SLUICE_VAR_DIR=str(tmp_path / "var"))
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=400
    )
    report = (tmp_path / "report.md").read_text() if (tmp_path / "report.md").exists() else ""
    assert done.returncode == 0, f"{report or done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert report.startswith("# Chaos run: PASS"), report[:2000]
    for fault in FAULTS.split(","):
        assert f"| {fault} |" in report  # each fault really happened
