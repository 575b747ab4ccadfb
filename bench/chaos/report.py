"""The chaos run's report: plain text, markdown tables where a table helps.

Why text: it is read in a terminal at the end of a run and pasted into an issue or
docs/reliability.md. The report puts the verdict first, then what the load was, what each
fault did to the requests in its window and how fast the platform recovered, then every
check with its violations (the first few of each, and how many) and its notes.
"""

from collections import Counter

from bench.chaos.checks import SHOWN, CheckResult, recoveries
from bench.chaos.history import History


def _load_table(history: History) -> list[str]:
    lines = [
        "| team | transport | requests | ok | refused 429 | other outcomes |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], Counter[str]] = {}
    for attempt in history.attempts:
        kind = attempt.transport + (" stream" if attempt.stream else "")
        key = (attempt.team, kind + (" (idle socket)" if attempt.idle_socket else ""))
        label = attempt.outcome if attempt.code is None else f"{attempt.outcome} {attempt.code}"
        groups.setdefault(key, Counter())[label] += 1
    for (team, kind), counts in sorted(groups.items()):
        total = sum(counts.values())
        ok = counts.pop("ok", 0)
        quota = sum(v for k, v in counts.items() if k.startswith("refused ") and "_per_" in k)
        others = ", ".join(
            f"{k} {v}"
            for k, v in counts.most_common()
            if not ("_per_" in k and k.startswith("refused "))
        )
        lines.append(f"| {team} | {kind} | {total} | {ok} | {quota} | {others or '-'} |")
    return lines


def _fault_table(history: History) -> list[str]:
    lines = [
        "| fault | t start s | held s | requests | outcomes in the window | first success s "
        "| last failure s | what happened |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for found in recoveries(history.attempts, history.faults, history.grace_s):
        fault = found.fault
        outcomes = ", ".join(
            f"{k} {v}" for k, v in sorted(found.outcomes.items(), key=lambda kv: -kv[1])
        )
        first = "-" if found.first_success_s is None else f"{found.first_success_s:.2f}"
        last = "-" if found.last_failure_s is None else f"{found.last_failure_s:.2f}"
        what = "; ".join([fault.detail, *fault.notes])
        lines.append(
            f"| {fault.kind} | {fault.started_at - history.started_at:.1f} "
            f"| {fault.ended_at - fault.started_at:.1f} | {found.requests} | {outcomes or '-'} "
            f"| {first} | {last} | {what} |"
        )
    return lines


def _check_lines(result: CheckResult) -> list[str]:
    lines = [f"[{'PASS' if result.passed else 'FAIL'}] {result.name}"]
    for violation in result.violations[:SHOWN]:
        lines.append(f"    ! {violation}")
    if len(result.violations) > SHOWN:
        lines.append(f"    ! ... and {len(result.violations) - SHOWN} more")
    for note in result.notes[:SHOWN]:
        lines.append(f"    - {note}")
    if len(result.notes) > SHOWN:
        lines.append(f"    - ... and {len(result.notes) - SHOWN} more notes")
    return lines


def render(history: History, results: list[CheckResult], header: list[str]) -> str:
    failed = [result for result in results if not result.passed]
    verdict = (
        "PASS: nothing lost, double-billed, over quota or left hanging"
        if not failed
        else f"FAIL: {len(failed)} of {len(results)} checks found violations "
        f"({sum(len(r.violations) for r in failed)} in all)"
    )
    seconds = history.ended_at - history.started_at
    lines = [
        f"# Chaos run: {verdict}",
        "",
        *header,
        f"load: {len(history.attempts)} requests over {seconds:.0f} s; "
        f"{len(history.ledger)} usage records; failures up to {history.grace_s:g} s after a "
        "fault ends count as its own",
        "",
        "## Load",
        "",
        *_load_table(history),
        "",
        "## Faults",
        "",
        *_fault_table(history),
        "",
        "first success: from the fault's end to the first success sent after it; last "
        "failure: from its end to the end of the last failed request (not a quota refusal) "
        "that overlapped its window.",
        "",
        "## Checks",
        "",
    ]
    for result in results:
        lines.extend(_check_lines(result))
    return "\n".join(lines) + "\n"
