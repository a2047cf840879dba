"""Audit throughput of `replay-audit audit` on `local[2]`: uniform and skewed producers at 1 GB and 4 GB.

`python -m bench.audit_throughput [--quick] [--sizes 1G,4G] [--cases uniform,skewed] [--repeat N]
[--profile]` writes, per (case, size), the bronze Delta tables `replay-audit ingest` would write for
that many bytes of one-record idempotent batches (generated on the executors with `spark.range`,
cached in `$KRA_CACHE/bench-audit/`), then times `jobs.audit.run_audit` (history, every rule, the
Delta writes and `report/`) in a fresh Spark session per measurement, from after the session is up.
The findings are checked against the anomalies planted in the data; per-phase times, the table and
the issue's targets (PASS/MISS with the measured figure) are printed and written to
`bench/results/audit-latest.json`. What is measured is in bench/README.md.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import (
    GB,
    MB,
    REPO,
    format_targets,
    git_revision,
    parse_size,
    size_label,
    target,
    write_report,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RESULTS_PATH = REPO / "bench" / "results" / "audit-latest.json"
# Bump when the rows a (case, size) produces change, so cached tables are regenerated.
GENERATOR_VERSION = 3  # 2: written with ingest's Parquet settings and table options; 3: walk_mark

# bench/datagen.py's 1-record shape: an 11-byte key and a 100-byte value make a 181-byte v2 batch.
BATCH_BYTES = 181
ROWS_PER_GB = GB // BATCH_BYTES
# Kafka's default segment.bytes (1 GiB) and `replay-audit ingest`'s default split (one task, one
# Parquet file per 128 MiB of segment): the same files and tasks ingest would leave behind.
SEGMENT_CAP = 1 << 30
BATCHES_PER_SEGMENT = SEGMENT_CAP // BATCH_BYTES
SPLIT_BYTES = 128 << 20
DUMP_ID = "bench"
REPLICA = "1"
TOPIC = "bench-audit"
PARTITIONS = 8
PRODUCERS = 1000
QUICK_PRODUCERS = 100
PRODUCER_ID_BASE = 1000
HOT_PRODUCER_ID = 4242
BASE_TIMESTAMP = 1_700_000_000_000
# Skewed case: one producer holds HOT_SHARE of all batches, 19 of every 20 batches of partition 0.
HOT_SHARE = 0.9
HOT_IN_PARTITION = (19, 20)

# Planted anomalies: the producer `c` of partition `p` with `(c + p) % ANOMALY_PERIOD == k` carries
# anomaly k at its ANOMALY_AT-th batch (sequence numbers in the comments are for ANOMALY_AT = 3).
ANOMALY_PERIOD = 100
ANOMALY_AT = 3
ANOMALIES = {
    1: "gap: 0 1 2 4 5 ... (SEQUENCE_GAP)",
    2: "duplicate: 0 1 2 3 3 4 ... (DUPLICATE_BATCH)",
    3: "reordered: 0 1 2 4 3 5 ... (SEQUENCE_REGRESSION; the jump to 4 is no gap)",
    4: "epoch bump: epoch 0 0 1 2, then epoch 1 from sequence 0 (EPOCH_BUMP)",
    5: "zombie: epoch 1 throughout but one epoch-0 batch (EPOCH_REGRESSION)",
    6: "late start: sequences from 3 in a log starting at offset 0 (HISTORY_START_MISSING)",
    7: "invalid: one batch with sequences 3-4 over one offset (INVALID_SEQUENCE, then SEQUENCE_GAP)",
}

CASES = ("uniform", "skewed")
DEFAULT_SIZES = ("1G", "4G")
# One size: a smoke run of every code path (the linearity target then reads n/a).
QUICK_SIZES = ("8M",)
# With two sizes or more, each case is also audited at this size, in the same rounds: its time stands
# for the fixed cost of a cold audit (JIT warm-up, Delta logs, planning, small jobs), and the time per
# GB beyond it is printed beside the targets (not one of them).
FIXED_SIZE = "8M"
# After the cold runs (a fresh JVM each), the same audits again in rounds in one session: the first
# round warms the JVM (class loading, JIT compilation, code generation) and is left out.
WARM_ROUNDS = 3

TARGET_ROWS_S = 200_000
TARGET_LINEAR = 0.15
TARGET_SKEW = 1.5


def cache_root() -> Path:
    """`$KRA_CACHE/bench-audit` (KRA_CACHE defaults to ~/.cache/kafka-replay-audit), outside the repo."""
    root = os.environ.get("KRA_CACHE") or "~/.cache/kafka-replay-audit"
    return Path(root).expanduser() / "bench-audit"


# ------------------------------------------------------------------------------------------------
# The data: which batches each topic-partition holds, and the findings the audit must report.
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Batches per topic-partition of one (case, size); partition 0 may hold the hot producer."""

    case: str
    size: int
    producers: int
    rows: tuple[int, ...]
    hot: tuple[int, int]  # the hot producer's share of partition 0's batches; (0, 1): none

    @property
    def batches(self) -> int:
        return sum(self.rows)

    @property
    def hot_batches(self) -> int:
        return self.rows[0] * self.hot[0] // self.hot[1]

    @property
    def hot_gap_at(self) -> int:
        """The hot producer's one gap, halfway through its sequences."""
        return self.hot_batches // 2

    @property
    def segment_bytes(self) -> int:
        return self.batches * BATCH_BYTES

    def params(self) -> dict[str, Any]:
        return {
            "generator_version": GENERATOR_VERSION,
            **asdict(self),
            "batch_bytes": BATCH_BYTES,
            "segment_cap": SEGMENT_CAP,
            "split_bytes": SPLIT_BYTES,
            "anomaly_period": ANOMALY_PERIOD,
            "anomaly_at": ANOMALY_AT,
        }


