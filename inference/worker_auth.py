"""The API key a deployment's workers want (a hosted OpenAI-compatible API's), sent as a
bearer token on every request the platform makes to them: inference, /tokenize, and the
scraper's health and model probes.

The database holds only the name of the environment variable that carries the key
(`ModelDeployment.api_key_env`), the way a Kubernetes secret reaches a pod: the key itself
is never stored, shown in the admin, put in the fleet snapshot, or logged.
"""

import logging
import os
import re
from functools import cache

logger = logging.getLogger(__name__)
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")


@cache  # a process's environment is fixed: read (and a missing key said) once
def worker_api_key(env_name: str, deployment: str) -> str:
    """The key from the named variable; "" for none. A name whose variable is unset is
    logged as an error (its workers will refuse the platform), never silently ignored."""
    if not env_name:
        return ""
    key = os.environ.get(env_name, "")
    if not key:
        logger.error(
            "deployment %s: its workers' API key variable %s is not set in this process; "
            "requests go to them without a key",
            deployment,
            env_name,
        )
    return key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}
