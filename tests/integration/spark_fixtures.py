"""One Spark session (local[2] with Delta) for the whole test run, from the project's session factory."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.integration.workers import run_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The tests' inputs are a few thousand rows, and their time goes to fixed costs. A JVM profile (JFR)
# of three audits of the bundled sample in this session put half of the JVM's samples in code
# generation: each task of each stage builds the source of its projections again (the compiled class
# is cached, the source is what it is looked up by), and Delta's typed reads of its log (nested
# `AddFile` structs) make long sources. Spark's switch for tests runs those projections interpreted
# (whole-stage code generation is not affected). Warm audits of the sample (2026-11-25, four in a
# row): 36.0-37.6 s wall and 43-46 s of JVM CPU interpreted, against 51.2-64.5 s and 65-84 s.
# The commands keep Spark's default (generated code, interpreted on a compile error); one test audits
# with it (test_audit.py), and the spark-submit test ingests in a session of its own, with the default.
CODEGEN_MODE = "spark.sql.codegen.factoryMode"
# The JVM: C1 and C2 (the JDK's default tiered compilation) instead of LOCAL_CONF's C1 only. C2 costs
# CPU at start and pays back within a few audits: five audits of the sample in a row, interpreted
# projections, 59.8, 32.8, 29.8, 31.3, 26.4 s (JVM CPU 99, 48, 37, 35, 28 s) against 57.1, 46.4,
# 47.1, 42.6, 41.7 s (67, 51, 52, 45, 44 s) with C1 only. The serial GC stays (one small heap).
TEST_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
# Room for the classes of many audits (Spark's default cache holds 100; an audit generates a few
# hundred, fewer with interpreted projections): a test audit of a shape seen before compiles nothing.
CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"
# A worker's session runs a few hundred audits over half an hour; Spark's 1 GiB default heap held the
# state they leave (generated classes, Delta snapshots) beside a running audit's sorts only just, and
# ran out in CI (2026-11-26), and 2 GiB did on 2026-11-30 (a tiered-storage audit late in a worker's
# run collected garbage for five minutes, then failed; alone it takes 30 s). Two workers' JVMs of
# 3 GiB each fit the 24 GiB machine many times over. With 3 GiB it happened again (CI, 2026-12-01: a
# tiered-storage audit timed out after 15 minutes): what filled the heap was a 32 MiB Tungsten page
# held by each broadcast hash relation the plans kept, gone with LOCAL_CONF's 2 MiB page (one worker
# running the integration files in order: 141 full collections in its first 524 s before, 29 in its
# first 647 s after). 4 GiB since 2026-12-02: a CI run whose suite had grown by some 60 tests (three
# more tiered-storage audits among them) filled one worker's 3 GiB after 29 minutes (old generation
# 99.98%, 101 full collections), and every test after it on that worker failed.
TEST_CONF = {
    "spark.driver.memory": "4g",
    CODEGEN_MODE: "NO_CODEGEN",
    CODEGEN_CACHE: "2000",
    "spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from jobs.spark_session import get_spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # Under pytest-xdist one worker at a time: a fresh machine's first start resolves Delta's jars
    # into the Ivy cache, which does not lock against a second resolver.
    with run_lock(tmp_path_factory, "spark-start"):
        session = get_spark("replay-audit tests", {"spark.sql.warehouse.dir": str(warehouse), **TEST_CONF})
    _JVM.append(session.sparkContext._jvm.ProcessHandle.current().pid())
    yield session
    session.stop()
    _JVM.clear()


# The pid of this process's Spark JVM, once the session has started.
_JVM: list[int] = []
# A test still running after this long gets the JVM's state written into its captured stderr, which
# pytest shows when pytest-timeout (900 s, pyproject.toml) fails it: the timeout's own dump has the
# Python stacks only, a thread blocked in a Py4J call. A stalled test in CI (2026-11-30) was the
# JVM collecting garbage, which only the JVM's side shows.
STALL_REPORT_S = 600.0
# The threads the report shows: Py4J's (`Thread-<n>`, each running a call from Python) and Spark's
# tasks, broadcasts and subqueries, each while in Spark's or Delta's code (an idle one waits in the
# JDK's). Of each, its top frames (what it does) and the last of Spark's or Delta's below them (what
# it was asked: `Dataset.localCheckpoint`, a task's stage).
STALL_THREADS = re.compile(
    r'"(Thread-\d+|Executor task launch worker.*|broadcast-exchange-\d+|subquery-\d+)"'
)
OURS = re.compile(r"at (org\.apache\.spark|io\.delta)\.")
STALL_TOP_FRAMES = 10
STALL_CALLER_FRAMES = 6


@pytest.fixture(autouse=True)
def jvm_report_on_stall(request: pytest.FixtureRequest) -> Iterator[None]:
    """For a test that uses the Spark session: the JVM's state in its stderr if it runs past
    STALL_REPORT_S."""
    if "spark" not in request.fixturenames or not _JVM:
        yield
        return
    pid = _JVM[0]
    timer = threading.Timer(STALL_REPORT_S, lambda: os.write(2, jvm_stall_report(pid).encode()))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def jvm_stall_report(pid: int) -> str:
    """The JVM's heap and collections (`jstat -gcutil`: old generation full, full collections and
    their seconds) and the top frames of the threads that run Python's calls and Spark's tasks
    (`jcmd Thread.print`)."""

    def run(*cmd: str) -> str:
        tool = shutil.which(cmd[0])
        if tool is None:
            return f"({cmd[0]} not found)\n"
        try:
            done = subprocess.run([tool, *cmd[1:]], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return f"({cmd[0]} timed out)\n"
        return done.stdout or done.stderr

    lines = [f"==== JVM {pid} after {STALL_REPORT_S:.0f} s of this test", run("jstat", "-gcutil", str(pid))]
    for block in re.split(r"\n\s*\n", run("jcmd", str(pid), "Thread.print")):
        head, *rest = block.strip().splitlines() or [""]
        frames = [line.strip() for line in rest if line.strip().startswith("at ")]
        ours = [i for i, frame in enumerate(frames) if OURS.match(frame)]
        if not STALL_THREADS.match(head) or not ours:
            continue
        shown = frames[:STALL_TOP_FRAMES]
        callers = [frames[i] for i in ours[-STALL_CALLER_FRAMES:] if i >= STALL_TOP_FRAMES]
        if callers:
            shown += ["...", *callers]
        lines.append("\n".join([head, *("    " + frame for frame in shown)]))
    return "\n".join(lines) + "\n"