def make_layout(case: str, size: int, producers: int) -> Layout:
    total = max(PARTITIONS, size // BATCH_BYTES)
    if case == "uniform":
        return Layout(case, size, producers, _spread(total, PARTITIONS), (0, 1))
    num, den = HOT_IN_PARTITION
    hot = round(HOT_SHARE * total)
    first = min(total - (PARTITIONS - 1), -(-hot * den // num))
    return Layout(case, size, producers, (first, *_spread(total - first, PARTITIONS - 1)), HOT_IN_PARTITION)


def _spread(total: int, parts: int) -> tuple[int, ...]:
    return tuple(total // parts + (1 if p < total % parts else 0) for p in range(parts))


def expected_findings(layout: Layout) -> dict[str, int]:
    """The findings (kind -> count) the planted anomalies must produce, and nothing else."""
    out: Counter[str] = Counter()
    a = ANOMALY_AT
    for p, rows in enumerate(layout.rows):
        cold = rows - (layout.hot_batches if p == 0 else 0)
        for c in range(layout.producers):
            n = cold // layout.producers + (1 if c < cold % layout.producers else 0)
            k = (c + p) % ANOMALY_PERIOD
            if k == 1 and n > a:
                out["SEQUENCE_GAP"] += 1
            elif k == 2 and n > a + 1:
                out["DUPLICATE_BATCH"] += 1
            elif k == 3 and n > a + 1:
                out["SEQUENCE_REGRESSION"] += 1
            elif k == 3 and n == a + 1:
                out["SEQUENCE_GAP"] += 1  # 0 1 2 4: the late batch never comes
            elif k == 4 and n > a:
                out["EPOCH_BUMP"] += 1
            elif k == 5 and n > a:
                out["EPOCH_REGRESSION"] += 1
            elif k == 6 and n > 0:
                out["HISTORY_START_MISSING"] += 1
            elif k == 7 and n > a:
                out["INVALID_SEQUENCE"] += 1
                if n > a + 1:
                    out["SEQUENCE_GAP"] += 1
    if layout.hot_gap_at > 0:
        out["SEQUENCE_GAP"] += 1
    return dict(sorted(out.items()))


def segments(layout: Layout) -> Iterator[tuple[int, int, int]]:
    """(partition, base offset, batches) of every segment: a new one every SEGMENT_CAP bytes."""
    for p, rows in enumerate(layout.rows):
        for base in range(0, rows, BATCHES_PER_SEGMENT):
            yield p, base, min(BATCHES_PER_SEGMENT, rows - base)


def batches_frame(spark: SparkSession, layout: Layout, log_dir: str) -> DataFrame:
    """The `batches` rows of the layout, computed from `spark.range` ids on the executors.

    Ids run partition by partition in offset order (as ingest's tasks write them). Each partition's
    batches are dealt round-robin to the producers, so every producer's sequences are contiguous, its
    timestamps increase and its epoch is 0, except for the planted anomalies (ANOMALIES).
    """
    from pyspark.sql import functions as F

    from schemas.tables import BATCHES, WALK_FIRST, WALK_LAST

    starts = [sum(layout.rows[:p]) for p in range(PARTITIONS)]
    tasks = max(1, math.ceil(layout.segment_bytes / SPLIT_BYTES))
    num, den = layout.hot
    a = ANOMALY_AT
    ids = spark.range(0, layout.batches, 1, tasks)
    e = F.expr
    b = ids.withColumn(
        "partition", e(" + ".join(f"CAST(id >= {s} AS INT)" for s in starts[1:]) or "0")
    ).withColumn("i", e(f"id - element_at(array({', '.join(map(str, starts))}), partition + 1)"))
    b = b.withColumn("hot_before", e(f"IF(partition = 0, (i * {num}) div {den}, 0)"))
    b = b.withColumn("is_hot", e(f"partition = 0 AND ((i + 1) * {num}) div {den} > hot_before"))
    b = b.withColumns(
        {
            "c": e(f"(i - hot_before) % {layout.producers}"),
            "seq0": e(f"IF(is_hot, hot_before, (i - hot_before) div {layout.producers})"),
        }
    )
    b = b.withColumn("k", e(f"IF(is_hot, -1, (c + partition) % {ANOMALY_PERIOD})"))
    sequence = f"""CASE
        WHEN k = -1 THEN seq0 + IF(seq0 >= {layout.hot_gap_at}, 1, 0)
        WHEN k = 1 THEN seq0 + IF(seq0 >= {a}, 1, 0)
        WHEN k = 2 THEN seq0 - IF(seq0 > {a}, 1, 0)
        WHEN k = 3 AND seq0 = {a} THEN {a + 1}
        WHEN k = 3 AND seq0 = {a + 1} THEN {a}
        WHEN k = 4 AND seq0 >= {a} THEN seq0 - {a}
        WHEN k = 5 THEN seq0 - IF(seq0 > {a}, 1, 0)
        WHEN k = 6 THEN seq0 + {a}
        ELSE seq0 END"""
    epoch = f"CASE WHEN k = 4 AND seq0 >= {a} THEN 1 WHEN k = 5 AND seq0 != {a} THEN 1 ELSE 0 END"
    b = b.withColumns(
        {
            "base_sequence": e(sequence),
            "producer_epoch": e(epoch),
            "seg_base": e(f"i - i % {BATCHES_PER_SEGMENT}"),
        }
    )
    # walk_mark: ingest walks each SPLIT_BYTES range of a segment as a unit and marks its first and
    # last batch (schemas.tables WALK_*); offsets are contiguous, so nothing else.
    rows = f"element_at(array({', '.join(map(str, layout.rows))}), partition + 1)"
    b = b.withColumn("pos", e(f"(i - seg_base) * {BATCH_BYTES}"))
    first = f"pos = 0 OR pos div {SPLIT_BYTES} != (pos - {BATCH_BYTES}) div {SPLIT_BYTES}"
    last = (
        f"i + 1 = {rows} OR i + 1 - seg_base = {BATCHES_PER_SEGMENT}"
        f" OR pos div {SPLIT_BYTES} != (pos + {BATCH_BYTES}) div {SPLIT_BYTES}"
    )
    b = b.withColumn("walk_mark", e(f"IF({first}, {WALK_FIRST}, 0) + IF({last}, {WALK_LAST}, 0)"))
    values: dict[str, Any] = {
        "dump_id": F.lit(DUMP_ID),
        "replica": F.lit(REPLICA),
        "topic": F.lit(TOPIC),
        "partition": F.col("partition"),
        "file": F.format_string("%s/%s-%d/%020d.log", F.lit(log_dir), F.lit(TOPIC), "partition", "seg_base"),
        "position": F.col("pos"),
        "base_offset": F.col("i"),
        "last_offset": F.col("i"),
        "count": F.lit(1),
        "magic": F.lit(2),
        "crc": F.xxhash64("partition", "i").bitwiseAND(F.lit(0xFFFFFFFF)),
        "crc_valid": F.lit(True),
        "attributes": F.lit(0),
        "compression": F.lit("none"),
        "timestamp_type": F.lit("CreateTime"),
        "is_transactional": F.lit(False),
        "is_control": F.lit(False),
        "partition_leader_epoch": F.lit(0),
        "base_timestamp": F.col("i") + BASE_TIMESTAMP,
        "max_timestamp": F.col("i") + BASE_TIMESTAMP,
        "producer_id": e(f"IF(is_hot, {HOT_PRODUCER_ID}, {PRODUCER_ID_BASE} + c)"),
        "producer_epoch": F.col("producer_epoch"),
        "base_sequence": F.col("base_sequence"),
        "last_sequence": e(f"IF(k = 7 AND seq0 = {a}, base_sequence + 1, base_sequence)"),
        "size_bytes": F.lit(BATCH_BYTES),
        "walk_mark": F.col("walk_mark"),
    }
    return b.select(
        *[
            (values[f.name] if f.name in values else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in BATCHES.schema.fields
        ]
    )


def files_rows(layout: Layout, log_dir: str) -> list[tuple[Any, ...]]:
    """The `files` inventory: one live `log` row per segment (what the audit reads of it: log starts)."""
    from schemas.tables import FILES

    mtime = BASE_TIMESTAMP + max(layout.rows)
    rows = []
    for p, base, count in segments(layout):
        row = {
            "dump_id": DUMP_ID,
            "replica": REPLICA,
            "topic": TOPIC,
            "partition": p,
            "file": f"{log_dir}/{TOPIC}-{p}/{base:020d}.log",
            "kind": "log",
            "log_dir": log_dir,
            "base_offset": base,
            "size_bytes": count * BATCH_BYTES,
            "mtime_ms": mtime,
            "fingerprint": f"{count * BATCH_BYTES}:{mtime}:{layout.case}-{GENERATOR_VERSION}",
            "is_live": True,
            "excluded_reason": None,
            "captured_at_ms": None,
        }
        rows.append(tuple(row[f.name] for f in FILES.schema.fields))
    return rows


def bronze_dir(layout: Layout) -> Path:
    return cache_root() / f"{layout.case}-{layout.size}-p{layout.producers}"


def is_cached(layout: Layout) -> bool:
    from jobs.audit import BRONZE_REQUIRED

    root = bronze_dir(layout)
    meta = root / "meta.json"
    params = json.loads(json.dumps(layout.params()))  # as stored: tuples become lists
    if not meta.is_file() or json.loads(meta.read_text()).get("params") != params:
        return False
    return all((root / "bronze" / name / "_delta_log").is_dir() for name in BRONZE_REQUIRED)


def generate(spark: SparkSession, layout: Layout) -> None:
    """Write the bronze tables of `layout` under `bronze_dir(layout)/bronze` (replacing what is there)."""
    from jobs.audit import BRONZE_REQUIRED
    from jobs.ingest import WRITE_SESSION_CONF, ingest_write_options, session_conf
    from schemas.tables import TABLES

    root = bronze_dir(layout)
    if root.exists():
        shutil.rmtree(root)
    out = root / "bronze"
    log_dir = str(root / "logdir")  # named in the rows; the audit never opens segment files
    for name in BRONZE_REQUIRED:
        spec = TABLES[name]
        if name == "batches":
            df = batches_frame(spark, layout, log_dir)
        elif name == "files":
            df = spark.createDataFrame(files_rows(layout, log_dir), spec.schema)
        else:
            df = spark.createDataFrame([], spec.schema)
        # Ingest's Parquet settings and table options: the audit reads what ingest writes.
        with session_conf(spark, WRITE_SESSION_CONF):
            writer = df.write.format("delta").mode("overwrite").options(**ingest_write_options(spec))
            writer.partitionBy(*spec.partition_by).save(str(out / name))
    meta = {"params": layout.params(), "batches": layout.batches, "expected": expected_findings(layout)}
    (root / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


# ------------------------------------------------------------------------------------------------
# A measurement: one child process, one fresh Spark session, `run_audit` timed phase by phase.
# ------------------------------------------------------------------------------------------------


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, ()))
    return pids


# One sample of a process tree's CPU: pid -> (kind, the process's own user + system CPU seconds).
CpuSample = dict[int, tuple[str, float]]


def tree_cpu(root: int) -> CpuSample:
    """The CPU each process of the tree under `root` has used itself, by kind of process: `jvm`
    (Spark's JVM, compiler and GC threads included), `python driver` (`root`: the audit's plans, py4j
    calls) and `python workers` (the executors' Python daemon and workers: the history's scan)."""
    ticks = os.sysconf("SC_CLK_TCK")
    sample: CpuSample = {}
    for pid in _process_tree(root):
        try:
            with open(f"/proc/{pid}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        seconds = sum(int(x) for x in tail.split()[11:13]) / ticks  # utime stime
        name = head.split("(", 1)[1]
        kind = "python driver" if pid == root else "jvm" if name == "java" else "python workers"
        sample[pid] = (kind, seconds)
    return sample


class CpuWatch:
    """The CPU a process tree uses between `start` and `stop`, by kind of process (`tree_cpu`),
    sampled every `interval` seconds in between.

    Each process counts its own CPU, from its first sample (or its start, when it began later) to its
    last. Finished children's time (`cutime`) is no help: pyspark's daemon ignores SIGCHLD, so the
    workers it forks leave no trace when they end (a worker that ended during a warm round took its CPU
    with it, and the difference of two samples of the tree came out at -69 s). What a process uses
    after its last sample, under `interval` seconds of it, is not counted."""

    def __init__(self, root: int, interval: float = 0.5) -> None:
        self.root, self.interval = root, interval
        self.first: CpuSample = {}
        self.last: CpuSample = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        for pid, (kind, seconds) in tree_cpu(self.root).items():
            if pid in self.last and self.last[pid][0] != kind:  # a pid used again by another process
                self.first.pop(pid, None)
            self.last[pid] = (kind, seconds)

    def start(self) -> CpuWatch:
        self.first = tree_cpu(self.root)
        self.last = dict(self.first)

        def run() -> None:
            while not self._stop.wait(self.interval):
                self._sample()

        self._thread = threading.Thread(target=run, name="cpu-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        totals = {"jvm": 0.0, "python driver": 0.0, "python workers": 0.0}
        for pid, (kind, seconds) in self.last.items():
            totals[kind] += seconds - (self.first[pid][1] if pid in self.first else 0.0)
        return totals


@dataclass
class Phase:
    seconds: float = 0.0  # exclusive of nested phases
    calls: int = 0
    jobs: int = 0
    stages: int = 0
    tasks: int = 0


@dataclass
class PhaseClock:
    """Times named phases of `run_audit` (nested ones excluded from their parent) and counts the Spark
    jobs, stages and tasks each ran (one job group per phase)."""

    spark: Any
    phases: dict[str, Phase] = field(default_factory=dict)
    failed_in: str | None = None  # the innermost phase an exception left
    # Job groups are `<prefix><phase>`: a session that audits again counts each audit's jobs alone.
    prefix: str = ""
    # run_audit runs some phases on threads of its own: each thread nests its phases on its own stack
    # (and sets its own job group); phases of two threads overlap in time.
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, prefix: str) -> None:
        """Start over for the next audit of the session: no phases, jobs grouped under `prefix`."""
        self.phases, self.failed_in, self.prefix = {}, None, prefix

    @property
    def _stack(self) -> list[list[Any]]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        stack: list[list[Any]] = self._local.stack
        return stack

    def wrap(self, fn: Callable[..., Any], name_of: Callable[..., str]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name_of(*args, **kwargs)):
                return fn(*args, **kwargs)

        return timed

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._stack.append([name, time.perf_counter(), 0.0])
        self.spark.sparkContext.setJobGroup(self.prefix + name, name)
        try:
            yield
        except BaseException:
            self.failed_in = self.failed_in or name
            raise
        finally:
            self._leave()

    def _leave(self) -> None:
        name, t0, nested = self._stack.pop()
        elapsed = time.perf_counter() - t0
        if self._stack:
            self._stack[-1][2] += elapsed
        with self._lock:
            phase = self.phases.setdefault(name, Phase())
            phase.seconds += elapsed - nested
            phase.calls += 1
        group = self._stack[-1][0] if self._stack else "other"
        self.spark.sparkContext.setJobGroup(self.prefix + group, group)

    def count_jobs(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        for name in [*self.phases, "other"]:
            phase = self.phases.setdefault(name, Phase())
            for job_id in tracker.getJobIdsForGroup(self.prefix + name):
                info = tracker.getJobInfo(job_id)
                if info is None:
                    continue
                phase.jobs += 1
                for stage_id in info.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None and stage.numCompletedTasks > 0:
                        phase.stages += 1
                        phase.tasks += stage.numCompletedTasks


def plan_metrics(spark: SparkSession, df: DataFrame, top: int = 8) -> dict[str, Any]:
    """Operator counts and the largest time metrics of `df`'s executed physical plan (after an action)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conv = jvm.scala.jdk.javaapi.CollectionConverters
    plan = df._jdf.queryExecution().executedPlan()
    ops: Counter[str] = Counter()
    times: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    todo = [plan]
    while todo:
        node = todo.pop()
        name = node.nodeName()
        ops[name] += 1
        metrics = node.metrics()
        for key in conv.asJava(metrics.keys()):
            metric = metrics.apply(key)
            kind, value = metric.metricType(), metric.value()
            label = f"{name}: {key}"
            if kind == "timing":
                times[label] += value / 1e3
            elif kind == "nsTiming":
                times[label] += value / 1e9
            elif kind == "size" and ("spill" in key or "data size" in key):
                sizes[label] += value
        todo.extend(conv.asJava(node.children()))
    interesting = (
        "Window",
        "Sort",
        "Exchange",
        "SortMergeJoin",
        "BroadcastHashJoin",
        "HashAggregate",
        "Scan",
    )
    return {
        "operators": {k: v for k, v in sorted(ops.items()) if any(i in k for i in interesting)},
        "top_times_s": {k: round(v, 2) for k, v in times.most_common(top) if v >= 0.01},
        "sizes_mb": {k: round(v / MB, 1) for k, v in sizes.most_common(top) if v > 0},
    }


def _rule_recorder(recorded: list[tuple[str, DataFrame]]) -> None:
    """Record every rule frame `audit_rules.pipeline.audit` builds (calls made from the pipeline only)."""
    from pyspark.sql import DataFrame

    from audit_rules import consistency, duplicates, epochs, ordering, retention, sequences, transactions

    for module in (consistency, duplicates, epochs, ordering, retention, sequences, transactions):
        for attr, fn in list(vars(module).items()):
            if attr.startswith("_") or not callable(fn) or getattr(fn, "__module__", "") != module.__name__:
                continue

            def record(*args: Any, _fn: Any = fn, _name: str = f"{module.__name__[12:]}.{attr}") -> Any:
                out = _fn(*args)
                if (
                    isinstance(out, DataFrame)
                    and sys._getframe(1).f_globals["__name__"] == "audit_rules.pipeline"
                ):
                    recorded.append((_name, out))
                return out

            setattr(module, attr, record)


def error_line(exc: BaseException) -> str:
    """One line for a (Py4J-wrapped) Spark error: the out-of-memory cause if there is one, else its first
    line, without the JVM stack."""
    text = str(exc)
    oom = re.search(r"[\w.]*OutOfMemoryError:? ?[^\n]{0,120}", text)
    stage = re.search(r"in stage [\d.]+", text)
    if oom:
        return oom.group(0).strip() + (f" ({stage.group(0)})" if stage else "")
    lines = [t for t in text.strip().splitlines() if "Exception" in t or "Error" in t] or [type(exc).__name__]
    return lines[0].strip()[:300]


def _instrumented_session(spec: dict[str, Any]) -> tuple[Any, Callable[[str], dict[str, Any]]]:
    """Start the session `replay-audit audit` would start (with the bench's overrides); return it and a
    function that times `run_audit` over an output directory (phases, CPU, the profiled rules when
    `spec["profile"]`; the session's start-up time as `start_s`)."""
    t0 = time.perf_counter()
    from jobs.spark_session import get_spark, job_local_conf

    spark = get_spark("bench-audit", extra_conf={**job_local_conf("audit"), **(spec.get("conf") or {})})
    start_s = time.perf_counter() - t0

    import jobs.audit as job
    import jobs.report as report
    from audit_rules.pipeline import local_checkpoint
    from jobs.profiles import load_profile

    clock = PhaseClock(spark)
    profiled: dict[str, Any] = {}
    recorded: list[tuple[str, DataFrame]] = []
    if spec["profile"]:
        _rule_recorder(recorded)

    def materialize(df: DataFrame, name: str) -> DataFrame:
        with clock.phase(name):
            out = local_checkpoint(df, name)
        if spec["profile"]:
            profiled[name] = {"seconds": clock.phases[name].seconds, **plan_metrics(spark, df)}
        return out

    audit_fn = job.audit

    def audit(bronze: Any, profile: Any, **kwargs: Any) -> Any:
        out = audit_fn(bronze, profile, materialize=materialize, **kwargs)
        for name, df in recorded:
            phase = f"rule {name} (profile only)"
            t = time.perf_counter()
            try:
                with clock.phase(phase):
                    rows: int | str = len(df.collect())
                metrics = plan_metrics(spark, df)
            except Exception as exc:  # the failure is the finding: the run goes on to the next rule
                rows, metrics = f"FAILED: {error_line(exc)}", {}
            profiled[phase] = {"seconds": time.perf_counter() - t, "findings": rows, **metrics}
        return out

    job.read_bronze = clock.wrap(job.read_bronze, lambda *a, **k: "read bronze")
    job.run_id_of = clock.wrap(job.run_id_of, lambda *a, **k: "run id (files hash)")
    job.audit = clock.wrap(audit, lambda *a, **k: "audit(): plan analysis")
    job._store = clock.wrap(job._store, lambda df, name, *a, **k: f"store {name}")
    job._overwrite = clock.wrap(job._overwrite, lambda df, name, *a, **k: f"write {name}")
    job._upsert_run = clock.wrap(job._upsert_run, lambda *a, **k: "write runs")
    report.write_findings_json = clock.wrap(report.write_findings_json, lambda *a, **k: "findings.json")
    report.write_html_report = clock.wrap(report.write_html_report, lambda *a, **k: "index.html")
    audits = itertools.count()

    def audit_once(output: str) -> dict[str, Any]:
        clock.reset(f"audit {next(audits)}: ")
        profiled.clear()
        recorded.clear()
        load_before = os.getloadavg()
        cpu = CpuWatch(os.getpid()).start()
        t1 = time.perf_counter()
        error, counts = "", {}
        try:
            counts = job.run_audit(spark, output, load_profile(), gx=False).counts
        except Exception as exc:  # reported as a FAILED line with the time it took to fail
            error = f"in {clock.failed_in or 'run_audit'}: {error_line(exc)}"
        audit_s = time.perf_counter() - t1
        cpu_by_process = cpu.stop()
        load_after = os.getloadavg()
        # The JVM may have died with the audit (java.lang.OutOfMemoryError): then no job counts.
        with suppress(Exception):
            clock.count_jobs()
        phases = {name: asdict(p) for name, p in clock.phases.items()}
        accounted = sum(p.seconds for p in clock.phases.values())
        phases.setdefault("other", asdict(Phase()))["seconds"] = max(0.0, audit_s - accounted)
        return {
            "start_s": start_s,
            "audit_s": audit_s,
            "cpu_s": sum(cpu_by_process.values()),
            "cpu_by_process": cpu_by_process,
            "load_before": load_before,
            "load_after": load_after,
            "findings": dict(sorted(counts.items())),
            "error": error,
            "phases": phases,
            "profile": dict(profiled),
        }

    return spark, audit_once


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement (in a fresh process): start Spark, then time `run_audit` over `spec["output"]`."""
    spark, audit_once = _instrumented_session(spec)
    run = audit_once(spec["output"])
    with suppress(Exception):  # the JVM died with the audit: nothing to stop
        spark.stop()
    return run


def run_warm_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Rounds of audits in one session (in a fresh process): each round audits every layout of
    `spec["layouts"]` once, in order, each into a scratch output of its own. Between audits the
    session's caches are dropped (cached frames, Delta's snapshots of the bronze tables), so what the
    later rounds keep from the earlier ones is the JVM's: loaded classes, compiled code."""
    spark, audit_once = _instrumented_session({**spec, "profile": False})
    jvm = spark.sparkContext._jvm
    layouts = [layout_of(params) for params in spec["layouts"]]
    runs: list[dict[str, Any]] = []
    for round_ in range(spec["rounds"]):
        for layout in layouts:
            with scratch_output(layout) as output:
                run = audit_once(str(output))
            spark.catalog.clearCache()
            jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
            runs.append({"round": round_, "case": layout.case, "size": layout.size, **run})
            print(f"  warm {progress_line(round_, spec['rounds'], layout, run)}", flush=True)
            if run["error"]:  # the session may be gone: `in_child` keeps its log
                return {"runs": runs, "error": run["error"]}
    spark.stop()
    return {"runs": runs}


def run_generator(spec: dict[str, Any]) -> dict[str, Any]:
    from jobs.spark_session import get_spark

    spark = get_spark("bench-audit datagen")
    for params in spec["layouts"]:
        layout = layout_of(params)
        t0 = time.perf_counter()
        generate(spark, layout)
        print(f"  generated {bronze_dir(layout)} in {time.perf_counter() - t0:.0f} s", flush=True)
    spark.stop()
    return {}


def in_child(task: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run `task` in a fresh Python process (its own JVM), return its JSON answer; the child's stderr is
    kept in `$KRA_CACHE/bench-audit/logs/` when something failed."""
    with tempfile.TemporaryDirectory(prefix="kra-bench-audit-") as tmp:
        spec_path, answer_path = Path(tmp) / "spec.json", Path(tmp) / "answer.json"
        spec_path.write_text(json.dumps({**spec, "task": task, "answer": str(answer_path)}))
        cmd = [sys.executable, "-m", "bench.audit_throughput", "--worker", str(spec_path)]
        done = subprocess.run(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True)
        crashed = done.returncode != 0 or not answer_path.is_file()
        answer: dict[str, Any] = {} if crashed else json.loads(answer_path.read_text())
        if crashed or answer.get("error"):
            log = cache_root() / "logs" / f"{task}-{time.strftime('%Y%m%d-%H%M%S')}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(done.stderr)
            answer["stderr"] = str(log)
        if crashed:
            causes = [
                line.strip()
                for line in done.stderr.splitlines()
                if ("Exception" in line or "Error" in line) and not line.lstrip().startswith("at ")
            ]
            shown = "\n".join(dict.fromkeys(causes[-12:]))
            raise SystemExit(
                f"bench worker {task} failed (exit {done.returncode}); stderr in {answer['stderr']}:\n{shown}"
            )
        return answer


def worker_main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    tasks = {"generate": run_generator, "audit": run_worker, "audit-warm": run_warm_worker}
    answer = tasks[spec["task"]](spec)
    Path(spec["answer"]).write_text(json.dumps(answer))
    return 0


def layout_of(params: dict[str, Any]) -> Layout:
    """A `Layout` back from its JSON form (`asdict`)."""
    return Layout(**{**params, "rows": tuple(params["rows"]), "hot": tuple(params["hot"])})


@contextmanager
def scratch_output(layout: Layout) -> Iterator[Path]:
    """A scratch output directory whose bronze tables link to the cached ones; deleted afterwards."""
    from jobs.audit import BRONZE_REQUIRED

    runs = cache_root() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    output = Path(tempfile.mkdtemp(prefix=f"{layout.case}-{layout.size}-", dir=runs))
    try:
        for name in BRONZE_REQUIRED:
            (output / name).symlink_to(bronze_dir(layout) / "bronze" / name, target_is_directory=True)
        yield output
    finally:
        shutil.rmtree(output, ignore_errors=True)


def measure_once(layout: Layout, profile: bool, conf: dict[str, str]) -> dict[str, Any]:
    """`run_audit` in a fresh process over a scratch output directory (`scratch_output`)."""
    with scratch_output(layout) as output:
        return in_child("audit", {"output": str(output), "profile": profile, "conf": conf})


def measure_warm(
    layouts: list[Layout], rounds: int, conf: dict[str, str]
) -> dict[Layout, list[dict[str, Any]]]:
    """`run_warm_worker` in a fresh process: every layout's runs, round by round."""
    answer = in_child(
        "audit-warm", {"layouts": [asdict(lay) for lay in layouts], "rounds": rounds, "conf": conf}
    )
    by_key = {(lay.case, lay.size): lay for lay in layouts}
    runs: dict[Layout, list[dict[str, Any]]] = {lay: [] for lay in layouts}
    for run in answer["runs"]:
        if run["error"]:
            run["stderr"] = answer.get("stderr", "")
        runs[by_key[run["case"], run["size"]]].append(run)
    return runs


def warm_failures(runs: dict[Layout, list[dict[str, Any]]]) -> list[str]:
    """Every warm run, the warm-up round's included, that failed or found other than the planted
    findings: the warm lines leave the first round out, the exit status must not."""
    return [
        f"{lay.case} {size_label(lay.size)} round {run['round'] + 1}: "
        + (f"FAILED {run['error']} (stderr: {run.get('stderr') or '-'})" if run["error"] else
           f"WRONG findings {run['findings']} != expected {expected_findings(lay)}")
        for lay, rs in runs.items()
        for run in rs
        if run["error"] or run["findings"] != expected_findings(lay)
    ]  # fmt: skip


def progress_line(round_: int, rounds: int, layout: Layout, run: dict[str, Any]) -> str:
    return (
        f"[{round_ + 1}/{rounds}] {layout.case} {size_label(layout.size)}: "
        f"audit {run['audit_s']:.1f} s ({layout.batches / run['audit_s']:,.0f} rows/s), "
        f"cpu {run['cpu_s']:.0f} s ("
        + ", ".join(f"{kind} {v:.0f}" for kind, v in run.get("cpu_by_process", {}).items())
        + f"), session start {run['start_s']:.1f} s, "
        f"load {run['load_before'][0]:.1f}->{run['load_after'][0]:.1f}"
        + (f"  FAILED {run['error']} (stderr: {run.get('stderr', '-')})" if run["error"] else "")
    )


# ------------------------------------------------------------------------------------------------
# Results, targets and the report.
# ------------------------------------------------------------------------------------------------


@dataclass
class Result:
    case: str
    size: int
    producers: int
    batches: int
    hot_batches: int
    segment_bytes: int
    start_s: float
    audit_s: float
    rows_s: float
    s_per_gb: float
    cpu_s: float
    rows_per_cpu_s: float
    cpu_share: float
    load_before: list[float]
    load_after: list[float]
    runs_s: list[float]
    findings: dict[str, int]
    expected: dict[str, int]
    ok: bool
    phases: dict[str, Any]
    error: str = ""  # the run failed (audit_s is then the time it took to fail)
    stderr: str = ""  # the failed run's Spark log
    cpu_by_process: dict[str, float] = field(default_factory=dict)  # `CpuWatch`


def to_result(layout: Layout, runs: list[dict[str, Any]]) -> Result:
    done = [r for r in runs if not r["error"]]
    best = min(done or runs, key=lambda r: r["audit_s"])
    expected = expected_findings(layout)
    cpus = os.cpu_count() or 1
    return Result(
        layout.case,
        layout.size,
        layout.producers,
        layout.batches,
        layout.hot_batches,
        layout.segment_bytes,
        best["start_s"],
        best["audit_s"],
        layout.batches / best["audit_s"],
        best["audit_s"] / (layout.segment_bytes / GB),
        best["cpu_s"],
        layout.batches / max(best["cpu_s"], 1e-9),
        best["cpu_s"] / (best["audit_s"] * cpus),
        list(best["load_before"]),
        list(best["load_after"]),
        [r["audit_s"] for r in runs],
        best["findings"],
        expected,
        all(r["findings"] == expected for r in done),
        best["phases"],
        best["error"],
        best.get("stderr", ""),
        best.get("cpu_by_process", {}),
    )


def warm_lines(layouts: list[Layout], runs: dict[Layout, list[dict[str, Any]]]) -> list[Result]:
    """The warm session's line of each layout: its runs after the first round (which warmed the JVM),
    the fastest counting; none for a layout with no run after the first round."""
    return [to_result(lay, later) for lay in layouts if (later := [r for r in runs[lay] if r["round"] > 0])]


def evaluate_targets(results: list[Result]) -> list[dict[str, Any]]:
    targets: list[dict[str, Any]] = []

    def add(name: str, passed: bool | None, measured: str) -> None:
        targets.append(target(name, passed, measured))

    name = f">= {TARGET_ROWS_S:,} batch rows/s (history + all rules)"
    if results:
        worst = min(r.rows_s for r in results)
        shown = ", ".join(
            f"{r.case} {size_label(r.size)}: "
            + (f"FAILED after {r.audit_s:.0f} s" if r.error else f"{r.rows_s:,.0f}")
            for r in results
        )
        passed = worst >= TARGET_ROWS_S and all(r.ok and not r.error for r in results)
        add(name, passed, f"{shown} rows/s")
    else:
        add(name, None, "not measured")
    for case in dict.fromkeys(r.case for r in results):
        rows = sorted((r for r in results if r.case == case), key=lambda r: r.size)
        name = f"{case}: time/GB at the larger size within {TARGET_LINEAR:.0%} of the smaller"
        if len(rows) < 2:
            add(name, None, "needs two sizes")
            continue
        small, large = rows[0], rows[-1]
        if small.error or large.error:
            add(name, False, "a run FAILED")
            continue
        ratio = large.s_per_gb / small.s_per_gb
        add(
            name,
            abs(ratio - 1) <= TARGET_LINEAR,
            f"{size_label(small.size)} {small.s_per_gb:.1f} s/GB, {size_label(large.size)} "
            f"{large.s_per_gb:.1f} s/GB (x{ratio:.2f})",
        )
    for size in dict.fromkeys(r.size for r in results):
        pair = {r.case: r for r in results if r.size == size}
        name = f"{size_label(size)}: skewed within {TARGET_SKEW}x of uniform"
        if "uniform" not in pair or "skewed" not in pair:
            add(name, None, "needs both cases")
            continue
        if pair["skewed"].error or pair["uniform"].error:
            add(name, False, "a run FAILED")
            continue
        ratio = pair["skewed"].audit_s / pair["uniform"].audit_s
        add(
            name,
            ratio <= TARGET_SKEW,
            f"uniform {pair['uniform'].audit_s:.1f} s, skewed {pair['skewed'].audit_s:.1f} s (x{ratio:.2f})",
        )
    return targets


def marginal_costs(results: list[Result], fixed: list[Result]) -> list[dict[str, Any]]:
    """Per case, the time per GB beyond the fixed cost (the `fixed` audit of the case, run in the same
    rounds) at each size, and the larger size's over the smaller's: whether the cost per GB is flat
    once the cost every cold audit pays is set aside. Reported beside the targets, not as one."""
    lines: list[dict[str, Any]] = []
    for base in fixed:
        rows = sorted(
            (r for r in results if r.case == base.case and r.size > base.size), key=lambda r: r.size
        )
        if len(rows) < 2 or base.error or any(r.error for r in rows):
            continue
        per_gb = {
            r.size: (r.audit_s - base.audit_s) / ((r.segment_bytes - base.segment_bytes) / GB) for r in rows
        }
        small, large = rows[0].size, rows[-1].size
        lines.append(
            {
                "case": base.case,
                "fixed_size": base.size,
                "fixed_s": base.audit_s,
                "s_per_gb_beyond_fixed": {size_label(k): v for k, v in per_gb.items()},
                "ratio": per_gb[large] / per_gb[small],
            }
        )
    return lines


def format_marginal(lines: list[dict[str, Any]]) -> str:
    out = []
    for m in lines:
        sizes = ", ".join(f"{label} {v:.1f} s/GB" for label, v in m["s_per_gb_beyond_fixed"].items())
        out.append(
            f"{m['case']}: time/GB beyond the {size_label(m['fixed_size'])} audit's {m['fixed_s']:.1f} s: "
            f"{sizes} (x{m['ratio']:.2f})"
        )
    return "\n".join(out)


def format_table(results: list[Result]) -> str:
    header = (
        f"{'case':<9}{'size':>8}{'batches':>12}{'audit s':>9}{'rows/s':>10}{'s/GB':>9}{'cpu s':>8}"
        f"{'rows/cpu-s':>11}{'cpu share':>10}{'load 1m':>13}{'start s':>8}{'runs s':>16}"
    )
    lines = ["", header]
    for r in results:
        load = f"{r.load_before[0]:.1f}->{r.load_after[0]:.1f}"
        lines.append(
            f"{r.case:<9}{size_label(r.size):>8}{r.batches:>12,}{r.audit_s:>9.1f}{r.rows_s:>10,.0f}"
            f"{r.s_per_gb:>9,.0f}{r.cpu_s:>8.0f}{r.rows_per_cpu_s:>11,.0f}{r.cpu_share:>10.2f}{load:>13}"
            f"{r.start_s:>8.1f}{' '.join(f'{s:.0f}' for s in r.runs_s):>16}"
            + (f"  FAILED {r.error}" if r.error else "")
            + ("" if r.ok else f"  WRONG findings {r.findings} != expected {r.expected}")
        )
    return "\n".join(lines)


def format_phases(results: list[Result]) -> str:
    names = list(dict.fromkeys(n for r in results for n in r.phases))
    width = max(len(n) for n in names) + 2
    lines = ["", "== time per phase of run_audit, s (jobs/stages/tasks) — best run of each line"]
    lines.append(
        f"{'phase':<{width}}" + "".join(f"{r.case[:4]} {size_label(r.size):>6}".rjust(22) for r in results)
    )
    for name in names:
        cells = []
        for r in results:
            p = r.phases.get(name)
            cells.append(
                "" if p is None else f"{p['seconds']:.1f} ({p['jobs']}/{p['stages']}/{p['tasks']})".rjust(22)
            )
        lines.append(f"{name:<{width}}" + "".join(cells))
    return "\n".join(lines)


def format_profile(case: str, size: int, profile: dict[str, Any]) -> str:
    lines = [
        "",
        f"== profile {case} {size_label(size)} (a separate run; rules re-run one by one over the "
        "materialised history)",
    ]
    for name, p in sorted(profile.items(), key=lambda kv: -kv[1]["seconds"]):
        extra = f", {p['findings']} findings" if "findings" in p else ""
        lines.append(f"{p['seconds']:7.1f} s  {name}{extra}")
        if p.get("operators"):
            lines.append(f"           operators: {p['operators']}")
        for metric, value in p.get("top_times_s", {}).items():
            lines.append(f"           {value:7.1f} s  {metric}")
        if p.get("sizes_mb"):
            lines.append(f"           sizes MB: {p['sizes_mb']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_throughput", description=__doc__)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument(
        "--quick", action="store_true", help=f"sizes {','.join(QUICK_SIZES)}, {QUICK_PRODUCERS} producers"
    )
    parser.add_argument(
        "--sizes", help=f"comma-separated sizes (decimal M/G); default {','.join(DEFAULT_SIZES)}"
    )
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: uniform, skewed")
    parser.add_argument(
        "--producers", type=int, help=f"producer ids (default {PRODUCERS}; quick {QUICK_PRODUCERS})"
    )
    parser.add_argument(
        "--driver-memory",
        help="spark.driver.memory of the measured sessions (local mode: the one JVM); default: "
        "`replay-audit audit`'s (jobs.spark_session.job_local_conf)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark conf of the measured sessions, over `replay-audit audit`'s (repeatable): for A/B runs",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per line, the fastest counts (default 1)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also one profiled run per case (at --profile-at): each rule re-run alone, plan metrics",
    )
    parser.add_argument("--profile-at", help="the size of the profiled runs (default: the smallest size)")
    parser.add_argument(
        "--fixed-at",
        help=f"with two sizes or more, also audit each case at this size, for the time per GB beyond a "
        f"cold audit's fixed cost (default {FIXED_SIZE}; none: skip)",
    )
    parser.add_argument(
        "--warm-rounds",
        type=int,
        default=WARM_ROUNDS,
        help=f"after the cold runs, rounds of the same audits in one session, the first left out (JIT "
        f"warm-up), the fastest of the others counts; default {WARM_ROUNDS}, 0: skip",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_PATH, help="where to write the JSON results")
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    if args.warm_rounds == 1 or args.warm_rounds < 0:
        parser.error("--warm-rounds: 0 (skip) or at least 2 (the first round only warms the JVM)")

    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    sizes = [
        parse_size(s)
        for s in (args.sizes.split(",") if args.sizes else QUICK_SIZES if args.quick else DEFAULT_SIZES)
    ]
    producers = args.producers or (QUICK_PRODUCERS if args.quick else PRODUCERS)
    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    started = time.perf_counter()
    cpus = os.cpu_count() or 1
    load = os.getloadavg()
    print(
        f"audit throughput, revision {git_revision()}, {cpus} cpus, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start"
        + (" (other work is running: compare cpu share and rows/cpu-s)" if load[0] > cpus - 0.5 else ""),
        flush=True,
    )
    print(
        f"data: {BATCH_BYTES}-byte one-record batches ({ROWS_PER_GB:,} batch rows per GB of segments), "
        f"{PARTITIONS} partitions, {producers} producers; skewed: producer {HOT_PRODUCER_ID} holds "
        f"{HOT_SHARE:.0%} of the batches ({HOT_IN_PARTITION[0]}/{HOT_IN_PARTITION[1]} of partition 0); "
        f"session: local[2], replay-audit audit's job conf{' + ' + str(conf) if conf else ''}",
        flush=True,
    )
    layouts = [make_layout(case, size, producers) for size in sizes for case in cases]
    fixed_at = args.fixed_at or FIXED_SIZE
    fixed_size = None if fixed_at.lower() == "none" or len(set(sizes)) < 2 else parse_size(fixed_at)
    if fixed_size is not None and fixed_size >= min(sizes):
        if args.fixed_at:
            parser.error(f"--fixed-at {fixed_at}: must be below the smallest size")
        fixed_size = None  # the default 8 MB is not below the sizes asked for: no fixed-cost runs
    fixed_layouts = [make_layout(case, fixed_size, producers) for case in cases] if fixed_size else []
    profile_size = parse_size(args.profile_at) if args.profile_at else min(sizes)
    profiled = [make_layout(case, profile_size, producers) for case in cases] if args.profile else []
    needed = list(dict.fromkeys([*fixed_layouts, *layouts, *profiled]))
    missing = [lay for lay in needed if not is_cached(lay)]
    for lay in needed:
        state = "to generate" if lay in missing else "cached"
        print(f"  {lay.case} {size_label(lay.size)}: {lay.batches:,} batches -> {bronze_dir(lay)} ({state})")
    if missing:
        t0 = time.perf_counter()
        in_child("generate", {"layouts": [asdict(lay) for lay in missing]})
        print(f"generated {len(missing)} table set(s) in {time.perf_counter() - t0:.0f} s", flush=True)

    measured = [*fixed_layouts, *layouts]
    runs: dict[Layout, list[dict[str, Any]]] = {lay: [] for lay in measured}
    for round_ in range(args.repeat):
        for lay in measured:
            run = measure_once(lay, profile=False, conf=conf)
            runs[lay].append(run)
            print(f"  {progress_line(round_, args.repeat, lay, run)}", flush=True)
    results = [to_result(lay, runs[lay]) for lay in layouts]
    fixed = [to_result(lay, runs[lay]) for lay in fixed_layouts]
    marginal = marginal_costs(results, fixed)
    warm_results: list[Result] = []
    warm_fixed: list[Result] = []
    warm_failed: list[str] = []
    if args.warm_rounds:
        print(
            f"warm: {args.warm_rounds} rounds of the same audits in one session, the first left out",
            flush=True,
        )
        warm_runs = measure_warm(sorted(measured, key=lambda lay: lay.size), args.warm_rounds, conf)
        warm_results = warm_lines(layouts, warm_runs)
        warm_fixed = warm_lines(fixed_layouts, warm_runs)
        warm_failed = warm_failures(warm_runs)
    warm_marginal = marginal_costs(warm_results, warm_fixed)
    profiles: list[dict[str, Any]] = []
    if args.profile:
        for lay in profiled:
            run = measure_once(lay, profile=True, conf=conf)
            profiles.append(
                {
                    "case": lay.case,
                    "size": lay.size,
                    "audit_s": run["audit_s"],
                    "phases": run["phases"],
                    "profile": run["profile"],
                    "error": run["error"],
                    "stderr": run.get("stderr", ""),
                }
            )

    targets = evaluate_targets(results)
    warm_targets = evaluate_targets(warm_results) if args.warm_rounds else []
    print(format_table([*fixed, *results]))
    print(format_phases([*fixed, *results]))
    if warm_results or warm_fixed:
        print("\n== warm: one session, rounds after the first")
        print(format_table([*warm_fixed, *warm_results]))
        print(format_phases([*warm_fixed, *warm_results]))
    for line in warm_failed:
        print(f"  warm {line}")
    for p in profiles:
        print(format_profile(p["case"], p["size"], p["profile"]))
        if p["error"]:
            print(f"  the profiled run FAILED {p['error']}")
    print(f"\n== targets, cold (local[{cpus}]: a fresh JVM per audit, session start excluded)")
    print(format_targets(targets, 62))
    if warm_targets:
        print(f"\n== targets, warm (local[{cpus}]: one session, the JVM warmed by the first round)")
        print(format_targets(warm_targets, 62))
    if marginal or warm_marginal:
        print("\n== beside the targets: the cost per GB once the 8 MB audit's time is set aside")
        if marginal:
            print("cold: " + format_marginal(marginal).replace("\n", "\ncold: "))
        if warm_marginal:
            print("warm: " + format_marginal(warm_marginal).replace("\n", "\nwarm: "))
    elapsed = time.perf_counter() - started
    print(
        f"\nGB = 10^9 bytes of segments ({ROWS_PER_GB:,} {BATCH_BYTES}-byte batches); audit s = "
        "run_audit(gx=False) wall time from after get_spark returned (history, every rule, Delta writes, "
        "report/); rows = batch rows; cpu s = user+system CPU of the worker's process tree (driver, JVM, "
        f"Python workers) during the audit; cpu share = cpu s / (audit s x {cpus}): below 1 the audit "
        "waited (for the CPU under others' load, or in a serial phase); runs s = every run, the fastest "
        "counts; warm: the same audits in one session, each into a fresh output with the session's "
        f"caches dropped between them, the first round left out. Took {elapsed:.0f} s."
    )
    write_report(
        args.out,
        {
            "quick": args.quick,
            "spark_conf": conf,
            "load_average_at_start": load,
            "batch_bytes": BATCH_BYTES,
            "rows_per_gb": ROWS_PER_GB,
            "partitions": PARTITIONS,
            "producers": producers,
            "anomalies": ANOMALIES,
            "results": [asdict(r) for r in results],
            "fixed_cost_runs": [asdict(r) for r in fixed],
            "marginal": marginal,
            "warm_rounds": args.warm_rounds,
            "warm_results": [asdict(r) for r in warm_results],
            "warm_fixed_cost_runs": [asdict(r) for r in warm_fixed],
            "warm_marginal": warm_marginal,
            "warm_targets": warm_targets,
            "warm_failed": warm_failed,
            "profiles": profiles,
            "targets": targets,
            "elapsed_s": elapsed,
        },
    )
    checked = [*fixed, *results, *warm_fixed, *warm_results]
    return 0 if all(r.ok and not r.error for r in checked) and not warm_failed else 1


if __name__ == "__main__":
    sys.exit(main())
