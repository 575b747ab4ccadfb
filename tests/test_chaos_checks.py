"""The chaos run's history checker (bench/chaos/checks.py) on synthetic histories: a clean
history passes, and each kind of violation it exists for is caught."""

from typing import Any

import pytest

from bench.chaos.checks import (
    check_batch,
    check_billing,
    check_errors,
    check_idle_sockets,
    check_orphans,
    check_quota_windows,
    check_streams,
    fault_at,
    max_in_window,
    recoveries,
    run_checks,
    status_of,
)
from bench.chaos.history import (
    BROKEN,
    ERROR_CHUNK,
    HANG,
    OK,
    REFUSED,
    Attempt,
    BatchLineResult,
    BatchResult,
    FaultWindow,
    History,
    IdleClose,
    LedgerRow,
    TeamLimits,
)

pytestmark = pytest.mark.unit
T0 = 1_700_000_000.0


def attempt(
    number: int,
    team: str = "steady",
    outcome: str = OK,
    at: float = 0.0,
    tokens: tuple[int, int] = (12, 16),
    cache: str | None = "bypass",
    status: int | None = 200,
    error: dict[str, Any] | None = None,
) -> Attempt:
    return Attempt(
        client_id=f"c{number}",
        team=team,
        transport="http",
        stream=True,
        temperature=1.0,
        sent_at=T0 + at,
        ended_at=T0 + at + 1.0,
        outcome=outcome,
        status=status,
        request_id=f"chatcmpl-{number}",
        error=error,
        prompt_tokens=tokens[0] if outcome == OK else None,
        completion_tokens=tokens[1] if outcome == OK else None,
        cache=cache,
    )


def row(
    number: int,
    team: str = "steady",
    at: float = 0.0,
    tokens: tuple[int, int] = (12, 16),
    cache: str = "bypass",
    status: str = "ok",
    batch_id: str = "",
) -> LedgerRow:
    # Settled a second after admission: created_at - latency = the admission time.
    return LedgerRow(
        request_id=f"chatcmpl-{number}" if not batch_id else f"batch_req_{batch_id}_{number}",
        team=team,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        status=status,
        cache_result=cache,
        created_at=T0 + at + 1.0,
        latency_ms=1000,
        batch_id=batch_id,
    )


def error(code: str, kind: str = "api_error") -> dict[str, Any]:
    return {"message": "m", "type": kind, "param": None, "code": code}


def clean_history() -> History:
    attempts = [attempt(n, at=n) for n in range(10)]
    attempts.append(
        attempt(
            10,
            team="rpm",
            outcome=REFUSED,
            at=3,
            status=429,
            error=error("requests_per_minute", "rate_limit_error"),
        )
    )
    attempts.append(
        attempt(11, outcome=ERROR_CHUNK, at=21, status=502, error=error("upstream_error"))
    )
    attempts.append(attempt(12, at=5, cache="hit-exact"))
    ledger = [row(n, at=n) for n in range(10)]
    ledger.append(row(11, at=21, tokens=(12, 3), status="failed"))
    ledger.append(row(12, at=5, tokens=(0, 0), cache="hit-exact"))
    batch = BatchResult(
        "batch_1",
        "batch",
        "cancelled",
        3,
        output=[BatchLineResult("line-0", "batch_req_batch_1_0", 200, 9, 16)],
        errors=[
            BatchLineResult("line-1", None, None, error_code="batch_cancelled"),
            BatchLineResult("line-2", None, None, error_code="batch_cancelled"),
        ],
    )
    ledger.append(row(0, team="batch", tokens=(9, 16), batch_id="batch_1"))
    return History(
        started_at=T0,
        ended_at=T0 + 60,
        attempts=attempts,
        ledger=ledger,
        limits={"steady": TeamLimits("steady"), "rpm": TeamLimits("rpm", requests_per_minute=5)},
        faults=[FaultWindow("worker-kill", "sim-0", T0 + 20, T0 + 25)],
        batch=batch,
    )


def violations(history: History) -> list[str]:
    return [v for result in run_checks(history) for v in result.violations]


def test_a_clean_history_passes_every_check():
    assert violations(clean_history()) == []


def test_a_double_billed_request_is_caught():
    history = clean_history()
    history.ledger.append(row(3, at=3))
    found = check_billing(history.attempts, history.ledger).violations
    assert found == ["double-billed: c3 (steady, http stream, chatcmpl-3) has 2 records"]


def test_a_reply_without_a_usage_record_is_caught():
    history = clean_history()
    history.ledger = [r for r in history.ledger if r.request_id != "chatcmpl-4"]
    found = check_billing(history.attempts, history.ledger).violations
    assert found == ["not billed: c4 (steady, http stream, chatcmpl-4) has no usage record"]


