"""How many tokens a chat request's prompt is, in the model's own tokens, before admission.

Admission reserves prompt + max_tokens against the team's quotas and checks them against
the context window, so the prompt figure decides refusals and clamps. The worker's own
count (usage.prompt_tokens) arrives only after generation; until then each deployment has
a counter (one small base class, PromptCounter):

- TemplateCounter, where the model's folder is on this host (TOKENIZER_DIR/<served model
  name>, by default var/models/, where `make worker` prepares the embedded model): the
  model's chat template (chat_template.jinja or tokenizer_config.json's) rendered the way
  vLLM renders it (a sandboxed Jinja environment, the generation prompt added, text parts
  joined by newlines for a template that takes string content, tools passed to the
  template), then encoded with its tokenizer.json without special tokens added. This is
  what the worker counts, so a prompt that fits is never refused for length and one that
  does not is refused before it queues.
- EstimatedCounter otherwise (a remote worker's model, or a request with image parts,
  which the worker expands into image tokens): the upper-leaning bytes / 3 estimate of
  ChatRequest.estimated_prompt_tokens(). Reconcile corrects either to the worker's usage.

A folder is loaded once per process (about 0.1 s for a 3.5 MB tokenizer.json), in a thread.
"""

import asyncio
import json
import logging
import time
from abc import ABC, abstractmethod
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from jinja2 import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from inference.chat_request import ChatRequest

logger = logging.getLogger(__name__)


class PromptCounter(ABC):
    @abstractmethod
    def count(self, chat: ChatRequest) -> int:
        """The prompt's tokens as the worker will count them (or an upper estimate)."""

    def exact_for(self, chat: ChatRequest) -> bool:
        """Whether count(chat) is the worker's own figure rather than an estimate."""
        return False


class EstimatedCounter(PromptCounter):
    def count(self, chat: ChatRequest) -> int:
        return chat.estimated_prompt_tokens()


ESTIMATED = EstimatedCounter()


class TemplateCounter(PromptCounter):
    def __init__(self, tokenizer: Tokenizer, template: str, special: dict[str, str]) -> None:
        self.tokenizer = tokenizer
        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
        )
        environment.filters["tojson"] = _tojson
        environment.globals["raise_exception"] = _raise
        environment.globals["strftime_now"] = lambda pattern: datetime.now().strftime(pattern)
        self.template = environment.from_string(template)
        self.special = special
        # A template that loops over a message's content takes OpenAI's parts; one that
        # adds it to strings takes text (vLLM detects the same and joins parts by newline).
        self.takes_parts = (
            "in message['content']" in template or 'in message["content"]' in template
        )

    def exact_for(self, chat: ChatRequest) -> bool:
        return chat.first_image_part() is None

    @classmethod
    def from_folder(cls, folder: Path) -> "TemplateCounter | None":
        """None when the folder lacks a tokenizer.json or a chat template."""
        tokenizer_file = folder / "tokenizer.json"
        if not tokenizer_file.is_file():
            return None
        config_file = folder / "tokenizer_config.json"
        config: dict[str, Any] = (
            json.loads(config_file.read_text()) if config_file.is_file() else {}
        )
        template_file = folder / "chat_template.jinja"
        template = (
            template_file.read_text() if template_file.is_file() else config.get("chat_template")
        )
        if not isinstance(template, str):
            return None
        special = {k: v for k, v in config.items() if k.endswith("_token") and isinstance(v, str)}
        return cls(Tokenizer.from_file(str(tokenizer_file)), template, special)

    def count(self, chat: ChatRequest) -> int:
        if chat.text_prompt is not None:  # a text completion: the prompt as it is, BOS and all
            return len(self.tokenizer.encode(chat.text_prompt, add_special_tokens=True).ids)
        if chat.first_image_part() is not None:
            return chat.estimated_prompt_tokens()  # image tokens are the worker's to count
        messages = [self._message(m) for m in chat.messages]
        try:
            prompt = self.template.render(
                messages=messages,
                tools=chat.options.get("tools"),
                add_generation_prompt=True,
                **self.special,
            )
        except TemplateError as exc:
            logger.warning("chat template failed (%s); the prompt is estimated", exc)
            return chat.estimated_prompt_tokens()
        return len(self.tokenizer.encode(prompt, add_special_tokens=False).ids)

    def _message(self, message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("content")
        if isinstance(content, list) and not self.takes_parts:
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            content = "\n".join(texts)
        elif content is None:
            content = ""
        return {**message, "content": content}


def _tojson(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _raise(message: str) -> None:
    raise TemplateError(message)


class PromptCounters:
    """One counter per served model name, per process; a folder is read once."""

    def __init__(self) -> None:
        self._counters: dict[str, PromptCounter] = {}
        self._loading: dict[str, asyncio.Future[PromptCounter]] = {}

    async def for_model(self, served_model_name: str) -> PromptCounter:
        counter = self._counters.get(served_model_name)
        if counter is not None:
            return counter
        loading = self._loading.get(served_model_name)
        if loading is None:
            loading = asyncio.ensure_future(asyncio.to_thread(_load, served_model_name))
            self._loading[served_model_name] = loading
        try:
            counter = await asyncio.shield(loading)
        finally:
            self._loading.pop(served_model_name, None)
        self._counters[served_model_name] = counter
        return counter

    def clear(self) -> None:
        self._counters.clear()


def _load(served_model_name: str) -> PromptCounter:
    root = Path(settings.TOKENIZER_DIR)
    folder = root / served_model_name
    if not served_model_name or folder.parent != root or not folder.is_dir():
        return ESTIMATED  # no folder here (a remote worker's model): estimated
    started = time.perf_counter()
    try:
        counter = TemplateCounter.from_folder(folder)
    except Exception as exc:  # a broken folder (tokenizers raises plain Exceptions)
        logger.error(
            "prompt tokens of %s are estimated: %s cannot be read: %s",
            served_model_name,
            folder,
            exc,
        )
        return ESTIMATED
    if counter is None:
        return ESTIMATED
    logger.info(
        "prompt tokens of %s counted with %s (loaded in %.2f s)",
        served_model_name,
        folder,
        time.perf_counter() - started,
    )
    return counter


prompt_counters = PromptCounters()
