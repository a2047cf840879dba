"""Ingest throughput of `replay-audit ingest` on `local[2]`, beside the single-process header decoder.

`python -m bench.ingest_throughput [--quick] [--shapes 500-record,1-record] [--sizes 1G,4G]` builds a
log directory per (shape, size) from kafka-python template batches (bench/datagen.py), runs the whole
`replay-audit ingest` process on it, samples the memory of the driver tree and of every Python
worker, times `kafka_log_decoder.segment.iter_segment_runs` (headers only, one process) on the same
files, prints a table and the issue's targets (PASS/MISS with the measured figure) and writes
`bench/results/ingest-latest.json`. What is measured is in bench/README.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import datagen
from bench.common import (
    GB,
    MB,
    REPO,
    format_targets,
    parse_size,
    replay_audit_cmd,
    size_label,
    target,
    write_report,
)

RESULTS_PATH = REPO / "bench" / "results" / "ingest-latest.json"
MIB = 1 << 20
# Kafka's default segment.bytes is 1 GiB: a size above that becomes several segments.
SEGMENT_CAP = 1 << 30
# One .index entry per this many bytes of segment (Kafka writes one per 4 KiB; coarser is enough
# for the planner, which cuts at entries >= split size apart).
INDEX_INTERVAL = 1 << 20
SAMPLE_S = 0.5
# The modules a Python worker runs as (`python -m MODULE`): PySpark's daemon and worker, or the daemon
# the local sessions start instead (`spark.python.daemon.module=jobs.pyspark_daemon`), whose forked
# workers keep its command line. Only the module argument counts: the JVM's command line names the
# daemon module too (in its `--conf`), and until 2026-11-30 a substring match took the JVM for a worker.
WORKER_MODULES = frozenset({"pyspark.daemon", "pyspark.worker", "jobs.pyspark_daemon"})
PARTITION_DIR = "bench-0"
GENERATOR_VERSION = 1

SHAPES = {
    "500-record": ("500-record batches, 20-40 byte values, keys, 1-2 headers", 500, (20, 40), 2),
    "1-record": ("one-record batches, 100-byte value", 1, (100, 100), 0),
}
DEFAULT_SIZES = {"500-record": ("1G", "4G"), "1-record": ("1G", "4G")}
QUICK_SIZES = ("64M", "256M")

TARGET_ROWS_S = 500_000
TARGET_MB_S = 1000
TARGET_LINEAR = 0.15
TARGET_WORKER_MIB = 1024


# ------------------------------------------------------------------------------------------------
# Data: a log directory of one partition, segments <= 1 GiB named by their first base offset.
# ------------------------------------------------------------------------------------------------


@dataclass
class LogDirData:
    shape: str
    size: int
    path: str  # the log directory (holds meta.properties)
    segments: list[str]
    batches: int
    records: int
    batch_size: int
    file_bytes: int


def build_log_dir(shape_name: str, size: int) -> tuple[LogDirData, bool]:
    """A cached log directory with `size` bytes of `shape_name` batches, plus a `.index` per segment."""
    description, per_batch, values, headers = SHAPES[shape_name]
    shape = datagen.Shape(shape_name, description, size, per_batch, "none", values, headers)
    root = datagen.cache_dir() / f"ingest-{shape_name}-{size}"
    meta_path = root / "meta.json"
    # As stored: tuples become lists (compared unconverted, the cache never matched).
    params = json.loads(
        json.dumps(
            {"generator_version": GENERATOR_VERSION, "datagen": datagen.GENERATOR_VERSION, **asdict(shape)}
        )
    )
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        data = LogDirData(**meta["data"])
        if meta.get("params") == params and all(
            os.path.isfile(s) and os.path.getsize(s) > 0 for s in data.segments
        ):
            return data, False
    if root.exists():
        shutil.rmtree(root)
    template = datagen.template_batch(shape)
    batch_size = len(template)
    total = max(1, size // batch_size)
    per_segment = SEGMENT_CAP // batch_size
    partition = root / "logdir" / PARTITION_DIR
    partition.mkdir(parents=True)
    (root / "logdir" / "meta.properties").write_text("version=1\nnode.id=1\n")
    segments = []
    first = 0
    while first < total:
        count = min(per_segment, total - first)
        base = first * per_batch
        path = partition / f"{base:020d}.log"
        write_segment(path, template, first, count, per_batch)
        write_index(path.with_suffix(".index"), batch_size, count, per_batch)
        segments.append(str(path))
        first += count
    data = LogDirData(
        shape_name,
        size,
        str(root / "logdir"),
        segments,
        total,
        total * per_batch,
        batch_size,
        total * batch_size,
    )
    meta_path.write_text(json.dumps({"params": params, "data": asdict(data)}, indent=1) + "\n")
    return data, True


def write_segment(path: Path, template: bytes, first: int, batches: int, per_batch: int) -> None:
    """Batches `first .. first+batches` of the stream: base offsets `(first + j) * per_batch`."""
    size = len(template)
    per_block = max(1, (4 << 20) // size)
    block = bytearray(template * per_block)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with tmp.open("wb") as out:
        done = 0
        while done < batches:
            count = min(per_block, batches - done)
            for j in range(count):
                struct.pack_into(">q", block, j * size, (first + done + j) * per_batch)
            out.write(memoryview(block)[: count * size])
            done += count
    os.replace(tmp, path)


def write_index(path: Path, batch_size: int, batches: int, per_batch: int) -> None:
    """A Kafka offset index: (relative offset, position) every ~INDEX_INTERVAL bytes, as 2 x int32."""
    step = max(1, INDEX_INTERVAL // batch_size)
    entries = bytearray()
    for j in range(step, batches, step):
        entries += struct.pack(">ii", j * per_batch, j * batch_size)
    path.write_bytes(bytes(entries))


def tiny_log_dir() -> LogDirData:
    """One one-record batch: its ingest is the JVM/session start and the per-table fixed cost."""
    return build_log_dir("1-record", 1)[0]


# ------------------------------------------------------------------------------------------------
# Measurements.
# ------------------------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def is_python_worker(argv: Sequence[str]) -> bool:
    """Whether a process started as `argv` is a PySpark Python worker (or their daemon)."""
    return any(a == "-m" and m in WORKER_MODULES for a, m in itertools.pairwise(argv))


@dataclass
class MemorySampler:
    """Every SAMPLE_S: the summed RSS of the process tree under `root`, and each Python worker's RSS."""

    root: int
    tree_peak_mib: float = 0.0
    workers_peak_mib: dict[int, float] = field(default_factory=dict)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            tree = _children()
            pids, todo = [], [self.root]
            while todo:
                pid = todo.pop()
                pids.append(pid)
                todo.extend(tree.get(pid, ()))
            total = 0.0
            for pid in pids:
                rss = _rss_mib(pid)
                total += rss
                if is_python_worker(_argv(pid)):
                    self.workers_peak_mib[pid] = max(self.workers_peak_mib.get(pid, 0.0), rss)
            self.tree_peak_mib = max(self.tree_peak_mib, total)
            self.samples += 1
            self._stop.wait(SAMPLE_S)

    def stop(self) -> None:
        self._stop.set()