def test_tokens_other_than_the_client_was_told_are_caught():
    history = clean_history()
    history.ledger[2] = row(2, at=2, tokens=(12, 17))
    (found,) = check_billing(history.attempts, history.ledger).violations
    assert "billed 12+17 tokens, the client was told 12+16" in found


def test_a_cache_hit_billed_tokens_is_caught():
    history = clean_history()
    history.ledger[-2] = row(12, at=5, tokens=(12, 16), cache="hit-exact")
    (found,) = check_billing(history.attempts, history.ledger).violations
    assert "28 tokens billed for a reply served by 'hit-exact'" in found


def test_an_error_billed_as_a_completed_reply_is_caught():
    history = clean_history()
    history.ledger[10] = row(11, at=21, tokens=(12, 3), status="ok")
    (found,) = check_billing(history.attempts, history.ledger).violations
    assert "the record bills a completed reply" in found


def test_a_record_no_request_claims_is_caught():
    history = clean_history()
    history.ledger.append(row(99, at=7))
    (found,) = check_orphans(history.attempts, history.ledger, history.batch).violations
    assert found.startswith("steady: 1 records no client request claims")


def test_a_record_of_a_request_whose_id_the_client_lost_is_allowed_and_noted():
    history = clean_history()
    lost = attempt(20, outcome=BROKEN, at=30)
    lost.request_id = None
    history.attempts.append(lost)
    history.ledger.append(row(99, at=30, status="cancelled"))
    result = check_orphans(history.attempts, history.ledger, history.batch)
    assert result.passed
    assert "1 records of requests whose id the client never learned" in result.notes[0]


def test_more_admissions_than_the_rpm_in_a_window_are_caught():
    ledger = [row(n, team="rpm", at=n * 10.0) for n in range(6)]  # 6 within 50 s
    limits = {"rpm": TeamLimits("rpm", requests_per_minute=5)}
    (found,) = check_quota_windows(ledger, limits, T0).violations
    assert found == "rpm: 6 requests admitted within 58 s from t=0.0 s, over its RPM of 5"


def test_the_rpm_holds_when_admissions_spread_past_the_window():
    # 5 in the first minute, 5 more each 60 s after one of them: never 6 in 58 s.
    ledger = [row(n, team="rpm", at=n * 12.0) for n in range(10)]
    limits = {"rpm": TeamLimits("rpm", requests_per_minute=5)}
    assert check_quota_windows(ledger, limits, T0).passed


def test_the_admission_time_is_the_settlement_less_the_latency():
    limits = {"rpm": TeamLimits("rpm", requests_per_minute=5)}
    # Settled within 6 s, but admitted 12 s apart (0, 12, ... 60 s): slow streams.
    ledger = [
        LedgerRow(f"r{n}", "rpm", 1, 1, "ok", "bypass", T0 + 100 + n, 1000 * (100 - 11 * n))
        for n in range(6)
    ]
    assert check_quota_windows(ledger, limits, T0).passed
    # Settled 20 s apart, but all admitted at once (T0 + 100).
    ledger = [
        LedgerRow(f"r{n}", "rpm", 1, 1, "ok", "bypass", T0 + 100 + 20 * n, 1000 * 20 * n)
        for n in range(6)
    ]
    assert not check_quota_windows(ledger, limits, T0).passed


def test_tokens_over_the_tpm_and_the_month_are_caught():
    ledger = [row(n, team="tpm", at=n, tokens=(50, 50)) for n in range(4)]
    limits = {"tpm": TeamLimits("tpm", tokens_per_minute=300, tokens_per_month=350)}
    found = check_quota_windows(ledger, limits, T0).violations
    assert found == [
        "tpm: 400 tokens admitted within 58 s from t=0.0 s, over its TPM of 300",
        "tpm: 400 tokens billed, over its month of 350",
    ]


def test_batch_lines_do_not_count_in_the_minute_windows_but_do_in_the_month():
    ledger = [row(n, team="b", at=n, batch_id="batch_1") for n in range(10)]
    limits = {"b": TeamLimits("b", requests_per_minute=5, tokens_per_month=100)}
    (found,) = check_quota_windows(ledger, limits, T0).violations
    assert "over its month of 100" in found


def test_max_in_window():
    points = [(0.0, 1), (10.0, 1), (57.9, 1), (58.0, 1), (100.0, 1)]
    assert max_in_window(points, 58.0) == (3, 0.0)
    assert max_in_window(points, 60.0) == (4, 0.0)
    assert max_in_window([], 58.0) == (0, 0.0)


