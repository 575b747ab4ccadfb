"""What the semantic cache compares, and under which key: the question (the last user
message's text), its context key (everything else that shapes the reply) and its entry id.

Only the last user message is compared; everything before it (system prompt, earlier
turns) and every option that shapes the reply must match exactly. That is the context
key: a hash of team, deployment and revision, all earlier messages, max_tokens and the
options, and the asker's name where the message gives one.
"""

import hashlib
import json

from inference.chat_request import ChatRequest
from inference.deployments import DeploymentInfo

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
