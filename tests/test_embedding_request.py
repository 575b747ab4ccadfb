"""Embeddings requests validated before any work (input forms, bounds, encodings), the
vectors' two encodings, and deployments of kind embedding kept out of chat routing."""

import base64
import json
from typing import Any

import numpy as np
import pytest
from asgiref.sync import async_to_sync

from gateway.api.views import model_list
from gateway.serving.admission import Caller, check_content_accepted, choose_target
from gateway.serving.embeddings import check_embedding_model
from gateway.serving.errors import ModelNotFound
from inference import fleet
from inference.chat_request import parse_chat_request
from inference.deployments import BUILTIN_EMBEDDING, catalog
from inference.embedding_request import (
    MAX_INPUT_CHARS,
    MAX_INPUTS,
    EmbeddingRequest,
    InvalidRequest,
    encode_vector,
    parse_embedding_request,
)

pytestmark = pytest.mark.unit


def parse(**fields: Any) -> EmbeddingRequest:
    return parse_embedding_request(json.dumps({"model": "m", "input": "hi", **fields}).encode())


def test_every_input_form_of_openai_is_read():
    assert parse(input="hello").texts == ["hello"]
    assert parse(input=["a", "b"]).texts == ["a", "b"]
    assert parse(input=[1, 2, 3]).token_arrays == [[1, 2, 3]]
    assert parse(input=[[1, 2], [3]]).token_arrays == [[1, 2], [3]]
    request = parse(input=["a", "b"], encoding_format="base64", dimensions=64, user="u-1")
    assert (request.encoding_format, request.dimensions, request.user) == ("base64", 64, "u-1")
    assert request.upstream_body() == {
        "input": ["a", "b"],
        "encoding_format": "base64",
        "dimensions": 64,
        "user": "u-1",
    }
    assert parse(encoding_format=None).encoding_format == "float"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": None}, "input"),
        ({"input": ["a", ""]}, "input.1"),
        ({"input": ["a", 1]}, "input"),
        ({"input": ["x"] * (MAX_INPUTS + 1)}, "input"),
        ({"input": "x" * (MAX_INPUT_CHARS + 1)}, "input"),
        ({"input": [[1], []]}, "input.1"),
        ({"input": [[1, -2]]}, "input.0"),
        ({"input": [True, 2]}, "input"),
        ({"input": "\ud800"}, "input"),
        ({"model": ""}, "model"),
        ({"encoding_format": "int8"}, "encoding_format"),
        ({"dimensions": 0}, "dimensions"),
        ({"dimensions": "64"}, "dimensions"),
        ({"user": 7}, "user"),
        ({"truncate_prompt_tokens": 8}, "truncate_prompt_tokens"),
    ],
)
def test_malformed_requests_are_refused_naming_the_parameter(fields, param):
    with pytest.raises(InvalidRequest) as refused:
        parse(**fields)
    assert refused.value.param == param


def test_a_body_that_is_not_a_json_object_is_refused():
    for raw in (b"", b"[1]", b'{"model": NaN}', b"\xff"):
        with pytest.raises(InvalidRequest):
            parse_embedding_request(raw)


def test_base64_is_little_endian_float32_of_the_same_values():
    vector = np.array([0.1, -2.5, 3.0e-7], dtype=np.float32)
    encoded = encode_vector(vector, "base64")
    assert isinstance(encoded, str)
    decoded = np.frombuffer(base64.b64decode(encoded), dtype="<f4")
    assert np.array_equal(decoded, np.array(encode_vector(vector, "float"), dtype=np.float32))


def test_the_builtin_model_refuses_token_arrays_and_shorter_vectors():
    with pytest.raises(InvalidRequest) as tokens:
        check_embedding_model(parse(input=[1, 2]), BUILTIN_EMBEDDING)
    assert tokens.value.param == "input"
    with pytest.raises(InvalidRequest) as shorter:
        check_embedding_model(parse(dimensions=128), BUILTIN_EMBEDDING)
    assert shorter.value.param == "dimensions"
    check_embedding_model(parse(dimensions=384), BUILTIN_EMBEDDING)  # its own size: no change


@pytest.mark.django_db
def test_auto_never_routes_a_chat_to_an_embedding_deployment():
    fleet.ensure_deployment("embedder", kind="embedding", tier="small")
    catalog.clear_local()
    auto = parse_chat_request(b'{"model": "auto", "messages": [{"role": "user", "content": "hi"}]}')
    with pytest.raises(ModelNotFound):
        async_to_sync(choose_target)(Caller(1), auto)
    assert "auto" not in {m["id"] for m in model_list(async_to_sync(catalog.all)())}
    embedder = async_to_sync(catalog.get)("embedder")
    assert embedder is not None and not embedder.in_process
    with pytest.raises(InvalidRequest) as refused:
        check_content_accepted(auto, embedder)
    assert refused.value.param == "model"

    fleet.ensure_deployment("chat", tier="small")
    catalog.clear_local()
    assert async_to_sync(choose_target)(Caller(1), auto).deployment.name == "chat"


@pytest.mark.django_db
def test_an_operator_deployment_of_the_builtin_model_replaces_the_default_entry():
    catalog.clear_local()
    assert async_to_sync(catalog.get)("all-minilm-l6-v2") == BUILTIN_EMBEDDING
    priced = fleet.ensure_deployment(
        "text-embedding-3-small", kind="embedding", served_model_name="all-minilm-l6-v2"
    )
    catalog.clear_local()
    deployments = async_to_sync(catalog.all)()
    assert "all-minilm-l6-v2" not in deployments
    assert deployments["text-embedding-3-small"].in_process
    # With a worker it is the worker's (vLLM serving the model under that name), and the
    # default entry is back.
    fleet.register_worker(priced, "http://127.0.0.1:9", registered_by="test")
    catalog.clear_local()
    deployments = async_to_sync(catalog.all)()
    assert not deployments["text-embedding-3-small"].in_process
    assert deployments["all-minilm-l6-v2"] == BUILTIN_EMBEDDING
