"""The one Spark session factory of the project.

Locally (`python -m jobs.cli`, pytest) it builds `local[2]` Spark with Delta's jars resolved through
`spark.jars.packages` (the artifact `configure_spark_with_delta_pip` names), its Ivy cache in
`$KRA_CACHE/ivy`, outside the repository. Under `spark-submit`, on Databricks or inside a Spark Connect client
it takes the session that is already there and changes nothing of it: master, jars and the Delta
settings belong to whoever started the cluster (ecosystem.md §1.6).
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_CACHE = Path.home() / ".cache" / "kafka-replay-audit"
LOCAL_MASTER = "local[2]"
# The Delta jars for local runs. delta-spark 4.4.1 on PyPI would ask Maven for 4.4.1, which the
# Maven Central mirror this project reaches does not serve; 4.4.0 has the same table protocol and
# the Python package is a thin py4j wrapper over it. `KRA_DELTA_VERSION` overrides.
DELTA_MAVEN_VERSION = "4.4.0"
DEFAULT_MAVEN_REPOSITORY = "https://repo1.maven.org/maven2/"
# Ivy's default chain looks in ~/.m2 first and gives up on a module whose .pom is there without its
# .jar (what `mvn` leaves after resolving the Kafka harness): resolve from the remote repository only,
# into our own cache, which makes later starts offline.
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="main"/>
  <caches defaultCacheDir="{cache}"/>
  <resolvers>
    <chain name="main" returnFirst="true">
      <ibiblio name="central" m2compatible="true" root="{root}"/>
    </chain>
  </resolvers>
</ivysettings>
"""

# Catalyst's constraint propagation off: the audit's plans are optimized without deriving the
# constraints each operator's output satisfies (`InferFiltersFromConstraints` copies a join side's
# conditions and null checks to the other side; `PruneFilters` drops a condition its input already
# satisfies). Their cost grows with a plan's aliases and conditions, and the findings' plan of an
# audit with records and an ack ledger unions dozens of rules over hundreds of operators: optimizing
# the bundled sample's took 5.2 s of a warm audit (the tests' session, 2026-12-04; `PruneFilters`
# 4.0 s of it, pruning nothing) and 6.8 s of a cold one, against 1.3 and 2.1 s without. What it would
# add are null checks and a few conditions the rules' own filters apply a step later; the scans keep
# their partition filters and dynamic pruning. Small plans gain little (the Python-built audits of
# two test files: 262.9 s against 264.4 s), and the audit bench does not move (1 GB uniform, cold,
# alternating: 53.9 and 50.6 s without, 56.3 and 51.4 s with). A SQL conf: `run_audit` sets it for
# its run in a session it did not start (spark-submit, Databricks).
PLAN_CONF = {"spark.sql.constraintPropagation.enabled": "false"}

