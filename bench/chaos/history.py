"""The records a chaos run keeps and its checks read: what each client saw, what the
ledger holds, when each fault was on. Plain dataclasses, no Django and no I/O, so the
checks are pure functions that a unit test can feed synthetic histories
(tests/test_chaos_checks.py), and a run's history can be written out as JSON and checked
again later.
"""

from dataclasses import asdict, dataclass, field
from typing import Any

# How a client request ended (Attempt.outcome).
OK = "ok"  # a whole reply: [DONE] (or a 200 body, or the socket's `done`)
REFUSED = "refused"  # an error before any content: a non-200 answer or the socket's `error`
ERROR_CHUNK = "error_chunk"  # content, then an error chunk (SSE) or `error` event (socket)
BROKEN = "broken"  # content, then the connection ended without [DONE], `done` or an error
HANG = "hang"  # nothing arrived for the client's idle timeout: a stream left hanging
DISCONNECTED = "disconnected"  # sent, then the connection closed before any answer
UNREACHABLE = "unreachable"  # no gateway accepted the connection: nothing was sent
MALFORMED = "malformed"  # an answer that is not OpenAI's shape (a 200 that is not JSON...)
PENDING = "pending"  # still running (a history written mid-run)

OUTCOMES = (OK, REFUSED, ERROR_CHUNK, BROKEN, HANG, DISCONNECTED, UNREACHABLE, MALFORMED)

# Billing: the ledger writes nothing for what a cache or another request's generation served.
FREE_CACHE_RESULTS = ("hit-exact", "hit-semantic", "coalesced")


@dataclass
class Attempt:
    """One client request, as the client saw it. `client_id` is the client's own id (sent
    as x-client-request-id); `request_id` is the gateway's (x-request-id, the chunks' and
    the socket events' `id`), None when the client never learned it."""

    client_id: str
    team: str
    transport: str  # "http" or "ws"
    stream: bool
    temperature: float
    sent_at: float  # epoch seconds
    gateway: int = 0  # which gateway answered (after any failover)
    ended_at: float = 0.0
    outcome: str = PENDING
    status: int | None = None  # HTTP status; on the socket, the status the error's code means
    request_id: str | None = None
    error: dict[str, Any] | None = None  # the OpenAI error object received, as received
    shape_ok: bool = True  # the error (if any) was in OpenAI's shape
    prompt_tokens: int | None = None  # from the reply's usage
    completion_tokens: int | None = None
    content_chunks: int = 0
    cache: str | None = None  # x-sluice-cache (x-sluice-coalesced), the socket's `cache`
    failover: bool = False  # the first gateway refused the connection; the other one took it
    idle_socket: bool = False  # sent on a socket kept idle for minutes before
    warmup: bool = False  # sent while waiting for the stack to serve: billed, not judged
    detail: str = ""  # an exception, a close code: what the report shows for odd outcomes

    @property
    def code(self) -> str | None:
        if not self.error:
            return None
        code = self.error.get("code")
        return str(code) if code is not None else None

    @property
    def failed(self) -> bool:
        return self.outcome not in (OK, PENDING)


@dataclass(frozen=True)
class LedgerRow:
    """One UsageRecord of the run's teams."""

    request_id: str
    team: str
    prompt_tokens: int
    completion_tokens: int
    status: str
    cache_result: str
    created_at: float  # epoch seconds, at settlement
    latency_ms: int  # from admission to settlement
    batch_id: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def admitted_at(self) -> float:
        """When admission counted it: the settlement time less the time since admission."""
        return self.created_at - self.latency_ms / 1000


@dataclass(frozen=True)
class TeamLimits:
    """A team's quota as the run set it; None: no limit of that kind."""

    team: str
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    tokens_per_month: int | None = None


@dataclass
class FaultWindow:
    """A fault from the moment it was done to the moment it was undone (the process back
    and answering, the signal sent, the memory freed)."""

    kind: str
    detail: str
    started_at: float
    ended_at: float = 0.0
    notes: list[str] = field(default_factory=list)
    gateway: int | None = None  # the gateway it stopped, for gateway faults


@dataclass(frozen=True)
class BatchLineResult:
    custom_id: str
    request_id: str | None  # the answered line's request id (output file)
    status_code: int | None  # the response's status; None for a line never run
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error_code: str | None = None  # the error file's code (batch_cancelled...)


@dataclass
class BatchResult:
    batch_id: str
    team: str
    status: str
    lines: int  # in the input file
    output: list[BatchLineResult] = field(default_factory=list)
    errors: list[BatchLineResult] = field(default_factory=list)
    detail: str = ""


@dataclass(frozen=True)
class IdleClose:
    """The server closed a socket that was idle between messages."""

    at: float
    gateway: int
    code: int | None


@dataclass
class History:
    started_at: float  # the load's start, epoch seconds
    ended_at: float
    attempts: list[Attempt]
    ledger: list[LedgerRow]
    limits: dict[str, TeamLimits]
    faults: list[FaultWindow]
    batch: BatchResult | None = None
    idle_closes: list[IdleClose] = field(default_factory=list)
    idle_socket_s: float = 0.0  # how long the idle sockets stayed idle between messages
    # Failures this long after a fault ended still count as the fault's (a worker takes a
    # couple of scrapes to come back into rotation).
    grace_s: float = 15.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
