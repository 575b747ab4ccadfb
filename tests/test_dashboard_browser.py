"""Every dashboard page in a real browser (Debian's chromium, driven by Playwright): the
Plotly charts draw from the locally served plotly.min.js with no console error.

Screenshots go to test-artifacts/dashboard-<page>.png.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import Browser, sync_playwright

from gateway.accounts import actions as account_actions
from gateway.dashboard import actions, rollup
from gateway.dashboard.fleet_sampling import record_fleet_sample
from gateway.usage.models import UsageRecord
from inference import fleet
from scaling.models import ScalingDecision
from tests.staff import tuning_staff
from tests.test_web_chat_browser import ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS

# The live server shares the database.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
PAGES = {"overview": 6, "costs": 4, "teams": 2, "fleet": 1, "tuning": 0}


def _traffic() -> None:
    team = account_actions.create_team("Acme", budget_per_month_usd=Decimal("50"))
    other = account_actions.create_team("Globex")
    deployment = fleet.ensure_deployment("small-model", gpu_cost_per_hour=Decimal("2.5"))
    fleet.register_worker(deployment, "http://127.0.0.1:9", registered_by="test")
    now = datetime.now(UTC)
    rows = []
    for n in range(600):
        at = now - timedelta(seconds=6 * n)
        rows.append(
            UsageRecord(
                request_id=f"r{n}",
                team_id=(team if n % 3 else other).pk,
                api_key_id=f"k{n % 4}",
                model="small-model",
                prompt_tokens=50,
                completion_tokens=n % 90,
                status=("failed" if n % 50 == 0 else "ok"),
                latency_ms=200 + 7 * (n % 300),
                ttft_ms=40 + n % 200,
                cost_micros=120,
                created_at=at,
                cache_result=["miss", "miss", "hit-exact", "hit-semantic", "coalesced"][n % 5],
            )
        )
    UsageRecord.objects.bulk_create(rows)
    for minutes in range(0, 60, 10):
        ScalingDecision.objects.create(
            deployment=deployment,
            at=now - timedelta(minutes=minutes),
            action="up" if minutes else "hold",
            rule="utilisation",
            from_replicas=1,
            to_replicas=2,
            reason="utilisation 0.85 above 0.80 for 60 s",
        )
    rollup.backfill(hours=2)
    record_fleet_sample()
    actions.change_cache_policy(None, team, {"similarity_threshold": 0.95})


@pytest.fixture
def session_cookie(live_server: object) -> str:
    _traffic()
    client = Client()
    client.force_login(tuning_staff())
    return client.cookies[settings.SESSION_COOKIE_NAME].value


@pytest.fixture
def browser() -> Iterator[Browser]:
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True
        )
        yield browser
        browser.close()


def test_every_page_draws_its_charts_without_console_errors(
    live_server: object, session_cookie: str, browser: Browser
) -> None:
    base = str(live_server)
    context = browser.new_context(base_url=base, viewport={"width": 1400, "height": 1000})
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": session_cookie, "url": base}]
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    for name, chart_count in PAGES.items():
        page.goto(f"/dashboard/{'' if name == 'overview' else name + '/'}?period=hour")
        assert page.locator("h1").inner_text() == name.capitalize()
        charts = page.locator(".chart")
        assert charts.count() == chart_count
        if chart_count:
            drawn = "document.querySelectorAll('.chart[data-rendered=\"1\"]').length"
            page.wait_for_function(f"{drawn} === {chart_count}", timeout=15_000)
            assert page.locator(".chart .main-svg").count() >= chart_count
        page.screenshot(path=ARTIFACTS / f"dashboard-{name}.png", full_page=True)
    page.goto("/dashboard/tuning/")
    assert page.locator("#audit").inner_text().count("Revert") == 1
    context.close()
    assert errors == []
