"""Decode throughput of kafka_log_decoder beside its peers, all measured in this one run on the same files.

`python -m bench.decode_throughput [--quick] [--shapes 1-record,500-record,zstd] [--skip-peers]`
prints a table and the targets of the issue (PASS/MISS with the measured ratio) and writes
`bench/results/latest.json`. Every measurement runs in a fresh child process pinned to one core,
which also gives its peak memory. What each line measures is in bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import datagen
from bench.common import REPO, replay_audit_cmd, write_report

RESULTS_PATH = REPO / "bench" / "results" / "latest.json"
MB = datagen.MB
CHUNK = 8 << 20
# Slow peers (pure-Python decoders, the row API) are measured on a whole-batch prefix of the file.
PREFIX_BYTES = 50 * MB
PREFIX_RECORDS = 500_000
# After one warm-up pass a worker repeats timed passes (best one counts; the machine may be shared)
# up to `max_passes`, or fewer (at least two) when the next pass would end after this many seconds.
PASS_BUDGET_S = 5.0
SUMMARY_RUNS = 5
# Streaming: decoding headers of the 500 MB file must need far less memory than the file.
STREAMING_RSS_MIB = 100
LOG_OVERHEAD = 12  # baseOffset + length
V2_HEADER = struct.Struct(">qiiBIhiqqqhii")  # the 61-byte v2 batch header (DefaultRecordBatch.java)
CRC_START = 21  # CRC-32C covers attributes .. end of batch
DLS_CLASS = "org.apache.kafka.tools.DumpLogSegments"


# ------------------------------------------------------------------------------------------------
# What one pass of each decoder does (runs in the pinned child process).
# ------------------------------------------------------------------------------------------------


@dataclass
class Counts:
    """What a pass saw; checked against what the generator wrote."""

    batches: int = 0
    records: int | None = None
    crc_failures: int = 0
    errors: int = 0
    plain_bytes: int | None = None


def ours_columnar(path: str, records: bool, limit: int) -> Counts:
    """The columnar API as a Spark task consumes it: per run, `.n` and the column memoryviews."""
    from kafka_log_decoder.segment import BatchRun, iter_segment_runs

    counts = Counts(records=0 if records else None)
    n_records = 0
    for run in iter_segment_runs(path, records=records, end_position=limit):
        if isinstance(run, BatchRun):
            counts.batches += run.n
            counts.crc_failures += run.batches["crc_valid"].tobytes().count(0)
            counts.errors += len(run.errors)
            for record_run in run.records:
                columns = record_run.columns
                n_records += len(columns["offset"])
                _ = (columns["key_len"], columns["value_len"], columns["headers_count"])
        else:
            counts.errors += len(run)
    if records:
        counts.records = n_records
    return counts


def ours_rows(path: str, records: bool, limit: int) -> Counts:
    """The row API (`read_log_segment`): one Python object per batch header and per record."""
    from kafka_log_decoder.rows import BatchHeader, Record
    from kafka_log_decoder.segment import read_log_segment

    counts = Counts(records=0 if records else None)
    n_records = 0
    for item in read_log_segment(path, records=records, end_position=limit):
        if isinstance(item, BatchHeader):
            counts.batches += 1
            counts.crc_failures += not item.crc_valid
        elif isinstance(item, Record):
            n_records += 1
        else:
            counts.errors += 1
    if records:
        counts.records = n_records
    return counts


def kafka_python(path: str, records: bool, limit: int) -> Counts:
    """kafka-python's consumer-side reader: header fields and `validate_crc()`, then each record."""
    from kafka.record.memory_records import MemoryRecords

    with open(path, "rb") as f:
        data = f.read(limit)
    reader = MemoryRecords(data)
    counts = Counts(records=0 if records else None)
    n_records = 0
    while (batch := reader.next_batch()) is not None:
        counts.batches += 1
        _ = (
            batch.base_offset,
            batch.last_offset,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            batch.records_count,
            batch.max_timestamp,
        )
        counts.crc_failures += not batch.validate_crc()
        if records:
            for record in batch:
                _ = (record.offset, record.key, record.value, record.headers)
                n_records += 1
    if records:
        counts.records = n_records
    return counts


