"""The chaos run (`manage.py chaos`, `make chaos`; docs/loadtest.md, "Chaos run").

Why: unit-level fault tests prove one fault at a time on an idle platform. Launch day is
sustained load while things fail one after another, and what a customer notices then is a
request billed twice, a reply that was never billed, a quota that let a team through twice
over, or a stream that never ends. This package starts a real stack, drives load through it
while it breaks parts of the stack on a schedule, records what every client saw, and
checks that history against the usage ledger.

Modules, in the order a run uses them:

- `stack`: the processes (bundled Redis 8 with AOF, a cache Redis, two gateways, Celery
  worker, batches worker and beat, the scraper, simulator workers), each restartable.
- `world`: what the run adds to the database (a deployment, teams with tight quotas, keys).
- `load`: the open-loop load generator (HTTP and WebSocket, streaming or not, sampled or
  deterministic) that records one `Attempt` per client request.
- `batch`: a Batch API job running behind the interactive load.
- `faults`: the fault schedule and how each fault is done and undone.
- `history`: the plain records the checks read (no Django, no I/O).
- `checks`: pure functions over a history: billing, orphans, quota windows, error shapes,
  streams, idle sockets, the batch, recovery times.
- `report`: the text report.
- `run`: the orchestration of one run.
"""
