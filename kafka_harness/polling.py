"""Waiting on a live broker: one loop for every condition the harness and the fixtures poll for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from kafka_harness.jars import HarnessError

T = TypeVar("T")


def poll_until(
    probe: Callable[[], T | None],
    timeout_s: float,
    failure: Callable[[], str],
    interval_s: float = 0.2,
) -> T:
    """Call `probe` every `interval_s` seconds until it returns something other than None or False, and
    return that (0 counts: a leader's node id can be 0). Once `timeout_s` have passed, one more
    probe, then `HarnessError(failure())`: `failure` runs only then, so it can ask the broker what
    the condition is waiting on, and its message should name the condition and what it saw."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise HarnessError(failure())
        time.sleep(interval_s)