@dataclass
class IngestRun:
    seconds: float  # the whole process (wall)
    status: int
    tree_peak_mib: float
    workers: int
    worker_peak_mib: float
    samples: int
    stderr_tail: str
    ingest_s: float = float("nan")  # the command's own time, JVM and Spark session start excluded


# The command's last line on stderr (jobs.ingest.run_cli): its time apart from the JVM and session start.
INGEST_LINE = re.compile(r"^replay-audit: ingested \d+ files in ([0-9.]+) s ")


def run_ingest(log_dir: str, split_bytes: str | None) -> IngestRun:
    """The whole `replay-audit ingest` subprocess into a fresh output directory, with memory sampled."""
    with tempfile.TemporaryDirectory(prefix="kra-ingest-bench-") as out:
        cmd = [*replay_audit_cmd()[0], "ingest", "--input", f"bench={log_dir}", "--output", f"{out}/tables"]
        if split_bytes:
            cmd += ["--split-bytes", split_bytes]
        with tempfile.TemporaryFile() as err:
            t0 = time.perf_counter()
            child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
            sampler = MemorySampler(child.pid)
            thread = threading.Thread(target=sampler.run, daemon=True)
            thread.start()
            status = child.wait()
            seconds = time.perf_counter() - t0
            sampler.stop()
            thread.join()
            err.seek(0)
            lines = err.read().decode(errors="replace").strip().splitlines()
    tail = lines[-5:]
    timed = [float(m.group(1)) for m in map(INGEST_LINE.match, lines) if m]
    peaks = sampler.workers_peak_mib
    return IngestRun(
        seconds,
        status,
        sampler.tree_peak_mib,
        len(peaks),
        max(peaks.values(), default=0.0),
        sampler.samples,
        "\n".join(tail),
        timed[-1] if timed else float("nan"),
    )


