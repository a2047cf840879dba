"""The audit bench's warm lines: one session's rounds, the first (JIT warm-up) left out."""

from __future__ import annotations

from typing import Any

from bench.audit_throughput import expected_findings, make_layout, warm_failures, warm_lines
from bench.common import GB


def run(round_: int, audit_s: float, findings: dict[str, int], error: str = "") -> dict[str, Any]:
    return {
        "round": round_, "start_s": 6.0, "audit_s": audit_s, "cpu_s": 2 * audit_s, "cpu_by_process": {},
        "load_before": [0.0], "load_after": [0.0], "findings": findings, "error": error, "phases": {},
    }  # fmt: skip


def test_the_first_round_is_left_out_and_the_fastest_later_run_counts() -> None:
    uniform, skewed = make_layout("uniform", GB, 1000), make_layout("skewed", GB, 1000)
    good = expected_findings(uniform)
    runs = {
        # The first round is the fastest of the uniform runs here: it must still not count.
        uniform: [run(0, 20.0, good), run(1, 41.0, good), run(2, 39.5, good)],
        skewed: [run(0, 70.0, expected_findings(skewed))],
    }
    (line,) = warm_lines([uniform, skewed], runs)
    assert (line.case, line.audit_s, line.runs_s) == ("uniform", 39.5, [41.0, 39.5])
    assert line.rows_s == uniform.batches / 39.5
    assert line.ok


def test_wrong_findings_in_a_later_round_mark_the_line() -> None:
    uniform = make_layout("uniform", GB, 1000)
    good = expected_findings(uniform)
    wrong = {**good, "SEQUENCE_GAP": good["SEQUENCE_GAP"] + 1}
    (line,) = warm_lines([uniform], {uniform: [run(0, 50.0, good), run(1, 40.0, good), run(2, 41.0, wrong)]})
    assert not line.ok


def test_a_failed_or_wrong_warm_up_round_is_still_reported() -> None:
    uniform = make_layout("uniform", GB, 1000)
    good = expected_findings(uniform)
    wrong = {**good, "SEQUENCE_GAP": good["SEQUENCE_GAP"] + 1}
    runs = {uniform: [run(0, 50.0, wrong), run(1, 40.0, good), run(2, 41.0, good)]}
    (line,) = warm_lines([uniform], runs)
    assert line.ok  # the warm line leaves the warm-up round out...
    (failure,) = warm_failures(runs)  # ...the failures do not
    assert failure.startswith("uniform 1 GB round 1: WRONG findings")
    failed = {uniform: [run(0, 9.0, {}, error="in history: java.lang.OutOfMemoryError")]}
    assert warm_lines([uniform], failed) == []
    (failure,) = warm_failures(failed)
    assert "FAILED in history: java.lang.OutOfMemoryError" in failure
    assert warm_failures({uniform: [run(0, 50.0, good), run(1, 40.0, good)]}) == []
