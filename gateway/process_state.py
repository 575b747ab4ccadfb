"""Every per-process copy and singleton, reset in one place.

A gateway process keeps short-lived copies (key and quota records, cache policies, the
deployment catalog, the fleet snapshot) and its Redis clients. Tests call
reset_process_state() between cases so that no copy from one case answers in the next;
the same is right for a process that must not trust what it held (after a fork).
"""

from caching import cell_audits
from caching.policy import cache_policies
from foundation.redis_clients import reset_clients
from gateway.accounts.authentication import forget_last_used_notes
from gateway.accounts.records import key_records, team_limits
from inference.deployments import catalog
from inference.snapshot import fleet_view
from inference.worker_prompt_counts import worker_prompt_counts
from scaling.routing.cold_start import cold_start


def reset_process_state() -> None:
    reset_clients()
    key_records.clear_local()
    team_limits.clear_local()
    cache_policies.clear_local()
    cell_audits.clear_local()
    catalog.clear_local()
    fleet_view.invalidate()  # a copy from before names workers that may be gone
    cold_start.clear_local()
    worker_prompt_counts.clear()
    forget_last_used_notes()
