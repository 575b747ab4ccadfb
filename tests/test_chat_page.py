import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gateway.accounts import actions
from inference import fleet

pytestmark = [pytest.mark.django_db, pytest.mark.unit]


def test_the_chat_page_needs_a_login():
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_logged_in_user_gets_the_page_with_models_and_a_csrf_cookie():
    fleet.ensure_deployment("smollm2-135m-instruct")
    user = get_user_model().objects.create_user("ann", password="a-long-password-1")
    actions.add_member(actions.create_team("Acme"), user)
    client = Client()
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    assert b"<option>smollm2-135m-instruct</option>" in response.content
    assert re.search(rb"chat/chat(\.[0-9a-f]{12})?\.js", response.content)
    assert "csrftoken" in response.cookies