def test_a_500_is_caught_anywhere():
    history = clean_history()
    history.attempts.append(attempt(30, outcome=REFUSED, at=22, status=500, error=error("x")))
    (found,) = check_errors(history.attempts, history.faults, history.grace_s, T0).violations
    assert "HTTP 500" in found


def test_a_503_outside_every_fault_window_is_caught_and_inside_is_not():
    history = clean_history()
    unavailable = error("service_unavailable")
    history.attempts.append(attempt(31, outcome=REFUSED, at=50, status=503, error=unavailable))
    history.attempts.append(attempt(32, outcome=REFUSED, at=38, status=503, error=unavailable))
    found = check_errors(history.attempts, history.faults, 15.0, T0).violations
    assert len(found) == 1
    assert "503 service_unavailable outside any fault window (t=50.0 s)" in found[0]


def test_an_error_not_in_openais_shape_is_caught():
    history = clean_history()
    bad = attempt(33, outcome=REFUSED, at=22, status=502, error={"raw": "Bad Gateway"})
    bad.shape_ok = False
    history.attempts.append(bad)
    (found,) = check_errors(history.attempts, history.faults, 15.0, T0).violations
    assert "not OpenAI's error shape" in found


def test_a_hang_and_a_cut_stream_are_caught():
    history = clean_history()
    history.attempts.append(attempt(40, outcome=HANG, at=10))
    history.attempts.append(attempt(41, outcome=BROKEN, at=11))
    found = check_streams(history.attempts).violations
    assert [v.split(":")[0] for v in found] == ["hang", "cut without an error chunk after 0 chunks"]


def test_an_idle_socket_closed_by_a_running_gateway_is_caught():
    faults = [FaultWindow("gateway-term", "", T0 + 30, T0 + 35, gateway=1)]
    closes = [IdleClose(T0 + 31, 1, 1012), IdleClose(T0 + 31, 0, 1006), IdleClose(T0 + 55, 1, 1000)]
    found = check_idle_sockets(closes, faults, 15.0, 150.0, T0).violations
    assert found == [
        "gateway 0 closed an idle socket (code 1006) at t=31.0 s",
        "gateway 1 closed an idle socket (code 1000) at t=55.0 s",
    ]


def test_a_batch_line_reported_twice_or_unbilled_is_caught():
    history = clean_history()
    assert history.batch is not None
    history.batch.errors.append(BatchLineResult("line-0", None, 500))
    history.ledger = [r for r in history.ledger if not r.batch_id]
    found = check_batch(history.batch, history.ledger).violations
    assert found == [
        "1 lines reported twice: ['line-0']",
        "answered line line-0 has no usage record",
    ]


def test_a_batch_attempt_that_billed_nothing_needs_no_line_but_one_that_billed_does():
    """A line retried after a failed try has a record for that try too: with no tokens
    (refused before a worker, or a batch line's failed try, which is not billed) it is in
    neither file by right; with tokens it is a line billed and never reported."""
    history = clean_history()
    assert history.batch is not None
    history.ledger.append(row(7, team="batch", tokens=(0, 0), status="failed", batch_id="batch_1"))
    assert check_batch(history.batch, history.ledger).violations == []
    history.ledger.append(row(8, team="batch", tokens=(9, 4), status="failed", batch_id="batch_1"))
    assert check_batch(history.batch, history.ledger).violations == [
        "1 billed batch lines in neither file: ['batch_req_batch_1_8']"
    ]


def test_status_of_socket_errors():
    assert status_of(error("requests_per_minute", "rate_limit_error")) == 429
    assert status_of(error("no_healthy_worker")) == 503
    assert status_of(error("upstream_error")) == 502
    assert status_of(error("something_new")) is None


def test_recovery_is_the_first_success_sent_after_the_fault_ends():
    history = clean_history()
    (found,) = recoveries(history.attempts, history.faults, history.grace_s)
    # The fault ended at 25 s; the first success sent after it does not exist in the clean
    # history (its last success was sent at 9 s).
    assert found.first_success_s is None
    history.attempts.append(attempt(50, at=27))
    (found,) = recoveries(history.attempts, history.faults, history.grace_s)
    assert found.first_success_s == pytest.approx(3.0)
    assert found.outcomes == {"error_chunk upstream_error": 1, "ok": 1}


def test_a_failure_in_overlapping_windows_is_put_down_to_the_latest_fault():
    faults = [
        FaultWindow("gateway-term", "", T0 + 10, T0 + 12),
        FaultWindow("scraper-pause", "", T0 + 20, T0 + 25),
    ]
    early, late = attempt(1, at=14), attempt(2, at=22)
    assert fault_at(early, faults, 15.0) is faults[0]
    assert fault_at(late, faults, 15.0) is faults[1]
    assert fault_at(attempt(3, at=45), faults, 15.0) is None
