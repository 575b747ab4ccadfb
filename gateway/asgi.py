import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
django_http = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402 - needs Django set up
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from gateway.body_limit import BodySizeLimit  # noqa: E402

# Static files (admin styles and scripts) come from the apps' static folders; no CDN, no
# collectstatic step for `make run`. Behind a CDN or nginx in production, set SERVE_STATIC=0.
http_app = ASGIStaticFilesHandler(django_http) if settings.SERVE_STATIC else django_http

# WebSocket routes (the chat consumer) join here when the chat app lands.
application = ProtocolTypeRouter(
    {
        "http": BodySizeLimit(http_app, settings.DATA_UPLOAD_MAX_MEMORY_SIZE),
        "websocket": URLRouter([]),
    }
)
