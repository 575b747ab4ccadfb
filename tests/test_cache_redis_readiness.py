"""/readyz with a separate cache Redis: checked, named, but not a reason to leave rotation."""

import pytest
from django.test import Client

from foundation.embedded_redis import free_port
from foundation.redis_clients import reset_clients

pytestmark = [pytest.mark.live, pytest.mark.django_db]


def test_readyz_checks_a_separate_cache_redis(settings, redis_url):
    settings.CACHE_REDIS_URL = redis_url.rsplit("/", 1)[0] + "/1"  # another database
    reset_clients()
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"] == {"database": "ok", "redis": "ok", "cache_redis": "ok"}
    assert "degraded" not in response.json()


def test_a_dead_cache_redis_is_named_but_the_gateway_stays_ready(settings):
    # Requests are still served without it: every cache is bypassed (caching/exact.py).
    settings.CACHE_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    reset_clients()
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready" and body["degraded"] == ["cache_redis"]
    assert body["checks"]["cache_redis"].startswith("error")
    assert (body["checks"]["database"], body["checks"]["redis"]) == ("ok", "ok")
