"""Deterministic stand-ins for a tokenizer and a model's output."""

import hashlib
import random
import re

_PIECE = re.compile(r"\w+|[^\w\s]")
_WORDS = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "at",
    "or",
    "an",
    "have",
    "not",
    "which",
    "but",
    "all",
    "can",
    "had",
    "one",
    "were",
    "their",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "time",
    "may",
    "about",
    "out",
    "up",
    "them",
    "some",
    "could",
    "than",
    "first",
    "into",
    "other",
    "these",
    "two",
    "then",
    "its",
    "over",
    "only",
    "new",
    "also",
    "after",
    "any",
    "most",
    "make",
    "like",
    "well",
    "through",
    "back",
    "years",
    "where",
    "much",
    "way",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
)


def tokenize(text: str) -> list[str]:
    return _PIECE.findall(text)


def prompt_tokens(messages: list[dict[str, str]]) -> list[str]:
    tokens: list[str] = []
    for message in messages:
        tokens += ["<|im_start|>", message["role"], "\n", *tokenize(message["content"])]
    return [*tokens, "<|im_start|>", "assistant", "\n"]


def completion(
    prompt: list[str], max_tokens: int, mean_length: int, ignore_eos: bool = False
) -> list[str]:
    """The same prompt always yields the same words. Like vLLM, `ignore_eos` runs to
    max_tokens; otherwise the natural length is drawn from the prompt's hash."""
    seed = hashlib.sha256("\x1f".join(prompt).encode()).digest()
    rng = random.Random(seed)
    natural = max(1, int(rng.expovariate(1 / mean_length)) + 1)
    count = max_tokens if ignore_eos else min(max_tokens, natural)
    return [(" " if i else "") + rng.choice(_WORDS) for i in range(count)]


_SCRIPTED_PIECE = re.compile(r"\s*(?:\w+|[^\w\s])")


def scripted_completion(reply: str, max_tokens: int) -> list[str]:
    """A fixed reply as tokens (a word or one punctuation mark, each with the whitespace
    before it), so it streams in small pieces and joins back to the same text (trailing
    whitespace aside). For tests that need a reply with given contents, such as markdown
    or markup, through the real gateway (`--scripted-replies`)."""
    return _SCRIPTED_PIECE.findall(reply)[:max_tokens]
