"""`kafka_harness.jars.run_tool`: how the harness runs mvn, StorageTool, DumpLogSegments and the Java
producer to their end."""

from __future__ import annotations

import sys

import pytest

from kafka_harness.dump_log_segments import DumpLogSegmentsError
from kafka_harness.jars import HarnessError, run_tool


def test_a_tool_that_ends_gives_its_output_and_status() -> None:
    done = run_tool([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], "python", 30)
    assert (done.returncode, done.stdout) == (3, "out\n")


def test_a_tool_that_outlasts_its_time_is_one_line_naming_it() -> None:
    with pytest.raises(HarnessError, match=r"^a sleeper did not finish in 1 s$"):
        run_tool([sys.executable, "-c", "import time; time.sleep(30)"], "a sleeper", 1)
    with pytest.raises(DumpLogSegmentsError):
        run_tool(
            [sys.executable, "-c", "import time; time.sleep(30)"], "DumpLogSegments", 1, DumpLogSegmentsError
        )
