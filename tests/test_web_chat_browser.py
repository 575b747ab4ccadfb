"""The web chat in a real browser: Debian's chromium, driven by Playwright, against a live
gateway (uvicorn + scraper processes) and a simulator worker.

Screenshots go to test-artifacts/ (kept by CI as the test's artifacts).
"""

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect, sync_playwright

from gateway.accounts import actions
from inference import fleet
from inference.sim.profiles import PROFILES
from inference.sim.text import completion, prompt_tokens
from tests.conftest import REPO_ROOT
from tests.live import LiveGateway
from tests.sims import SimProcess

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
CHROMIUM = "/usr/bin/chromium"
# Without the networking flags chromium phones home, and this machine refuses it noisily.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "test-artifacts"
PROFILE = "h100-llama3-8b"
PASSWORD = "a-long-password-1"


def long_prompt(min_words: int) -> str:
    """A prompt the simulator answers at full length (its replies are a function of the
    prompt), so there is time to press Stop mid-reply."""
    mean = PROFILES[PROFILE].mean_output_tokens
    for n in range(1000):
        text = f"Tell me a long story, number {n}"
        messages = [{"role": "user", "content": text}]
        if len(completion(prompt_tokens(messages), 256, mean)) >= min_words:
            return text
    raise AssertionError("no prompt with a long enough simulated reply")


@pytest.fixture
def live_chat(redis_url: str) -> Iterator[str]:
    sim = SimProcess(profile=PROFILE, model="sim-upstream")
    try:
        team = actions.create_team("Acme", **{**actions.NO_LIMITS, "requests_per_minute": 100})
        deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
        fleet.register_worker(deployment, sim.url, registered_by="test")
        user = get_user_model().objects.create_user("ann", password=PASSWORD)
        actions.add_member(team, user)
        gateway = LiveGateway(redis_url)
        yield gateway.url
        gateway.stop()
    finally:
        sim.stop()


@pytest.fixture
def page(live_chat: str) -> Iterator[Page]:
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True
        )
        page = browser.new_page(base_url=live_chat)
        console_errors: list[str] = []
        page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: console_errors.append(str(error)))
        yield page
        browser.close()
    assert console_errors == []


def log_in(page: Page) -> None:
    page.goto("/")
    expect(page).to_have_url("/accounts/login/?next=/")
    page.get_by_label("Username").fill("ann")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#model")).to_have_value("small-model")


def test_a_user_logs_in_streams_a_reply_and_sees_tokens_and_quota(page: Page) -> None:
    log_in(page)
    expect(page.locator("#quota")).to_have_text("Remaining: 100 requests this minute")
    page.locator("#prompt").fill("Hello there")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".message.user")).to_have_text("Hello there")
    expect(page.locator("#usage")).to_contain_text("Tokens:", timeout=15_000)
    expect(page.locator(".message.assistant")).not_to_be_empty()
    expect(page.locator("#quota")).to_have_text("Remaining: 99 requests this minute")
    page.screenshot(path=ARTIFACTS / "web-chat-reply.png")

    page.locator("#new").click()  # the button; a conversation not titled yet has its name
    expect(page.locator(".message")).to_have_count(0)


def test_stop_ends_a_streaming_reply_and_bills_what_was_produced(page: Page) -> None:
    log_in(page)
    page.locator("#prompt").fill(long_prompt(min_words=200))
    page.get_by_role("button", name="Send").click()
    reply = page.locator(".message.assistant")
    expect(reply).to_have_text(_at_least_words(3), timeout=15_000)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#usage")).to_contain_text("Stopped.", timeout=10_000)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    words = len(reply.inner_text().split())
    billed = int(page.locator("#usage").inner_text().split(", ")[1].split()[0])
    assert 3 <= words < 200
    assert billed >= words  # every word shown was a token produced and billed
    page.screenshot(path=ARTIFACTS / "web-chat-stopped.png")


def _at_least_words(count: int) -> re.Pattern[str]:
    return re.compile(rf"^\s*(\S+\s+){{{count - 1},}}\S+")
