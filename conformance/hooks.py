"""Schemathesis hooks for the conformance check (conformance/schemathesis.toml loads them).

What the generic checks cannot know, each explained where it is done:

- **Which models exist** (`map_case`, `before_add_examples`). OpenAI's schema lets `model`
  be any string, so nearly every generated request would name a model Sluice does not serve
  and stop at 404 before any reply is built. Most requests get a served model instead; one
  in KEEP_ONE_IN keeps its generated name, so the 404 path is checked too. A `model` that is
  not a string (a malformed request) is left alone. The names come from the environment.
- **What Sluice refuses on purpose** (`map_case`, `filter_failure`): refusals.py. Most
  requests are sent without what it refuses by design or the description leaves undefined,
  so that their replies are checked against the schema instead of nearly all stopping at a
  400; one in KEEP_ONE_IN keeps it, and its refusal is dropped from the failures only when
  refusals.py names the reason.
- **Every shape of reply** (`before_add_examples`): examples.py, sent on every run.
- **OpenAI's error shape** (`openai_error_shape`). The description documents error bodies
  only for 429, yet OpenAI answers every refusal as `{"error": {"message", "type", "param",
  "code"}}` (its `ErrorResponse` schema), which the official clients parse.

SLUICE_CONFORMANCE_LOG=<file> appends every failure found, dropped or kept, as a JSON line:
what to read when a new version of the description (or of Sluice) changes the results.
"""

import hashlib
import json
import os
from typing import Any

import schemathesis
from schemathesis import Case as AnyCase
from schemathesis import CheckContext, HookContext, Response

from conformance.examples import chat_bodies, completion_bodies, embedding_bodies
from conformance.leniency import (
    base64_reply_conforms,
    empty_stop,
    nameless_json_schema,
    null_for_optional,
)
from conformance.refusals import by_design, openai_refuses_too, within_surface

CHAT, COMPLETIONS, EMBEDDINGS = "/chat/completions", "/completions", "/embeddings"
MODEL = "/models/{model}"
CHAT_MODEL = os.environ.get("SLUICE_CONFORMANCE_CHAT_MODEL", "small-model")
EMBEDDING_MODEL = os.environ.get("SLUICE_CONFORMANCE_EMBEDDING_MODEL", "all-minilm-l6-v2")
SERVED = {CHAT: CHAT_MODEL, COMPLETIONS: CHAT_MODEL, EMBEDDINGS: EMBEDDING_MODEL}
KEEP_ONE_IN = 8
Case = AnyCase[Any]


def _kept(case: Case, salt: str) -> bool:
    """A stable one-in-KEEP_ONE_IN choice per case (hooks must be deterministic: a case is
    built again when it is shrunk or replayed)."""
    seen = json.dumps([case.body, case.path_parameters], sort_keys=True, default=repr)
    return hashlib.sha256(f"{salt}{seen}".encode()).digest()[0] % KEEP_ONE_IN == 0


@schemathesis.hook
def map_case(context: HookContext, case: Case) -> Case:
    served = SERVED.get(case.path)
    body = case.body
    if served is not None and isinstance(body, dict):
        if not _kept(case, "refused"):
            body = within_surface(case.path, body)
        if isinstance(body.get("model"), str) and not _kept(case, "model"):
            body = {**body, "model": served}
        case.body = body
    if case.path == MODEL and case.path_parameters and not _kept(case, "model"):
        case.path_parameters = {**case.path_parameters, "model": CHAT_MODEL}
    return case


