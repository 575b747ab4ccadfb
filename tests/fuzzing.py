"""Seeded generators of hostile JSON: values, chat bodies and their mutations (for
tests/fuzz_requests.py, which builds the requests and socket frames of tests/test_fuzz.py).

One random.Random drives everything, so a seed replays a run exactly. Bodies are written as
text by hand rather than with json.dumps: that way they can carry what json.dumps never
writes (NaN and Infinity literals, duplicated keys, numbers of thousands of digits, nesting
deeper than any decoder allows), and byte mutations then add invalid UTF-8 and truncation.
"""

import json
import random

Pairs = list[tuple[str, str]]  # a JSON object as (key, value as JSON text), in order

FIELDS = (
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "temperature",
    "top_p",
    "top_k",
    "min_tokens",
    "presence_penalty",
    "frequency_penalty",
    "stream",
    "stream_options",
    "stop",
    "seed",
    "logit_bias",
    "response_format",
    "user",
    "ignore_eos",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "functions",
    "function_call",
    "logprobs",
    "top_logprobs",
    "cache_salt",
    "prompt",
    "type",
    "",
)
MESSAGE_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio")
ROLES = ("system", "user", "assistant", "tool", "developer", "function", "USER", "", "robot")
PART_TYPES = ("text", "image_url", "input_audio", "file", "refusal", "TEXT", "")
MODELS = ("small-model", "small-model", "small-model", "auto", "model-without-workers")
# What json.dumps never writes: Python's decoder takes the first three, the rest are invalid.
LITERALS = (
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e999",
    "1e-400",
    "-0",
    "9223372036854775808",
    "-9223372036854775809",
    "1" * 5000,
    "0." + "1" * 5000,
    "01",
    "+1",
    ".5",
    "0x10",
    "undefined",
    "'single'",
    '"\\ud800"',
    '"\\udfff\\ud800x"',
    '"\\u0000"',
    '"\\x41"',
    '"tab\there"',
    "[1,]",
    '{"a":1,}',
    '{"a"}',
    "[",
    "}",
)
NESTING_DEPTHS = (3, 16, 64, 300, 900, 990, 998, 1_200, 20_000, 200_000)
ALPHABET = (
    "abc xyz",
    "0123456789",
    "\u00e9\u00df\u4e2d\u6587\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\U0001f600\U0001f4a9\u200d\u202e\ufeff",
    "\x00\x01\x1f\x7f\n\r\t",
    "\\\"'{}[]:,",
    "\u0301\u0308\uffff\ufffd",
)


def random_text(rng: random.Random, longest: int = 40) -> str:
    pool = rng.choice(ALPHABET) + rng.choice(ALPHABET)
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, longest)))


def _string(rng: random.Random) -> str:
    """A JSON string literal: ordinary, odd Unicode, lone surrogates, long."""
    roll = rng.random()
    if roll < 0.05:
        return json.dumps(rng.choice(ALPHABET)[0] * rng.choice((1_000, 10_000, 100_000)))
    if roll < 0.1:
        return json.dumps(rng.choice(("\ud800", "\udc00", "a\udfffb")))
    if roll < 0.25:
        return json.dumps(rng.choice((*FIELDS, *ROLES, *PART_TYPES, *MODELS)))
    return json.dumps(random_text(rng), ensure_ascii=rng.random() < 0.5)


def nested(rng: random.Random, depth: int) -> str:
    """A value nested `depth` levels deep, written without recursion."""
    opener, closer = rng.choice((("[", "]"), ('{"a":', "}"), ('[{"text":', "}]")))
    return opener * depth + rng.choice(("0", '"x"', "null", "[]")) + closer * depth


