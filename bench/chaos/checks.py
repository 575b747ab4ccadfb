"""The invariants a chaos run must keep, as pure functions over its history.

Why pure: a check that only runs against a live stack is only ever seen to pass. Each one
here is proven to catch what it claims on synthetic histories (tests/test_chaos_checks.py):
a request billed twice, a reply never billed, a quota window overrun, a 500, a hang.

- billing: every reply a client received whole has exactly one usage record, marked ok,
  with the tokens the client was told (nothing for what a cache or a shared generation
  served, as docs/caching.md bills it); no request has two.
- orphans: no usage record without a client request. A client that lost its connection
  before it learned the request id cannot be matched by id, so records of its team up to
  the number of such requests are allowed and reported apart.
- quota windows: from the ledger, no team's admitted requests (tokens) exceed its RPM (TPM)
  in any window, nor its tokens this month. Admission counts in one-second buckets, at most
  `limit` in any 60 consecutive buckets (docs/accounts.md); a continuous 60 s window can
  touch 61 buckets, and a request's admission second is estimated from its record
  (settlement time less latency), so windows are checked over WINDOW_S - SLACK_S = 58 s.
- errors: no 5xx other than 502/503; every failure in OpenAI's shape; 502/503 only while
  a fault was on (or GRACE after it ended); 429 for a quota any time; nothing else.
- streams: every stream ended: no hang past the idle timeout, no stream cut without an
  error chunk, no request left without an answer.
- idle sockets: a socket idle between messages is never closed by the server, except by
  the gateway that was being stopped.
- batch: every line of the batch in the output or the error file once, every answered line
  in the ledger once with its tokens.
- recovery (reported, not judged): per fault, the requests in its window, their outcomes,
  and the time from the fault's end to the first success sent after it.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.chaos.history import (
    BROKEN,
    DISCONNECTED,
    ERROR_CHUNK,
    FREE_CACHE_RESULTS,
    HANG,
    MALFORMED,
    OK,
    PENDING,
    REFUSED,
    UNREACHABLE,
    Attempt,
    BatchResult,
    FaultWindow,
    History,
    IdleClose,
    LedgerRow,
    TeamLimits,
)

WINDOW_S = 60.0
SLACK_S = 2.0
QUOTA_CODES = frozenset(
    {
        "requests_per_minute",
        "tokens_per_minute",
        "tokens_per_month",
        "budget_per_month",
        "key_requests_per_minute",
    }
)
FAULT_STATUSES = frozenset({502, 503, 429})
# What an error's code means in HTTP terms (gateway/serving/errors.py, docs/api.md): the
# socket's error events and SSE error chunks carry no status of their own.
CODE_STATUS = {
    **dict.fromkeys(QUOTA_CODES, 429),
    "rate_limited": 429,
    "too_many_failed_authentications": 429,
    "batch_queue_limit_exceeded": 429,
    "upstream_error": 502,
    "service_unavailable": 503,
    "no_healthy_worker": 503,
    "queue_timeout": 503,
    "invalid_request": 400,
    "context_length_exceeded": 400,
    "max_tokens_over_cap": 400,
    "invalid_api_key": 401,
    "unauthenticated": 401,
    "insufficient_scope": 403,
    "model_not_allowed": 403,
    "model_not_found": 404,
    "busy": 409,
    "request_too_large": 413,
}
TYPE_STATUS = {
    "rate_limit_error": 429,
    "invalid_request_error": 400,
    "permission_error": 403,
}
SHOWN = 12  # violations listed per check; the rest are counted


@dataclass
class CheckResult:
    name: str
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations


def is_openai_error(body: Any) -> bool:
    """{"error": {"message": str, "type": str, "param": ..., "code": ...}}."""
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        return False
    error = body["error"]
    return (
        isinstance(error.get("message"), str)
        and isinstance(error.get("type"), str)
        and "param" in error
        and "code" in error
    )


def status_of(error: dict[str, Any]) -> int | None:
    """The HTTP status an error object stands for (for chunks and socket events)."""
    code = error.get("code")
    if isinstance(code, str) and code in CODE_STATUS:
        return CODE_STATUS[code]
    kind = error.get("type")
    return TYPE_STATUS.get(kind) if isinstance(kind, str) else None


def in_window(moment: float, fault: FaultWindow, grace_s: float) -> bool:
    return fault.started_at <= moment <= fault.ended_at + grace_s


def fault_at(attempt: Attempt, faults: Iterable[FaultWindow], grace_s: float) -> FaultWindow | None:
    """The fault whose window (with its grace) the attempt overlapped: it was sent or
    ended in it, or ran across all of it. Where windows overlap (a grace running into the
    next fault), the one that started last before the attempt ended."""
    found = None
    for fault in faults:
        overlaps = fault.started_at <= (attempt.ended_at or attempt.sent_at)
        overlaps = overlaps and attempt.sent_at <= fault.ended_at + grace_s
        if overlaps and (found is None or fault.started_at > found.started_at):
            found = fault
    return found


def _by_request_id(ledger: Iterable[LedgerRow]) -> dict[str, list[LedgerRow]]:
    rows: dict[str, list[LedgerRow]] = defaultdict(list)
    for row in ledger:
        rows[row.request_id].append(row)
    return rows


def _tokens_match(attempt: Attempt, row: LedgerRow) -> str | None:
    """Why the record's tokens are not what the client was told, or None."""
    if row.cache_result in FREE_CACHE_RESULTS:
        if row.tokens:
            return f"{row.tokens} tokens billed for a reply served by '{row.cache_result}'"
        return None
    if attempt.prompt_tokens is None or attempt.completion_tokens is None:
        return "the client received no usage to compare"
    if (row.prompt_tokens, row.completion_tokens) != (
        attempt.prompt_tokens,
        attempt.completion_tokens,
    ):
        return (
            f"billed {row.prompt_tokens}+{row.completion_tokens} tokens, the client was told "
            f"{attempt.prompt_tokens}+{attempt.completion_tokens}"
        )
    return None


