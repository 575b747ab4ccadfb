"""A live site for the web chat's tests: a gateway (uvicorn + scraper) on the test Redis, a
simulator with scripted replies (`--scripted-replies`) behind `small-model`, `spare-model`
with no worker, team Acme with users ann and bob, and team Tiny (one request a minute)
with user carl."""

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model

from foundation.embedded_redis import free_port
from gateway.accounts import actions
from inference import fleet
from tests.children import Child, wait_until_serving
from tests.conftest import REPO_ROOT
from tests.live import LiveGateway

PASSWORD = "a-long-password-1"
# A profile slow enough that Stop lands mid-reply.
PROFILE = "h100-llama3-8b"

MARKDOWN_QUESTION = "Show me a markdown reply"
MARKDOWN_REPLY = """Here is a list:

- **bold** item
- `inline code` item

```python
def greet(name):
    return "hello " + name
```

A [real link](https://example.com/docs) too."""

INJECTION_QUESTION = "Reply with markup"
# Everything a model's reply could try, rendered by the page. Each payload, if it ran,
# would set window.__pwned (or open a dialog, which the test also watches for).
INJECTION_REPLY = """Attempts:

<script>window.__pwned = "script"</script>

<img src="x" onerror="window.__pwned = 'img'">

<svg onload="window.__pwned = 'svg'"></svg>

<iframe src="javascript:window.__pwned = 'iframe'"></iframe>

<a href="javascript:window.__pwned = 'raw-a'">raw anchor</a>

[markdown link](javascript:window.__pwned='md-link')

[spaced link]( javascript:window.__pwned='spaced' )

[entity link](&#106;avascript:window.__pwned='entity')

[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)

![image](x" onerror="window.__pwned='image-attr')

<details open ontoggle="window.__pwned = 'details'">x</details>

```html
<script>window.__pwned = "in-code"</script>
```

The end."""

SCRIPTED = {MARKDOWN_QUESTION: MARKDOWN_REPLY, INJECTION_QUESTION: INJECTION_REPLY}


class ScriptedSim:
    """A simulator serving `sim-upstream`, with the scripted replies above."""

    def __init__(self, directory: Path) -> None:
        replies = directory / "replies.json"
        replies.write_text(json.dumps(SCRIPTED))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        args = [sys.executable, "-m", "inference.sim", "--port", str(port)]
        args += ["--profile", PROFILE, "--model", "sim-upstream"]
        args += ["--scripted-replies", str(replies)]
        self.child = Child(f"simulator :{port}", args, REPO_ROOT)
        wait_until_serving([self.child], f"{self.url}/health", 15, "the simulator")

    def stop(self) -> None:
        self.child.stop()


@dataclass
class ChatSite:
    gateway: LiveGateway
    redis_url: str

    @property
    def url(self) -> str:
        return self.gateway.url


def chat_site(redis_url: str, directory: Path) -> Iterator[ChatSite]:
    sim = ScriptedSim(directory)
    try:
        users = get_user_model().objects
        acme = actions.create_team("Acme", requests_per_minute=100)
        for name in ("ann", "bob"):
            actions.add_member(acme, users.create_user(name, password=PASSWORD))
        tiny = actions.create_team("Tiny", requests_per_minute=1)
        actions.add_member(tiny, users.create_user("carl", password=PASSWORD))
        deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
        fleet.register_worker(deployment, sim.url, registered_by="test")
        # No worker at all; its tier keeps model "auto" away from it.
        fleet.ensure_deployment("spare-model", served_model_name="sim-upstream", tier="batch")
        site = ChatSite(LiveGateway(redis_url), redis_url)
        try:
            yield site
        finally:
            site.gateway.stop()  # the one serving now: a test may have replaced it
    finally:
        sim.stop()
