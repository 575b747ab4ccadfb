import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402 - needs Django set up
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from foundation.gc_tuning import tune_for_serving  # noqa: E402
from gateway.api.common import holds_an_inference_key  # noqa: E402
from gateway.api_handler import split_application  # noqa: E402
from gateway.body_limit import BodySizeLimit  # noqa: E402
from gateway.chat.routing import websocket_urlpatterns  # noqa: E402
from gateway.drain_asgi import DrainGuard  # noqa: E402

# Static files are served by WhiteNoise, a middleware of the full stack (SERVE_STATIC,
# gateway/static_files.py): API requests never pass through it.
http_app = split_application()
MULTIPART_OVERHEAD_BYTES = 64 * 1024  # the form's boundaries and other fields

# WebSocket: session login (or an API key in the first message); the Origin must be one
# of ALLOWED_HOSTS, so another site cannot ride a user's session cookie (CSRF for sockets).
# Outermost, the drain (gateway/drain_asgi.py): lifespan installs the SIGTERM drain, and
# HTTP requests that reach a draining process are refused.
application = DrainGuard(
    ProtocolTypeRouter(
        {
            # A batch input file may be far larger than a request (BATCH_FILE_MAX_BYTES).
            "http": BodySizeLimit(
                http_app,
                settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
                {"/v1/files": settings.BATCH_FILE_MAX_BYTES + MULTIPART_OVERHEAD_BYTES},
                may_send_larger=holds_an_inference_key,
            ),
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)

# Last: everything start-up built is in place (foundation/gc_tuning.py).
if settings.GC_GEN0_THRESHOLD:
    tune_for_serving(settings.GC_GEN0_THRESHOLD)
