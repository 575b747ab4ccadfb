"""The requests and socket frames tests/test_fuzz.py sends, drawn from one seeded
random.Random (tests/fuzzing.py writes the JSON in them), and a raw HTTP/1.1 sender for the
bytes no client library writes: Latin-1 header values, chunked uploads.
"""

import asyncio
import json
import random
from dataclasses import dataclass, field

from tests.fuzzing import (
    NESTING_DEPTHS,
    mutate,
    mutate_bytes,
    near,
    nested,
    obj,
    random_text,
    valid_pairs,
    value,
)


@dataclass(frozen=True)
class HttpCase:
    kind: str  # what the case exercises, for the tally
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    raw_headers: tuple[tuple[bytes, bytes], ...] = ()  # sent over a raw socket when set
    chunked: bool = False


CONTENT_TYPES = (
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json; charset=latin-1",
    "application/xml",
    "",
)


def _auth(rng: random.Random, key: str) -> tuple[str, str | None]:
    """A broken Authorization header (None: the header is left out)."""
    return rng.choice(
        (
            ("no-header", None),
            ("no-token", "Bearer"),
            ("empty-token", "Bearer   "),
            ("basic", "Basic " + key),
            ("lowercase", "bearer " + key),
            ("truncated", "Bearer " + key[:-1]),
            ("extended", "Bearer " + key + "x"),
            ("other-key", "Bearer " + key[:10] + "z" * (len(key) - 10)),
            ("two-tokens", f"Bearer {key} {key}"),
            ("garbage", "Bearer " + "".join(c for c in random_text(rng, 300) if c.isprintable())),
            ("long", "Bearer " + "k" * 8000),
        )
    )


def http_case(rng: random.Random, keys: list[str], limit: int) -> HttpCase:
    """One request to POST /v1/chat/completions."""
    key = rng.choice(keys)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    kind, roll = "", rng.random()
    if roll < 0.12:
        kind, body = "valid", obj(valid_pairs(rng)).encode()
    elif roll < 0.7:
        pairs = valid_pairs(rng)
        for _ in range(rng.randint(1, 3)):
            pairs = mutate(rng, pairs)
        kind, body = "fields", obj(pairs).encode("utf-8", "surrogatepass")
    elif roll < 0.8:
        kind, body = "bytes", mutate_bytes(rng, obj(mutate(rng, valid_pairs(rng))).encode())
    elif roll < 0.86:
        kind, body = "top-level", rng.choice((b"", value(rng).encode("utf-8", "surrogatepass")))
    elif roll < 0.9:
        kind, body = "nested", nested(rng, rng.choice(NESTING_DEPTHS)).encode()
    elif roll < 0.905:
        extra = rng.choice((-300, -1, 0, 1, 300))
        kind, body = f"near-limit{extra:+d}", near(limit, valid_pairs(rng)[:1], extra)
    elif roll < 0.93:
        return _raw_case(rng, headers, key, limit)
    else:
        kind, body = "content-type", obj(valid_pairs(rng)).encode()
        headers["Content-Type"] = rng.choice(CONTENT_TYPES)
    if rng.random() < 0.08:
        auth_kind, value_ = _auth(rng, key)
        kind = f"{kind}+auth-{auth_kind}"
        if value_ is None:
            del headers["Authorization"]
        else:
            headers["Authorization"] = value_
    if rng.random() < 0.05:
        headers["Cache-Control"] = rng.choice(("no-cache", "no-store, no-cache", "max-age=x", ""))
        ttls = ("60", "0", "-1", "", "1e3", "9" * 30, "9" * 5000)
        headers["x-sluice-cache-ttl"] = rng.choice(ttls)
        kind += "+cache-headers"
    return HttpCase(kind, body, headers)


def _raw_case(rng: random.Random, headers: dict[str, str], key: str, limit: int) -> HttpCase:
    """Bytes no HTTP client library sends: Latin-1 header values, chunked uploads."""
    body = obj(valid_pairs(rng)).encode()
    if rng.random() < 0.5:
        over = rng.random() < 0.3
        if over:
            body = near(limit, valid_pairs(rng)[:1], rng.choice((1, 5000)))
        kind = "raw-chunked" + ("-over-limit" if over else "")
        return HttpCase(kind, body, headers, chunked=True)
    name, value_ = rng.choice(
        (
            (b"authorization", b"Bearer " + key.encode() + b"\xe9"),
            (b"authorization", b"Bearer \xff\xfe" + key.encode()[2:]),
            (b"cache-control", b"no-\xe7ache"),
            # Superscript digits: "²".isdigit() is true, int("²") raises.
            (b"x-sluice-cache-ttl", rng.choice((b"\xbd", b"6\xe9", b"\xa0", b"\xb2", b"6\xb9"))),
        )
    )
    return HttpCase("raw-latin1-header", body, headers, raw_headers=((name, value_),))


