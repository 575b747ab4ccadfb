"""The web chat as people use it, in a real browser (Debian's chromium driven by
Playwright) against a live gateway, real Redis and a simulator with scripted replies
(tests/web_chat_site.py): Enter to send, markdown with highlighted code and a Copy
button, conversations kept on the server and listed in the sidebar, per-user ownership,
Stop, regenerate and edit, model "auto" and the cache badge, a quota error's countdown, a
lost socket, a phone-sized screen, and markup from the model that must not run.

Every page fails its test on a console error (unless the test expects that one).
Screenshots go to test-artifacts/web-chat-*.png.
"""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, Page, ViewportSize, expect, sync_playwright

from tests import live
from tests.live import LiveGateway
from tests.test_web_chat_browser import ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, long_prompt
from tests.web_chat_site import (
    INJECTION_QUESTION,
    MARKDOWN_QUESTION,
    PASSWORD,
    ChatSite,
    chat_site,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
REPLY_TIMEOUT_MS = 15_000
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture
def site(redis_url: str, tmp_path: Path) -> Iterator[ChatSite]:
    yield from chat_site(redis_url, tmp_path)


class Browsing:
    """One chromium; each page in its own context (its own cookies: its own user)."""

    def __init__(self, browser: Browser, site: ChatSite) -> None:
        self.browser = browser
        self.site = site
        self.console_errors: list[str] = []
        self.expected_errors: list[re.Pattern[str]] = []

    def page(self, viewport: ViewportSize | None = None, dark: bool = False) -> Page:
        context = self.browser.new_context(
            base_url=self.site.url,
            viewport=viewport or {"width": 1280, "height": 800},
            color_scheme="dark" if dark else "light",
            reduced_motion="reduce",  # no sliding sidebar caught half-way in a screenshot
            permissions=["clipboard-read", "clipboard-write"],
        )
        page = context.new_page()
        page.on("console", lambda m: self._error(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: self._error(str(error)))
        return page

    def _error(self, text: str) -> None:
        if not any(pattern.search(text) for pattern in self.expected_errors):
            self.console_errors.append(text)


@pytest.fixture
def browsing(site: ChatSite) -> Iterator[Browsing]:
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True
        )
        browsing = Browsing(browser, site)
        yield browsing
        browser.close()
    assert browsing.console_errors == []


def log_in(page: Page, username: str = "ann") -> None:
    page.goto("/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#model")).to_have_value("small-model")
    expect(page.locator("#quota")).to_contain_text("Remaining")  # the socket is open


def ask(page: Page, question: str) -> None:
    """Type the question and press Enter, as a person does; wait for the whole reply."""
    replies = page.locator(".turn.assistant .figures").count()
    page.locator("#prompt").fill(question)
    page.locator("#prompt").press("Enter")
    expect(page.locator(".turn.assistant .figures")).to_have_count(
        replies + 1, timeout=REPLY_TIMEOUT_MS
    )


def screenshot(page: Page, name: str) -> None:
    page.screenshot(path=ARTIFACTS / f"web-chat-{name}.png", full_page=True)


