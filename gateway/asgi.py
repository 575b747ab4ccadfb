import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
django_http = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402 - needs Django set up

# WebSocket routes (the chat consumer) join here when the chat app lands.
application = ProtocolTypeRouter({"http": django_http, "websocket": URLRouter([])})
