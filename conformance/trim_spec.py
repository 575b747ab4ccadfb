"""Cut OpenAI's OpenAPI description down to the operations Sluice serves.

Run by hand when the vendored copy is refreshed, never by the check itself (which reads only
`conformance/openai-openapi.yml`):

    .venv/bin/python conformance/trim_spec.py /path/to/openai-openapi/openapi.yaml

The full description is about 3 MB and describes some 200 operations; schemathesis would
parse all of it on every run, and the repository would carry text it never uses. The trimmed
copy keeps the served operations (``OPERATIONS``) whole, every component schema they reach
through ``$ref`` (transitively) and the security scheme, and drops the ``x-oaiMeta`` blocks
(documentation examples in five languages, not part of any schema).

Two patches make the description say what OpenAI's API does, in terms a validator reads the
same way (README.md beside this file lists them):

- ``with_discriminator_mappings``: a discriminator without a mapping means, by OpenAPI's
  rules, that its values are the schema names (``ChatCompletionMessageToolCall``); the API
  sends the value each schema's enum gives (``function``). The mapping is written out.
- ``with_stream_events``: the description puts the chat chunk schema directly under
  ``text/event-stream``, where OpenAPI 3.2 (and schemathesis) read the schema of one event
  (``data``, ``event``, ``id``); the patch says the event's ``data`` is a chunk as JSON, an
  error as JSON, or ``[DONE]``, which ends every OpenAI stream.
- ``with_text_stream``: text completions document their 200 as ``application/json`` only,
  though ``stream: true`` is part of the request ("tokens will be sent as data-only
  server-sent events ... terminated by a ``data: [DONE]`` message") and the response
  schema says "both the streamed and non-streamed response objects share the same shape".
  The patch adds that ``text/event-stream`` reply, as chat's is read: each event's ``data``
  a ``CreateCompletionResponse`` whose choices' ``finish_reason`` may be null (every chunk
  but a choice's last carries null, in OpenAI's stream as in vLLM's), an error, or
  ``[DONE]``.
"""

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

# (path, method) pairs: what Sluice serves under /v1/ that OpenAI's description also has.
OPERATIONS = [
    ("/chat/completions", "post"),
    ("/completions", "post"),
    ("/embeddings", "post"),
    ("/models", "get"),
    ("/models/{model}", "get"),
]
OUT = Path(__file__).resolve().parent / "openai-openapi.yml"
HEADER = """\
# Trimmed from OpenAI's OpenAPI description (MIT, see LICENSE beside this file; source and
# commit in README.md) by conformance/trim_spec.py: the operations Sluice serves and the
# components they reference, without the x-oaiMeta documentation examples. Regenerate with
# that script rather than editing by hand.
"""


def without_docs(node: Any) -> Any:
    """The node with every x-oaiMeta block removed, at any depth."""
    if isinstance(node, dict):
        return {k: without_docs(v) for k, v in node.items() if k != "x-oaiMeta"}
    if isinstance(node, list):
        return [without_docs(v) for v in node]
    return node


def refs_in(node: Any) -> set[str]:
    """Every component name referenced under node (``#/components/<kind>/<name>``)."""
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/"):
            found.add(ref.removeprefix("#/components/"))
        for value in node.values():
            found |= refs_in(value)
    elif isinstance(node, list):
        for value in node:
            found |= refs_in(value)
    return found


def with_discriminator_mappings(node: Any, schemas: dict[str, Any]) -> Any:
    """node with each unmapped discriminator mapped from its variants' enum values."""
    if isinstance(node, list):
        return [with_discriminator_mappings(item, schemas) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: with_discriminator_mappings(v, schemas) for k, v in node.items()}
    discriminator = node.get("discriminator")
    if isinstance(discriminator, dict) and "mapping" not in discriminator:
        mapping = {}
        for variant in node.get("oneOf", node.get("anyOf", [])):
            ref = variant.get("$ref", "")
            field = (
                schemas.get(ref.rsplit("/", 1)[-1], {})
                .get("properties", {})
                .get(discriminator["propertyName"], {})
            )
            for value in field.get("enum", [field["const"]] if "const" in field else []):
                mapping[value] = ref
        if mapping:
            node["discriminator"] = {**discriminator, "mapping": mapping}
    return node


def with_stream_events(operation: dict[str, Any], chunk: Any = None) -> dict[str, Any]:
    """The operation with its text/event-stream schema as the schema of one event: the
    description's own (chat), or chunk where it has none (text completions)."""
    content = operation["responses"]["200"]["content"]
    if chunk is None:
        chunk = content["text/event-stream"]["schema"]
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    data = {
        "oneOf": [
            {"const": "[DONE]"},
            {"contentMediaType": "application/json", "contentSchema": chunk},
            {"contentMediaType": "application/json", "contentSchema": error},
        ]
    }
    event = {"type": "object", "required": ["data"], "properties": {"data": data}}
    streamed = {**content, "text/event-stream": {"schema": event}}
    return {
        **operation,
        "responses": {
            **operation["responses"],
            "200": {**operation["responses"]["200"], "content": streamed},
        },
    }


def with_text_stream(operation: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """The text completion operation with a text/event-stream reply (see the module's
    docstring): its chunks are replies whose finish_reason may be null."""
    chunk = without_docs(copy.deepcopy(schemas["CreateCompletionResponse"]))
    choice = chunk["properties"]["choices"]["items"]["properties"]
    choice["finish_reason"] = {"anyOf": [choice["finish_reason"], {"type": "null"}]}
    return with_stream_events(operation, chunk)


def trim(spec: dict[str, Any]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, method in OPERATIONS:
        item = spec["paths"][path]
        kept = paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        kept[method] = without_docs(item[method])
        if (path, method) == ("/chat/completions", "post"):
            kept[method] = with_stream_events(kept[method])
        if (path, method) == ("/completions", "post"):
            kept[method] = with_text_stream(kept[method], spec["components"]["schemas"])
    components: dict[str, dict[str, Any]] = {
        "securitySchemes": spec["components"]["securitySchemes"]
    }
    paths = with_discriminator_mappings(paths, spec["components"]["schemas"])
    pending = refs_in(paths)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        kind, _, key = name.partition("/")
        node = without_docs(spec["components"][kind][key])
        node = with_discriminator_mappings(node, spec["components"]["schemas"])
        components.setdefault(kind, {})[key] = node
        pending |= refs_in(node) - seen
    for kind in components:
        components[kind] = dict(sorted(components[kind].items()))
    return {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": spec["servers"],
        "security": spec["security"],
        "paths": paths,
        "components": components,
    }


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: trim_spec.py PATH_TO/openapi.yaml")
    spec = yaml.load(Path(sys.argv[1]).read_text(), Loader=yaml.CSafeLoader)
    text = yaml.dump(trim(spec), Dumper=yaml.CSafeDumper, sort_keys=False, width=100)
    OUT.write_text(HEADER + text)
    print(f"wrote {OUT} ({len(text) // 1024} KiB)")


if __name__ == "__main__":
    main()
