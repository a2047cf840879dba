"""The ingest bench decides its targets on confidence intervals: a target passes only when the whole
interval meets it, misses only when none of it does."""

from __future__ import annotations

from statistics import median

from bench.ingest_throughput import (
    GB,
    MB,
    TARGET_MB_S,
    Warm,
    difference,
    evaluate_targets,
    is_python_worker,
    rate_range,
    ratio_interval,
)


def test_difference_is_the_difference_of_medians_inside_its_interval() -> None:
    runs = [10.4, 10.6, 10.5, 12.9, 10.5, 10.45, 10.55, 10.5, 10.6]
    tiny = [10.0, 10.1, 9.9, 10.0, 10.2, 10.05, 9.95, 10.0, 10.1]
    d = difference(runs, tiny)
    assert d.median_s == 10.5 - 10.0
    assert d.low_s <= d.median_s <= d.high_s
    # Among nine runs, one slow run does not stretch the interval to the spread (2.5 s).
    assert d.high_s - d.low_s < 0.5
    assert difference(runs, tiny) == d  # seeded: the same runs give the same interval


def test_interval_widens_with_noise() -> None:
    steady = difference([5.0, 5.1, 5.0, 4.9, 5.0], [1.0, 1.0, 1.1, 0.9, 1.0])
    noisy = difference([5.0, 6.5, 3.6, 4.9, 6.0], [1.0, 2.2, 0.1, 0.9, 1.7])
    assert noisy.high_s - noisy.low_s > 2 * (steady.high_s - steady.low_s)


def test_rate_range_is_unbounded_where_the_interval_reaches_zero() -> None:
    d = difference([1.0, 1.2, 1.1], [1.0, 1.1, 1.2])
    low, high = rate_range(1000.0, d)
    assert d.low_s <= 0
    assert high == float("inf")
    assert low == 1000.0 / d.high_s


