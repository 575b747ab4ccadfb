"""HTTP caching, the layer in front of the response caches (docs/caching.md, "HTTP caching"):
static files under hashed names served as immutable, ETags and private max-ages on
/v1/models, and the edge configuration in deploy/edge/ (nginx)."""

import getpass
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.management import call_command
from django.template import Context, Template
from django.test import AsyncRequestFactory, Client, override_settings
from django.views.decorators.http import require_GET

from foundation.embedded_redis import free_port
from gateway.accounts import actions
from gateway.api import views
from gateway.api.http_caching import MODEL_LIST_MAX_AGE_S, http_cacheable, max_age_of
from gateway.process_state import reset_process_state
from gateway.static_files import manifest_is_current
from inference import fleet
from tests.children import Child
from tests.conftest import MESSAGES, REPO_ROOT
from tests.waiting import wait_until

SOURCES = REPO_ROOT / "static"
HASHED = r"[0-9a-f]{12}"
FOREVER = "max-age=315360000, public, immutable"
EDGE_CONFIG = REPO_ROOT / "deploy" / "edge" / "nginx.conf"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
)


def static_url(name: str) -> str:
    return Template("{% load static %}{% static name %}").render(Context({"name": name}))


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """STATIC_ROOT after `manage.py collectstatic`, as `make run` and the image build do."""
    root = tmp_path_factory.mktemp("static")
    with override_settings(STATIC_ROOT=root):
        call_command("collectstatic", interactive=False, verbosity=0)
    manifest_is_current.cache_clear()
    return root


@pytest.fixture(autouse=True)
def fresh_manifest_check():
    """The manifest is checked once per process; each test here is a process start."""
    manifest_is_current.cache_clear()
    yield
    manifest_is_current.cache_clear()


