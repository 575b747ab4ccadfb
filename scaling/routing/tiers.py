"""Tiered routing: which tier, small (cheap) or large (capable), should answer a request.

A request for the model "auto" is classified here, then sent to a deployment of the chosen
tier (gateway/serving/admission.py). The classifier is a handful of explainable rules, each adding
or taking away points; at THRESHOLD points or more the request goes to the large tier. Rules
rather than a model because every decision must be explainable in a response header, cost
next to nothing on the hot path (tens of microseconds), and give the same answer in every
gateway process. `TierClassifier` is the seam where a learned classifier could replace them.
Rules, weights and measured accuracy: docs/routing.md, "Tiered routing (model auto)".
"""

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Literal

Tier = Literal["small", "large"]
AUTO_MODEL = "auto"
ROUTED_TIERS: tuple[Tier, Tier] = ("small", "large")
BATCH_TIER = "batch"  # "auto" sends a batch's lines here first (gateway/serving/admission.py)
THRESHOLD = 2.0
# Cues are looked for in the task's first and last characters only: a 100 kB paste then costs
# what a question does, and the instruction sits before or after what was pasted.
HEAD_CHARS, TAIL_CHARS = 1000, 300
MAX_NAMED = 4  # rules named in a decision's reason (a response header): the strongest
LONG_TASK_CHARS = 600  # about 150 tokens: beyond a question, a pasted document or a spec
LONG_CONTEXT_CHARS = 8000  # about 2,000 tokens of conversation, where small models lose track
LONG_CONTEXT_MESSAGES = 8
LARGE_MAX_TOKENS = 2048  # the caller expects a long answer
WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
NUMBER = re.compile(r"\d[\d,.]*")
INSTRUCTION_END = re.compile(r"[:\"\n]")  # pasted or quoted material starts here
CODE_STARTS = (
    "def ",
    "class ",
    "import ",
    "function ",
    "const ",
    "let ",
    "var ",
    "return ",
    "#include",
    "fn ",
    "func ",
    "public ",
    "select ",
    "traceback",
    'file "',
)


def message_text(content: object) -> str:
    """A message's text, whether a string or OpenAI content parts (images count as nothing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


@dataclass(frozen=True)
class TierRequest:
    """What the classifier sees of a chat request."""

    messages: Sequence[Mapping[str, Any]]
    max_tokens: int | None = None
    json_output: bool = False

    @property
    def task(self) -> str:
        """The last user message: the thing being asked now (the system prompt is not)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return message_text(message.get("content"))
        return message_text(self.messages[-1].get("content")) if self.messages else ""

    @property
    def context_chars(self) -> int:
        return sum(len(message_text(m.get("content"))) for m in self.messages)


@dataclass(frozen=True)
class Scan:
    """The task read once: its length, its lower-cased head and tail, and their words."""

    length: int
    text: str
    words: frozenset[str]

    @classmethod
    def of(cls, task: str) -> "Scan":
        window = (
            task
            if len(task) <= HEAD_CHARS + TAIL_CHARS
            else (f"{task[:HEAD_CHARS]}\n{task[-TAIL_CHARS:]}")
        )
        text = window.lower()
        return cls(len(task), text, frozenset(WORD.findall(text)))


@dataclass(frozen=True)
class TierDecision:
    tier: Tier
    reason: str  # the score and the rules that fired; short and ASCII, fit for a header
    score: float
    signals: tuple[str, ...] = ()  # every rule that fired, with its points


class TierClassifier(ABC):
    """Anything that maps a request to a tier with a reason (rules today, maybe a model)."""

    @abstractmethod
    def classify(self, request: TierRequest) -> TierDecision: ...


@dataclass(frozen=True)
class Rule:
    """A named signal worth `points`: fires on any of its words, or any of its phrases found
    in the text. Subclasses look at the shape of the request instead."""

    name: str
    points: float
    words: frozenset[str] = frozenset()
    phrases: tuple[str, ...] = ()

    def fires(self, scan: Scan, request: TierRequest) -> bool:
        return not self.words.isdisjoint(scan.words) or any(p in scan.text for p in self.phrases)


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


def rule(name: str, points: float, words: str = "", phrases: Iterable[str] = ()) -> Rule:
    return Rule(name, points, _set(words), tuple(phrases))


