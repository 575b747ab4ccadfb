import time

import pytest

from gateway.accounts import actions
from tests.conftest import child_env, start_worker

pytestmark = pytest.mark.live


@pytest.mark.django_db(transaction=True)
def test_a_revoked_key_stops_working_in_every_process_within_two_seconds(redis_url):
    team = actions.create_team("Acme")
    issued = actions.issue_api_key(team)
    watchers = [
        start_worker("auth_loop.py", [issued.plaintext], child_env(redis_url)) for _ in range(2)
    ]
    try:
        # Each says "ok" once it has authenticated the key: both now serve it from their
        # process caches, no sleep needed.
        for watcher in watchers:
            assert watcher.stdout is not None
            assert watcher.stdout.readline().strip() == "ok", watcher.stderr.read()  # type: ignore[union-attr]
        revoked_at = time.time()
        actions.revoke_api_key(issued.key)
        for watcher in watchers:
            out, err = watcher.communicate(timeout=10)
            fields = out.split()
            assert fields[0] == "rejected", err
            assert float(fields[1]) - revoked_at < 2.0
            assert "revoked" in out
    finally:
        for watcher in watchers:
            watcher.kill()
