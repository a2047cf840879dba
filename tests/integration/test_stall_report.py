"""The JVM report a stalled test gets in its stderr (`spark_fixtures.jvm_report_on_stall`), taken here
from the test session's own JVM while a Spark job runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from tests.integration.spark_fixtures import (
    _JVM,
    STALL_CALLER_FRAMES,
    STALL_TOP_FRAMES,
    jvm_stall_report,
)


def _slow(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        time.sleep(6)
        yield batch


def test_the_stall_report_shows_the_heap_the_running_task_and_the_call_from_python(spark: Any) -> None:
    job = threading.Thread(target=lambda: spark.range(1).mapInArrow(_slow, "id long").collect())
    job.start()
    try:
        time.sleep(3)  # the task is in `_slow` by now, and the call from Python waits for its job
        report = jvm_stall_report(_JVM[0])
    finally:
        job.join()
    heap, _, threads = report.partition('\n"')
    # jstat's columns: the old generation's occupancy, the full collections and their time.
    assert heap.split("\n")[1].split()[3:10] == ["O", "M", "CCS", "YGC", "YGCT", "FGC", "FGCT"], report
    blocks = ['"' + block for block in threads.split('\n"')]
    assert any(b.startswith('"Executor task launch worker') for b in blocks), report
    # The Py4J thread that runs `collect`: what it waits in, and below it what Python asked.
    (call,) = [b for b in blocks if b.startswith('"Thread-') and "collectToPython" in b]
    assert call.splitlines()[1].startswith("    at ")
    # Idle threads are left out; each thread is cut to its top frames and its last callers.
    assert not [b for b in blocks if "org.apache.spark" not in b and "io.delta" not in b], report
    assert all(len(b.splitlines()) <= 1 + STALL_TOP_FRAMES + 1 + STALL_CALLER_FRAMES for b in blocks), report