def _phrases(*parts: str) -> list[str]:
    """Every combination: _phrases("how", "would|should", "you|i") -> "how would you", ..."""
    return [" ".join(words) for words in product(*(part.split("|") for part in parts))]


class AsksForCode(Rule):
    """ "implement", or a making verb with a code noun soon after: "write a bash script"."""

    VERBS = _set("write build create refactor optimise optimize translate")
    NOUNS = _set(
        "function class script program query queries algorithm module server test tests "
        "manifest dockerfile workflow schema implementation cli code api regex expression"
    )
    NEAR = re.compile(
        r"\b(?:write|build|create|refactor|optimi[sz]e|translate)\b[^.?!\n]{0,60}\b"
        rf"(?:{'|'.join(sorted(NOUNS - {'expression'}))}|regular expression)\b"
    )

    def fires(self, scan: Scan, request: TierRequest) -> bool:
        if "implement" in scan.words:
            return True
        return (
            not self.VERBS.isdisjoint(scan.words)
            and not self.NOUNS.isdisjoint(scan.words)
            and self.NEAR.search(scan.text) is not None
        )


class CodeLines(Rule):
    """Two or more lines that look like code or a stack trace, fenced or not."""

    def fires(self, scan: Scan, request: TierRequest) -> bool:
        found = 0
        for line in scan.text.splitlines():
            found += _code_like(line.strip())
            if found >= 2:
                return True
        return False


def _code_like(line: str) -> bool:
    return (
        line.startswith(CODE_STARTS)
        or line.endswith((";", "{", "}"))
        or (line.startswith(("if ", "for ")) and line.endswith((":", "{")))
        or (line.startswith("from ") and " import " in line)
    )


class LongWriting(Rule):
    def fires(self, scan: Scan, request: TierRequest) -> bool:
        return super().fires(scan, request) or (
            "word" in scan.text and re.search(r"\b\d[\d,]{2,}[- ]words?\b", scan.text) is not None
        )


@dataclass(frozen=True)
class Check(Rule):
    """A rule on the request's shape rather than its words."""

    test: Callable[[Scan, TierRequest], bool] = lambda scan, request: False

    def fires(self, scan: Scan, request: TierRequest) -> bool:
        return self.test(scan, request)


class SeveralRequirements(Rule):
    """Three or more comma-separated asks in the instruction (before any quoted or pasted
    material, which starts at a colon, a quote or a new line): "cover X, Y, Z and W"."""

    def fires(self, scan: Scan, request: TierRequest) -> bool:
        return INSTRUCTION_END.split(scan.text, maxsplit=1)[0].count(", ") >= 3


class SeveralFigures(Rule):
    """Four or more numbers: a quantitative problem rather than a lookup."""

    def fires(self, scan: Scan, request: TierRequest) -> bool:
        return len(NUMBER.findall(scan.text)) >= 4


RULES: tuple[Rule, ...] = (
    Rule("code block", 2, phrases=("```",)),
    CodeLines("code or stack trace", 2),
    AsksForCode("asks for code", 2),
    rule(
        "debugging",
        2,
        "bug debug throw throws traceback hangs oomkilled slow",
        ["doesn't compile", "doesnt compile", "stack trace", "root cause", "race condition"],
    ),
    rule(
        "maths or proof",
        2,
        "prove proof derive derivation integral eigenvalue eigenvalues "
        "eigenvector eigenvectors equations probability induction theorem lagrange matrix "
        "gradient",
        ["show that"],
    ),
    rule(
        "step-by-step reasoning",
        2,
        "reasoning",
        [
            "step by step",
            "step-by-step",
            "walk me through",
            "think through",
            "explain why",
            *_phrases("show", "your|each|the", "working|step"),
        ],
    ),
    rule(
        "analysis or comparison",
        2,
        "compare comparison analyse analyze evaluate trade-off "
        "trade-offs tradeoff tradeoffs critically critique weigh weighs weighing discuss",
        ["pros and cons", "strengths and weaknesses"],
    ),
    rule("design or strategy", 2, "design architecture strategy go-to-market"),
    LongWriting(
        "long-form writing",
        2,
        _set("essay report story proposal guide postmortem speech itinerary narrative"),
        ("blog post", "requirements document", "lesson plan", "cover letter", "literature review"),
    ),
    rule("plan", 1, "plan roadmap migration"),
    rule("asks for depth", 1, "detailed comprehensive thorough", ["in depth", "in detail"]),
    rule("asks for an explanation", 1, "explain justify", ["and why"]),
    rule(
        "open-ended how",
        1,
        "",
        [
            *_phrases("how", "would|should|could", "you|i|we"),
            "what's the best way",
            "what is the best way",
            "what would happen",
        ],
    ),
    rule("calculation", 1, "calculate compute estimate model"),
    rule(
        "scale or performance", 1, "million latency p99 throughput concurrent scale", ["per second"]
    ),
    SeveralRequirements("several requirements", 1),
    SeveralFigures("several figures", 1),
    Check("several questions", 1, test=lambda scan, _: scan.text.count("?") >= 3),
    Check("long task", 1, test=lambda scan, _: scan.length > LONG_TASK_CHARS),
    Check(
        "long conversation",
        2,
        test=lambda _, request: (
            request.context_chars > LONG_CONTEXT_CHARS
            or len(request.messages) > LONG_CONTEXT_MESSAGES
        ),
    ),
    Check(
        "large max_tokens",
        2,
        test=lambda _, request: (
            request.max_tokens is not None and request.max_tokens >= LARGE_MAX_TOKENS
        ),
    ),
    Check("structured output", 1, test=lambda _, request: request.json_output),
    rule(
        "short-output request",
        -2,
        "translate one-line one-liner briefly rephrase shorten",
        [
            "in one sentence",
            "in one line",
            "in simple terms",
            "rewrite this",
            *_phrases("fix the", "grammar|spelling|typo"),
        ],
    ),
)