def cache_log_dir(log_dir: str) -> None:
    """Read every file under `log_dir` into the page cache (the ingests are measured on cached bytes).

    Reading once at the start is not enough on every machine: on the 2-core VM these figures come
    from, the kernel pages out file pages left untouched for about a minute (DAMON `pageout`, min age
    12 x 5 s); 4 GB read again after 70 s idle took 7.4 s from disk against 0.6 s cached.
    """
    buffer = bytearray(8 << 20)
    view = memoryview(buffer)
    for root, _, names in os.walk(log_dir):
        for name in names:
            with open(os.path.join(root, name), "rb", buffering=0) as f:
                while f.readinto(view):
                    pass


def header_decoder_seconds(segments: list[str]) -> float:
    """Single-process `iter_segment_runs(records=False)` over every segment: best of 2 passes."""
    from kafka_log_decoder.segment import BatchRun, iter_segment_runs

    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        batches = 0
        for path in segments:
            for run in iter_segment_runs(path, records=False):
                if isinstance(run, BatchRun):
                    batches += run.n
                    _ = run.batches["crc_valid"]
        best = min(best, time.perf_counter() - t0)
    return best


def warm_child(paths: list[str], rounds: int, split_bytes: str | None) -> None:
    """In one session (the command's job conf), `rounds` rounds of one ingest per log directory, in the
    order given; one JSON line per ingest on stdout. Run as a child of the bench (`--warm-child`)."""
    from jobs.ingest import DEFAULT_SPLIT_BYTES, IngestOptions, LabeledPath
    from jobs.ingest import parse_size as ingest_size
    from jobs.ingest import run_ingest as ingest
    from jobs.spark_session import get_spark, job_local_conf

    spark = get_spark("replay-audit ingest bench", job_local_conf("ingest"))
    split = ingest_size(split_bytes) if split_bytes else DEFAULT_SPLIT_BYTES
    for round_no in range(rounds):
        for path in paths:
            cache_log_dir(path)
            with tempfile.TemporaryDirectory(prefix="kra-ingest-bench-") as out:
                options = IngestOptions(
                    [LabeledPath.parse(f"bench={path}")], f"{out}/tables", split_bytes=split
                )
                t0 = time.perf_counter()
                ingest(spark, options)
                seconds = time.perf_counter() - t0
            print(json.dumps({"path": path, "round": round_no, "seconds": seconds}), flush=True)


def warm_ingests(
    paths: list[str], rounds: int, split_bytes: str | None
) -> tuple[dict[str, list[float]], float]:
    """`warm_child` as a subprocess: every ingest's seconds per path, and the largest Python worker."""
    cmd = [sys.executable, "-m", "bench.ingest_throughput", "--warm-child", "--rounds", str(rounds)]
    if split_bytes:
        cmd += ["--split-bytes", split_bytes]
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen([*cmd, *paths], stdout=subprocess.PIPE, stderr=err, cwd=REPO, text=True)
        sampler = MemorySampler(child.pid)
        thread = threading.Thread(target=sampler.run, daemon=True)
        thread.start()
        out, _ = child.communicate()
        sampler.stop()
        thread.join()
        if child.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-5:]
            raise SystemExit("warm ingests failed:\n" + "\n".join(tail))
    times: dict[str, list[float]] = {p: [] for p in paths}
    for line in out.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            times[row["path"]].append(row["seconds"])
    return times, max(sampler.workers_peak_mib.values(), default=0.0)


@dataclass
class Warm:
    """In-process figures of one (shape, size): the best ingest less the best one-batch ingest."""

    shape: str
    size: int
    batches: int
    file_bytes: int
    runs_s: list[float]
    tiny_runs_s: list[float]
    ingest_s: float
    rows_s: float
    mb_s: float
    s_per_gb: float
    worker_peak_mib: float
    low_s: float = 0.0  # the CONFIDENCE interval of ingest_s
    high_s: float = 0.0


