"""Which client address a request or socket comes from, for per-address abuse limits.

The peer of the connection (ASGI `scope["client"]`, Django's REMOTE_ADDR) is the client
unless the operator says how many proxies stand in front (`TRUSTED_PROXY_COUNT`): then
the address is the one the outermost trusted proxy saw, the `TRUSTED_PROXY_COUNT`-th
entry of X-Forwarded-For counted from the right (each proxy appends its peer). Entries
to the left of it were written by the client and are never trusted: an attacker could
rotate them to escape every per-address limit. Without the setting the header is
ignored. (uvicorn itself rewrites the peer from X-Forwarded-For when the peer is in its
FORWARDED_ALLOW_IPS, 127.0.0.1 by default, i.e. for a proxy on the same host.)

IPv6 addresses count per /64: one subscriber usually holds a whole /64, so counting
single addresses would give an attacker 2**64 fresh ones.
"""

import ipaddress
from typing import Any

from django.conf import settings
from django.http import HttpRequest

UNKNOWN = "unknown"  # no peer (a Unix socket without a proxy): all such clients share a count
_MAX_RAW_LENGTH = 64  # an entry that is no IP address is kept as written, this long at most


def limit_subject(address: str) -> str:
    """The unit an address is counted as: an IPv4 address, or an IPv6 /64."""
    text = address.strip()
    if text.startswith("[") and "]" in text:  # "[2001:db8::1]:443"
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "203.0.113.7:443"
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return text[:_MAX_RAW_LENGTH] or UNKNOWN
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def client_address(peer: str | None, forwarded_for: list[str], trusted_proxies: int) -> str:
    """The client's counting unit, from the connection's peer and its X-Forwarded-For values."""
    if trusted_proxies > 0:
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        hops = [hop for hop in hops if hop]
        if len(hops) >= trusted_proxies:
            return limit_subject(hops[-trusted_proxies])
        # Fewer entries than proxies: the request did not come through them all; the
        # peer is then the only address we know.
    return limit_subject(peer) if peer else UNKNOWN


def scope_client_address(scope: dict[str, Any]) -> str:
    """The client address of an ASGI connection (the chat socket)."""
    client = scope.get("client")
    peer = str(client[0]) if client else None
    forwarded = [
        value.decode("latin-1")
        for name, value in scope.get("headers", [])
        if name.lower() == b"x-forwarded-for"
    ]
    return client_address(peer, forwarded, settings.TRUSTED_PROXY_COUNT)


def request_client_address(request: HttpRequest) -> str:
    """The client address of a Django request (the sign-in pages)."""
    peer = request.META.get("REMOTE_ADDR") or None
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    return client_address(peer, [forwarded] if forwarded else [], settings.TRUSTED_PROXY_COUNT)