class RuleClassifier(TierClassifier):
    """Adds up the points of the rules that fire; THRESHOLD or more is the large tier."""

    def __init__(self, rules: Iterable[Rule] = RULES, threshold: float = THRESHOLD) -> None:
        self.rules = tuple(rules)
        self.threshold = threshold

    def classify(self, request: TierRequest) -> TierDecision:
        scan = Scan.of(request.task)
        fired = [rule for rule in self.rules if rule.fires(scan, request)]
        score = sum(rule.points for rule in fired)
        tier: Tier = "large" if score >= self.threshold else "small"
        signals = tuple(f"{rule.name} {rule.points:+g}" for rule in fired)
        return TierDecision(tier, _reason(score, fired), score, signals)


def _reason(score: float, fired: list[Rule]) -> str:
    """The score and the rules behind it, strongest first: "score 4: code block, debugging"."""
    names = [rule.name for rule in sorted(fired, key=lambda r: -abs(r.points))[:MAX_NAMED]]
    return f"score {score:g}: {', '.join(names) or 'no hard-task signal'}"


default_classifier: TierClassifier = RuleClassifier()


def classify(
    messages: Sequence[Mapping[str, Any]],
    max_tokens: int | None = None,
    response_format: object = None,
) -> TierDecision:
    """The tier for one chat request, by the default classifier."""
    json_output = isinstance(response_format, Mapping) and str(
        response_format.get("type", "")
    ).startswith("json")
    return default_classifier.classify(TierRequest(messages, max_tokens, json_output))


@dataclass(frozen=True)
class TierRoute:
    """Where a request for "auto" went, and why: what the response headers say."""

    decision: TierDecision
    deployment: str
    tier: Tier
    fallback: bool = False  # the decided tier had no deployment; the other tier served it

    def headers(self) -> dict[str, str]:
        why = self.decision.reason
        if self.fallback:
            why = f"fallback: no {self.decision.tier} deployment available; {why}"
        return {"x-sluice-tier": f"{self.tier} ({why})", "x-sluice-routed-model": self.deployment}


def choose_deployment(
    decision: TierDecision, deployments: Iterable[tuple[str, str]]
) -> TierRoute | None:
    """The first deployment by name of the decided tier, else of the other routed tier.

    `deployments` are the (name, tier) pairs the caller may use. First by name keeps the
    choice the same in every gateway process and lets an admin steer it by naming. None when
    no deployment is small or large.
    """
    first: dict[str, str] = {}
    for name, tier in sorted(deployments):
        if tier in ROUTED_TIERS:
            first.setdefault(tier, name)
    other: Tier = "small" if decision.tier == "large" else "large"
    for tier, fallback in ((decision.tier, False), (other, True)):
        if tier in first:
            return TierRoute(decision, first[tier], tier, fallback)
    return None
