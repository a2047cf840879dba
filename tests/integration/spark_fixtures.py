"""One Spark session (local[2] with Delta) for the whole test run, from the project's session factory."""

from __future__ import annotations

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
# first 647 s after).
TEST_CONF = {
    "spark.driver.memory": "3g",
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
    yield session
    session.stop()