def read_windows(path: str, limit: int) -> Generator[tuple[bytearray, int], int, None]:
    """8 MiB windows of the file that start at a batch boundary: yields (buffer, valid bytes).

    The caller walks whole batches from 0 and sends back where it stopped; the rest is moved to the
    front and the window refilled with readinto (one buffer, reused).
    """
    buf = bytearray(CHUNK)
    end = 0
    remaining = limit
    with open(path, "rb", buffering=0) as f:
        while True:
            room = len(buf) - end
            if room == 0:  # one batch larger than the window
                buf.extend(bytes(len(buf)))
                room = len(buf) - end
            with memoryview(buf) as view:
                got = f.readinto(view[end : end + min(room, remaining)]) if remaining else 0
            if not got:
                return
            remaining -= got
            end += got
            stopped = yield buf, end
            buf[: end - stopped] = buf[stopped:end]
            end -= stopped


def struct_crc32c(path: str, records: bool, limit: int) -> Counts:
    """A plain Python walker: `struct` for the header, the crc32c package for the CRC (header mode)."""
    from crc32c import crc32c

    counts = Counts()
    unpack_from = V2_HEADER.unpack_from
    windows = read_windows(path, limit)
    try:
        buf, end = next(windows)
        while True:
            pos = 0
            with memoryview(buf) as view:
                while pos + LOG_OVERHEAD <= end:
                    header = unpack_from(buf, pos)
                    size = LOG_OVERHEAD + header[1]
                    if pos + size > end:
                        break
                    counts.batches += 1
                    counts.crc_failures += crc32c(view[pos + CRC_START : pos + size]) != header[4]
                    pos += size
            buf, end = windows.send(pos)
    except StopIteration:
        pass
    return counts


def read_crc32c(path: str, records: bool, limit: int) -> Counts:
    """The ceiling for header mode on large batches: read the file and CRC-32C every byte of it."""
    from crc32c import crc32c

    crc = 0
    buf = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f, memoryview(buf) as view:
        while got := f.readinto(view):
            crc = crc32c(view[:got], crc)
    return Counts(batches=-1)


def read_only(path: str, records: bool, limit: int) -> Counts:
    """Reading the file into a reused 8 MiB buffer, nothing else: what the disk/page cache gives."""
    buf = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f, memoryview(buf) as view:
        while f.readinto(view):
            pass
    return Counts(batches=-1)


def _bare_zstd(path: str, limit: int, decompress: Callable[[memoryview], Any]) -> Counts:
    counts = Counts(records=0, plain_bytes=0)
    plain = n_records = 0
    unpack_from = V2_HEADER.unpack_from
    windows = read_windows(path, limit)
    try:
        buf, end = next(windows)
        while True:
            pos = 0
            with memoryview(buf) as view:
                while pos + LOG_OVERHEAD <= end:
                    header = unpack_from(buf, pos)
                    size = LOG_OVERHEAD + header[1]
                    if pos + size > end:
                        break
                    plain += len(decompress(view[pos + V2_HEADER.size : pos + size]))
                    n_records += header[12]
                    counts.batches += 1
                    pos += size
            buf, end = windows.send(pos)
    except StopIteration:
        pass
    counts.records = n_records
    counts.plain_bytes = plain
    return counts


def zstd_cramjam(path: str, records: bool, limit: int) -> Counts:
    """Bare zstd decompression of every batch payload with cramjam (what our decoder calls)."""
    import cramjam

    return _bare_zstd(path, limit, cramjam.zstd.decompress)


def zstd_zstandard(path: str, records: bool, limit: int) -> Counts:
    """Bare zstd decompression of every batch payload with the zstandard package."""
    import zstandard

    return _bare_zstd(path, limit, zstandard.ZstdDecompressor().decompress)


@dataclass(frozen=True)
class Decoder:
    key: str
    label: str
    measure: Callable[[str, bool, int], Counts]
    imports: tuple[str, ...]
    modes: tuple[str, ...] = ("headers", "records")
    shapes: tuple[str, ...] | None = None  # None: every shape
    prefix: bool = False  # measured on a prefix of the file
    ours: bool = False