def value(rng: random.Random, depth: int = 0) -> str:
    """Any JSON value (or near-JSON literal), as text."""
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(("null", "true", "false"))
    if roll < 0.25:
        return str(rng.choice((0, 1, -1, 2, 3, 100, 2**31, 2**63 - 1, -(2**63), 2**64)))
    if roll < 0.33:
        return repr(rng.choice((0.0, 0.5, 1.0, 1.5, -0.5, 2.0000001, 1e308, 5e-324, -1e300)))
    if roll < 0.55:
        return _string(rng)
    if roll < 0.62:
        return rng.choice(LITERALS)
    if roll < 0.67 and depth == 0:
        return nested(rng, rng.choice(NESTING_DEPTHS))
    if roll < 0.83 and depth < 3:
        return "[" + ",".join(value(rng, depth + 1) for _ in range(rng.randint(0, 4))) + "]"
    if depth < 3:
        keys = [json.loads(_string(rng)) for _ in range(rng.randint(0, 4))]
        return obj([(key, value(rng, depth + 1)) for key in keys if isinstance(key, str)])
    return _string(rng)


def obj(pairs: Pairs) -> str:
    return "{" + ",".join(f"{json.dumps(key)}:{text}" for key, text in pairs) + "}"


# Values that get past the first checks of a field, so the checks behind them run too.
PLAUSIBLE: dict[str, tuple[str, ...]] = {
    "model": tuple(json.dumps(m) for m in (*MODELS, "", "small-model\u0000", "SMALL-MODEL")),
    "max_tokens": ("1", "4", "0", "32768", "32769", "1.0", "-1", "true", "null", '"4"'),
    "n": ("1", "1.0", "2", "0", "true", "null", '"1"'),
    "temperature": ("0", "0.0", "2", "2.0000001", "-0.0", "1e-320", "true", '"0"'),
    "top_p": ("1", "0", "1.5", "-0.1"),
    "top_k": ("-1", "-2", "50", "1.5"),
    "min_tokens": ("0", "-1", "3", "2"),
    "seed": ("0", "-9223372036854775808", "9223372036854775807", "9223372036854775808", "1.5"),
    "stream": ("true", "false", "1", '"true"', "null"),
    "stream_options": ('{"include_usage":true}', '{"include_usage":[]}', "[]", "{}", "null"),
    "stop": (
        '"\\n"',
        '["a","b","c","d"]',
        '["a","b","c","d","e"]',
        json.dumps("s" * 257),
        "[1]",
        "[]",
        "[null]",
    ),
    "logit_bias": (
        '{"42":-100}',
        '{"42":101}',
        '{"-1":1}',
        '{"\\u0661":1}',
        '{"1e2":1}',
        '{"42":true}',
        json.dumps({str(t): 1 for t in range(301)}),
    ),
    "response_format": (
        '{"type":"json_object"}',
        '{"type":"text"}',
        '{"type":"xml"}',
        '{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}',
        json.dumps({"type": "json_schema", "json_schema": {"d": "x" * 20_000}}),
        '{"type":["text"]}',
        '{"type":{"a":1}}',
    ),
    "user": ('"alice"', json.dumps("u" * 5000), "1", '"\\u0000"'),
    "ignore_eos": ("true", "false", "1"),
}


def _field_value(rng: random.Random, name: str) -> str:
    if name in PLAUSIBLE and rng.random() < 0.5:
        return rng.choice(PLAUSIBLE[name])
    return value(rng)


