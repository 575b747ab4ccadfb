"""A vLLM-compatible simulator of one GPU worker: a measuring instrument for routing and
autoscaling at scale, never a stand-in for the real worker in `make run`."""