def _who(attempt: Attempt) -> str:
    kind = f"{attempt.transport}{' stream' if attempt.stream else ''}"
    return f"{attempt.client_id} ({attempt.team}, {kind}, {attempt.request_id or 'no id'})"


def check_billing(attempts: list[Attempt], ledger: list[LedgerRow]) -> CheckResult:
    result = CheckResult("billing: one usage record per reply, tokens as the client saw them")
    rows = _by_request_id(ledger)
    matched = 0
    for attempt in attempts:
        found = rows.get(attempt.request_id or "", [])
        if len(found) > 1:
            result.violations.append(f"double-billed: {_who(attempt)} has {len(found)} records")
        if attempt.outcome == OK:
            if attempt.request_id is None:
                result.violations.append(f"a whole reply without a request id: {_who(attempt)}")
                continue
            if not found:
                result.violations.append(f"not billed: {_who(attempt)} has no usage record")
                continue
            matched += 1
            row = found[0]
            if row.status != "ok":
                result.violations.append(
                    f"{_who(attempt)}: the client got a whole reply, the record says '{row.status}'"
                )
            mismatch = _tokens_match(attempt, row)
            if mismatch == "the client received no usage to compare":
                result.notes.append(f"{_who(attempt)}: {mismatch}")
            elif mismatch is not None:
                result.violations.append(f"{_who(attempt)}: {mismatch}")
            if attempt.cache is not None and attempt.cache != row.cache_result:
                result.violations.append(
                    f"{_who(attempt)}: the client was told cache '{attempt.cache}', the "
                    f"record says '{row.cache_result}'"
                )
        elif found and found[0].status == "ok" and attempt.outcome in (REFUSED, ERROR_CHUNK):
            result.violations.append(
                f"{_who(attempt)}: the client got an error ({attempt.code}), the record "
                "bills a completed reply"
            )
    ok = sum(attempt.outcome == OK for attempt in attempts)
    result.notes.insert(0, f"{ok} whole replies, {matched} of them with a usage record")
    return result