# The tuned conf of ecosystem.md §1.4: one small JVM, no UI, no adaptive re-planning of tiny plans.
LOCAL_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.databricks.delta.snapshotPartitions": "2",
    # No `delta.log.cacheSize` of 3 (delta-io's own tests' setting, copied from ecosystem.md §1.4): an
    # audit reads and writes about fifteen tables, and with room for three DeltaLogs each read of a
    # table rebuilt its log and reconstructed its snapshot's state (a Spark job) before Delta's scan
    # could filter the files. Delta's default cache keeps up to 10,000, each for an hour since its last
    # access (`delta.log.cacheRetentionMinutes`); a cached state is Spark storage, spilled to disk under
    # pressure. Four warm audits of the sample in a row (test session, 2026-11-28): 48.5, 28.6, 25.4,
    # 21.1 s (JVM CPU 87, 47, 39, 29 s) against 50.4, 33.5, 29.5, 27.6 s (90, 58, 48, 41 s); Delta's
    # scan preparation 10 s of the last audit's planning threads against 51 s.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    # Must reach the JVM command line: pyspark hands builder conf to spark-submit.
    "spark.driver.extraJavaOptions": (
        "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
    ),
    # Keep Python workers alive between tasks: each decode task would otherwise pay an import.
    "spark.python.worker.reuse": "true",
    # The workers' daemon, without Spark's zipped copies of pyspark and py4j on the workers' path, and
    # reading the session's jars on it once: each task re-read their directories (`jobs.pyspark_daemon`),
    # 0.2-0.3 s of every Python task for the zips, 0.1 s for the jars.
    "spark.python.daemon.module": "jobs.pyspark_daemon",
    # PySpark 4 wraps every Column function (`F.col`, `cast`, `alias`, ...) to send its Python call
    # site to the JVM for error messages: a stack walk and about five Py4J round trips per call. An
    # audit builds its plans from ~8,000 such calls (~27,000 round trips in all); without the call
    # sites (an analysis error still names the column and the plan, not the line of audit_rules), a
    # warm audit of one small partition took 9.4-10.2 s to plan against 10.5-13.4 s, and a first one
    # 18.4 s against 25.7 s (2026-11-27, test session, one run each).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # With the UI off, the status listeners still keep the last 1000 SQL executions (each with its
    # plan's text and graph), jobs and stages, and 100,000 tasks, on the driver's heap, for no reader.
    # An audit runs about a hundred queries with plans of hundreds of columns; a test worker's session
    # runs a few hundred audits, and with Spark's 1 GiB default heap it ran out (java.lang.
    # OutOfMemoryError in CI, 2026-11-26).
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "1000",
    # Tungsten's page: each hash relation a broadcast join reads keeps one whole page on the heap,
    # however few its rows (`UnsafeHashedRelation` copies its rows into a `BytesToBytesMap` page), and
    # keeps it as long as the plan that broadcast it lives. Spark sizes the page from the heap (32 MiB
    # with a 3 GiB driver, 64 MiB with 6 GiB); an audit broadcasts a few dozen small frames. Live heap
    # after an audit of one corrupt sample partition, before the plans were released (3 GiB test
    # driver, three audits in a row, 2026-12-01): 696-707 MiB with 32 MiB pages, 155-180 MiB with 2 MiB.
    # A test worker's session that kept a few audits' plans ran out of heap and collected garbage until
    # a test timed out (CI, 2026-11-30). A sort's rows span as many pages as they need, up to a task's
    # 8,192 (Spark's page table): 16 GiB of execution memory a task, beyond any local[2] heap.
    "spark.buffer.pageSize": "2m",
    **PLAN_CONF,
}


# JVM options of the local sessions the commands (`replay-audit ingest|audit|run`) start, over
# LOCAL_CONF (whose C1-only, serial-GC JVM starts fastest and suits one small input). A job
# moves millions of rows per GB of small batches: C2 converts, sorts and encodes them about twice as
# fast. Plain tiered compilation costs ~13 s of CPU more at start-up (C2 compiles the planner and
# Delta's log replay); raised C2 thresholds leave that code to C1 (~5 s more than C1 alone) and still
# compile the per-row paths, which run millions of times.
JOB_JAVA_OPTIONS = (
    "-XX:+UseParallelGC",
    "-XX:ReservedCodeCacheSize=256m",
    "-XX:Tier4InvocationThreshold=100000",
    "-XX:Tier4MinInvocationThreshold=60000",
    "-XX:Tier4CompileThreshold=120000",
    "-XX:Tier4BackEdgeThreshold=400000",
    # Spark reads every decoded row from the Arrow vectors the Python workers send; Arrow Java checks
    # the bounds and reference count of the buffer on each value read (a tenth of the JVM's CPU on
    # one-record batches). The vectors come from pyarrow through Spark's own IPC reader.
    "-Darrow.enable_unsafe_memory_access=true",
    "-Darrow.enable_null_check_for_get=false",
)
# In local mode the driver JVM is the only executor: window sorts, joins and the Delta writes of a
# multi-GB audit need more than Spark's 1g default. `KRA_DRIVER_MEMORY` overrides.
DEFAULT_JOB_DRIVER_MEMORY = "6g"
# The audit stores its history on the executors' disks, serialized (`pipeline.local_checkpoint`),
# and reads it back several times. Kryo writes an UnsafeRow as its bytes; Java serialization goes
# through `writeExternal`. A row holds no references for Kryo to track. On the audit bench's 4 GB
# (one run each, 2026-11-24): 161.9 s with Java serialization, 150.6 s with Kryo, 141.4 and 143.0 s
# without reference tracking. Ingest stores no rows: there Kryo only adds its start-up (a fresh
# session's first 1 GB ingest took 1.5 s longer, medians of 3; the second the same).
#
# Four shuffle partitions instead of two: the history's sort, scan and stored rows come in tasks of
# half the size (at 4 GB each of two tasks sorted 11 million rows and spilled), and the silver write
# starts from four stored blocks. On
# the audit bench (interleaved, 2026-11-25): 4 GB uniform 141.2 and 138.3 s against 144.9 and
# 146.8 s (CPU 258 and 253 s against 262 and 265 s); the skewed case, whose hot producer stays in one
# task either way, 72.6 s at 1 GB and 176.5 s at 4 GB against 75.0 and 180.6 s in the full run before.
#
# Spark keeps the classes it generated in an LRU cache of 100 by default. An audit generates about 400
# distinct ones (8 MB, no optional evidence: 377 compiled with room for all, 417 with the default, which
# evicts and compiles some again), so a session that audits again compiled every one of them again. With
# room for 1000, a second audit of the same shape compiles none. Quick bench (8 MB uniform, 2026-11-26,
# alternating): warm audits 15.8 and 15.9 s against 21.1 and 21.6 s (CPU 25 against 33-35 s); cold
# ones within the noise (46.1 and 42.6 s against 44.2 and 46.7 s). A static conf: it must be set when the
# session starts.
AUDIT_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.referenceTracking": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.codegen.cache.maxEntries": "1000",
}