@pytest.mark.unit
def test_before_collectstatic_pages_link_plain_names_cached_a_minute(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "never-collected"
    assert static_url("chat/chat.css") == "/static/chat/chat.css"
    response = Client().get("/static/chat/chat.css")
    assert response.status_code == 200
    assert response["Cache-Control"] == "max-age=60, public"
    assert response.getvalue() == (SOURCES / "chat" / "chat.css").read_bytes()
    again = Client().get("/static/chat/chat.css", headers={"If-None-Match": response["ETag"]})
    assert again.status_code == 304


@pytest.mark.unit
def test_once_collected_pages_link_hashed_names_served_as_immutable(settings, collected):
    settings.STATIC_ROOT = collected
    url = static_url("chat/chat.css")
    assert re.fullmatch(rf"/static/chat/chat\.{HASHED}\.css", url), url
    response = Client().get(url)
    assert response.status_code == 200 and response["Cache-Control"] == FOREVER
    zipped = Client().get(url, headers={"Accept-Encoding": "gzip"})
    assert zipped["Content-Encoding"] == "gzip" and "Accept-Encoding" in zipped["Vary"]
    # What an old page or a bookmark asks for still answers, briefly cached.
    plain = Client().get("/static/chat/chat.css")
    assert plain.status_code == 200 and plain["Cache-Control"] == "max-age=60, public"


@pytest.mark.unit
def test_the_chat_scripts_import_each_other_by_hashed_name(settings, collected):
    """chat.js's modules are immutable too: its imports name their hashed copies."""
    settings.STATIC_ROOT = collected
    hashed_chat = static_url("chat/chat.js").removeprefix("/static/")
    imports = re.findall(r'from "\./([^"]+)"', (collected / hashed_chat).read_text())
    assert imports and all(re.fullmatch(rf"\w+\.{HASHED}\.js", name) for name in imports)


@pytest.mark.unit
def test_a_file_changed_since_collectstatic_sends_pages_to_plain_names(settings, collected):
    """A stale manifest would link copies of old files: the sources are served instead."""
    settings.STATIC_ROOT = collected
    manifest = collected / "staticfiles.json"
    kept = manifest.stat()
    os.utime(manifest, (kept.st_atime, (SOURCES / "chat" / "chat.js").stat().st_mtime - 60))
    try:
        assert static_url("chat/chat.js") == "/static/chat/chat.js"
    finally:
        os.utime(manifest, (kept.st_atime, kept.st_mtime))


@pytest.mark.unit
def test_a_file_missing_from_the_manifest_sends_pages_to_plain_names(settings, collected, tmp_path):
    root = tmp_path / "static"
    shutil.copytree(collected, root)
    manifest = json.loads((root / "staticfiles.json").read_text())
    del manifest["paths"]["chat/socket.js"]  # as if socket.js were added after collectstatic
    (root / "staticfiles.json").write_text(json.dumps(manifest))
    settings.STATIC_ROOT = root
    assert static_url("chat/chat.css") == "/static/chat/chat.css"


@pytest.mark.unit
def test_a_name_nothing_provides_is_a_plain_link_not_a_broken_page(settings, collected):
    settings.STATIC_ROOT = collected
    assert static_url("chat/no-such-file.css") == "/static/chat/no-such-file.css"


async def asgi_get(app, path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    communicator = ApplicationCommunicator(app, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(5)
    body = b""
    while True:
        message = await communicator.receive_output(5)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(5)
    return start["status"], {name.lower(): value for name, value in start["headers"]}, body


@pytest.mark.unit
def test_under_asgi_static_files_are_served_whole_with_no_warning(settings, collected, recwarn):
    """The gateway's own path: the middleware answers on the event loop, the file read in
    one thread call (Django warns about WhiteNoise's sync iterator otherwise)."""
    from gateway.api_handler import split_application

    settings.STATIC_ROOT = collected
    app = split_application()  # built now, so its middleware sees this STATIC_ROOT
    status, headers, body = async_to_sync(asgi_get)(app, static_url("chat/chat.js"))
    assert status == 200 and headers[b"cache-control"] == FOREVER.encode()
    assert body == (collected / static_url("chat/chat.js").removeprefix("/static/")).read_bytes()
    status, headers, body = async_to_sync(asgi_get)(app, "/static/chat/chat.css")
    assert status == 200 and body == (SOURCES / "chat" / "chat.css").read_bytes()
    assert not [w for w in recwarn if "StreamingHttpResponse" in str(w.message)]


def as_served(view):
    """A view as gateway/api/views.py serves it: made http_cacheable there, else here."""
    if max_age_of(view) is not None:
        return view
    return http_cacheable(MODEL_LIST_MAX_AGE_S)(view)


# /v1/models and /v1/models/{id}
models_view = as_served(views.models)
model_view = as_served(views.model)


def call(view, key: str, path: str, *args: str, **headers: str):
    request = AsyncRequestFactory().get(path, headers={"Authorization": f"Bearer {key}", **headers})
    return async_to_sync(view)(request, *args)


@pytest.fixture
def acme():
    fleet.ensure_deployment("small-model")
    fleet.ensure_deployment("large-model")
    reset_process_state()
    return actions.create_team("Acme")


@pytest.mark.live
@pytest.mark.django_db
def test_the_model_list_is_private_to_the_key_with_an_etag_and_a_short_max_age(acme):
    key = actions.issue_api_key(acme).plaintext
    response = call(models_view, key, "/v1/models")
    assert response.status_code == 200
    assert {m["id"] for m in json.loads(response.content)["data"]} >= {"small-model"}
    assert set(response["Cache-Control"].split(", ")) == {
        "private",
        f"max-age={MODEL_LIST_MAX_AGE_S}",
    }
    assert "Authorization" in response["Vary"]
    assert re.fullmatch(r'"[0-9a-f]+"', response["ETag"])


@pytest.mark.live
@pytest.mark.django_db
def test_a_client_holding_the_list_gets_a_bodiless_304_with_the_same_headers(acme):
    key = actions.issue_api_key(acme).plaintext
    first = call(models_view, key, "/v1/models")
    etag = first["ETag"]
    for held in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = call(models_view, key, "/v1/models", **{"If-None-Match": held})
        assert again.status_code == 304 and again.content == b"", held
        for name in ("ETag", "Cache-Control", "Vary"):
            assert again[name] == first[name]
    assert call(models_view, key, "/v1/models", **{"If-None-Match": '"other"'}).status_code == 200


@pytest.mark.live
@pytest.mark.django_db
def test_the_etag_follows_what_the_key_may_use(acme):
    everything = actions.issue_api_key(acme).plaintext
    one = actions.issue_api_key(acme, allowed_models=("small-model",)).plaintext
    before = call(models_view, everything, "/v1/models")["ETag"]
    assert call(models_view, one, "/v1/models")["ETag"] != before
    fleet.ensure_deployment("new-model")
    reset_process_state()  # the catalog copy of every gateway process refreshes each second
    after = call(models_view, everything, "/v1/models", **{"If-None-Match": before})
    assert after.status_code == 200 and after["ETag"] != before
    assert "new-model" in {m["id"] for m in json.loads(after.content)["data"]}


@pytest.mark.live
@pytest.mark.django_db
def test_a_revoked_key_gets_its_401_even_with_a_matching_etag(acme):
    issued = actions.issue_api_key(acme)
    etag = call(models_view, issued.plaintext, "/v1/models")["ETag"]
    actions.revoke_api_key(issued.key)
    reset_process_state()
    refused = call(models_view, issued.plaintext, "/v1/models", **{"If-None-Match": etag})
    assert refused.status_code == 401
    assert refused["Cache-Control"] == "no-store" and "ETag" not in refused


@pytest.mark.live
@pytest.mark.django_db
def test_one_model_is_cached_alike_and_refusals_are_not(acme):
    key = actions.issue_api_key(acme, allowed_models=("small-model",)).plaintext
    found = call(model_view, key, "/v1/models/small-model", "small-model")
    assert found.status_code == 200 and "private" in found["Cache-Control"]
    held = {"If-None-Match": found["ETag"]}
    assert call(model_view, key, "/v1/models/small-model", "small-model", **held).status_code == 304
    for model_id, status in (("no-such-model", 404), ("large-model", 403)):
        refused = call(model_view, key, f"/v1/models/{model_id}", model_id)
        assert refused.status_code == status and refused["Cache-Control"] == "no-store"


@pytest.mark.unit
def test_only_async_views_can_be_wrapped_and_only_once():
    with pytest.raises(TypeError):
        http_cacheable(60)(lambda request: None)  # type: ignore[arg-type,return-value]
    assert max_age_of(models_view) == MODEL_LIST_MAX_AGE_S
    with pytest.raises(TypeError):
        http_cacheable(60)(require_GET(models_view))


def edge_locations() -> dict[str, str]:
    """location -> its block, from deploy/edge/nginx.conf (no nested blocks in those)."""
    text = re.sub(r"#[^\n]*", "", EDGE_CONFIG.read_text())
    return {
        m.group(1).strip(): m.group(2) for m in re.finditer(r"location\s+([^{]+)\{([^}]*)\}", text)
    }


@pytest.mark.unit
def test_the_edge_caches_static_files_and_passes_the_rest_through_unbuffered():
    text = re.sub(r"#[^\n]*", "", EDGE_CONFIG.read_text())
    assert text.count("{") == text.count("}")
    locations = edge_locations()
    assert "proxy_cache sluice_static;" in locations["/static/"]
    api = locations["/v1/"]
    for directive in ("proxy_buffering off;", "proxy_request_buffering off;", "proxy_cache off;"):
        assert directive in api
    assert "proxy_buffering off;" in locations["/ws/"]
    assert "proxy_set_header Upgrade $http_upgrade;" in text
    assert "proxy_set_header Connection $connection_upgrade;" in text
    assert "proxy_cache off;" in locations["/"]  # pages carry sessions: never cached
    assert "return 404;" in locations["= /metrics"]


def edge_config(directory: Path, port: int, upstream: str) -> Path:
    """deploy/edge/nginx.conf with its paths, port and upstream moved into a test's own
    directory, so it runs as any user and touches nothing of the machine's."""
    for sub in ("cache", "temp"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    temp = "".join(
        f"    {kind}_temp_path {directory}/temp/{kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    text = EDGE_CONFIG.read_text()
    for old, new in (
        ("/var/cache/nginx", f"{directory}/cache"),
        ("/var/log/nginx", str(directory)),
        ("/run/nginx-sluice.pid", f"{directory}/nginx.pid"),
        ("listen 80;", f"listen 127.0.0.1:{port};"),
        ("server 127.0.0.1:8000;", f"server {upstream};"),
        ("\nhttp {\n", f"\nhttp {{\n{temp}"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    if os.geteuid() == 0:  # workers would run as nobody, who cannot write the test's dirs
        text = f"user {getpass.getuser()};\n{text}"
    path = directory / "nginx.conf"
    path.write_text(text)
    return path


def nginx_args(config: Path, *extra: str) -> list[str]:
    assert NGINX is not None
    directory = str(config.parent)
    return [NGINX, "-p", directory, "-e", f"{directory}/error.log", "-c", str(config), *extra]


needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed")


@pytest.mark.live
@needs_nginx
def test_nginx_accepts_the_edge_config(tmp_path):
    config = edge_config(tmp_path, free_port(), "127.0.0.1:8000")
    result = subprocess.run(nginx_args(config, "-t"), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def upstream_sim():
    """Replies of 30 tokens at 80 ms each: a stream that takes over two seconds."""
    from tests.sims import SimProcess

    process = SimProcess(model="sim-upstream", fixed_ttft_ms=20, fixed_itl_ms=80)
    yield process
    process.stop()


@pytest.mark.live
@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_through_the_edge_static_files_are_cached_and_tokens_stream_as_generated(
    platform, tmp_path
):
    port = free_port()
    config = edge_config(tmp_path, port, f"127.0.0.1:{platform['gateway'].port}")
    edge = Child(f"nginx :{port}", nginx_args(config, "-g", "daemon off;"), tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: urllib.request.urlopen(f"{base}/healthz", timeout=2),
            10,
            "nginx to pass /healthz through",
            ignoring=(OSError,),
        )
        statuses = []
        for _ in range(2):
            with urllib.request.urlopen(f"{base}/static/chat/chat.css", timeout=5) as response:
                statuses.append(response.headers["X-Cache-Status"])
        assert statuses == ["MISS", "HIT"]

        client = openai.OpenAI(base_url=f"{base}/v1", api_key=platform["key"], max_retries=0)
        started = time.monotonic()
        arrivals = []
        stream = client.chat.completions.create(
            model="small-model", messages=MESSAGES, max_tokens=30, stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic() - started)
        # As generated, 80 ms apart over 2.3 s: not held back and sent together at the end.
        assert len(arrivals) >= 20 and arrivals[-1] - arrivals[0] > 1.5, arrivals

        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/metrics", timeout=5)
        assert refused.value.code == 404
    finally:
        edge.stop()