def test_enter_sends_and_the_markdown_reply_renders_with_highlighted_code_to_copy(
    browsing: Browsing,
) -> None:
    page = browsing.page()
    log_in(page)
    prompt = page.locator("#prompt")
    prompt.fill("first line")
    prompt.press("Shift+Enter")
    prompt.press_sequentially("second line")
    expect(prompt).to_have_value("first line\nsecond line")  # a new line, nothing sent
    expect(page.locator(".message")).to_have_count(0)
    prompt.fill("")

    ask(page, MARKDOWN_QUESTION)
    reply = page.locator(".turn.assistant")
    expect(reply.locator("li strong")).to_have_text("bold")
    expect(reply.locator("li code")).to_have_text("inline code")
    code = reply.locator("pre code.language-python")
    expect(code).to_contain_text('def greet(name):\n    return "hello " + name')
    expect(code.locator(".hljs-keyword").first).to_have_text("def")  # highlighted
    link = reply.get_by_role("link", name="real link")
    expect(link).to_have_attribute("href", "https://example.com/docs")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(reply.locator(".figures")).to_contain_text(re.compile(r"small-model · \d+ in, \d+ out"))
    expect(reply.locator(".figures")).to_contain_text("first token")
    expect(page.locator("#prompt")).to_be_focused()  # ready for the next question

    reply.get_by_role("button", name="Copy code").click()
    expect(reply.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == 'def greet(name):\n    return "hello " + name\n'
    screenshot(page, "markdown")


def test_a_conversation_is_kept_listed_and_resumed_after_a_reload(browsing: Browsing) -> None:
    page = browsing.page()
    log_in(page)
    ask(page, "What is a sluice?")
    ask(page, "And a lock?")
    expect(page).to_have_url(re.compile(r"\?c=\d+$"))
    sidebar = page.locator("#conversations")
    expect(sidebar.get_by_role("button", name="What is a sluice?", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    replies = page.locator(".message.assistant .content").all_inner_texts()

    page.reload()
    expect(page.locator(".message.user")).to_have_text(["What is a sluice?", "And a lock?"])
    expect(page.locator(".message.assistant .content")).to_have_text(replies)
    expect(page.locator(".turn.assistant .figures").first).to_contain_text("small-model")
    expect(page.locator("#title")).to_have_text("What is a sluice?")

    # Renamed in the sidebar, kept on the server.
    page.get_by_role("button", name="Rename “What is a sluice?”").click()
    title = page.get_by_label("New title")
    title.fill("Canals")
    title.press("Enter")
    expect(page.locator("#title")).to_have_text("Canals")
    # A new conversation, then back to the first from the sidebar.
    page.locator("#new").click()  # the button; a conversation not titled yet has its name
    expect(page.locator(".message")).to_have_count(0)
    ask(page, "Something else")
    expect(sidebar.locator("li")).to_have_count(2)
    sidebar.get_by_role("button", name="Canals", exact=True).click()
    expect(page.locator(".message.user")).to_have_count(2)
    screenshot(page, "resumed")

    # In another browser, the same user finds it too.
    elsewhere = browsing.page()
    log_in(elsewhere)
    elsewhere.locator("#conversations").get_by_role("button", name="Canals", exact=True).click()
    expect(elsewhere.locator(".message.user")).to_have_text(["What is a sluice?", "And a lock?"])

    # Deleted: gone from the list and from the server.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete “Something else”").click()
    expect(sidebar.locator("li")).to_have_count(1)


def test_a_new_conversation_started_while_a_title_is_edited_saves_the_title(
    browsing: Browsing,
) -> None:
    """The click on "New conversation" blurs the title field, which saves it: the new
    conversation starts while the entry is still a field waiting for its save (it threw,
    and the old conversation stayed on screen)."""
    page = browsing.page()
    log_in(page)
    ask(page, "What is a weir?")
    page.get_by_role("button", name="Rename “What is a weir?”").click()
    page.get_by_label("New title").fill("Weirs")
    page.locator("#new").click()  # the button; a conversation not titled yet has its name
    expect(page.locator(".message")).to_have_count(0)
    expect(page.locator("#title")).to_have_text("New conversation")
    saved = page.locator("#conversations").get_by_role("button", name="Weirs", exact=True)
    expect(saved).to_be_visible()
    expect(saved).not_to_have_attribute("aria-current", "page")


def test_another_user_can_neither_list_nor_open_a_conversation(browsing: Browsing) -> None:
    page = browsing.page()
    log_in(page, "ann")
    ask(page, "My private question")
    address = page.url

    browsing.expected_errors.append(re.compile(r"status of 404"))  # the refused fetch
    other = browsing.page()
    log_in(other, "bob")
    expect(other.locator("#conversations-empty")).to_be_visible()
    other.goto(address)
    expect(other.locator(".message.error")).to_contain_text("does not exist (or is not yours)")
    expect(other.locator(".message.user")).to_have_count(0)
    expect(other.get_by_text("My private question")).to_have_count(0)
    screenshot(other, "not-yours")


def test_stop_ends_a_reply_mid_way_and_the_part_that_arrived_is_kept(
    browsing: Browsing,
) -> None:
    page = browsing.page()
    log_in(page)
    page.locator("#prompt").fill(long_prompt(min_words=200))
    page.locator("#prompt").press("Enter")
    reply = page.locator(".message.assistant .content")
    expect(reply).to_have_text(re.compile(r"^\s*(\S+\s+){3,}\S+"), timeout=REPLY_TIMEOUT_MS)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".turn.assistant .badge.stopped")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    shown = reply.inner_text()
    assert 3 <= len(shown.split()) < 200

    page.reload()
    expect(page.locator(".turn.assistant .badge.stopped")).to_be_visible()
    expect(page.locator(".message.assistant .content")).to_have_text(shown)


def test_regenerate_and_edit_replace_the_last_exchange_with_auto_and_the_cache_badge(
    browsing: Browsing,
) -> None:
    page = browsing.page()
    log_in(page)
    page.locator("#model").select_option("auto")
    page.get_by_role("button", name="Settings").click()
    page.get_by_label("Temperature").fill("0")  # deterministic: the caches may keep it
    page.get_by_label("System prompt").fill("Answer briefly.")
    ask(page, "Name a river")
    figures = page.locator(".turn.assistant .figures")
    expect(figures).to_contain_text("auto → small-model")  # which model answered
    expect(figures.locator(".badge.cache")).to_have_count(0)

    page.get_by_role("button", name="Regenerate").click()
    expect(figures.locator(".badge.cache")).to_have_text("cached: same question", timeout=10_000)
    expect(figures).to_contain_text("$0")
    expect(page.locator(".message")).to_have_count(2)

    page.get_by_role("button", name="Edit").click()
    editor = page.get_by_label("Edit your message")
    editor.fill("Name a mountain")
    editor.press("Enter")
    expect(page.locator(".message.user")).to_have_text(["Name a mountain"])
    expect(figures.locator(".numbers")).to_contain_text(re.compile(r"\d+ out"), timeout=10_000)
    screenshot(page, "regenerated")

    page.reload()  # the server kept the replacement only, with the settings
    expect(page.locator(".message.user")).to_have_text(["Name a mountain"])
    expect(page.locator(".message.assistant")).to_have_count(1)
    expect(page.locator("#model")).to_have_value("auto")
    expect(page.get_by_label("Temperature", exact=True)).to_have_value("0")
    expect(page.get_by_label("System prompt")).to_have_value("Answer briefly.")


def test_regenerate_of_a_reply_kept_for_a_similar_question_asks_afresh(
    browsing: Browsing,
) -> None:
    page = browsing.page()
    log_in(page)
    page.get_by_role("button", name="Settings").click()
    page.get_by_label("Temperature").fill("0")
    ask(page, "What is the capital of France?")
    page.locator("#new").click()  # the button; a conversation not titled yet has its name
    expect(page.locator(".message")).to_have_count(0)
    page.get_by_label("Temperature").fill("0")  # a conversation's own setting
    ask(page, "What's the capital of France?")
    badge = page.locator(".turn.assistant .figures .badge.cache")
    expect(badge).to_have_text("cached: similar question")

    page.get_by_role("button", name="Regenerate").click()
    # Generated for this question: no badge (an exact hit would say "same question").
    expect(page.locator(".turn.assistant .figures")).to_contain_text(
        re.compile(r"\d+ out"), timeout=REPLY_TIMEOUT_MS
    )
    expect(badge).to_have_count(0)
    expect(page.locator(".message")).to_have_count(2)


def test_a_quota_error_names_the_limit_and_counts_down_to_its_reset(browsing: Browsing) -> None:
    page = browsing.page()
    log_in(page, "carl")  # team Tiny: one request a minute
    ask(page, "One question")
    page.locator("#prompt").fill("A second question")
    page.locator("#prompt").press("Enter")
    error = page.locator(".message.error")
    expect(error).to_contain_text("You have used up your team's requests per minute.")
    countdown = error.locator(".countdown")
    expect(countdown).to_have_text(re.compile(r"^The limit resets in 0:[0-5]\d\.$"))
    first = countdown.inner_text()
    expect(countdown).not_to_have_text(first, timeout=3_000)  # it counts
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    screenshot(page, "quota")


def test_no_worker_for_the_model_says_to_try_again_and_trying_again_works(
    browsing: Browsing,
) -> None:
    page = browsing.page()
    log_in(page)
    page.locator("#model").select_option("spare-model")  # it has no worker
    page.locator("#prompt").fill("Anyone there?")
    page.locator("#prompt").press("Enter")
    error = page.locator(".message.error")
    expect(error).to_contain_text("No model worker can take this message right now.")
    screenshot(page, "no-worker")
    page.locator("#model").select_option("small-model")
    page.locator(".turn.error").get_by_role("button", name="Try again").click()
    expect(page.locator(".turn.assistant .figures")).to_contain_text(
        "small-model", timeout=REPLY_TIMEOUT_MS
    )
    expect(page.locator(".message.error")).to_have_count(0)
    expect(page.locator(".message.user")).to_have_text(["Anyone there?"])


def test_a_lost_socket_reconnects_by_itself_and_says_so(
    browsing: Browsing, site: ChatSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    browsing.expected_errors.append(re.compile(r"WebSocket connection to .* failed"))
    page = browsing.page()
    log_in(page)
    port = site.gateway.port
    site.gateway.stop()
    banner = page.locator("#connection")
    expect(banner).to_contain_text("Connection lost. Reconnecting in")
    screenshot(page, "reconnecting")

    monkeypatch.setattr(live, "free_port", lambda: port)  # the same address as before
    site.gateway = LiveGateway(site.redis_url)
    expect(banner).to_have_text("Reconnected.", timeout=20_000)
    ask(page, "Are you back?")


def test_the_chat_works_on_a_phone_sized_screen_in_the_systems_dark_theme(
    browsing: Browsing,
) -> None:
    page = browsing.page(viewport=PHONE, dark=True)
    log_in(page)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(22, 24, 28)"  # the dark palette (static/chat/chat.css)
    expect(page.locator("#sidebar")).not_to_be_visible()
    ask(page, MARKDOWN_QUESTION)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"]  # nothing wider than the screen
    screenshot(page, "phone")

    page.get_by_role("button", name="Conversations").click()
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.locator("#new")).to_be_focused()
    expect(page.locator("#new")).to_have_accessible_name("New conversation")
    screenshot(page, "phone-sidebar")
    page.keyboard.press("Escape")
    expect(page.locator("#sidebar")).not_to_be_visible()


def test_markup_in_a_reply_is_shown_as_text_and_never_runs(browsing: Browsing) -> None:
    page = browsing.page()
    dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    log_in(page)
    ask(page, INJECTION_QUESTION)
    reply = page.locator(".message.assistant .content")
    expect(reply).to_contain_text("The end.")
    expect(reply).to_contain_text('<script>window.__pwned = "script"</script>')  # as text
    for tag in ("script", "img", "svg", "iframe", "details", "object", "embed"):
        expect(reply.locator(tag)).to_have_count(0)
    hrefs = reply.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert all(href.startswith(("https:", "http:", "mailto:")) for href in hrefs), hrefs
    handlers = reply.evaluate(
        "root => [...root.querySelectorAll('*')].flatMap("
        "e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on'))"
    )
    assert handlers == []
    for text in ("markdown link", "spaced link", "entity link", "data link"):
        reply.get_by_text(text).first.click()  # a link that survived would run here
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []
    screenshot(page, "markup-as-text")
