"""The audit bench's cost per GB beyond a cold audit's fixed cost (printed beside its targets)."""

from __future__ import annotations

import pytest

from bench.audit_throughput import BATCH_BYTES, Result, marginal_costs
from bench.common import GB, MB


def result(case: str, size: int, audit_s: float, error: str = "") -> Result:
    batches = size // BATCH_BYTES
    return Result(
        case, size, 1000, batches, 0, batches * BATCH_BYTES, 5.0, audit_s, batches / audit_s,
        audit_s / (batches * BATCH_BYTES / GB), audit_s * 2, batches / audit_s, 1.0, [0.0], [0.0],
        [audit_s], {}, {}, True, {}, error,
    )  # fmt: skip


def test_the_fixed_audit_is_taken_off_each_size_before_the_ratio() -> None:
    fixed = [result("uniform", 8 * MB, 30.0)]
    rows = [result("uniform", GB, 52.0), result("uniform", 4 * GB, 110.0)]
    (line,) = marginal_costs(rows, fixed)
    gb1 = (rows[0].segment_bytes - fixed[0].segment_bytes) / GB
    gb4 = (rows[1].segment_bytes - fixed[0].segment_bytes) / GB
    per_gb = line["s_per_gb_beyond_fixed"]
    assert per_gb["1 GB"] == pytest.approx(22.0 / gb1)
    assert per_gb["4 GB"] == pytest.approx(80.0 / gb4)
    assert line["ratio"] == pytest.approx((80.0 / gb4) / (22.0 / gb1))
    # Taken as they are, the same runs are far from flat (x0.53): the fixed cost is what differs.
    assert rows[1].s_per_gb / rows[0].s_per_gb < 0.6 < line["ratio"]


def test_no_line_without_two_sizes_of_the_case_or_after_a_failed_run() -> None:
    fixed = [result("uniform", 8 * MB, 30.0), result("skewed", 8 * MB, 31.0)]
    rows = [result("uniform", GB, 52.0), result("skewed", GB, 55.0), result("skewed", 4 * GB, 130.0, "boom")]
    assert marginal_costs(rows, fixed) == []
    assert marginal_costs(rows[:2], []) == []