DECODERS = {
    d.key: d
    for d in (
        Decoder(
            "ours",
            "kafka_log_decoder columnar (iter_segment_runs)",
            ours_columnar,
            ("kafka_log_decoder.segment",),
            ours=True,
        ),
        Decoder(
            "ours-rows",
            "kafka_log_decoder rows (read_log_segment)",
            ours_rows,
            ("kafka_log_decoder.segment",),
            prefix=True,
            ours=True,
        ),
        Decoder(
            "kafka-python",
            "kafka-python 3.0.12 MemoryRecords",
            kafka_python,
            ("kafka.record.memory_records",),
            prefix=True,
        ),
        Decoder("struct-crc32c", "struct + crc32c walker", struct_crc32c, ("crc32c",), modes=("headers",)),
        Decoder(
            "read-crc32c", "read + CRC-32C of the file (ceiling)", read_crc32c, ("crc32c",), ("headers",)
        ),
        Decoder("read-only", "read only (readinto 8 MiB)", read_only, (), ("headers",)),
        Decoder(
            "zstd-cramjam",
            "bare zstd decompress: cramjam (ceiling)",
            zstd_cramjam,
            ("cramjam",),
            ("records",),
            ("zstd",),
        ),
        Decoder(
            "zstd-zstandard",
            "bare zstd decompress: zstandard",
            zstd_zstandard,
            ("zstandard",),
            ("records",),
            ("zstd",),
        ),
    )
}
DLS_KEY = "dump-log-segments"
DLS_LABEL = "DumpLogSegments 4.3.1 (whole JVM process)"


def peak_rss_mib() -> float:
    """This process's own peak RSS (VmHWM); ru_maxrss would include the parent's, kept across fork/exec."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_worker(task: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this (fresh, pinned) process: a warm-up pass, then timed passes."""
    os.sched_setaffinity(0, {task["cpu"]})
    decoder = DECODERS[task["decoder"]]
    for module in decoder.imports:
        importlib.import_module(module)
    baseline = peak_rss_mib()
    path, records, limit = task["path"], task["mode"] == "records", task["limit"]
    times: list[float] = []
    counts: list[Counts] = []
    started = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        counts.append(decoder.measure(path, records, limit))
        times.append(time.perf_counter() - t0)
        spent = time.perf_counter() - started
        if len(times) == 1 and spent > PASS_BUDGET_S / 2:
            break  # slow: the first pass is the measurement
        timed_passes = len(times) - 1
        if timed_passes >= task["max_passes"] or (timed_passes >= 2 and spent + times[-1] > PASS_BUDGET_S):
            break
    timed = times[1:] if len(times) > 1 else times
    return {
        "times": timed,
        "counts": asdict(counts[-1]),
        "rss_baseline_mib": baseline,
        "rss_peak_mib": peak_rss_mib(),
    }


# ------------------------------------------------------------------------------------------------
# The parent: tasks, child processes, the JVM tool, the CLI start-up.
# ------------------------------------------------------------------------------------------------


@dataclass
class Result:
    shape: str
    mode: str
    decoder: str
    label: str
    bytes: int
    seconds: float
    batches: int
    prefix: bool
    rss_peak_mib: float | None
    rss_baseline_mib: float | None
    times: list[float]
    ok: bool
    note: str = ""

    @property
    def mb_s(self) -> float:
        return self.bytes / MB / self.seconds

    @property
    def batches_s(self) -> float:
        return self.batches / self.seconds

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "mb_s": self.mb_s, "batches_s": self.batches_s}