def _unknown_ids(attempts: list[Attempt]) -> Counter[str]:
    """Per team, requests that reached a gateway without the client learning their id."""
    return Counter(
        attempt.team
        for attempt in attempts
        if attempt.request_id is None and attempt.failed and attempt.outcome != UNREACHABLE
    )


def check_orphans(
    attempts: list[Attempt], ledger: list[LedgerRow], batch: BatchResult | None
) -> CheckResult:
    result = CheckResult("orphans: no usage record without a client request")
    known = {attempt.request_id for attempt in attempts if attempt.request_id}
    batch_id = batch.batch_id if batch is not None else None
    orphans: dict[str, list[LedgerRow]] = defaultdict(list)
    for row in ledger:
        if row.batch_id:
            if row.batch_id != batch_id:
                result.violations.append(f"{row.request_id}: a line of an unknown batch")
            continue  # the batch's own rows: check_batch
        if row.request_id not in known:
            orphans[row.team].append(row)
    allowed = _unknown_ids(attempts)
    for team, rows in sorted(orphans.items()):
        listed = ", ".join(f"{r.request_id} ({r.status})" for r in rows[:5])
        if len(rows) > allowed[team]:
            result.violations.append(
                f"{team}: {len(rows)} records no client request claims, but only "
                f"{allowed[team]} of its requests ended without an id: {listed}"
            )
        else:
            result.notes.append(
                f"{team}: {len(rows)} records of requests whose id the client never learned "
                f"({allowed[team]} requests ended so): {listed}"
            )
    return result


def max_in_window(points: list[tuple[float, int]], span_s: float) -> tuple[int, float]:
    """The largest sum of amounts whose times lie within span_s of each other, and the
    time the heaviest window starts. points: (time, amount)."""
    ordered = sorted(points)
    best, best_at, total, first = 0, 0.0, 0, 0
    for last in range(len(ordered)):
        total += ordered[last][1]
        while ordered[last][0] - ordered[first][0] >= span_s:
            total -= ordered[first][1]
            first += 1
        if total > best:
            best, best_at = total, ordered[first][0]
    return best, best_at


def check_quota_windows(
    ledger: list[LedgerRow], limits: dict[str, TeamLimits], started_at: float = 0.0
) -> CheckResult:
    result = CheckResult(
        f"quotas: admitted requests and tokens within each team's limits in any "
        f"{WINDOW_S - SLACK_S:g} s (from the ledger)"
    )
    span = WINDOW_S - SLACK_S
    by_team: dict[str, list[LedgerRow]] = defaultdict(list)
    for row in ledger:
        by_team[row.team].append(row)
    for team, quota in sorted(limits.items()):
        rows = by_team.get(team, [])
        interactive = [row for row in rows if not row.batch_id]  # batch lines: own windows
        figures = []
        for name, limit, points in (
            ("RPM", quota.requests_per_minute, [(r.admitted_at, 1) for r in interactive]),
            ("TPM", quota.tokens_per_minute, [(r.admitted_at, r.tokens) for r in interactive]),
        ):
            if limit is None:
                continue
            most, at = max_in_window(points, span)
            loose, _ = max_in_window(points, WINDOW_S)
            figures.append(f"{name} {limit}: at most {most} in {span:g} s ({loose} in 60 s)")
            if most > limit:
                result.violations.append(
                    f"{team}: {most} {'requests' if name == 'RPM' else 'tokens'} admitted "
                    f"within {span:g} s from t={at - started_at:.1f} s, over its {name} of {limit}"
                )
        if quota.tokens_per_month is not None:
            used = sum(row.tokens for row in rows)
            figures.append(f"month {quota.tokens_per_month}: {used} used")
            if used > quota.tokens_per_month:
                result.violations.append(
                    f"{team}: {used} tokens billed, over its month of {quota.tokens_per_month}"
                )
        result.notes.append(f"{team}: " + ("; ".join(figures) or "no limits"))
    return result


