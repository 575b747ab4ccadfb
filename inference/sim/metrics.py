"""The simulator's /metrics, under vLLM's metric names, so scrapers cannot tell it apart."""

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()  # type: ignore[no-untyped-call]

_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)


class SimMetrics:
    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name"]
        self._running = Gauge(
            "vllm:num_requests_running",
            "Requests running on the GPU",
            labels,
            registry=self.registry,
        )
        self._waiting = Gauge(
            "vllm:num_requests_waiting", "Requests waiting", labels, registry=self.registry
        )
        self._kv = Gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage, 1 = full", labels, registry=self.registry
        )
        self._queries = Counter(
            "vllm:prefix_cache_queries", "Prompt tokens looked up", labels, registry=self.registry
        )
        self._hits = Counter(
            "vllm:prefix_cache_hits",
            "Prompt tokens found in the cache",
            labels,
            registry=self.registry,
        )
        self._prompt = Counter(
            "vllm:prompt_tokens", "Prompt tokens processed", labels, registry=self.registry
        )
        self._generated = Counter(
            "vllm:generation_tokens", "Tokens generated", labels, registry=self.registry
        )
        self._success = Counter(
            "vllm:request_success", "Finished requests", labels, registry=self.registry
        )
        self._aborted = Counter(
            "vllm:request_aborted", "Cancelled requests", labels, registry=self.registry
        )
        # Not one of vLLM's: what the simulator adds so tests can count the gateway's asks.
        self.tokenize_requests = Counter(
            "sim:tokenize_requests", "Prompts counted by /tokenize", labels, registry=self.registry
        )
        self._ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Time to first token",
            labels,
            buckets=_TTFT_BUCKETS,
            registry=self.registry,
        )
        self._sleep = Gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
            "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means level 2.",
            [*labels, "sleep_state"],
            registry=self.registry,
        )
        self.model = model_name
        for metric in (
            self._running,
            self._waiting,
            self._kv,
            self._queries,
            self._hits,
            self._prompt,
            self._generated,
            self._success,
            self._aborted,
            self._ttft,
            self.tokenize_requests,
        ):
            metric.labels(model_name)  # export every series from the start, at zero

    def gauges(self, running: int, waiting: int, kv_usage: float) -> None:
        self._running.labels(self.model).set(running)
        self._waiting.labels(self.model).set(waiting)
        self._kv.labels(self.model).set(kv_usage)

    def sleep_state(self, level: int | None) -> None:
        """None: awake; 0, 1 or 2: asleep at that level (sleep mode, inference/sim/sleep.py)."""
        self._sleep.labels(self.model, "awake").set(1 if level is None else 0)
        self._sleep.labels(self.model, "weights_offloaded").set(1 if level == 1 else 0)
        self._sleep.labels(self.model, "discard_all").set(1 if level == 2 else 0)

    def prefix_lookup(self, queried: int, hit: int) -> None:
        self._queries.labels(self.model).inc(queried)
        self._hits.labels(self.model).inc(hit)

    def first_token(self, seconds: float) -> None:
        self._ttft.labels(self.model).observe(seconds)

    def finished(self, prompt_tokens: int, generated: int) -> None:
        self._prompt.labels(self.model).inc(prompt_tokens)
        self._generated.labels(self.model).inc(generated)
        self._success.labels(self.model).inc()

    def aborted(self) -> None:
        self._aborted.labels(self.model).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
