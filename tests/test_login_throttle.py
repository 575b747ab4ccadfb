"""Brute-forcing the web sign-in pages (/accounts/login/ and /admin/login/) against real
Redis: failed sign-ins are limited per username and per client address
(gateway/accounts/login_throttle.py)."""

from typing import TYPE_CHECKING

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from foundation.redis_clients import reset_clients

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as Response

pytestmark = [pytest.mark.django_db, pytest.mark.live]
LOGIN = "/accounts/login/"
ATTACKER = "203.0.113.7"
BYSTANDER = "198.51.100.9"
PASSWORD = "a-long-password-1"
LOCKED = "Too many failed sign-ins; try again in 15 minutes."


@pytest.fixture
def users() -> None:
    get_user_model().objects.create_user("ann", password=PASSWORD)
    get_user_model().objects.create_user("bob", password=PASSWORD)


def sign_in(
    username: str, password: str, address: str = ATTACKER, forwarded_for: str | None = None
) -> "Response":
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else None
    return Client().post(
        LOGIN, {"username": username, "password": password}, headers=headers, REMOTE_ADDR=address
    )


@pytest.mark.usefixtures("users")
def test_guessing_one_password_locks_the_username_even_for_the_right_password(settings):
    settings.LOGIN_FAILURES_PER_USERNAME = 3
    guesses = [sign_in("ann", f"guess-{n}").status_code for n in range(3)]
    locked = sign_in("ann", PASSWORD)
    # Guessing from many addresses does not help: the count is the username's.
    elsewhere = sign_in("Ann ", PASSWORD, address=BYSTANDER)
    assert guesses == [200, 200, 429]
    assert locked.status_code == 429 and "sessionid" not in locked.cookies
    assert LOCKED in locked.content.decode()
    assert 840 <= int(locked["Retry-After"]) <= 900
    assert elsewhere.status_code == 429
    # Other accounts are not held to ann's count.
    assert sign_in("bob", PASSWORD).status_code == 302


@pytest.mark.usefixtures("users")
def test_one_address_trying_many_usernames_is_locked_out(settings):
    settings.LOGIN_FAILURES_PER_ADDRESS = 4
    sprayed = [sign_in(name, "password123").status_code for name in ("a", "b", "c", "d")]
    right_password = sign_in("ann", PASSWORD)
    # Without a trusted proxy, X-Forwarded-For is the client's own words: rotating it
    # changes nothing.
    rotated = sign_in("bob", PASSWORD, forwarded_for="10.1.2.3")
    assert sprayed == [200, 200, 200, 429]
    assert right_password.status_code == 429 and LOCKED in right_password.content.decode()
    assert rotated.status_code == 429
    assert sign_in("ann", PASSWORD, address=BYSTANDER).status_code == 302


@pytest.mark.usefixtures("users")
def test_the_lockout_does_not_say_whether_the_username_exists(settings):
    settings.LOGIN_FAILURES_PER_USERNAME = 2

    def attempts(username: str) -> list[tuple[int, bool]]:
        responses = [sign_in(username, "wrong-guess") for _ in range(3)]
        return [(r.status_code, LOCKED in r.content.decode()) for r in responses]

    existing, unknown = attempts("ann"), attempts("nobody-by-this-name")
    assert existing == unknown == [(200, False), (429, True), (429, True)]


def test_the_admin_sign_in_is_throttled_too(settings):
    settings.LOGIN_FAILURES_PER_USERNAME = 2
    get_user_model().objects.create_superuser("root", password=PASSWORD)

    def admin_sign_in(password: str) -> "Response":
        return Client().post(
            "/admin/login/", {"username": "root", "password": password}, REMOTE_ADDR=ATTACKER
        )

    guesses = [admin_sign_in(f"guess-{n}").status_code for n in range(2)]
    locked = admin_sign_in(PASSWORD)
    assert guesses == [200, 429]
    assert locked.status_code == 429 and LOCKED in locked.content.decode()