def check_errors(
    attempts: list[Attempt], faults: list[FaultWindow], grace_s: float, started_at: float = 0.0
) -> CheckResult:
    result = CheckResult(
        "errors: no 500; OpenAI's shape; 502/503 only in a fault window; 429 for quotas"
    )
    kinds: Counter[str] = Counter()
    for attempt in attempts:
        if attempt.warmup or attempt.outcome not in (REFUSED, ERROR_CHUNK, MALFORMED):
            continue
        status = attempt.status
        fault = fault_at(attempt, faults, grace_s)
        if attempt.outcome == MALFORMED or not attempt.shape_ok:
            result.violations.append(
                f"{_who(attempt)}: not OpenAI's error shape (status {status}): {attempt.detail}"
            )
            kinds["malformed"] += 1
        elif status is None:
            result.violations.append(f"{_who(attempt)}: an error of unknown kind {attempt.error}")
            kinds["unknown"] += 1
        elif status >= 500 and status not in FAULT_STATUSES:
            result.violations.append(f"{_who(attempt)}: HTTP {status} {attempt.code}")
            kinds[f"{status}"] += 1
        elif status == 429 and attempt.code in QUOTA_CODES:
            kinds["quota"] += 1
        elif status in FAULT_STATUSES and fault is not None:
            kinds[f"{status} in {fault.kind}"] += 1
        elif status in FAULT_STATUSES:
            result.violations.append(
                f"{_who(attempt)}: {status} {attempt.code} outside any fault window "
                f"(t={attempt.sent_at - started_at:.1f} s)"
            )
            kinds[f"{status} outside faults"] += 1
        else:
            result.violations.append(f"{_who(attempt)}: unexpected {status} {attempt.code}")
            kinds[f"{status}"] += 1
    result.notes.append(", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) or "no errors")
    return result


def check_streams(attempts: list[Attempt]) -> CheckResult:
    result = CheckResult(
        "streams: every request answered, every stream ended ([DONE] or an error chunk)"
    )
    for attempt in attempts:
        if attempt.warmup:
            continue
        if attempt.outcome == HANG:
            result.violations.append(f"hang: {_who(attempt)}: {attempt.detail}")
        elif attempt.outcome == BROKEN:
            result.violations.append(
                f"cut without an error chunk after {attempt.content_chunks} chunks: "
                f"{_who(attempt)}: {attempt.detail}"
            )
        elif attempt.outcome == DISCONNECTED:
            result.violations.append(f"no answer: {_who(attempt)}: {attempt.detail}")
        elif attempt.outcome == UNREACHABLE:
            result.violations.append(f"no gateway took it: {_who(attempt)}: {attempt.detail}")
        elif attempt.outcome == PENDING:
            result.violations.append(f"never finished: {_who(attempt)}")
    return result


def check_idle_sockets(
    closes: list[IdleClose],
    faults: list[FaultWindow],
    grace_s: float,
    idle_s: float,
    started_at: float = 0.0,
) -> CheckResult:
    result = CheckResult(f"idle sockets: never closed by the server while idle ({idle_s:g} s)")
    for close in closes:
        excused = any(
            fault.kind == "gateway-term" and fault.gateway == close.gateway
            for fault in faults
            if in_window(close.at, fault, grace_s)
        )
        if excused:
            result.notes.append(f"gateway {close.gateway} closed an idle socket as it stopped")
        else:
            result.violations.append(
                f"gateway {close.gateway} closed an idle socket (code {close.code}) at "
                f"t={close.at - started_at:.1f} s"
            )
    return result


def check_batch(batch: BatchResult | None, ledger: list[LedgerRow]) -> CheckResult:
    result = CheckResult("batch: each line in the output or error file once, billed once")
    if batch is None:
        result.notes.append("no batch ran")
        return result
    seen = Counter(line.custom_id for line in [*batch.output, *batch.errors])
    twice = [custom_id for custom_id, count in seen.items() if count > 1]
    if twice:
        result.violations.append(f"{len(twice)} lines reported twice: {twice[:5]}")
    finished = batch.status in ("completed", "cancelled", "expired", "failed")
    if finished and len(seen) != batch.lines:
        result.violations.append(f"{batch.lines} lines, {len(seen)} in the output and error files")
    rows = _by_request_id(row for row in ledger if row.batch_id == batch.batch_id)
    for request_id, found in rows.items():
        if len(found) > 1:
            result.violations.append(f"double-billed batch line {request_id}: {len(found)}")
    reported = {line.request_id for line in [*batch.output, *batch.errors] if line.request_id}
    for line in batch.output:
        found = rows.get(line.request_id or "", [])
        if not found:
            result.violations.append(f"answered line {line.custom_id} has no usage record")
            continue
        row = found[0]
        if row.cache_result not in FREE_CACHE_RESULTS and (
            row.prompt_tokens,
            row.completion_tokens,
        ) != (line.prompt_tokens, line.completion_tokens):
            result.violations.append(
                f"line {line.custom_id}: billed {row.prompt_tokens}+{row.completion_tokens}, "
                f"its output says {line.prompt_tokens}+{line.completion_tokens}"
            )
    # An attempt that billed nothing (refused before a worker, or a batch line's failed try,
    # which the team does not pay for) needs no place in the files.
    unreported = [
        request_id
        for request_id, found in rows.items()
        if request_id not in reported
        and any(row.prompt_tokens or row.completion_tokens for row in found)
    ]
    if unreported:
        result.violations.append(
            f"{len(unreported)} billed batch lines in neither file: {unreported[:5]}"
        )
    codes = Counter(line.error_code or str(line.status_code) for line in batch.errors)
    result.notes.append(
        f"{batch.batch_id} {batch.status}: {batch.lines} lines, {len(batch.output)} answered, "
        f"{len(batch.errors)} in the error file ({dict(codes)}), {len(rows)} usage records"
    )
    return result


@dataclass(frozen=True)
class Recovery:
    fault: FaultWindow
    requests: int  # sent while the fault was on (or in the grace after it)
    outcomes: dict[str, int]  # by outcome (errors by code)
    first_success_s: float | None  # from the fault's end to the first success sent after it
    last_failure_s: float | None  # from the fault's end to the last non-quota failure's end


def recoveries(
    attempts: list[Attempt], faults: list[FaultWindow], grace_s: float
) -> list[Recovery]:
    found = []
    for fault in faults:
        inside = [a for a in attempts if fault_at(a, faults, grace_s) is fault]
        outcomes: Counter[str] = Counter()
        for attempt in inside:
            outcomes[
                attempt.outcome if attempt.code is None else f"{attempt.outcome} {attempt.code}"
            ] += 1
        after = [a.ended_at for a in attempts if a.outcome == OK and a.sent_at >= fault.ended_at]
        failures = [
            a.ended_at
            for a in inside
            if a.failed and a.code not in QUOTA_CODES and a.ended_at > fault.ended_at
        ]
        found.append(
            Recovery(
                fault,
                len(inside),
                dict(outcomes),
                min(after) - fault.ended_at if after else None,
                max(failures) - fault.ended_at if failures else None,
            )
        )
    return found


def run_checks(history: History) -> list[CheckResult]:
    return [
        check_billing(history.attempts, history.ledger),
        check_orphans(history.attempts, history.ledger, history.batch),
        check_quota_windows(history.ledger, history.limits, history.started_at),
        check_errors(history.attempts, history.faults, history.grace_s, history.started_at),
        check_streams(history.attempts),
        check_idle_sockets(
            history.idle_closes,
            history.faults,
            history.grace_s,
            history.idle_socket_s,
            history.started_at,
        ),
        check_batch(history.batch, history.ledger),
    ]
