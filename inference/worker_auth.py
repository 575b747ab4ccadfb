"""The API key a deployment's workers want (a hosted OpenAI-compatible API's, or a vLLM
started with --api-key), sent as a bearer token on inference (chat, text completions,
embeddings), /tokenize, and the scraper's probes.

The database holds only the name of the environment variable that carries the key
(`ModelDeployment.api_key_env`), the way a Kubernetes secret reaches a pod: the key itself
is never stored, shown in the admin, put in the fleet snapshot, or logged. The name must
start with SLUICE_WORKER_KEY_: whoever may edit a deployment (and so point its workers at a
server of their own) can then send out only variables meant for workers, never the
gateway's own secrets (DATABASE_URL, SECRET_KEY).
"""

import logging
import os
import re
from functools import cache

logger = logging.getLogger(__name__)
ENV_PREFIX = "SLUICE_WORKER_KEY_"
ENV_NAME = re.compile(rf"^{ENV_PREFIX}[A-Z0-9_]{{1,80}}$")


@cache  # a process's environment is fixed: read (and a missing key said) once
def worker_api_key(env_name: str, deployment: str) -> str:
    """The key from the named variable; "" for none. A name whose variable is unset is
    logged as an error (its workers will refuse the platform), never silently ignored."""
    if not env_name:
        return ""
    if not ENV_NAME.match(env_name):  # the model validates it; a row written around it
        logger.error(
            "deployment %s: api_key_env %r is not a worker key variable", deployment, env_name
        )
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