@pytest.mark.parametrize("page", ["/accounts/password_change/", "/admin/password_change/"])
def test_a_session_guessing_its_owners_password_on_a_change_page_is_locked_out(settings, page):
    """A stolen session may not guess the present password that a password change asks
    for without limit; guesses count against the account, as failed sign-ins do."""
    settings.LOGIN_FAILURES_PER_USERNAME = 2
    owner = get_user_model().objects.create_superuser("root", password=PASSWORD)
    session = Client()
    session.force_login(owner)

    def change(old: str) -> "Response":
        form = {
            "old_password": old,
            "new_password1": "n3w-pa55word!",
            "new_password2": "n3w-pa55word!",
        }
        return session.post(page, form, REMOTE_ADDR=ATTACKER)

    guesses = [change(f"guess-{n}").status_code for n in range(2)]
    locked = change(PASSWORD)
    assert guesses == [200, 429]
    assert locked.status_code == 429
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)  # the right password, refused while locked
    assert sign_in("root", PASSWORD).status_code == 429  # one count for the account


def test_a_non_staff_session_cannot_clear_its_count_through_the_admins_change_page(settings):
    """The admin's page sends a non-staff session to the admin login (a redirect); reaching
    the throttle, that redirect read as a success and cleared the account's failures."""
    settings.LOGIN_FAILURES_PER_USERNAME = 2
    owner = get_user_model().objects.create_user("ann", password=PASSWORD)
    session = Client()
    session.force_login(owner)
    form = {"old_password": "guess", "new_password1": "n3w-pa55w!", "new_password2": "n3w-pa55w!"}
    guessed = session.post("/accounts/password_change/", form, REMOTE_ADDR=ATTACKER)
    via_admin = session.post("/admin/password_change/", form, REMOTE_ADDR=ATTACKER)
    locked = session.post("/accounts/password_change/", form, REMOTE_ADDR=ATTACKER)
    assert (guessed.status_code, via_admin.status_code, locked.status_code) == (200, 302, 429)


def test_there_is_no_password_reset_page_for_a_platform_that_sends_no_mail():
    assert Client().get("/accounts/password_reset/").status_code == 404


@pytest.mark.usefixtures("users")
def test_a_good_sign_in_clears_its_usernames_failures(settings):
    settings.LOGIN_FAILURES_PER_USERNAME = 3
    before = [sign_in("ann", f"typo-{n}").status_code for n in range(2)]
    signed_in = sign_in("ann", PASSWORD).status_code
    after = [sign_in("ann", f"typo-{n}").status_code for n in range(2)]
    assert (before, signed_in, after) == ([200, 200], 302, [200, 200])


@pytest.mark.usefixtures("users")
def test_sign_in_is_refused_while_redis_is_down(settings, unreachable_redis_url):
    settings.REDIS_URL = unreachable_redis_url
    reset_clients()
    refused = sign_in("ann", PASSWORD)
    assert refused.status_code == 503 and "sessionid" not in refused.cookies
    assert "try again shortly" in refused.content.decode()
    assert Client().get(LOGIN).status_code == 200  # the page itself still shows


@pytest.mark.usefixtures("users")
def test_signing_in_through_the_throttle_still_needs_the_csrf_token():
    client = Client(enforce_csrf_checks=True)
    refused = client.post(LOGIN, {"username": "ann", "password": PASSWORD})
    token = client.get(LOGIN).cookies["csrftoken"].value
    accepted = client.post(
        LOGIN, {"username": "ann", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert refused.status_code == 403
    assert accepted.status_code == 302 and accepted["Location"] == "/"


def test_the_sign_in_page_cannot_be_framed_or_sniffed():
    page = Client().get(LOGIN)
    assert page["X-Frame-Options"] == "DENY"
    assert page["X-Content-Type-Options"] == "nosniff"
    assert page["Referrer-Policy"] == "same-origin"
    assert "Strict-Transport-Security" not in page  # off until SECURE_HSTS_SECONDS is set
    assert "HttpOnly" in str(page.cookies["csrftoken"])
    assert "SameSite=Lax" in str(page.cookies["csrftoken"])


@pytest.mark.usefixtures("users")
def test_unicode_variants_of_a_username_share_its_count(settings):
    """Django's login form applies NFKC before looking the user up, so the full-width and
    the superscript-a spellings sign in as ann: each must count against ann's limit."""
    settings.LOGIN_FAILURES_PER_USERNAME = 3
    settings.LOGIN_FAILURES_PER_ADDRESS = 100
    variants = ["ann", "\uff41\uff4e\uff4e", "\u1d43nn"]
    codes = [
        sign_in(name, "guess", address=f"198.51.100.{n}").status_code
        for n, name in enumerate(variants)
    ]
    assert codes == [200, 200, 429]
    assert sign_in("ann", PASSWORD, address=BYSTANDER).status_code == 429
