import subprocess
import sys

import pytest
from django.test import Client

from foundation.embedded_redis import free_port
from foundation.redis_clients import reset_clients
from tests.conftest import REPO_ROOT


@pytest.mark.unit
def test_healthz_says_the_process_is_alive():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.live
@pytest.mark.django_db
def test_readyz_is_ready_when_database_and_redis_answer():
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"] == {"database": "ok", "redis": "ok"}


@pytest.mark.unit
@pytest.mark.django_db
def test_readyz_is_503_and_names_redis_when_redis_is_down(settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    reset_clients()
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "ok"
    assert response.json()["checks"]["redis"].startswith("error")


def import_settings(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "SLUICE_VAR_DIR": str(tmp_path),
            **env,
        },
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.live
@pytest.mark.parametrize(
    "env",
    [{}, {"SECRET_KEY": "short"}, {"SECRET_KEY": "insecure-dev-key-only-for-local-debugging"}],
)
def test_production_refuses_to_start_without_a_real_secret_key(tmp_path, env):
    result = import_settings(tmp_path, **env)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


@pytest.mark.live
def test_production_starts_with_a_real_secret_key(tmp_path):
    assert import_settings(tmp_path, SECRET_KEY="x" * 50).returncode == 0


@pytest.mark.live
def test_a_bad_typed_setting_names_the_variable(tmp_path):
    result = import_settings(tmp_path, SECRET_KEY="x" * 50, REDIS_MAX_CONNECTIONS="lots")
    assert result.returncode != 0
    assert "REDIS_MAX_CONNECTIONS='lots' is not an integer" in result.stderr


@pytest.mark.unit
def test_metrics_can_require_a_bearer_token(settings):
    settings.METRICS_BEARER_TOKEN = "scrape-secret"
    assert Client().get("/metrics").status_code == 401
    allowed = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret")
    assert allowed.status_code == 200
    assert b"sluice_queue_length" in allowed.content


@pytest.mark.unit
def test_metrics_without_a_token_are_for_this_host_only(settings):
    settings.METRICS_BEARER_TOKEN = ""
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    refused = Client(REMOTE_ADDR="203.0.113.9").get("/metrics")
    assert refused.status_code == 403 and b"METRICS_BEARER_TOKEN" in refused.content
