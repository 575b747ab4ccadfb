"""A worker's /metrics is its own words: numbers routing and the autoscaler cannot use
count as nothing, and nothing in it can fail the scrape of the other workers."""

import pytest

from inference.worker_metrics import histogram_quantile, parse_metrics

pytestmark = pytest.mark.unit


def test_gauges_that_are_not_finite_numbers_of_zero_or_more_count_as_nothing():
    """One NaN gauge made every routing policy's maximum fail (every request to the
    deployment a 500) and the autoscaler's arithmetic raise."""
    reading = parse_metrics(
        "vllm:num_requests_running NaN\n"
        "vllm:num_requests_waiting +Inf\n"
        "vllm:kv_cache_usage_perc -3\n"
        'vllm:num_requests_running{engine="1"} 2\n'
    )
    assert (reading.running, reading.waiting, reading.kv_usage) == (2.0, 0.0, 0.0)
    assert reading.reports_load


def test_a_bucket_without_a_readable_bound_is_skipped_not_a_failed_scrape():
    """Valid Prometheus text; it raised KeyError, which failed the whole scrape: no
    snapshot was published and every worker of every deployment went unroutable."""
    reading = parse_metrics(
        "vllm:time_to_first_token_seconds_bucket 3\n"
        'vllm:time_to_first_token_seconds_bucket{le="x"} 4\n'
        'vllm:time_to_first_token_seconds_bucket{le="0.5"} 5\n'
        'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 10\n'
        "vllm:num_requests_running 1\n"
    )
    assert reading.ttft_buckets == {0.5: 5.0, float("inf"): 10.0}
    assert reading.running == 1.0
    assert histogram_quantile(reading.ttft_buckets, 0.5) == 0.5
