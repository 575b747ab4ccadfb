import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.serving.errors import api_error
from inference.chat_request import InvalidRequest, chat_request_from, parse_chat_request

pytestmark = pytest.mark.unit

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"model": json_values, "messages": json_values},
        optional={
            "max_tokens": json_values,
            "stream": json_values,
            "stream_options": json_values,
            "temperature": json_values,
        },
    ).map(lambda v: json.dumps(v).encode()),
)


@settings(max_examples=1000, deadline=None)
@given(bodies)
def test_any_body_is_either_accepted_or_refused_with_a_400(raw):
    try:
        parse_chat_request(raw)
    except InvalidRequest as refused:  # the only way validation may fail
        error = api_error(refused)
        assert error.status == 400
        assert error.body()["error"]["type"] == "invalid_request_error"


def test_nan_and_infinity_are_not_json():
    with pytest.raises(InvalidRequest) as error:
        parse_chat_request(
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}'
        )
    assert api_error(error.value).status == 400 and "not valid JSON" in str(error.value)


def test_a_valid_body_keeps_sampling_options_and_forces_usage_upstream():
    chat = parse_chat_request(
        json.dumps(
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 0,
                "max_tokens": 5,
                "stream": True,
            }
        ).encode()
    )
    assert chat.upstream_body()["temperature"] == 0
    assert chat.upstream_body()["stream_options"] == {"include_usage": True}
    assert chat.include_usage is False


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages.0"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "temprature": 1},
            "temprature",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": []}, "tools"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 9}, "n"),
        ({"model": "m", "messages": [{"role": ["user"], "content": "x"}]}, "messages.0"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [1]}]},
            "messages.0.content.0.type",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
            "temperature",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 1.5}, "top_p"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": 2**64}, "seed"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": [1]}, "stop"),
    ],
)
def test_each_mistake_names_its_parameter(body, param):
    with pytest.raises(InvalidRequest) as error:
        parse_chat_request(json.dumps(body).encode())
    assert error.value.param == param


USER = {"role": "user", "content": "x"}
IMAGE = {"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data"}}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (  # a worker must never be pointed at the metadata service (or any internal host)
            {"messages": [{"role": "user", "content": [IMAGE]}]},
            "messages.0.content.0.image_url",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{**IMAGE, "image_url": {"url": "file:///etc"}}]}
                ]
            },
            "messages.0.content.0.image_url",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "input_audio", "data": "x"}]}]},
            "messages.0.content.0.type",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]},
            "messages.0.content.0",
        ),
        ({"messages": [{**USER, "audio_url": "http://x"}]}, "messages.0.audio_url"),
        ({"messages": [USER], "stop": "s" * 257}, "stop"),
        ({"messages": [USER], "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"messages": [USER], "logit_bias": {str(t): 1 for t in range(301)}}, "logit_bias"),
        ({"messages": [USER], "logit_bias": {"hello": 1}}, "logit_bias"),
        ({"messages": [USER], "logit_bias": {"42": 500}}, "logit_bias"),
        ({"messages": [USER], "response_format": {"type": "xml"}}, "response_format"),
        (
            {
                "messages": [USER],
                "response_format": {"type": "json_schema", "json_schema": {"d": "x" * 20_000}},
            },
            "response_format",
        ),
    ],
)
def test_what_reaches_a_shared_worker_is_bounded_and_text_only(body, param):
    with pytest.raises(InvalidRequest) as error:
        parse_chat_request(json.dumps({"model": "m", **body}).encode())
    assert error.value.param == param


def test_bounded_options_within_their_limits_pass():
    chat = parse_chat_request(
        json.dumps(
            {
                "model": "m",
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "stop": ["a" * 256],
                "logit_bias": {"42": -100, "7": 2.5},
                "response_format": {"type": "json_object"},
            }
        ).encode()
    )
    assert chat.options["logit_bias"] == {"42": -100, "7": 2.5}


