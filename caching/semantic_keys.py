"""What the semantic cache compares, and under which key: the question (the last user
message's text), its context key (everything else that shapes the reply) and its entry id.

Only the last user message is compared; everything before it (system prompt, earlier
turns) and every option that shapes the reply must match exactly. That is the context
key: a hash of team, deployment and revision, all earlier messages, max_tokens and the
options, and the asker's name where the message gives one.
"""

import hashlib
import json
from dataclasses import dataclass, field, replace

from caching import semantic_scores
from caching.verify.features import Features, analyze
from inference.chat_request import ChatRequest
from inference.deployments import DeploymentInfo
from inference.embeddings import Vector

# A new probe recipe (dimensions, weighting) needs a new prefix: old sets hold another basis.
# A change to how verification reads numbers, dates or negations (caching/verify/) moves
# questions to other sets: until their entries expire, only hits are lost.
SET_PREFIX = "sluice:cache:sem:probes:"
ENTRY_PREFIX = "sluice:cache:sem:entry:"

# A question is embedded whole (inference/embeddings.py reads up to 1,016 tokens window by
# window and pools them), so two long questions that share their beginning differ by the
# rest. Verification is pure Python on the event loop, up to 3.5 ms for 3,000 characters
# of numbers (measured): a question over LONG_QUESTION_CHARS has only its nearest candidate
# checked, and one over MAX_QUESTION_CHARS skips the semantic cache (counted), as do denser
# texts past the embedder's 1,016 tokens (CJK, code).
MAX_QUESTION_CHARS = 3000
LONG_QUESTION_CHARS = 1000


def question_of(chat: ChatRequest) -> str | None:
    """The last user message's text; None when the conversation does not end with one, or
    when it is too long for the semantic cache."""
    question = _last_user_text(chat)
    return question if question is not None and len(question) <= MAX_QUESTION_CHARS else None


def question_too_long(chat: ChatRequest) -> bool:
    question = _last_user_text(chat)
    return question is not None and len(question) > MAX_QUESTION_CHARS


def _last_user_text(chat: ChatRequest) -> str | None:
    last = chat.messages[-1]
    if last.get("role") != "user":
        return None
    content = last.get("content")
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        if len(parts) != len(content):
            return None  # images or audio: their meaning is not in the text
        content = " ".join(parts)
    return content.strip() if isinstance(content, str) and content.strip() else None


def context_key(team_id: int, deployment: DeploymentInfo, chat: ChatRequest) -> str:
    material = {
        "team": team_id,
        "deployment": deployment.name,
        "revision": deployment.revision,
        "context": chat.messages[:-1],
        "max_tokens": chat.max_tokens,
        "options": chat.options,
    }
    # Who asks (a user message's `name`): "What is my name?" from bob is not alice's
    # question, though word for word the same (which is served without verification). Only
    # when there is more than role and content: every other context keeps its key.
    asker = {k: v for k, v in chat.messages[-1].items() if k not in ("role", "content")}
    if asker:
        material["asker"] = asker
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def element_id(context: str, question: str) -> str:
    return hashlib.sha256(f"{context}\n{question}".encode()).hexdigest()


def partition(features: Features) -> str:
    """Which of its context's vector sets a verified question goes in: one per set of
    anchors, the things verification requires a candidate to share exactly (its numbers,
    its dates and its count of negations: caching/verify/verdict.py), so that a lookup
    only ever searches questions it could accept. Templated traffic ("Summarize ticket
    4411", "Say hello, request 93") then never searches the other values' questions, which
    crowded out real candidates and made every search the HNSW graph's worst case (vectors
    that differ in a number); a value seen for the first time finds its set empty (EXISTS)
    and costs no search at all. "" (the context's own set) for a question without anchors.
    A hash, like every key here: key names never show a question's content."""
    numbers = sorted(features.numbers)
    if not numbers and not features.dates and not features.negations:
        return ""
    anchors = [*numbers, "", *sorted(features.dates), "", str(features.negations)]
    return hashlib.sha256("\n".join(anchors).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SemanticSlot:
    """Where a question lives: its context's vector set (its anchors' one when lookups
    verify: partition()) and its own entry; its probe vector (what the set holds,
    inference/probe_embeddings.py) once probed, and its MiniLM vector once a lookup scored
    a candidate for it (most never do)."""

    set_key: str
    element: str
    question: str
    probe: Vector | None = None
    vector: Vector | None = None
    features: Features | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        context: str,
        question: str,
        *,
        verified: bool = True,
        probe: Vector | None = None,
        vector: Vector | None = None,
    ) -> "SemanticSlot":
        """verified: whether lookups in this context verify their candidates (a team's
        policy, always under an error bound). Without verification every question of the
        context shares one set: any of them may then answer any other."""
        element = element_id(context, question)
        features = None
        if verified and len(question) <= LONG_QUESTION_CHARS:
            # Remembered per process (15 to 50 us to make, 4,096 least recently used):
            # an exact hit, asked again and again, makes its slot before its exact
            # lookup. Keyed by entry id, so by team.
            features = semantic_scores.candidate_features(element, question)
        elif verified:
            features = analyze(question)  # a long question: not worth remembering
        part = partition(features) if features is not None else ""
        set_key = SET_PREFIX + context + (f":{part}" if part else "")
        return cls(set_key, element, question, probe, vector, features)

    @property
    def entry_key(self) -> str:
        return ENTRY_PREFIX + self.element

    def embedded(self, vector: Vector) -> "SemanticSlot":
        return replace(self, vector=vector)

    def probe_bytes(self) -> bytes:
        if self.probe is None:
            raise ValueError("the question is not probed yet: semantic.probed()")
        return self.probe.tobytes()