def _part(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:
        return obj([("type", '"text"'), ("text", _string(rng))])
    if roll < 0.8:
        pairs = [("type", json.dumps(rng.choice(PART_TYPES))), ("text", value(rng, 1))]
        if rng.random() < 0.5:
            pairs.append(rng.choice((("image_url", '{"url":"http://169.254.169.254/"}'),)))
        return obj(pairs)
    return value(rng, 1)


def _message(rng: random.Random) -> str:
    """One message: mostly valid, else with one field of any type or shape."""
    role = rng.choice(("user", "user", "system", "assistant", "developer", "tool"))
    pairs: Pairs = [("role", json.dumps(role)), ("content", json.dumps(random_text(rng) or "Hi"))]
    roll = rng.random()
    if roll < 0.35:
        return obj(pairs)
    if roll < 0.5:
        parts = [_part(rng) for _ in range(rng.randint(0, 3))]
        return obj([pairs[0], ("content", "[" + ",".join(parts) + "]")])
    if roll < 0.6:
        call = '{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}'
        tool = rng.choice(((("tool_calls", f"[{call}]"),), (("tool_call_id", '"c1"'),)))
        return obj([pairs[0], ("content", "null"), *tool])
    if roll < 0.9:
        name = rng.choice(MESSAGE_FIELDS)
        kept = [(k, v) for k, v in pairs if k != name]
        odd = json.dumps(rng.choice(ROLES)) if name == "role" and rng.random() < 0.5 else None
        return obj([*kept, (name, odd or value(rng))])
    return value(rng, 1)


def messages(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.8:
        return "[" + ",".join(_message(rng) for _ in range(rng.randint(1, 4))) + "]"
    if roll < 0.85:
        return "[" + ",".join(['{"role":"user","content":"a"}'] * rng.randint(500, 5000)) + "]"
    return value(rng)


def valid_pairs(rng: random.Random) -> Pairs:
    """A request the gateway serves, with a small max_tokens so the worker answers fast."""
    pairs: Pairs = [
        ("model", json.dumps(rng.choice(MODELS))),
        ("messages", json.dumps([{"role": "user", "content": random_text(rng) or "Hi"}])),
        ("max_tokens", str(rng.randint(1, 6))),
    ]
    optional: Pairs = [
        ("temperature", rng.choice(("0", "0.7", "1"))),
        ("stream", rng.choice(("true", "false"))),
        ("stream_options", '{"include_usage":true}'),
        ("stop", '["\\n\\n"]'),
        ("seed", str(rng.randint(0, 2**31))),
        ("user", '"fuzzer"'),
        ("n", "1"),
        ("response_format", '{"type":"text"}'),
        ("logit_bias", '{"42":1.5}'),
    ]
    return pairs + rng.sample(optional, rng.randint(0, len(optional)))


def mutate(rng: random.Random, pairs: Pairs) -> Pairs:
    """One change to an object: a field of any value, broken messages, a duplicated or
    dropped key, deep nesting or a near-JSON literal."""
    pairs = list(pairs)
    roll = rng.random()
    if roll < 0.45:
        name = rng.choice(FIELDS) if rng.random() < 0.9 else json.loads(_string(rng))
        pairs = [(k, v) for k, v in pairs if k != name] + [(name, _field_value(rng, name))]
    elif roll < 0.75:
        pairs = [(k, v) for k, v in pairs if k != "messages"] + [("messages", messages(rng))]
    elif roll < 0.85 and pairs:
        name, _ = rng.choice(pairs)
        pairs.insert(rng.randint(0, len(pairs)), (name, _field_value(rng, name)))
    elif roll < 0.92 and pairs:
        pairs.pop(rng.randrange(len(pairs)))
    else:
        name = rng.choice(FIELDS[:20])
        deep = nested(rng, rng.choice(NESTING_DEPTHS)) if rng.random() < 0.6 else None
        pairs = [(k, v) for k, v in pairs if k != name] + [(name, deep or rng.choice(LITERALS))]
    return pairs


def mutate_bytes(rng: random.Random, raw: bytes) -> bytes:
    """Damage the encoded body: truncation, invalid UTF-8, other encodings, trailing data."""
    roll = rng.random()
    if roll < 0.3:
        return raw[: rng.randrange(len(raw) + 1)]
    if roll < 0.55:
        at = rng.randrange(len(raw) + 1)
        junk = rng.choice((b"\xff", b"\xc3\x28", b"\xc0\xaf", b"\xed\xa0\x80", b"\x80", b"\x00"))
        return raw[:at] + junk + raw[at:]
    if roll < 0.65:
        return raw.decode().encode(rng.choice(("utf-16", "utf-32", "utf-16-le")))
    if roll < 0.75:
        return b"\xef\xbb\xbf" + raw
    if roll < 0.85:
        return raw + rng.choice((b"x", b"{}", b" ]", b"\x00", b"\n" * 100))
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))


def near(limit: int, pairs: Pairs, extra: int) -> bytes:
    """A valid body whose one long message makes it `extra` bytes from `limit`."""
    pairs = [*pairs, ("max_tokens", "2")]
    base = obj([*pairs, ("messages", '[{"role":"user","content":""}]')]).encode()
    filler = "x" * max(0, limit + extra - len(base))
    return obj([*pairs, ("messages", json.dumps([{"role": "user", "content": filler}]))]).encode()
