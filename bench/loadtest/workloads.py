"""What the benchmark sends: chat request bodies from a JSONL file or a synthetic workload.

Synthetic workloads are seeded, so two runs (or two endpoints in one --compare run) send
the same requests in the same order.
"""

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Question families, each with paraphrases that mean the same thing: a semantic cache
# should answer a paraphrase from the original; an exact cache cannot.
_FAMILIES = [
    [
        "What is the capital of {x}?",
        "Which city is the capital of {x}?",
        "Name the capital city of {x}.",
        "Tell me what the capital of {x} is.",
    ],
    [
        "How many people live in {x}?",
        "What is the population of {x}?",
        "Roughly how many inhabitants does {x} have?",
        "Give me the population of {x}.",
    ],
    [
        "What language is spoken in {x}?",
        "Which language do people in {x} speak?",
        "What is the main language of {x}?",
        "Tell me the official language of {x}.",
    ],
    [
        "What currency does {x} use?",
        "Which currency is used in {x}?",
        "What money do they use in {x}?",
        "Name the currency of {x}.",
    ],
]
_PLACES = [
    "France",
    "Japan",
    "Brazil",
    "Kenya",
    "Canada",
    "Norway",
    "Peru",
    "Vietnam",
    "Egypt",
    "Chile",
    "Poland",
    "Ghana",
    "Nepal",
    "Spain",
    "Mexico",
    "India",
    "Italy",
    "Greece",
    "Turkey",
    "Iceland",
    "Ireland",
    "Morocco",
    "Portugal",
    "Chad",
]
_TOPICS = [
    "rivers",
    "robots",
    "bread",
    "volcanoes",
    "chess",
    "tides",
    "bees",
    "glass",
    "trains",
    "maps",
    "clocks",
    "salt",
    "kites",
    "owls",
    "bridges",
    "tea",
]
SYSTEM_PROMPT = (
    "You are the support assistant of a travel company. Answer in one or two short "
    "sentences, in plain English, without lists. If you are unsure, say so. "
) * 8  # long enough to fill several prefix-cache blocks, as real system prompts do


@dataclass(frozen=True)
class WorkloadSpec:
    name: str  # "unique", "shared-prefix" or a path to a JSONL file
    model: str
    max_tokens: int
    repeat_share: float = 0.3
    paraphrase_share: float = 0.2
    ignore_eos: bool = True
    seed: int = 0


def _body(spec: WorkloadSpec, messages: list[dict[str, str]]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": spec.model,
        "messages": messages,
        "max_tokens": spec.max_tokens,
        "temperature": 0,
    }
    if spec.ignore_eos:
        body["ignore_eos"] = True  # vLLM's extension: every reply has max_tokens tokens
    return body


def _unique(spec: WorkloadSpec, rng: random.Random) -> Iterator[dict[str, Any]]:
    n = 0
    while True:
        n += 1
        words = " and ".join(rng.sample(_TOPICS, 2))
        yield _body(spec, [{"role": "user", "content": f"Note {n}: write about {words}."}])


def _shared_prefix(spec: WorkloadSpec, rng: random.Random) -> Iterator[dict[str, Any]]:
    """A shared system prompt; questions are new, exact repeats, or paraphrases of earlier
    ones, in the chosen shares."""
    asked: list[tuple[int, str]] = []  # (family, place) of earlier questions
    while True:
        draw = rng.random()
        if asked and draw < spec.repeat_share:
            family, place = rng.choice(asked)
            question = _FAMILIES[family][0].format(x=place)
        elif asked and draw < spec.repeat_share + spec.paraphrase_share:
            family, place = rng.choice(asked)
            question = rng.choice(_FAMILIES[family][1:]).format(x=place)
        else:
            family, place = rng.randrange(len(_FAMILIES)), rng.choice(_PLACES)
            asked.append((family, place))
            question = _FAMILIES[family][0].format(x=place)
        yield _body(
            spec,
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
        )


def _from_file(spec: WorkloadSpec) -> Iterator[dict[str, Any]]:
    """Each line one chat request body; the file is replayed from the top when exhausted."""
    lines = [line for line in Path(spec.name).read_text().splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{spec.name} holds no requests")
    bodies = []
    for number, line in enumerate(lines, 1):
        try:
            body = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{spec.name}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise ValueError(f"{spec.name}:{number}: needs an object with 'messages'")
        bodies.append({"model": spec.model, "max_tokens": spec.max_tokens, **body})
    return itertools.cycle(bodies)


def requests_for(spec: WorkloadSpec) -> Iterator[dict[str, Any]]:
    rng = random.Random(spec.seed)
    if spec.name == "unique":
        return _unique(spec, rng)
    if spec.name == "shared-prefix":
        return _shared_prefix(spec, rng)
    return _from_file(spec)
