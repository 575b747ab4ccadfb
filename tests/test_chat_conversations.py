"""The web chat's conversations: the actions that write them and the JSON API under
/chat/api/, in process (Django's test client and the test database)."""

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client

from gateway.chat import actions
from gateway.chat.models import DEFAULT_TITLE, Conversation, Message
from inference.sim.text import scripted_completion

pytestmark = [pytest.mark.django_db, pytest.mark.unit]
PASSWORD = "a-long-password-1"


def user(name: str) -> Any:
    return get_user_model().objects.create_user(name, password=PASSWORD)


def logged_in(name: str, enforce_csrf: bool = False) -> tuple[Client, Any]:
    person = user(name)
    client = Client(enforce_csrf_checks=enforce_csrf)
    client.force_login(person)
    return client, person


def reply(content: str = "An answer.", **changes: Any) -> actions.Reply:
    fields: dict[str, Any] = {
        "content": content,
        "model": "small-model",
        "request_id": "chatcmpl-1",
        "prompt_tokens": 12,
        "completion_tokens": 3,
        "cache_result": "miss",
        "cost_micros": 42,
        "ttft_ms": 80,
        "stopped": False,
        **changes,
    }
    return actions.Reply(**fields)


def send(client: Client, method: str, path: str, body: Any = None, **extra: Any) -> Any:
    data = None if body is None else json.dumps(body)
    return getattr(client, method)(path, data=data, content_type="application/json", **extra)


def test_a_recorded_exchange_keeps_the_reply_figures_and_names_the_conversation() -> None:
    ann = user("ann")
    conversation = actions.create_conversation(ann.pk, {"model": "auto", "temperature": 0.2})
    saved = actions.record_exchange(
        ann.pk, conversation.pk, "What is   a sluice,\nreally?", reply(cache_result="hit-exact")
    )
    conversation.refresh_from_db()
    assert conversation.title == "What is a sluice, really?"
    question, answer = conversation.messages.all()
    assert (question.pk, answer.pk) == (saved.user_message_id, saved.reply_id)
    assert question.role == Message.Role.USER and question.content == "What is   a sluice,\nreally?"
    assert (answer.model, answer.prompt_tokens, answer.completion_tokens) == ("small-model", 12, 3)
    assert (answer.cache_result, answer.cost_micros, answer.ttft_ms) == ("hit-exact", 42, 80)


def test_replacing_from_a_question_drops_it_and_everything_after_it() -> None:
    ann = user("ann")
    conversation = actions.create_conversation(ann.pk)
    first = actions.record_exchange(ann.pk, conversation.pk, "One", reply("1"))
    second = actions.record_exchange(ann.pk, conversation.pk, "Two", reply("2"))
    actions.record_exchange(
        ann.pk, conversation.pk, "Two, edited", reply("2b", stopped=True), second.user_message_id
    )
    kept = list(conversation.messages.values_list("content", "stopped"))
    assert kept == [("One", False), ("1", False), ("Two, edited", False), ("2b", True)]
    assert first.user_message_id is not None
    assert conversation.messages.filter(pk=first.user_message_id).exists()


def test_another_users_conversation_cannot_be_written_to() -> None:
    ann, bob = user("ann"), user("bob")
    conversation = actions.create_conversation(ann.pk)
    with pytest.raises(actions.ConversationNotFound):
        actions.record_exchange(bob.pk, conversation.pk, "Mine now?", reply())
    for not_bobs in (conversation.pk, str(conversation.pk), 2**63, -1, "1; drop", None, True):
        with pytest.raises(actions.ConversationNotFound):
            actions.owned_conversation(bob.pk, not_bobs)
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"title": "   "}, "title"),
        ({"title": "x" * 201}, "title"),
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"system_prompt": 7}, "system_prompt"),
        ({"user_id": 2}, "user_id"),
    ],
)
def test_settings_out_of_bounds_are_refused_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    conversation = actions.create_conversation(user("ann").pk)
    with pytest.raises(ValidationError) as refused:
        actions.change_conversation(conversation, changes)
    assert field in refused.value.message_dict


def test_long_first_questions_make_short_titles() -> None:
    title = actions.title_from("word " * 40)
    assert len(title) <= actions.AUTO_TITLE_LENGTH and title.endswith("…")
    assert actions.title_from("  \n ") == DEFAULT_TITLE


def test_the_api_lists_creates_renames_and_deletes_a_users_own_conversations() -> None:
    client, ann = logged_in("ann")
    created = send(client, "post", "/chat/api/conversations/", {"model": "small-model"})
    assert created.status_code == 201
    conversation_id = created.json()["id"]
    actions.record_exchange(ann.pk, conversation_id, "Hello", reply("Hi!"))

    listed = client.get("/chat/api/conversations/").json()
    assert [c["title"] for c in listed["conversations"]] == ["Hello"]
    assert listed["has_more"] is False

    path = f"/chat/api/conversations/{conversation_id}/"
    renamed = send(client, "patch", path, {"title": "Greetings", "temperature": 0})
    assert renamed.status_code == 200
    assert (renamed.json()["title"], renamed.json()["temperature"]) == ("Greetings", 0)
    messages = client.get(f"{path}messages/").json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Hello"),
        ("assistant", "Hi!"),
    ]
    assert messages[1]["cost_micros"] == 42 and messages[1]["cache"] == "miss"

    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404
    assert not Message.objects.exists()


