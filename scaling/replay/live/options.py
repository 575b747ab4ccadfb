"""What a live replay is asked to do, in one frozen value, and the error it fails with.

Every part of a run (the processes, the driver, the report) reads its numbers from the one
LiveOptions, so a request's length on the worker and in the report cannot disagree.
"""

from dataclasses import dataclass

FIXED = "fixed"  # the fixed-latency simulator, as opposed to a simulator profile name


class LiveReplayError(RuntimeError):
    """The live replay could not run (a replica never came up, the lease was taken)."""


@dataclass(frozen=True)
class LiveOptions:
    speed: float = 30.0  # trace seconds per wall second
    rate_scale: float | None = None  # wall req/s per trace req/s; None: auto (fit_rate_scale)
    start_s: float = 0.0  # trace second the measured window starts at
    duration_s: float | None = None  # trace seconds to replay; None: to the trace's end
    lead_in_s: float = 300.0  # trace seconds at the first second's rate, not measured
    tokens: int = 16  # chunks streamed per request (ignore_eos: exactly this many)
    output_tokens: float = 200.0  # the trace's (mean over the window): how long a request
    # holds its slot, as in the simulated replay's FleetModel
    prompt_words: int = 32
    worker: str = FIXED  # fixed-latency simulator, or a simulator profile name
    worker_ttft_s: float = 0.25  # fixed-latency worker: first token after this ...
    per_token_s: float = 0.015  # ... then output_tokens x this, over tokens - 1 gaps
    ttft_target_s: float = 1.0
    queue_timeout_s: float = 10.0  # a request queued this long in the dispatcher gives up
    gpu_cost_per_hour: float = 4.0
    # Trace seconds a sleeping replica takes to wake (vLLM's sleep mode, level 1: weights
    # back from host memory; seconds, where a cold start takes minutes). The simulator
    # answers POST /wake_up after wake_time_s / speed wall seconds (`--wake-s`).
    wake_time_s: float = 10.0
    seed: int = 0
    deployment_prefix: str = "replay-live"

    @property
    def worker_itl_s(self) -> float:
        """The fixed-latency worker's gap between chunks: a request streams `tokens` chunks
        but lasts as long as one of output_tokens (fewer chunks spare the client's CPU)."""
        return self.per_token_s * self.output_tokens / max(self.tokens - 1, 1)

    @property
    def worker_wake_s(self) -> float:
        """Wall seconds a replica's POST /wake_up takes: the trace's wake time, scaled."""
        return self.wake_time_s / self.speed

    @property
    def service_s(self) -> float:
        """Wall seconds a request holds its slot on a fixed-latency worker: FleetModel's
        base_ttft_s + per_token_s x output tokens."""
        return self.worker_ttft_s + (self.tokens - 1) * self.worker_itl_s