def job_local_conf(command: str = "audit") -> dict[str, str]:
    """The local session conf of a command run (not of the tests): C2 JIT, parallel GC, driver memory,
    and for a command that audits (`audit`, `run`; not `ingest`) Kryo and four shuffle partitions."""
    conf = {
        "spark.driver.extraJavaOptions": " ".join(JOB_JAVA_OPTIONS),
        "spark.driver.memory": os.environ.get("KRA_DRIVER_MEMORY") or DEFAULT_JOB_DRIVER_MEMORY,
    }
    if command != "ingest":
        conf.update(AUDIT_CONF)
    return conf


def concurrently(spark: SparkSession, tasks: Sequence[Callable[[], object]]) -> None:
    """Run `tasks` (each a few Spark jobs) on threads of this driver, which inherit the caller's job
    group and local properties; re-raise the first task's error once every task has ended.

    Each task is wrapped on its own: `inheritable_thread_target` clones the local properties once per
    wrapping and hands that one `Properties` to every thread of it, so threads of one wrapping share
    them, and a query ending on one clears `spark.sql.execution.root.id` under another's running query
    (`NumberFormatException: Cannot parse null string`, SPARK-55505)."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.util import inheritable_thread_target

    with ThreadPoolExecutor(max_workers=max(1, len(tasks))) as pool:
        futures = [pool.submit(inheritable_thread_target(spark)(task)) for task in tasks]
    for future in futures:
        future.result()


def cache_dir() -> Path:
    """`$KRA_CACHE` (default ~/.cache/kafka-replay-audit): downloaded jars, never inside the repo."""
    return Path(os.environ.get("KRA_CACHE") or DEFAULT_CACHE).expanduser()


def on_managed_cluster() -> bool:
    """True under spark-submit, on Databricks, or with Spark Connect: the session is not ours to build."""
    return any(
        os.environ.get(name)
        for name in (
            "DATABRICKS_RUNTIME_VERSION",
            # spark-submit's PythonRunner (and the pyspark shell) start the driver with these set.
            "PYSPARK_GATEWAY_PORT",
            "SPARK_REMOTE",
            "SPARK_CONNECT_MODE_ENABLED",
        )
    )


def get_spark(
    app_name: str = "replay-audit", extra_conf: Mapping[str, str] | None = None, *, quiet_jvm: bool = False
) -> SparkSession:
    """The active session if there is one (or the platform's), else a new local Delta session; with
    `quiet_jvm` (the CLI's), the local JVM's own output goes to a log file (`jvm_log_path`), not to
    the terminal."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if on_managed_cluster():
        session = SparkSession.builder.getOrCreate()
        _require_delta(session)
        return session
    return build_local_spark(app_name, extra_conf, jvm_log=jvm_log_path(app_name) if quiet_jvm else None)


# The file the CLI's local JVM writes its output to (Ivy's resolution report, Spark's warnings), where it
# was sent to one: named in the CLI's closing line when a job fails.
JVM_LOG: Path | None = None
# How many of those files the cache keeps (the newest).
_JVM_LOGS_KEPT = 20


def jvm_log_path(app_name: str) -> Path | None:
    """Where a CLI run's local JVM writes its output: `$KRA_SPARK_LOG` if set (`stderr`: the terminal, as
    pyspark leaves it), else `$KRA_CACHE/logs/<command>-<pid>.log` (the oldest beyond the newest 20
    removed)."""
    chosen = os.environ.get("KRA_SPARK_LOG")
    if chosen == "stderr":
        return None
    if chosen:
        return Path(chosen)
    logs = cache_dir() / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True)
        kept = sorted(logs.glob("*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[_JVM_LOGS_KEPT - 1 :]:
            old.unlink(missing_ok=True)
    except OSError:
        return None
    slug = re.sub(r"[^A-Za-z0-9]+", "-", app_name).strip("-") or "spark"
    return logs / f"{slug}-{os.getpid()}.log"


DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


def _require_delta(session: SparkSession) -> None:
    """Under spark-submit, a session without Delta Lake is a usage error (exit 2) named before any work,
    not a Java trace at the first table write: the submitter passes the Delta jars and settings
    (ecosystem §5.2), which the job only reads. Not on Databricks (Delta is built in) or Spark Connect
    (no JVM here to ask)."""
    if any(
        os.environ.get(name)
        for name in ("DATABRICKS_RUNTIME_VERSION", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
    ):
        return
    from jobs.ingest import UsageError

    flags = (
        f"--packages {delta_maven_coordinate(session.version)} --conf spark.sql.extensions={DELTA_EXTENSION} "
        "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog"
    )
    if DELTA_EXTENSION not in (session.conf.get("spark.sql.extensions", "") or ""):
        raise UsageError(
            f"this Spark session has no Delta Lake (spark.sql.extensions does not name {DELTA_EXTENSION}): "
            f"submit the job with {flags}, or with conf/spark-submit.sh"
        )
    try:
        session._jvm.org.apache.spark.util.Utils.classForName(DELTA_EXTENSION, True, False)  # type: ignore[union-attr]
    except Exception as exc:  # Py4JJavaError: the class is not on the driver's class path
        if "ClassNotFoundException" in str(exc):
            raise UsageError(
                f"this Spark session names {DELTA_EXTENSION} but has not its jar: submit the job with "
                f"{flags} (the Delta build of this Spark line, {session.version})"
            ) from None


# Starts of the local JVM tried before its failure is reported (see build_local_spark).
_JVM_START_ATTEMPTS = 3


def build_local_spark(
    app_name: str, extra_conf: Mapping[str, str] | None = None, *, jvm_log: Path | None = None
) -> SparkSession:
    """`local[2]` Spark with Delta's jars through `spark.jars.packages`, cached in `$KRA_CACHE/ivy`; the
    JVM's output (stderr, which it inherits) to `jvm_log` when given."""
    global JVM_LOG
    from pyspark.sql import SparkSession

    _prepare_local_workers()
    ivy = cache_dir() / "ivy"
    builder = SparkSession.builder.master(os.environ.get("KRA_SPARK_MASTER", LOCAL_MASTER)).appName(app_name)
    conf = {
        **LOCAL_CONF,
        "spark.jars.packages": delta_maven_coordinate(),
        "spark.jars.ivy": str(ivy),
        "spark.jars.ivySettings": str(_write_ivy_settings(ivy)),
        **(extra_conf or {}),
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        for attempt in range(1, _JVM_START_ATTEMPTS + 1):
            try:
                with _stderr_to(jvm_log) as redirected:
                    if redirected:
                        JVM_LOG = jvm_log
                    session = builder.getOrCreate()
                break
            except Exception as exc:
                # A first start downloads Delta's jars: Maven Central now and then answers with an empty
                # body (Ivy: "Downloaded file size (0) doesn't match expected Content Length"), which a
                # second try, fetching only what is missing from the cache, gets past.
                if "JAVA_GATEWAY_EXITED" not in str(exc) or attempt == _JVM_START_ATTEMPTS:
                    raise
                time.sleep(5 * attempt)
    except Exception as exc:
        if "JAVA_GATEWAY_EXITED" not in str(exc):
            raise
        # Its cause is in the JVM's output (an Ivy report, a Java error), not in the exception.
        repository = os.environ.get("DEFAULT_ARTIFACT_REPOSITORY") or DEFAULT_MAVEN_REPOSITORY
        where = "above" if JVM_LOG is None else f"in {JVM_LOG}"
        said = _first_error(JVM_LOG)
        if said is not None:
            raise RuntimeError(f"the local Spark JVM did not start: {said} (its output is {where})") from exc
        raise RuntimeError(
            f"the local Spark JVM did not start: check java (JAVA_HOME) and that "
            f"{conf['spark.jars.packages']} resolves into {ivy} from {repository} (the first run needs the "
            f"network; the JVM's output {where} says what failed)"
        ) from exc
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def _stderr_to(path: Path | None) -> Iterator[bool]:
    """File descriptors 2 and 1 pointed at `path` meanwhile (yields whether 2 is): a JVM started inside
    inherits them for good (pyspark starts the gateway with the parent's stdout and stderr, and Ivy
    prints its ":: loading settings ::" line to stdout, before the CLI's own lines); this process's own
    come back after. Where the file cannot be opened, or this process has no stderr to put back
    (started with `2>&-`), nothing is moved; a closed stdout is left closed."""
    if path is None:
        yield False
        return
    _flush_std()
    try:
        saved = os.dup(2)
    except OSError:
        yield False
        return
    try:
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        os.close(saved)
        yield False
        return
    try:
        saved_out: int | None = os.dup(1)
    except OSError:
        saved_out = None
    try:
        os.dup2(target, 2)
        if saved_out is not None:
            os.dup2(target, 1)
        os.close(target)
        yield True
    finally:
        _flush_std()
        os.dup2(saved, 2)
        os.close(saved)
        if saved_out is not None:
            os.dup2(saved_out, 1)
            os.close(saved_out)


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def _first_error(log: Path | None) -> str | None:
    """The first line of the JVM's log that says what failed (`Error`, `Exception`, Ivy's unresolved
    dependency), for the one-line message: the JVM names its own cause (an invalid -Xmx, a missing
    class), which the gateway's exception does not."""
    if log is None:
        return None
    previous = generic = None
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in itertools.islice(f, 10_000):
                text = line.strip()
                if not text or text.startswith("::"):  # Ivy's report ("::: UNRESOLVED DEPENDENCIES ::")
                    continue
                if generic is not None:
                    # "Error occurred during initialization of VM" comes before the line that says why.
                    return f"{generic}: {text}"[:300]
                if re.search(r"Error|Exception|[Ii]nvalid|unresolved dependency", text):
                    # "Could not create the Java Virtual Machine" follows the line that says why.
                    if "Could not create the Java Virtual Machine" in text and previous is not None:
                        return f"{previous} ({text})"[:300]
                    if text.startswith("Error occurred during initialization of VM"):
                        generic = text
                        continue
                    return text[:300]
                previous = text
        if generic is not None:
            return generic
    except OSError:
        return None
    return None


def delta_maven_coordinate(spark_version: str | None = None) -> str:
    """The artifact `configure_spark_with_delta_pip` would name (`delta-spark_<spark major.minor>_2.13`)
    for `spark_version` (default: this pyspark's)."""
    import pyspark

    spark_line = ".".join((spark_version or pyspark.__version__).split(".")[:2])
    version = os.environ.get("KRA_DELTA_VERSION") or DELTA_MAVEN_VERSION
    return f"io.delta:delta-spark_{spark_line}_2.13:{version}"


def _write_ivy_settings(ivy: Path) -> Path:
    root = os.environ.get("DEFAULT_ARTIFACT_REPOSITORY") or DEFAULT_MAVEN_REPOSITORY
    text = IVY_SETTINGS.format(cache=ivy / "cache", root=root)
    path = ivy / "ivysettings.xml"
    if not path.is_file() or path.read_text() != text:
        ivy.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def _prepare_local_workers() -> None:
    """Local Python workers inherit the driver's environment: the driver's interpreter (the venv, not
    whatever `python3` is on PATH) and the project root on their path (a source checkout run in place;
    an installed wheel needs nothing)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