def test_a_user_at_the_conversation_limit_is_told_to_delete_some(settings: Any) -> None:
    settings.CHAT_MAX_CONVERSATIONS = 3
    client, ann = logged_in("ann")
    made = [send(client, "post", "/chat/api/conversations/", {}) for _ in range(4)]
    assert [r.status_code for r in made] == [201, 201, 201, 409]
    error = made[-1].json()["error"]
    assert error["code"] == "too_many_conversations" and "delete some" in error["message"]
    assert Conversation.objects.filter(user=ann).count() == 3
    other, _ = logged_in("bob")  # a limit per user, not for everyone
    assert send(other, "post", "/chat/api/conversations/", {}).status_code == 201
    assert client.delete(f"/chat/api/conversations/{made[0].json()['id']}/").status_code == 204
    assert send(client, "post", "/chat/api/conversations/", {}).status_code == 201


def test_text_no_database_keeps_is_a_400_and_a_question_holding_it_is_still_kept() -> None:
    """A NUL or an unpaired surrogate (JSON's lone \\ud800): PostgreSQL refuses the first,
    every UTF-8 database the second. A title or system prompt with one is a 400 naming the
    field (it was a 500); a question or reply with one is kept with U+FFFD (it was lost)."""
    client, ann = logged_in("ann")
    created = send(client, "post", "/chat/api/conversations/", {})
    path = f"/chat/api/conversations/{created.json()['id']}/"
    for field, value in (("title", "a\ud800b"), ("system_prompt", "a\x00b")):
        refused = send(client, "patch", path, {field: value})
        assert refused.status_code == 400, refused.content
        assert refused.json()["error"]["param"] == field
    deep = client.post(
        "/chat/api/conversations/", data="[" * 100_000, content_type="application/json"
    )
    assert deep.status_code == 400 and deep.json()["error"]["param"] == "body"
    actions.record_exchange(ann.pk, created.json()["id"], "why\ud800?", reply("so\x00"))
    kept = list(Message.objects.values_list("content", flat=True))
    assert kept == ["why\ufffd?", "so\ufffd"]


def test_another_user_gets_404_for_every_use_of_a_conversation_that_is_not_theirs() -> None:
    ann = user("ann")
    conversation = actions.create_conversation(ann.pk, {"title": "Private"})
    bob, _ = logged_in("bob")
    path = f"/chat/api/conversations/{conversation.pk}/"
    assert bob.get(path).status_code == 404
    assert bob.get(f"{path}messages/").status_code == 404
    assert send(bob, "patch", path, {"title": "Taken"}).status_code == 404
    assert bob.delete(path).status_code == 404
    assert bob.get("/chat/api/conversations/").json()["conversations"] == []
    assert bob.get(f"/chat/api/conversations/{2**64}/").status_code == 404  # not a 500
    conversation.refresh_from_db()
    assert conversation.title == "Private"


def test_the_api_needs_a_login_and_a_csrf_token_for_writes() -> None:
    anonymous = Client()
    refused = anonymous.get("/chat/api/conversations/")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthenticated"

    client, _ = logged_in("ann", enforce_csrf=True)
    assert send(client, "post", "/chat/api/conversations/", {}).status_code == 403
    client.get("/")  # the chat page sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    accepted = send(client, "post", "/chat/api/conversations/", {}, HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201
    assert Conversation.objects.count() == 1


def test_a_bad_body_is_a_400_naming_the_problem() -> None:
    client, _ = logged_in("ann")
    not_json = client.post("/chat/api/conversations/", "{", content_type="application/json")
    assert not_json.status_code == 400 and not_json.json()["error"]["param"] == "body"
    hot = send(client, "post", "/chat/api/conversations/", {"temperature": 9})
    assert hot.status_code == 400 and hot.json()["error"]["param"] == "temperature"


def test_a_scripted_simulator_reply_streams_in_pieces_that_join_back_to_it() -> None:
    text = 'Some **markdown**:\n\n```python\nprint("<b>")\n```\n<img src=x onerror="y()">'
    pieces = scripted_completion(text, max_tokens=1000)
    assert "".join(pieces) == text and len(pieces) > 20
    assert "".join(scripted_completion(text, max_tokens=3)) == "Some **"


@pytest.mark.parametrize("offset", ["²", "-1", "1.5", "9" * 30])
def test_an_offset_that_is_no_page_start_is_a_400_naming_it(offset: str) -> None:
    client, _ = logged_in("ann")
    response = client.get("/chat/api/conversations/", {"offset": offset})
    assert response.status_code == 400 and response.json()["error"]["param"] == "offset"