def false_hit_body(rng: random.Random) -> bytes:
    """A body for POST /v1/cache/false-hits ({"request_id": "chatcmpl-..."})."""
    roll = rng.random()
    if roll < 0.5:
        text = random_text(rng, 60) if rng.random() < 0.8 else "\ud800"
        request_id = json.dumps("chatcmpl-" + text) if rng.random() < 0.7 else value(rng)
        return obj([("request_id", request_id)]).encode()
    if roll < 0.7:
        return nested(rng, rng.choice(NESTING_DEPTHS)).encode()
    if roll < 0.85:
        return mutate_bytes(rng, b'{"request_id":"chatcmpl-0123456789abcdef"}')
    return value(rng).encode()


@dataclass(frozen=True)
class Frame:
    kind: str
    text: str | None = None
    data: bytes | None = None  # a binary frame
    answered: bool = True  # the server replies (a stop with nothing streaming gets nothing)
    auth: bool = False  # an auth message: a refusal counts toward the socket's limit


def _not_json(literal: str) -> None:
    raise ValueError(f"{literal} is not JSON")


def _as_sent(kind: str, text: str) -> Frame:
    """A frame of any text, expected to be answered as the server will read it (a random
    object may happen to be {"type": "stop"}, which gets no answer)."""
    try:
        decoded = json.loads(text, parse_constant=_not_json)  # as the server decodes it
    except (ValueError, RecursionError):
        return Frame(kind, text)
    kind_sent = decoded.get("type") if isinstance(decoded, dict) else None
    return Frame(kind, text, answered=kind_sent != "stop", auth=kind_sent == "auth")


def ws_frame(rng: random.Random, key: str, limit: int) -> Frame:
    """One client message for /ws/chat/."""
    roll = rng.random()
    if roll < 0.15:
        return Frame("valid-chat", obj([("type", '"chat"'), *valid_pairs(rng)]))
    if roll < 0.55:
        pairs = valid_pairs(rng)
        for _ in range(rng.randint(1, 3)):
            pairs = mutate(rng, pairs)
        return Frame("chat", obj([("type", '"chat"'), *pairs]))
    if roll < 0.63:
        api_key = rng.choice((json.dumps(key), json.dumps(key + "x"), value(rng)))
        return Frame("auth", obj([("type", '"auth"'), ("api_key", api_key)]), auth=True)
    if roll < 0.68:
        return Frame("stop", '{"type":"stop"}', answered=False)
    if roll < 0.78:
        # Not "auth" or "stop": those are auth and stop frames, answered as such.
        kind = rng.choice(('"chat"', '"CHAT"', '"Auth"', '"delta"', '""', "null", "1", "[]"))
        return _as_sent("wrong-shape", obj([("type", kind)]) if rng.random() < 0.6 else value(rng))
    if roll < 0.88:
        text = rng.choice((random_text(rng, 200), obj(valid_pairs(rng))[:-1], "", "NaN", "[1,]"))
        return Frame("not-json", text)
    if roll < 0.97:
        data = rng.choice((b"", b"\xff\xfe", obj([("type", '"chat"'), *valid_pairs(rng)]).encode()))
        return Frame("binary", data=data)
    extra = rng.choice((-100, 0, 1, 100))
    text = near(limit, [("type", '"chat"'), *valid_pairs(rng)[:1]], extra).decode()
    return Frame(f"near-limit{extra:+d}", text)


def _dechunk(body: bytes) -> bytes:
    out, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2 :]
    return out


async def send_raw(port: int, case: HttpCase) -> tuple[int, str, bytes]:
    """One request written byte by byte (Latin-1 header values, a chunked upload)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        raw = dict(case.raw_headers)
        headers = {k.lower().encode(): v.encode("latin-1") for k, v in case.headers.items()}
        headers.update(raw)
        headers[b"connection"] = b"close"
        if case.chunked:
            headers[b"transfer-encoding"] = b"chunked"
            step = 65_536
            pieces = [case.body[i : i + step] for i in range(0, len(case.body), step)]
            payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        else:
            headers[b"content-length"] = str(len(case.body)).encode()
            payload = case.body
        lines = [b"POST /v1/chat/completions HTTP/1.1", b"host: 127.0.0.1"]
        lines += [name + b": " + value for name, value in headers.items()]
        writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + payload)
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    answer_headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines)
    }
    if answer_headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return int(status_line.split()[1]), answer_headers.get("content-type", ""), body
