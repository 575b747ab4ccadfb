"""The Channels layer's Redis connection settings (one place: settings and tests use it).

channels-redis's receive loop blocks in BZPOPMIN for `brpop_timeout` (5 s). redis-py 8 gives
every connection a 5 s socket timeout by default, so an idle consumer's read timed out just
before Redis answered: the consumer died with `TimeoutError: Timeout reading from ...` and
the server dropped the WebSocket about 5 s after its last message (redis-py #4091,
channels_redis #422). The socket timeout here is set explicitly and well above the blocking
pop, so no client default can undercut it again.
"""

from typing import Any

# channels_redis.core.RedisChannelLayer.brpop_timeout in every 4.x release (pinned <5).
CHANNELS_BLOCKING_POP_S = 5
# A read that takes longer than this means Redis is gone, not idle.
CHANNEL_LAYER_SOCKET_TIMEOUT_S = 3 * CHANNELS_BLOCKING_POP_S


def channel_layers_for(redis_url: str, connect_timeout_s: float = 1.0) -> dict[str, Any]:
    """CHANNEL_LAYERS for a Redis URL."""
    host = {
        "address": redis_url,
        "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT_S,
        "socket_connect_timeout": connect_timeout_s,
    }
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [host], "prefix": "sluice:asgi"},
        }
    }