def _warm(size: int, runs: list[float], tiny: list[float]) -> Warm:
    d = difference(runs, tiny)
    file_bytes = size
    return Warm(
        "500-record",
        size,
        size // 20_000,
        file_bytes,
        runs,
        tiny,
        d.median_s,
        (size // 20_000) / d.median_s,
        file_bytes / MB / d.median_s,
        d.median_s / (file_bytes / GB),
        100.0,
        d.low_s,
        d.high_s,
    )


def _verdicts(warm: list[Warm]) -> dict[str, bool | None]:
    return {t["name"]: t["passed"] for t in evaluate_targets(warm, [])}


def test_targets_pass_miss_or_stay_undecided_by_the_interval() -> None:
    tiny = [2.0, 2.05, 1.95, 2.0, 2.02]
    rate = f"warm: 500-record >= {TARGET_MB_S:,} MB/s"
    linear = "warm: 500-record time/GB at larger size within 15% of smaller"
    # 1 GB in ~0.5 s and 4 GB in ~2 s, both steady: fast enough and linear.
    fast = [_warm(GB, [2.5, 2.52, 2.48, 2.5, 2.51], tiny), _warm(4 * GB, [4.0, 4.02, 3.98, 4.0, 4.01], tiny)]
    assert _verdicts(fast)[rate] is True
    assert _verdicts(fast)[linear] is True
    # 1 GB in ~2 s: 500 MB/s whatever the noise.
    slow = [
        _warm(GB, [4.0, 4.05, 3.95, 4.0, 4.02], tiny),
        _warm(4 * GB, [18.0, 18.1, 17.9, 18.0, 18.0], tiny),
    ]
    assert _verdicts(slow)[rate] is False
    # 4 GB costs twice 1 GB's time per GB: not linear.
    assert _verdicts(slow)[linear] is False
    # 1 GB's runs spread across the target: undecided.
    noisy = [_warm(GB, [2.5, 4.0, 2.2, 3.6, 2.9], tiny), _warm(4 * GB, [4.0, 4.02, 3.98, 4.0, 4.01], tiny)]
    assert _verdicts(noisy)[rate] is None
    assert _verdicts(noisy)[linear] is None


def test_the_ratio_interval_holds_the_ratio_and_is_narrower_than_combining_the_two_intervals() -> None:
    """The linearity ratio is bootstrapped as one statistic (the one-batch runs drawn once per draw
    for both sizes), not bounded by the ends of the two sizes' own intervals, which would take both
    at their extremes at once."""
    tiny = [10.0, 10.3, 10.1, 9.9, 10.2, 10.0, 10.4, 10.1, 9.8]
    small = [10.9, 11.2, 11.0, 11.1, 10.8, 11.3, 11.0, 10.9, 11.1]
    large = [13.7, 14.0, 13.9, 13.8, 14.1, 13.6, 13.9, 14.0, 13.8]
    point = ((median(large) - median(tiny)) / 4) / (median(small) - median(tiny))
    low, high = ratio_interval(small, large, tiny, 1.0, 4.0)
    assert low <= point <= high
    d_small, d_large = difference(small, tiny), difference(large, tiny)
    ends = ((d_large.low_s / 4) / d_small.high_s, (d_large.high_s / 4) / d_small.low_s)
    assert ends[0] < low and high < ends[1]
    assert ratio_interval(small, large, tiny, 1.0, 4.0) == (low, high)  # seeded


def test_the_ratio_is_unbounded_when_the_smaller_size_cannot_be_told_from_nothing() -> None:
    tiny = [10.0, 10.3, 10.1, 9.9, 10.2]
    low, high = ratio_interval([10.1, 10.2, 10.0, 10.3, 9.9], [14.0, 14.1, 13.9, 14.0, 14.2], tiny, 1.0, 4.0)
    assert high == float("inf") and low > 0


def test_the_ratio_is_unknown_when_neither_size_can_be_told_from_nothing() -> None:
    tiny = [10.0, 10.3, 10.1, 9.9, 10.2]
    noise = [10.1, 10.0, 9.9, 10.2, 10.1]
    assert ratio_interval(noise, list(reversed(noise)), tiny, 1.0, 4.0) == (0.0, float("inf"))


def test_only_python_workers_count_as_workers() -> None:
    """The JVM names the workers' daemon module in its `--conf`: it is no worker (before 2026-11-30 the
    bench's worker peak was the JVM's RSS)."""
    jvm = [
        "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
        "-cp",
        "/x/pyspark/jars/*",
        "org.apache.spark.deploy.SparkSubmit",
        "--conf",
        "spark.python.daemon.module=jobs.pyspark_daemon",
        "pyspark-shell",
    ]
    assert not is_python_worker(jvm)
    assert is_python_worker(["/repo/.venv/bin/python3", "-m", "jobs.pyspark_daemon", ""])
    assert is_python_worker(["python3", "-m", "pyspark.daemon"])
    assert is_python_worker(["python3", "-u", "-m", "pyspark.worker"])
    assert not is_python_worker(["python3", "-m", "bench.ingest_throughput", "--warm-child"])
    assert not is_python_worker([])


def test_one_run_decides_nothing() -> None:
    """A bootstrap of one run is that run: with one run a sample, the interval is unbounded and no
    target passes or misses on it."""
    d = difference([12.0], [10.0])
    assert d.median_s == 2.0
    assert (d.low_s, d.high_s) == (float("-inf"), float("inf"))
    assert ratio_interval([11.0], [14.0], [10.0], 1.0, 4.0) == (0.0, float("inf"))
    one = [_warm(GB, [2.5], [2.0]), _warm(4 * GB, [4.0], [2.0])]
    verdicts = _verdicts(one)
    assert verdicts[f"warm: 500-record >= {TARGET_MB_S:,} MB/s"] is None
    assert verdicts["warm: 500-record time/GB at larger size within 15% of smaller"] is None
    # Two runs each bound it.
    assert difference([12.0, 12.2], [10.0, 10.1]).high_s < float("inf")