def measure(decoder: Decoder, segment: datagen.Segment, mode: str, cpu: int, max_passes: int) -> Result:
    """Run one decoder on one file in a child process and check what it saw."""
    limit = segment.file_size
    if decoder.prefix:
        per_batch = segment.records // segment.batches
        cap = PREFIX_RECORDS // per_batch * segment.batch_size if mode == "records" else PREFIX_BYTES
        limit = segment.prefix_bytes(min(PREFIX_BYTES, cap))
    task = {
        "decoder": decoder.key,
        "path": segment.path,
        "mode": mode,
        "limit": limit,
        "cpu": cpu,
        "max_passes": max_passes,
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.decode_throughput", "--worker", json.dumps(task)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench worker {decoder.key} on {segment.shape}/{mode} failed:\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    counts = Counts(**out["counts"])
    expected_batches = limit // segment.batch_size
    problems = []
    if counts.batches not in (-1, expected_batches):
        problems.append(f"saw {counts.batches} batches, wrote {expected_batches}")
    expected_records = expected_batches * (segment.records // segment.batches)
    if counts.records is not None and counts.records != expected_records:
        problems.append(f"saw {counts.records} records, wrote {expected_records}")
    if counts.crc_failures or counts.errors:
        problems.append(f"{counts.crc_failures} CRC failures, {counts.errors} errors")
    notes = []
    if decoder.prefix and limit < segment.file_size:
        notes.append(f"first {limit / MB:.0f} MB")
    if counts.plain_bytes:
        notes.append(f"{counts.plain_bytes / MB:.0f} MB decompressed")
    return Result(
        segment.shape,
        mode,
        decoder.key,
        decoder.label,
        limit,
        min(out["times"]),
        expected_batches,
        decoder.prefix and limit < segment.file_size,
        out["rss_peak_mib"],
        out["rss_baseline_mib"],
        out["times"],
        not problems,
        "; ".join(notes + problems),
    )


@dataclass
class Jvm:
    java: str
    classpath: str
    log4j: str | None


def find_jvm_tool() -> tuple[Jvm | None, str]:
    """Java and the Kafka 4.3.1 classpath (kafka_harness.jars, else /tmp/kpom/lib), or why not."""
    try:
        from kafka_harness import jars
    except ImportError:
        fallback, java = Path("/tmp/kpom/lib"), shutil.which("java")
        if fallback.is_dir() and java:
            return Jvm(java, f"{fallback}/*", None), str(fallback)
        return None, "no kafka_harness.jars, and no /tmp/kpom/lib or no java"
    try:
        lib = jars.ensure_kafka_jars()
        return Jvm(jars.java_executable(), f"{lib}/*", str(jars.tools_log4j2_config())), str(lib)
    except jars.HarnessError as exc:
        return None, str(exc)


def run_pinned(cmd: list[str], stdout: Any) -> tuple[float, float, int, str]:
    """Wall seconds, peak RSS (MiB), exit status and stderr of one child (pinned: it inherits our CPU).

    The peak RSS comes from wait4, so it is at least this bench process's own peak (Linux keeps the
    high-water mark across fork and exec); the JVM's is far above that.
    """
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=stdout, stderr=err, cwd=REPO)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return seconds, usage.ru_maxrss / 1024, child.returncode, err.read().decode(errors="replace")


def dump_log_segments_cmd(jvm: Jvm, path: str, mode: str) -> list[str]:
    cmd = [jvm.java]
    if jvm.log4j:
        cmd.append(f"-Dlog4j2.configurationFile={jvm.log4j}")
    cmd += ["-cp", jvm.classpath, DLS_CLASS, "--files", path]
    return cmd + (["--deep-iteration"] if mode == "records" else [])


def measure_dump_log_segments(jvm: Jvm, segment: datagen.Segment, mode: str, startup_s: float) -> Result:
    """DumpLogSegments as a user runs it: one JVM, output to /dev/null, wall time including start-up."""
    seconds, rss, status, stderr = run_pinned(
        dump_log_segments_cmd(jvm, segment.path, mode), subprocess.DEVNULL
    )
    if seconds > 1.25 * startup_s:
        steady = segment.file_size / MB / (seconds - startup_s)
        note = f"{steady:,.0f} MB/s without the {startup_s:.2f} s JVM start"
    else:
        note = f"mostly the {startup_s:.2f} s JVM start"
    if status != 0:
        note = f"exit {status}: {stderr.strip().splitlines()[-1] if stderr.strip() else ''}"
    return Result(
        segment.shape,
        mode,
        DLS_KEY,
        DLS_LABEL,
        segment.file_size,
        seconds,
        segment.batches,
        False,
        rss,
        None,
        [seconds],
        status == 0,
        note,
    )


def jvm_startup(jvm: Jvm, one_batch: datagen.Segment) -> float:
    """Median wall time of DumpLogSegments on a one-batch file: the JVM's fixed cost."""
    cmd = dump_log_segments_cmd(jvm, one_batch.path, "headers")
    return statistics.median(run_pinned(cmd, subprocess.DEVNULL)[0] for _ in range(3))


def measure_dump_summary(one_batch: datagen.Segment) -> dict[str, Any]:
    """`replay-audit dump --summary` of a one-batch file: median whole-process wall time of 5 runs."""
    base, shown = replay_audit_cmd()
    cmd = [*base, "dump", "--summary", one_batch.path]
    check = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO)  # warm-up
    summary = json.loads(check.stdout) if check.returncode == 0 else {}
    runs = [run_pinned(cmd, subprocess.DEVNULL) for _ in range(SUMMARY_RUNS)]
    return {
        "command": f"{shown} dump --summary <one-batch .log>",
        "runs_s": [r[0] for r in runs],
        "median_s": statistics.median(r[0] for r in runs),
        "rss_peak_mib": max(r[1] for r in runs),
        "ok": summary.get("batches") == 1 and all(r[2] == 0 for r in runs),
    }


# ------------------------------------------------------------------------------------------------
# Targets and the report.
# ------------------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    passed: bool | None  # None: not measured in this run
    measured: str
    ratio: float | None


