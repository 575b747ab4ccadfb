"""The whole-reply timeouts are refused at start when they could not work: 0 or less would
fail every request asked whole (or, read as "unset", silently mean another value)."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.live  # it starts a Python process


@pytest.mark.parametrize("name", ["UPSTREAM_REPLY_TIMEOUT_S", "BATCH_LINE_REPLY_TIMEOUT_S"])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_reply_timeout_of_no_time_is_refused_naming_the_setting(name, value):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gateway.settings", name: value}
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert f"{name}={float(value)} must be more than 0 seconds" in started.stderr
