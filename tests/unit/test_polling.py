"""`kafka_harness.polling.poll_until`, the one loop the harness and the fixtures wait on a broker with."""

from __future__ import annotations

import time

import pytest

from kafka_harness.jars import HarnessError
from kafka_harness.polling import poll_until


def test_returns_the_first_answer_and_probes_no_more() -> None:
    answers = iter([None, None, 0, 7])  # 0 is an answer: a leader's node id can be 0
    calls: list[int] = []

    def probe() -> int | None:
        calls.append(1)
        return next(answers)

    failures: list[int] = []

    def failure() -> str:
        failures.append(1)
        return "never"

    assert poll_until(probe, 5.0, failure, interval_s=0.001) == 0
    assert len(calls) == 3
    assert failures == []  # the failure message is built only on a timeout


def test_false_is_not_yet_and_true_is_the_answer() -> None:
    answers = iter([False, None, False, True])
    assert poll_until(lambda: next(answers), 5.0, lambda: "never", interval_s=0.001) is True


def test_a_condition_never_met_raises_the_failure_message_after_the_timeout() -> None:
    calls: list[float] = []

    def probe() -> None:
        calls.append(time.monotonic())

    started = time.monotonic()
    with pytest.raises(HarnessError, match=r"^orders-0: in-sync replicas \[2\], not \[2, 3\]$"):
        poll_until(probe, 0.05, lambda: "orders-0: in-sync replicas [2], not [2, 3]", interval_s=0.01)
    assert calls[-1] - started >= 0.05  # one more probe once the time was up
    assert len(calls) >= 3