def evaluate_targets(results: list[Result], summary: dict[str, Any] | None) -> list[Target]:
    by = {(r.shape, r.mode, r.decoder): r for r in results}
    targets: list[Target] = []

    def add(name: str, ours: tuple[str, str], value: Callable[[Result], float | None], need: float) -> None:
        result = by.get((*ours, "ours"))
        ratio = value(result) if result is not None else None
        if ratio is None:
            targets.append(Target(name, None, "not measured", None))
        else:
            ok = ratio >= need and result is not None and result.ok
            targets.append(Target(name, ok, f"{ratio:.2f} (need >= {need:g})", ratio))

    def vs(shape: str, mode: str, peer: str) -> Callable[[Result], float | None]:
        other = by.get((shape, mode, peer))
        return lambda r: None if other is None else r.mb_s / other.mb_s

    add("headers 1-record >= 1,000 MB/s", ("1-record", "headers"), lambda r: r.mb_s / 1000, 1)
    add(
        "headers 1-record >= 40x kafka-python",
        ("1-record", "headers"),
        vs("1-record", "headers", "kafka-python"),
        40,
    )
    add(
        "headers 1-record >= 12x struct walker",
        ("1-record", "headers"),
        vs("1-record", "headers", "struct-crc32c"),
        12,
    )
    add(
        "headers 500-record >= 80% of read+CRC",
        ("500-record", "headers"),
        vs("500-record", "headers", "read-crc32c"),
        0.8,
    )
    add("records 1-record >= 500 MB/s", ("1-record", "records"), lambda r: r.mb_s / 500, 1)
    add("records 500-record >= 2,000 MB/s", ("500-record", "records"), lambda r: r.mb_s / 2000, 1)
    bare = [by.get(("zstd", "records", k)) for k in ("zstd-cramjam", "zstd-zstandard")]
    fastest = min((b for b in bare if b is not None), key=lambda b: b.seconds, default=None)
    # "Within 10%": our time at most 1.1x the fastest bare decompression's; shown as bare/ours time.
    add(
        "zstd records within 10% of bare zstd",
        ("zstd", "records"),
        lambda r: None if fastest is None else fastest.seconds / r.seconds,
        1 / 1.1,
    )
    streaming = by.get(("500-record", "headers", "ours"))
    if streaming is None or streaming.rss_peak_mib is None:
        targets.append(
            Target(f"headers 500-record peak RSS < {STREAMING_RSS_MIB} MiB", None, "not measured", None)
        )
    else:
        peak = streaming.rss_peak_mib
        targets.append(
            Target(
                f"headers 500-record peak RSS < {STREAMING_RSS_MIB} MiB",
                peak < STREAMING_RSS_MIB,
                f"{peak:.0f} MiB for a {streaming.bytes / MB:.0f} MB file",
                peak / STREAMING_RSS_MIB,
            )
        )
    if summary is None:
        targets.append(Target("dump --summary one batch < 0.5 s", None, "not measured", None))
    else:
        median = summary["median_s"]
        ok = median < 0.5 and summary["ok"]
        targets.append(Target("dump --summary one batch < 0.5 s", ok, f"{median:.3f} s", median / 0.5))
    for shape in dict.fromkeys(r.shape for r in results):
        for mode in ("headers", "records"):
            if (shape, mode, DLS_KEY) in by:
                add(f"{shape} {mode} faster than DumpLogSegments", (shape, mode), vs(shape, mode, DLS_KEY), 1)
    return targets


def format_table(results: list[Result], segments: dict[str, datagen.Segment]) -> str:
    lines = []
    header = (
        f"{'decoder':<48} {'MB':>6} {'MB/s':>9} {'batches/s':>11} {'ours x':>8} {'peak RSS MiB':>14}  note"
    )
    for shape in dict.fromkeys(r.shape for r in results):
        segment = segments[shape]
        for mode in ("headers", "records"):
            rows = [r for r in results if r.shape == shape and r.mode == mode]
            if not rows:
                continue
            ours = next((r for r in rows if r.decoder == "ours"), None)
            lines.append("")
            lines.append(
                f"== {shape} / {mode}: {segment.file_size / MB:.0f} MB, {segment.batches:,} batches of "
                f"{segment.records // segment.batches} records ({segment.batch_size:,} bytes each)"
            )
            lines.append(header)
            for r in rows:
                times = "-" if ours is None or r is ours else f"{ours.mb_s / r.mb_s:.2f}"
                rss = "-" if r.rss_peak_mib is None else f"{r.rss_peak_mib:.0f}"
                if r.rss_baseline_mib is not None:
                    rss += f" (+{r.rss_peak_mib - r.rss_baseline_mib:.0f})"  # type: ignore[operator]
                flag = "" if r.ok else "WRONG: "
                lines.append(
                    f"{r.label:<48} {r.bytes / MB:>6.0f} {r.mb_s:>9,.0f} {r.batches_s:>11,.0f} {times:>8} "
                    f"{rss:>14}  {flag}{r.note}"
                )
    return "\n".join(lines)


