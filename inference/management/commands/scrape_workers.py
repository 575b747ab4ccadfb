import asyncio
from typing import Any

from django.core.management.base import BaseCommand

from inference.fleet import register_workers_from_settings
from inference.scraper import Scraper


class Command(BaseCommand):
    help = "Scrape every worker's /health and /metrics each second into the fleet snapshot."

    def handle(self, *args: Any, **options: Any) -> None:
        register_workers_from_settings()
        asyncio.run(Scraper().run_forever())