# The confidence of the interval the targets are decided on, and the bootstrap that draws it.
CONFIDENCE = 0.95
BOOTSTRAP_DRAWS = 10_000
BOOTSTRAP_SEED = 20261124
# Fewer runs than this in a sample leave its interval unbounded: the bootstrap of one run is that run
# (a point, not a confidence interval), and a target decided on it (`--repeat 1`, `--rounds 2`) was
# decided on one measurement.
MIN_RUNS = 2


@dataclass(frozen=True)
class Difference:
    """The ingest time of a size over the one-batch ingest: the difference of the medians of their
    runs, and a CONFIDENCE interval of it (percentile bootstrap, each sample resampled on its own)."""

    median_s: float
    low_s: float
    high_s: float


def difference(runs: list[float], baseline: list[float]) -> Difference:
    """`median(runs) - median(baseline)` with its bootstrap interval: the medians of `BOOTSTRAP_DRAWS`
    resamples (with replacement, seeded: the same runs give the same interval) of each sample."""
    import numpy as np

    a, b = np.asarray(runs, dtype=float), np.asarray(baseline, dtype=float)
    if min(len(a), len(b)) < MIN_RUNS:
        return Difference(float(np.median(a) - np.median(b)), -math.inf, math.inf)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = np.median(rng.choice(a, (BOOTSTRAP_DRAWS, len(a))), axis=1) - np.median(
        rng.choice(b, (BOOTSTRAP_DRAWS, len(b))), axis=1
    )
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Difference(float(np.median(a) - np.median(b)), float(low), float(high))


def ratio_interval(
    small: list[float], large: list[float], baseline: list[float], gb_small: float, gb_large: float
) -> tuple[float, float]:
    """The CONFIDENCE interval of the time per GB at the larger size over that at the smaller:
    `((median(large) - median(baseline)) / gb_large) / ((median(small) - median(baseline)) / gb_small)`
    over `BOOTSTRAP_DRAWS` resamples of the three samples, the baseline drawn once per draw for both
    sizes (they share it). A draw whose smaller size's time is not above 0 s has an unbounded ratio
    (an unknown one when the larger size's is not above 0 s either).
    """
    import numpy as np

    if min(len(small), len(large), len(baseline)) < MIN_RUNS:
        return 0.0, math.inf
    rng = np.random.default_rng(BOOTSTRAP_SEED)

    def medians(runs: list[float]) -> Any:
        return np.median(rng.choice(np.asarray(runs, dtype=float), (BOOTSTRAP_DRAWS, len(runs))), axis=1)

    base = medians(baseline)
    per_gb_small = (medians(small) - base) / gb_small
    per_gb_large = np.maximum(medians(large) - base, 0.0) / gb_large
    told = per_gb_small > 0
    ratios = np.where(told, per_gb_large / np.where(told, per_gb_small, 1.0), np.inf)
    # Neither size told from nothing: the draw's ratio could be anything, so it widens both ends.
    unknown = ~told & (per_gb_large <= 0)
    tail = (1 - CONFIDENCE) / 2 * 100
    low = np.percentile(np.where(unknown, 0.0, ratios), tail, method="inverted_cdf")
    high = np.percentile(np.where(unknown, np.inf, ratios), 100 - tail, method="inverted_cdf")
    return float(low), float(high)


def rate_range(amount: float, d: Difference) -> tuple[float, float]:
    """(lowest, highest) of `amount` per second the interval allows (infinite where it reaches 0 s)."""
    low = amount / d.high_s if d.high_s > 0 else float("inf")
    high = amount / d.low_s if d.low_s > 0 else float("inf")
    return low, high


def measure_warm(
    shape: str, datas: list[LogDirData], tiny: LogDirData, rounds: int, split_bytes: str | None
) -> list[Warm]:
    """The (shape, sizes) in one warm session: rounds of (one-batch, each size) ingests, interleaved."""
    times, worker_peak = warm_ingests([tiny.path, *(d.path for d in datas)], rounds, split_bytes)
    # The first round warms the JIT: its runs are left out.
    tiny_runs = times[tiny.path][1:] or times[tiny.path]
    found = []
    for data in datas:
        d = difference(times[data.path][1:] or times[data.path], tiny_runs)
        found.append(
            Warm(
                data.shape,
                data.size,
                data.batches,
                data.file_bytes,
                times[data.path],
                times[tiny.path],
                d.median_s,
                per_s(data.batches, d.median_s),
                per_s(data.file_bytes / MB, d.median_s),
                d.median_s / (data.file_bytes / GB),
                worker_peak,
                d.low_s,
                d.high_s,
            )
        )
    return found


