"""`manage.py bench` against a fixed-latency simulator: the figures it prints must match what
the simulator was told to do."""

import itertools
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from bench.loadtest.drivers import arrival_gaps
from bench.loadtest.workloads import WorkloadSpec, requests_for
from foundation.embedded_redis import free_port
from tests.sims import SimProcess

TTFT_S, ITL_S, TOKENS = 0.040, 0.005, 10
EXPECTED_LATENCY_S = TTFT_S + (TOKENS - 1) * ITL_S  # 85 ms


@pytest.fixture(scope="module")
def fixed_sim():
    sim = SimProcess(model="sim", fixed_ttft_ms=TTFT_S * 1000, fixed_itl_ms=ITL_S * 1000)
    yield sim
    sim.stop()


def bench(tmp_path: Path, url: str, **options: object) -> dict[str, Any]:
    out = tmp_path / "bench.json"
    call_command("bench", url=url, model="sim", max_tokens=TOKENS, json=out, quiet=True, **options)
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


@pytest.mark.live
def test_a_streamed_sweep_reports_the_configured_latency_and_throughput(fixed_sim, tmp_path):
    doc = bench(tmp_path, f"{fixed_sim.url}/v1", concurrency="1,4", requests=40)
    for level in doc["levels"]:
        assert level["ok"] == level["requests"] == 40
        # Never faster than configured; the slack is the host (2 shared cores) and Python.
        assert EXPECTED_LATENCY_S <= level["latency_p50_s"] < EXPECTED_LATENCY_S * 1.4
        assert TTFT_S <= level["ttft_p50_s"] < TTFT_S * 1.5
        assert ITL_S <= level["tpot_p50_s"] < ITL_S * 1.6
        assert level["output_tokens_per_s"] == pytest.approx(level["requests_per_s"] * TOKENS)
        ideal = level["level"] / EXPECTED_LATENCY_S
        assert 0.6 * ideal < level["requests_per_s"] <= ideal
        assert level["errors"] == {}


@pytest.mark.live
def test_without_streaming_the_first_token_is_the_whole_reply(fixed_sim, tmp_path):
    (level,) = bench(tmp_path, f"{fixed_sim.url}/v1", concurrency="2", requests=10, stream=False)[
        "levels"
    ]
    assert EXPECTED_LATENCY_S <= level["latency_p50_s"] < EXPECTED_LATENCY_S * 1.4
    assert level["ttft_p50_s"] == pytest.approx(level["latency_p50_s"], abs=0.002)


@pytest.mark.live
def test_open_loop_arrivals_follow_the_seeded_schedule(fixed_sim, tmp_path):
    (level,) = bench(tmp_path, f"{fixed_sim.url}/v1", rate="25", requests=50, seed=7)["levels"]
    gaps = list(itertools.islice(arrival_gaps(25, "poisson", random.Random(7)), 49))
    expected = sum(gaps) + EXPECTED_LATENCY_S  # the last arrival, then its reply
    assert level["ok"] == 50
    assert expected <= level["elapsed_s"] < expected + 0.25


@pytest.mark.live
def test_errors_are_counted_by_kind(fixed_sim, tmp_path):
    wrong_model = bench(
        tmp_path,
        f"{fixed_sim.url}/v1",
        concurrency="1",
        requests=3,
        compare=f"http://127.0.0.1:{free_port()}/v1",
    )
    call_command(
        "bench",
        url=f"{fixed_sim.url}/v1",
        model="no-such-model",
        concurrency="1",
        requests=2,
        quiet=True,
        json=tmp_path / "missing.json",
    )
    missing = json.loads((tmp_path / "missing.json").read_text())
    assert missing["levels"][0]["errors"] == {"http_404": 2}
    target, nobody = wrong_model["levels"]
    assert target["errors"] == {} and nobody["errors"] == {"connect": 3}
    assert wrong_model["comparison"][0]["throughput_ratio"] is None  # nothing to divide by


@pytest.mark.live
def test_compare_runs_both_endpoints_and_reports_ratios(fixed_sim, tmp_path):
    doc = bench(
        tmp_path,
        f"{fixed_sim.url}/v1",
        concurrency="2",
        requests=20,
        compare=f"{fixed_sim.url}/v1",
        html=tmp_path / "report.html",
    )
    target, compare = doc["levels"]
    assert (target["endpoint"], compare["endpoint"]) == ("target", "compare")
    assert target["errors"] == compare["errors"] == {}
    (row,) = doc["comparison"]
    # The ratios are the two runs' own figures set side by side (not a timing claim: the
    # same server twice varies with the machine's load, as benchmarks are read).
    ratio = target["requests_per_s"] / compare["requests_per_s"]
    assert row["throughput_ratio"] == pytest.approx(ratio)
    added = target["latency_p50_s"] - compare["latency_p50_s"]
    assert row["added_latency_p50_s"] == pytest.approx(added)
    html = (tmp_path / "report.html").read_text()
    assert "plotly.js v" in html and len(html) > 1_000_000  # the library itself, inlined
    assert "<script src=" not in html  # nothing fetched: the report opens offline


@pytest.mark.unit
def test_the_shared_prefix_workload_mixes_repeats_and_paraphrases_as_asked():
    spec = WorkloadSpec("shared-prefix", "m", 8, repeat_share=0.4, paraphrase_share=0.3)
    bodies = list(itertools.islice(requests_for(spec), 2000))
    questions = Counter(body["messages"][1]["content"] for body in bodies)
    assert len({body["messages"][0]["content"] for body in bodies}) == 1  # one system prompt
    repeats = sum(count - 1 for count in questions.values())
    assert repeats / len(bodies) > 0.4  # exact repeats, plus new questions that recur
    assert bodies[0] == next(requests_for(spec))  # seeded: the same run twice


@pytest.mark.live
def test_a_jsonl_workload_is_replayed_and_bad_lines_are_named(tmp_path, fixed_sim):
    good = tmp_path / "good.jsonl"
    good.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    doc = bench(tmp_path, f"{fixed_sim.url}/v1", concurrency="1", requests=3, workload=str(good))
    assert doc["levels"][0]["ok"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\nnot json\n')
    with pytest.raises(CommandError, match=r"bad\.jsonl:2"):
        bench(tmp_path, f"{fixed_sim.url}/v1", concurrency="1", requests=1, workload=str(bad))