# Found by the fuzz of issue 14 (tests/test_fuzz.py): each of these reached a client as a 500.
@pytest.mark.parametrize(
    ("raw", "param"),
    [
        pytest.param(b"[" * 100_000, None, id="past the decoder's depth limit"),
        pytest.param(
            b'{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":'
            + b'{"type":"text","x":'
            + b"[" * 900
            + b"]" * 900
            + b"}}",
            "response_format",
            id="within the decoder's limit, past the encoders' on the way",
        ),
        pytest.param(
            b'{"model":"m","messages":[{"role":"user","content":"a\\ud800"}]}',
            "messages",
            id="a lone surrogate in the content",
        ),
        pytest.param(
            b'{"model":"m","messages":[{"role":"user","content":"x"}],"user":"\\udfff"}',
            "user",
            id="a lone surrogate in an option",
        ),
        pytest.param(
            b'{"model":"m","messages":[{"role":"user","content":"x"}],'
            b'"response_format":{"type":"json_schema","json_schema":{"max":1e999}}}',
            "response_format",
            id="a number past float range",
        ),
        pytest.param(
            b'{"model":"m","messages":[{"role":"user","content":"x"}],'
            b'"response_format":{"type":["text"]}}',
            "response_format",
            id="an array where the format type goes",
        ),
        pytest.param(
            b'{"model":"m","messages":[{"role":"user","content":[{"type":{"a":1}}]}]}',
            "messages.0.content.0.type",
            id="an object where the part type goes",
        ),
    ],
)
def test_bodies_that_broke_the_gateway_are_refused_with_a_400_naming_the_field(raw, param):
    with pytest.raises(InvalidRequest) as refused:
        parse_chat_request(raw)
    assert refused.value.param == param
    assert api_error(refused.value).status == 400


def test_socket_messages_are_held_to_the_same_depth_and_unicode_rules():
    """chat_request_from takes JSON already decoded (the socket's, a batch line's)."""
    deep: list[object] = []
    for _ in range(100):
        deep = [deep]
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    for body, param in (
        ({**base, "stop": deep}, "stop"),
        ({**base, "messages": [{"role": "user", "content": "\ud800"}]}, "messages"),
        ({**base, "seed": float("inf")}, "seed"),
    ):
        with pytest.raises(InvalidRequest) as refused:
            chat_request_from(body)
        assert refused.value.param == param


def test_a_json_schema_nested_like_real_ones_still_passes():
    schema: dict[str, object] = {"type": "string"}
    for _ in range(20):
        schema = {"type": "object", "properties": {"inner": schema}}
    chat = chat_request_from(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x \u00e9 \U0001f600"}],
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
        }
    )
    assert chat.options["response_format"]["json_schema"]["schema"] == schema


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x.png",
        "http://localhost:8000/x.png",
        "http://10.0.0.5/x.png",
        "http://[::1]/x.png",
        "https://192.168.1.1/x.png",
        # IPv4's other spellings, which the resolver reads as these addresses
        "http://2852039166/latest/meta-data/",  # 169.254.169.254
        "http://127.1/x.png",
        "http://0x7f000001/x.png",
        "http://0177.0.0.1/x.png",
        "http://0/x.png",
        "http://10.1/x.png",
        "http://[::ffff:127.0.0.1]/x.png",
    ],
)
def test_an_image_url_to_an_internal_host_is_refused(url):
    part = {"type": "image_url", "image_url": {"url": url}}
    with pytest.raises(InvalidRequest) as error:
        parse_chat_request(
            json.dumps({"model": "m", "messages": [{"role": "user", "content": [part]}]}).encode()
        )
    assert error.value.param == "messages.0.content.0.image_url"


def test_image_parts_parse_and_say_where_they_are():
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
    ]
    body = {"model": "m", "messages": [USER, {"role": "user", "content": parts}]}
    chat = parse_chat_request(json.dumps(body).encode())
    assert chat.first_image_part() == "messages.1.content.1.type"
    text_only = parse_chat_request(json.dumps({"model": "m", "messages": [USER]}).encode())
    assert text_only.first_image_part() is None


@pytest.mark.parametrize("field", ["audio", "prediction", "web_search_options", "moderation"])
def test_a_field_refused_by_design_is_refused_when_set_and_read_as_absent_when_null(field):
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    chat = chat_request_from({**base, field: None})
    assert field not in chat.options
    with pytest.raises(InvalidRequest) as refused:
        chat_request_from({**base, field: {"type": "content", "content": "x"}})
    assert refused.value.param == field