@dataclass
class Result:
    shape: str
    size: int
    segments: int
    batches: int
    file_bytes: int
    wall_s: float
    start_s: float
    ingest_s: float
    rows_s: float
    mb_s: float
    s_per_gb: float
    tree_peak_mib: float
    workers: int
    worker_peak_mib: float
    decoder_mb_s: float
    fraction_of_decoder: float
    ok: bool
    note: str = ""
    runs_s: list[float] = field(default_factory=list)  # every whole run's wall time
    low_s: float = 0.0  # the CONFIDENCE interval of ingest_s
    high_s: float = 0.0
    command_s: float = 0.0  # the median of the runs' own times (their stderr line: JVM and session start
    # excluded)
    command_runs_s: list[float] = field(default_factory=list)
    baseline_runs_s: list[float] = field(default_factory=list)  # the one-batch ingest's own times


def cold_rounds(paths: list[str], split_bytes: str | None, repeat: int) -> dict[str, list[IngestRun]]:
    """`repeat` rounds of one whole ingest of each log directory, in turn. Interleaved, a drift of the
    machine's speed over the runs (others' load, the host) moves every directory's runs alike instead
    of biasing whichever was measured first."""
    runs: dict[str, list[IngestRun]] = {p: [] for p in paths}
    for round_no in range(max(1, repeat)):
        for path in paths:
            cache_log_dir(path)
            run = run_ingest(path, split_bytes)
            runs[path].append(run)
            print(f"  cold round {round_no + 1}: {path}: {run.ingest_s:.2f} s", flush=True)
    return runs