@schemathesis.hook
def before_add_examples(context: HookContext, examples: list[Case]) -> None:
    """The description's own examples name OpenAI's models (gpt-4o-mini,
    gpt-3.5-turbo-instruct, text-embedding-3-small): they are sent with a served model
    instead. Then one request for each shape of reply (examples.py)."""
    for case in examples:
        served = SERVED.get(case.path)
        if served is not None and isinstance(case.body, dict) and "model" in case.body:
            case.body = {**case.body, "model": served}
        if case.path == MODEL and case.path_parameters:
            case.path_parameters = {**case.path_parameters, "model": CHAT_MODEL}
    operation = context.operation
    if operation is None:
        return
    bodies = {
        CHAT: chat_bodies(CHAT_MODEL),
        COMPLETIONS: completion_bodies(CHAT_MODEL),
        EMBEDDINGS: embedding_bodies(EMBEDDING_MODEL),
    }
    for body in bodies.get(operation.path, []):
        examples.append(operation.Case(body=body, media_type="application/json"))


def _error_of(response: Response) -> dict[str, Any] | None:
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else None


def _documented(failure: Any, case: Case, response: Response) -> str | None:
    """Why the failure is one that refusals.py documents, or None for a real one."""
    checks = type(failure).checks
    body = case.body if isinstance(case.body, dict) else {}
    if "negative_data_rejection" in checks and response.status_code < 400:
        data = case.meta.phase.data if case.meta is not None else None
        said = [getattr(data, "parameter", None), getattr(data, "description", None)]
        if null_for_optional(said, body):
            return "null for an optional field"
        if empty_stop(said, body):
            return "an empty stop list"
        return "a nameless json_schema" if nameless_json_schema(said, body) else None
    if "response_schema_conformance" in checks and body.get("encoding_format") == "base64":
        conforms = case.path == EMBEDDINGS and base64_reply_conforms(json.loads(response.content))
        return "base64 embeddings" if conforms else None
    if "positive_data_acceptance" not in checks or response.status_code != 400:
        return None
    param = (_error_of(response) or {}).get("param")
    if not isinstance(param, str):
        return None
    if by_design(case.path, param, body):
        return f"by design: {param}"
    if openai_refuses_too(case.path, param, body):
        return f"OpenAI refuses it too: {param}"
    return None


@schemathesis.hook
def filter_failure(context: HookContext, failure: Any, case: Case, response: Response) -> bool:
    """Keep every failure but those refusals.py documents."""
    why = _documented(failure, case, response)
    log = os.environ.get("SLUICE_CONFORMANCE_LOG")
    if log:
        entry = {
            "dropped": why,
            "checks": type(failure).checks,
            "title": failure.title,
            "method": case.method,
            "path": case.path,
            "status": response.status_code,
            "error": _error_of(response),
            "body": case.body,
        }
        with open(log, "a") as out:
            out.write(json.dumps(entry, default=repr) + "\n")
    return why is None


def _error_problems(error: Any) -> list[str]:
    """What keeps error from being the inside of OpenAI's ErrorResponse (empty: it is)."""
    if not isinstance(error, dict):
        return ['the body is not {"error": {...}}']
    keys = ("message", "type", "param", "code")
    problems = [f"error.{key} is missing" for key in keys if key not in error]
    for key in ("message", "type"):
        if key in error and not isinstance(error[key], str):
            problems.append(f"error.{key} is not a string")
    for key in ("param", "code"):
        if key in error and error[key] is not None and not isinstance(error[key], str):
            problems.append(f"error.{key} is neither a string nor null")
    return problems


@schemathesis.check
def openai_error_shape(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every refusal is JSON in OpenAI's error shape, so that a client reports it as an
    error instead of failing to parse it."""
    if response.status_code < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    if not content_type.startswith("application/json"):
        shown = content_type or "no content type"
        raise AssertionError(f"{response.status_code} answered as {shown}, not JSON")
    try:
        body = json.loads(response.content)
    except ValueError:
        raise AssertionError(f"{response.status_code} answered with a body not JSON") from None
    problems = _error_problems(body.get("error") if isinstance(body, dict) else None)
    if problems:
        shape = "; ".join(problems)
        raise AssertionError(f"{response.status_code} is not in OpenAI's error shape: {shape}")
    return True
