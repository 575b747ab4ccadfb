"""The context policy: what a request whose prompt plus max_tokens does not fit the
deployment's context window gets (refuse, clamp or trim), chosen per team and, for one
request, by the client; and "trim" itself, which leaves out the oldest turns until it fits.

What trim keeps, always: every system and developer message, wherever it stands, and the
last user message with everything after it (the question being asked, and the tool calls
and results that answer it). What may go, oldest first, is whole turns: a user message with
the replies, tool calls and tool results that follow it up to the next user message (what
comes before the first user message is a turn of its own). Whole turns rather than single
messages: a tool result never outlives the assistant message that called it, and what is
left still starts with a user message and alternates, as strict chat templates require.

How many turns go: the fewest that make the prompt fit, found by bisection over the number
of turns left out, each candidate counted by the counter admission uses (the model's own
tokens where its tokenizer is on this host: gateway/serving/admission.py count_prompt).
Not a sum of per-message sizes: a chat template is not additive (SmolLM2's adds a default
system prompt only when the first message is not one, for instance), so per-message
figures would be estimates, and one that came out short would let the worker refuse what
admission passed. Bisection costs 1 + log2(turns) counts (8 for a 100-turn chat), only for
a request that does not fit, and its first count, every turn left out, refuses a request
whose kept messages alone do not fit.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from gateway.accounts.models import QuotaPolicy
from gateway.accounts.records import QuotaLimits
from gateway.serving.errors import ContextLengthExceeded
from inference.chat_request import ChatRequest, InvalidRequest

Policy = QuotaPolicy.LengthPolicy
POLICY_HEADER = "x-sluice-context-policy"  # HTTP: the request's own policy
POLICY_FIELD = "context_policy"  # the WebSocket chat message's
TRIMMED_HEADER = "x-sluice-context-trimmed"  # how many messages were left out
KEPT_ROLES = frozenset({"system", "developer"})


def team_policy(limits: QuotaLimits) -> str:
    """The team's policy (a team on the platform default refuses)."""
    if limits.trim_context:
        return Policy.TRIM.value
    return Policy.CLAMP.value if limits.clamp_max_tokens else Policy.REFUSE.value


def with_requested_policy(chat: ChatRequest, value: object, param: str) -> ChatRequest:
    """The chat with the policy its client asked for (`value`, from the header or the socket
    field named `param`); None (not asked) leaves the team's. Any policy may be asked for:
    each only lowers what the request would have used, as the client could have."""
    if value is None:
        return chat
    policy = value.strip().lower() if isinstance(value, str) else None
    if policy not in Policy.values:
        shown = repr(value)[:40]
        raise InvalidRequest(
            f"'{param}' must be one of {', '.join(Policy.values)}; got {shown}.", param
        )
    return replace(chat, context_policy=policy)


def droppable_turns(messages: list[dict[str, Any]]) -> list[list[int]]:
    """The indexes of the turns trim may leave out, oldest first (the module docstring says
    which). Without a user message, the last message that is not a tool result is kept
    with what follows it."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    calls = [i for i, m in enumerate(messages) if m.get("role") != "tool"]
    kept_from = users[-1] if users else (calls[-1] if calls else 0)
    turns: list[list[int]] = []
    for index in range(kept_from):
        role = messages[index].get("role")
        if role in KEPT_ROLES:
            continue
        if role == "user" or not turns:
            turns.append([index])
        else:
            turns[-1].append(index)
    return turns


@dataclass(frozen=True)
class Trim:
    chat: ChatRequest  # with the turns left out
    dropped: int  # messages left out
    tokens: int  # chat's prompt, counted
    fits: bool  # False: even with every turn left out it is over the budget


async def trim_to_fit(
    chat: ChatRequest, budget: int, count: Callable[[ChatRequest], Awaitable[int]]
) -> Trim:
    """The chat with the fewest oldest turns left out that brings its prompt to `budget`
    tokens or fewer (the window less max_tokens). Called for a chat that does not fit as it
    is; `count` is admission's counter."""
    turns = droppable_turns(chat.messages)

    def without(number: int) -> Trim:
        gone = {index for turn in turns[:number] for index in turn}
        kept = [m for index, m in enumerate(chat.messages) if index not in gone]
        return Trim(replace(chat, messages=kept), len(gone), 0, False)

    least = without(len(turns))
    tokens = await count(least.chat)
    best = replace(least, tokens=tokens, fits=tokens <= budget)
    if not best.fits:
        return best
    low, high = 1, len(turns)  # dropping `high` turns fits; 0 did not (the caller's count)
    while low < high:
        middle = (low + high) // 2
        candidate = without(middle)
        tokens = await count(candidate.chat)
        if tokens <= budget:
            high, best = middle, replace(candidate, tokens=tokens, fits=True)
        else:
            low = middle + 1
    return best


class KeptMessagesTooLong(ContextLengthExceeded):
    """Trim could not make it fit: the system messages and the last user message (with what
    follows it) alone, plus max_tokens, are over the window. context_length_exceeded, as
    under refuse, in words that say what is left to shorten."""

    def __init__(
        self, model: str, window: int, prompt: int, max_tokens: int, estimated: bool = True
    ) -> None:
        super().__init__(model, window, prompt, max_tokens, estimated)
        how = ", estimated" if estimated else ""
        self.args = (
            f"The model '{model}' has a context length of {window} tokens. Even with every "
            f"earlier turn left out (context policy trim), the system messages and the last "
            f"user message are {prompt} tokens{how}, and with {max_tokens} for the completion "
            f"that is {prompt + max_tokens}. Please shorten them or reduce max_tokens.",
        )