def format_targets(targets: list[Target]) -> str:
    lines = ["", "== targets"]
    for t in targets:
        verdict = {True: "PASS", False: "MISS", None: "n/a "}[t.passed]
        lines.append(f"{verdict}  {t.name:<48} {t.measured}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode_throughput", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small files (25x smaller), for a smoke run")
    parser.add_argument("--shapes", default="1-record,500-record,zstd", help="comma-separated shape names")
    parser.add_argument(
        "--skip-peers", action="store_true", help="only our decoders and dump --summary (no peers, no JVM)"
    )
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)), help="the core to pin to")
    parser.add_argument("--out", type=Path, default=RESULTS_PATH, help="where to write the JSON results")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_worker(json.loads(args.worker))))
        return 0

    started = time.perf_counter()
    # Pinned from here on: every child (workers, the JVM, the CLI) inherits this one core.
    os.sched_setaffinity(0, {args.cpu})
    available = datagen.shapes(quick=args.quick)
    wanted = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in available]
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(unknown)}; choose from {', '.join(available)}")
    max_passes = 5 if args.quick else 10

    segments: dict[str, datagen.Segment] = {}
    for name in wanted:
        t0 = time.perf_counter()
        segment, made = datagen.ensure_segment(available[name])
        segments[name] = segment
        what = f"generated in {time.perf_counter() - t0:.1f} s" if made else "cached"
        print(f"data {name}: {segment.path} ({segment.file_size / MB:.0f} MB, {what})", flush=True)
    one_batch, _ = datagen.ensure_segment(datagen.ONE_BATCH)

    jvm, jvm_where = (None, "skipped (--skip-peers)") if args.skip_peers else find_jvm_tool()
    startup = jvm_startup(jvm, one_batch) if jvm else None
    print(
        f"DumpLogSegments: {jvm_where}" + (f", JVM start-up {startup:.2f} s" if startup else ""), flush=True
    )

    results: list[Result] = []
    for name, segment in segments.items():
        for mode in ("headers", "records"):
            for decoder in DECODERS.values():
                if args.skip_peers and not decoder.ours:
                    continue
                if mode not in decoder.modes or (decoder.shapes and name not in decoder.shapes):
                    continue
                result = measure(decoder, segment, mode, args.cpu, max_passes)
                results.append(result)
                print(f"  {name:<10} {mode:<8} {decoder.label:<48} {result.mb_s:>9,.0f} MB/s", flush=True)
            if jvm is not None and startup is not None:
                result = measure_dump_log_segments(jvm, segment, mode, startup)
                results.append(result)
                print(f"  {name:<10} {mode:<8} {DLS_LABEL:<48} {result.mb_s:>9,.0f} MB/s", flush=True)

    summary = measure_dump_summary(one_batch)
    targets = evaluate_targets(results, summary)

    print(format_table(results, segments))
    print(
        f"\n== replay-audit dump --summary of one batch: median {summary['median_s']:.3f} s of "
        f"{SUMMARY_RUNS} runs ({summary['command']})"
    )
    print(format_targets(targets))
    elapsed = time.perf_counter() - started
    print(
        f"\nMB = 10^6 bytes of the file; every line ran in its own process pinned to CPU {args.cpu}; "
        f"best of the timed passes; 'ours x' = our MB/s / that line's MB/s; peak RSS (+ over the "
        f"process after its imports). Took {elapsed:.0f} s."
    )

    write_report(
        args.out,
        {
            "quick": args.quick,
            "cpu": args.cpu,
            "jvm": {"classpath": jvm_where, "startup_s": startup},
            "data": {name: asdict(s) for name, s in segments.items()},
            "results": [r.to_json() for r in results],
            "dump_summary": summary,
            "targets": [asdict(t) for t in targets],
            "elapsed_s": elapsed,
        },
    )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