def summarised(runs: list[IngestRun]) -> IngestRun:
    """The run of median own time among `runs`, with the largest memory peaks of all of them. A
    failed run is returned as the result."""
    failed = [r for r in runs if r.status != 0 or r.ingest_s != r.ingest_s]  # nan: no timing line
    if failed:
        return failed[0]
    middle = sorted(runs, key=lambda r: r.ingest_s)[(len(runs) - 1) // 2]
    middle.tree_peak_mib = max(r.tree_peak_mib for r in runs)
    middle.worker_peak_mib = max(r.worker_peak_mib for r in runs)
    middle.workers = max(r.workers for r in runs)
    return middle


def measure(data: LogDirData, runs: list[IngestRun], starts: list[float], header_s: float) -> Result:
    """Cold figures of one log directory: its ingest time is the `difference` of its runs' own times
    and those of the one-batch ingest (`starts`)."""
    run = summarised(runs)
    d = difference([r.ingest_s for r in runs], starts)
    mb_s = per_s(data.file_bytes / MB, d.median_s)
    decoder_mb_s = data.file_bytes / MB / header_s
    return Result(
        data.shape,
        data.size,
        len(data.segments),
        data.batches,
        data.file_bytes,
        run.seconds,
        statistics.median(starts),
        d.median_s,
        per_s(data.batches, d.median_s),
        mb_s,
        d.median_s / (data.file_bytes / GB),
        run.tree_peak_mib,
        run.workers,
        run.worker_peak_mib,
        decoder_mb_s,
        mb_s / decoder_mb_s,
        run.status == 0,
        "" if run.status == 0 else f"exit {run.status}: {run.stderr_tail}",
        [r.seconds for r in runs],
        d.low_s,
        d.high_s,
        statistics.median(r.ingest_s for r in runs),
        [r.ingest_s for r in runs],
        list(starts),
    )


# ------------------------------------------------------------------------------------------------
# Targets and the report.
# ------------------------------------------------------------------------------------------------


def evaluate_targets(results: list[Warm], cold: list[Result]) -> list[dict[str, Any]]:
    """The issue's throughput and linearity targets twice: on the cold figures (the command's own time
    in a fresh process less the one-batch ingest's: what a user's `replay-audit ingest` pays) and on
    the warm ones (one session, JIT warm, the one-batch ingest's time subtracted); the worker memory
    target on every run.

    Each ingest time is a difference of medians with a CONFIDENCE interval (`difference`). A target
    passes when the whole interval meets it, misses when none of it does, and is undecided (n/a)
    when the interval straddles it: the runs cannot tell.
    """
    targets: list[dict[str, Any]] = []

    def add(name: str, passed: bool | None, measured: str) -> None:
        targets.append(target(name, passed, measured))

    failed = {r.shape for r in cold if not r.ok}
    measured: tuple[tuple[str, list[Any]], ...] = (("cold", list(cold)), ("warm", list(results)))
    for label, figures in measured:
        for shape, name, need, unit in (
            ("1-record", f"1-record >= {TARGET_ROWS_S:,} batch rows/s", TARGET_ROWS_S, "rows/s"),
            ("500-record", f"500-record >= {TARGET_MB_S:,} MB/s", TARGET_MB_S, "MB/s"),
        ):
            rows = [r for r in figures if r.shape == shape]
            if not rows:
                add(f"{label}: {name}", None, "not measured")
                continue
            ranges = [rate_range(_amount(r, unit), _diff(r)) for r in rows]
            passed: bool | None
            if shape in failed or any(high < need for _, high in ranges):
                passed = False
            elif all(low >= need for low, _ in ranges):
                passed = True
            else:
                passed = None
            shown = "; ".join(
                f"{size_label(r.size)}: {per_s(_amount(r, unit), r.ingest_s):,.0f} ({_range(low, high)})"
                for r, (low, high) in zip(rows, ranges, strict=True)
            )
            add(f"{label}: {name}", passed, f"{shown} {unit}")
        for shape in dict.fromkeys(r.shape for r in figures):
            rows = sorted((r for r in figures if r.shape == shape), key=lambda r: r.size)
            name = f"{label}: {shape} time/GB at larger size within {TARGET_LINEAR:.0%} of smaller"
            if len(rows) < 2:
                add(name, None, "needs two sizes")
                continue
            small, large = rows[0], rows[-1]
            gb_small, gb_large = small.file_bytes / GB, large.file_bytes / GB
            ratio = large.s_per_gb / small.s_per_gb
            (small_runs, baseline), (large_runs, _) = _samples(small), _samples(large)
            low, high = ratio_interval(small_runs, large_runs, baseline, gb_small, gb_large)
            verdict: bool | None
            if low >= 1 - TARGET_LINEAR and high <= 1 + TARGET_LINEAR:
                verdict = True
            elif high < 1 - TARGET_LINEAR or low > 1 + TARGET_LINEAR:
                verdict = False
            else:
                verdict = None
            add(
                name,
                verdict,
                f"{size_label(small.size)} {small.s_per_gb:.2f} s/GB, {size_label(large.size)} "
                f"{large.s_per_gb:.2f} s/GB (x{ratio:.2f}, interval {_range(low, high, 2)})",
            )
    if results or cold:
        peak = max([r.worker_peak_mib for r in results] + [r.worker_peak_mib for r in cold])
        # No worker seen is no measurement (the markers missed the workers' command line), not a pass.
        add(
            f"peak per Python worker < {TARGET_WORKER_MIB} MiB",
            peak < TARGET_WORKER_MIB if peak > 0 else None,
            f"{peak:.0f} MiB" if peak > 0 else "no Python worker seen",
        )
    return targets


def _samples(r: Result | Warm) -> tuple[list[float], list[float]]:
    """The runs of a line and of the one-batch ingest its time was measured over (warm: the first
    round left out, as `measure_warm` leaves it out)."""
    if isinstance(r, Warm):
        return r.runs_s[1:] or r.runs_s, r.tiny_runs_s[1:] or r.tiny_runs_s
    return r.command_runs_s, r.baseline_runs_s


def _interval(r: Result | Warm) -> str:
    return f"{r.low_s:.2f}-{r.high_s:.2f}"


def per_s(amount: float, seconds: float) -> float:
    """`amount / seconds`, infinite for a time the runs could not tell from nothing."""
    return amount / seconds if seconds > 0 else float("inf")


def _amount(r: Result | Warm, unit: str) -> float:
    return float(r.batches) if unit == "rows/s" else r.file_bytes / MB


def _diff(r: Result | Warm) -> Difference:
    return Difference(r.ingest_s, r.low_s, r.high_s)


def _range(low: float, high: float, digits: int = 0) -> str:
    """An interval for the report: `low-high`, `high` printed as `inf` when unbounded."""
    shown_high = "inf" if high == float("inf") else f"{high:,.{digits}f}"
    return f"{low:,.{digits}f}-{shown_high}"


def format_table(results: list[Result], warm: list[Warm]) -> str:
    header = (
        f"{'shape':<11}{'size':>8}{'segs':>5}{'batches':>12}{'wall s':>8}{'cmd s':>7}{'ingest s':>9}"
        f"{'interval':>13}"
        f"{'rows/s':>11}{'MB/s':>8}{'s/GB':>7}{'tree MiB':>9}{'wkrs':>5}{'wkr MiB':>8}{'dec MB/s':>9}"
        f"{'frac':>6}"
    )
    lines = ["", header]
    for r in results:
        lines.append(
            f"{r.shape:<11}{size_label(r.size):>8}{r.segments:>5}{r.batches:>12,}{r.wall_s:>8.1f}"
            f"{r.command_s:>7.2f}{r.ingest_s:>9.2f}{_interval(r):>13}"
            f"{r.rows_s:>11,.0f}{r.mb_s:>8,.0f}"
            f"{r.s_per_gb:>7.2f}{r.tree_peak_mib:>9,.0f}"
            f"{r.workers:>5}{r.worker_peak_mib:>8,.0f}{r.decoder_mb_s:>9,.0f}{r.fraction_of_decoder:>6.3f}"
            + ("" if r.ok else f"  FAILED {r.note}")
        )
    lines += [
        "",
        f"{'warm':<11}{'size':>8}{'ingest s':>9}{'interval':>13}{'rows/s':>11}{'MB/s':>8}{'s/GB':>7}",
    ]
    for w in warm:
        lines.append(
            f"{w.shape:<11}{size_label(w.size):>8}{w.ingest_s:>9.2f}{_interval(w):>13}"
            f"{w.rows_s:>11,.0f}{w.mb_s:>8,.0f}"
            f"{w.s_per_gb:>7.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_throughput", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"sizes {' and '.join(QUICK_SIZES)} per shape")
    parser.add_argument("--shapes", default="500-record,1-record", help="comma-separated shape names")
    parser.add_argument(
        "--sizes",
        help="comma-separated sizes for every shape (e.g. 1G,4G; decimal M/G); default 1G,4G",
    )
    parser.add_argument(
        "--split-bytes", help="passed to `replay-audit ingest --split-bytes` (default: its own)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="cold rounds: each runs one whole ingest of the one-batch log directory and of each size, "
        "in turn (the one-batch ingest runs once more first, left out); their medians count (default 5)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="rounds of the warm, in-process measurement, the first left out (default 6)",
    )
    parser.add_argument("--warm-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS_PATH, help="where to write the JSON results")
    args = parser.parse_args(argv)
    if args.warm_child:
        warm_child(args.paths, args.rounds, args.split_bytes)
        return 0

    wanted = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(unknown)}; choose from {', '.join(SHAPES)}")
    started = time.perf_counter()
    plan: list[tuple[str, int]] = []
    for shape in wanted:
        sizes = args.sizes.split(",") if args.sizes else QUICK_SIZES if args.quick else DEFAULT_SIZES[shape]
        plan += [(shape, parse_size(s)) for s in sizes]
    tiny = tiny_log_dir()
    datas: list[LogDirData] = []
    for shape, size in plan:
        t0 = time.perf_counter()
        data, made = build_log_dir(shape, size)
        what = f"generated in {time.perf_counter() - t0:.0f} s" if made else "cached"
        print(
            f"data {shape} {size_label(size)}: {data.path} ({len(data.segments)} segment(s), {what})",
            flush=True,
        )
        datas.append(data)
    # Also warms the page cache for the ingests.
    header_s = {data.path: header_decoder_seconds(data.segments) for data in datas}
    # One one-batch run more than asked, first: it also fills the page cache with the jars and
    # modules, and is left out.
    first = run_ingest(tiny.path, args.split_bytes)
    if first.status != 0:
        raise SystemExit(f"ingest of the one-batch log directory failed:\n{first.stderr_tail}")
    cold = cold_rounds([tiny.path, *(d.path for d in datas)], args.split_bytes, args.repeat)
    first_and_starts = [first, *cold[tiny.path]]
    start = summarised(cold[tiny.path])
    if start.status != 0:
        raise SystemExit(f"ingest of the one-batch log directory failed:\n{start.stderr_tail}")
    starts = [s.ingest_s for s in first_and_starts[1:]]
    start_s = statistics.median(starts)
    print(
        f"start cost (the command's own time ingesting one one-batch segment, JVM and session start "
        f"excluded; runs {', '.join(f'{s.ingest_s:.2f}' for s in first_and_starts)} s, the first left "
        f"out; whole processes {', '.join(f'{s.seconds:.1f}' for s in first_and_starts)} s): median "
        f"{start_s:.2f} s",
        flush=True,
    )

    results: list[Result] = []
    for data in datas:
        result = measure(data, cold[data.path], starts, header_s[data.path])
        results.append(result)
        print(
            f"  {data.shape} {size_label(data.size)}: {result.ingest_s:.2f} s over the one-batch ingest "
            f"({_interval(result)} s), {result.rows_s:,.0f} rows/s, {result.mb_s:,.0f} MB/s, "
            f"{result.s_per_gb:.2f} s/GB (command "
            f"{', '.join(f'{s:.2f}' for s in result.command_runs_s)} s; whole processes "
            f"{', '.join(f'{s:.1f}' for s in result.runs_s)} s), "
            f"worker peak {result.worker_peak_mib:.0f} MiB",
            flush=True,
        )

    warm: list[Warm] = []
    for shape in dict.fromkeys(d.shape for d in datas):
        found = measure_warm(
            shape, [d for d in datas if d.shape == shape], tiny, args.rounds, args.split_bytes
        )
        for w in found:
            print(
                f"  warm {shape} {size_label(w.size)}: {w.ingest_s:.2f} s over the one-batch ingest "
                f"({_interval(w)} s), {w.rows_s:,.0f} rows/s, {w.mb_s:,.0f} MB/s, "
                f"{w.s_per_gb:.2f} s/GB (runs "
                f"{', '.join(f'{x:.1f}' for x in w.runs_s)} s; one-batch "
                f"{', '.join(f'{x:.1f}' for x in w.tiny_runs_s)} s)",
                flush=True,
            )
        warm += found

    targets = evaluate_targets(warm, results)
    print(format_table(results, warm))
    print("\n== targets (local[2], start excluded; cold: a fresh process each, warm: one warm session)")
    print(format_targets(targets, 58))
    elapsed = time.perf_counter() - started
    print(
        f"\nMB/GB = 10^6/10^9 bytes of segment; cold: {args.repeat} whole `replay-audit ingest` processes "
        "per line; cmd s = the median of their own times (the stderr line: JVM and Spark session start "
        f"excluded); ingest s = median cmd s - {start_s:.2f} s, the median of {args.repeat} one-batch "
        "ingests (per-ingest fixed jobs and commits, first-use class loading); warm: one session, "
        f"{args.rounds} interleaved rounds, the first left out, ingest s = median ingest - median "
        "one-batch ingest; interval: the "
        f"{CONFIDENCE:.0%} percentile-bootstrap interval of ingest s ({BOOTSTRAP_DRAWS:,} draws); a "
        "target passes when the whole interval meets it, misses when none of it does, n/a otherwise; rows "
        "= batch rows; tree MiB = peak summed RSS of the ingest process tree (JVM + driver + workers); "
        "wkr MiB = largest peak RSS of one Python worker (pyspark.daemon/worker); dec MB/s = "
        "single-process header-only iter_segment_runs on the same files; frac = ingest MB/s / dec MB/s. "
        f"Took {elapsed:.0f} s."
    )
    write_report(
        args.out,
        {
            "quick": args.quick,
            "repeat": args.repeat,
            "start_s": start_s,
            "start_runs_s": [s.ingest_s for s in first_and_starts],
            "start_wall_runs_s": [s.seconds for s in first_and_starts],
            "split_bytes": args.split_bytes,
            "rounds": args.rounds,
            "results": [asdict(r) for r in results],
            "warm": [asdict(w) for w in warm],
            "targets": targets,
            "elapsed_s": elapsed,
        },
    )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
