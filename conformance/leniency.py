"""Where OpenAI's API is looser than its description: requests the description forbids that
Sluice accepts as OpenAI does, and replies the description mistypes. The conformance check
(conformance/hooks.py) drops a failure only when one of these says why.

- Null for an optional field: Sluice reads an explicit null as the field left out, at any
  depth, as OpenAI does for most fields; the description marks only some nullable.
- A nameless json_schema response format: passed on (see nameless_json_schema).
- An empty stop list: read as no stop sequences, as vLLM reads it (clients send it).
- Base64 embeddings: the description types a vector as an array of numbers only.
"""

import base64
import binascii
import re
import struct
from typing import Any

import jsonschema_rs

from conformance.refusals import component_schemas

# A field a mutation changed, as schemathesis says it: "dimensions: Incorrect type",
# "functions -> Array with invalid items: parameters: Incorrect type", "violates `type` at
# /properties/dimensions (was integer, became null)".
_MUTATED_FIELD = re.compile(r"(\w+): Incorrect type|/properties/(\w+) \(was \w+, became null\)")
# What OpenAI's request objects require: a null there must be refused.
REQUIRED_FIELDS = {"model", "messages", "input", "role", "type", "id", "function"}


def null_for_optional(mutated: list[str | None], body: Any) -> bool:
    """Whether a request was malformed by an explicit null for an optional field, at any
    depth (mutated: what schemathesis says it changed: a parameter, a description)."""
    fields = {
        start or inner for said in mutated for start, inner in _MUTATED_FIELD.findall(said or "")
    }
    fields |= {said for said in mutated if said and said.isidentifier()}
    return any(_holds_null(body, field) for field in fields - REQUIRED_FIELDS)


def _holds_null(value: Any, field: str) -> bool:
    if isinstance(value, dict):
        if field in value and value[field] is None:
            return True
        return any(_holds_null(item, field) for item in value.values())
    if isinstance(value, list):
        return any(_holds_null(item, field) for item in value)
    return False


def nameless_json_schema(mutated: list[str | None], body: Any) -> bool:
    """Whether a request was malformed only by a json_schema response format without a
    name: Sluice passes it on (a worker that needs one refuses it; tests/test_chat_request.py
    pins the leniency), where OpenAI requires one."""
    response_format = body.get("response_format") if isinstance(body, dict) else None
    schema = response_format.get("json_schema") if isinstance(response_format, dict) else None
    said = " ".join(m or "" for m in mutated)
    return isinstance(schema, dict) and "name" not in schema and "json_schema" in said


def base64_reply_conforms(reply: Any) -> bool:
    """Whether an embeddings reply to `encoding_format: base64` matches the schema once its
    vectors are decoded. The description types `embedding` as an array of numbers only, yet
    OpenAI's API (and its client, which asks for base64 by default) sends the float32 bytes
    of the vector as a base64 string when asked to."""
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list):
        return False
    decoded = []
    for item in data:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(vector, str):
            return False
        try:
            raw = base64.b64decode(vector, validate=True)
        except (binascii.Error, ValueError):
            return False
        if not raw or len(raw) % 4:
            return False
        decoded.append({**item, "embedding": list(struct.unpack(f"<{len(raw) // 4}f", raw))})
    schema = {
        "$ref": "#/components/schemas/CreateEmbeddingResponse",
        "components": {"schemas": component_schemas()},
    }
    return bool(jsonschema_rs.is_valid(schema, {**reply, "data": decoded}))


def empty_stop(mutated: list[str | None], body: Any) -> bool:
    """Whether a request was malformed only by `stop: []` (the description wants 1 to 4)."""
    said = " ".join(m or "" for m in mutated)
    return isinstance(body, dict) and body.get("stop") == [] and "stop" in said
