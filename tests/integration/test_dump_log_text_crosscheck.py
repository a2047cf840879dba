"""Golden cross-check: Kafka's own DumpLogSegments (4.3.1) and our binary decoders agree, field by field.

The tool's text goes through `dump_log_text`; the same files go through the binary decoders
(`segment`, `producer_snapshot`, `index_files`). Only the fields the text cannot carry are left
out, and they are named in one place: `dump_log_text.FIELDS_NOT_IN_TEXT`. Inputs: every segment,
index, time index, transaction index, producer snapshot and KRaft snapshot of the committed real
fixtures, and of a real 4.3.1 broker's log directory (idempotent, transactional with commits and
aborts, non-idempotent, gzip/snappy/lz4/zstd data). No skips: without Java or the jars this fails.
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from kafka_harness.dump_log_segments import DUMP_LOG_SEGMENTS_CLASSES, run_dump_log_segments
from kafka_harness.jars import (
    KAFKA_VERSION,
    ZK_KAFKA_VERSION,
    ensure_kafka_jars,
    java_executable,
    kafka_classpath,
)
from kafka_log_decoder.constants import KRAFT_SNAPSHOT_SUFFIX
from kafka_log_decoder.discovery import DumpLogText, discover
from kafka_log_decoder.dump import iter_file_items
from kafka_log_decoder.dump_log_text import fields_in_text, parse_dump_log_text, read_dump_log_text
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.rows import BatchHeader, IndexEntry, Record, SnapshotEntry, TxnIndexEntry
from kafka_log_decoder.segment import read_log_segment
from tests.integration.conftest import BrokerDump
from tests.paths import REAL_FIXTURES

pytestmark = pytest.mark.integration

REAL = REAL_FIXTURES
# The files DumpLogSegments dumps (it ignores every other suffix, e.g. `.log.deleted`).
DUMPED_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", KRAFT_SNAPSHOT_SUFFIX)


def dumped_files(root: Path) -> list[Path]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in DUMPED_SUFFIXES)
    assert files, f"no Kafka files under {root}"
    return files


def binary_rows(path: Path) -> list[Any]:
    # KRaft snapshots (`.checkpoint`) hold record batches like a segment.
    if path.suffix == KRAFT_SNAPSHOT_SUFFIX:
        return list(read_log_segment(path, records=True))
    return list(iter_file_items(path, records=True))


def text_rows_by_file(
    files: list[Path], version: str = KAFKA_VERSION
) -> tuple[dict[str, list[Any]], list[DecodeError]]:
    """DumpLogSegments' rows per dumped file (the tool of Kafka `version`), and the lines the parser could
    not read."""
    ensure_kafka_jars(version)
    text = run_dump_log_segments(files, deep_iteration=True, version=version)
    assert text.count("\nDumping ") + text.startswith("Dumping ") == len(files), text[:2000]
    by_file: dict[str, list[Any]] = defaultdict(list)
    unreadable: list[DecodeError] = []
    for item in parse_dump_log_text(text.splitlines(keepends=True), source="DumpLogSegments stdout"):
        if isinstance(item, DecodeError) and item.kind is CorruptionKind.UNREADABLE_BATCH:
            unreadable.append(item)
        else:
            by_file[item.file].append(item)
    return by_file, unreadable


def differences(text: list[Any], binary: list[Any]) -> list[str]:
    """Row-by-row differences, side by side (at most ten)."""
    out = []
    if len(text) != len(binary):
        out.append(f"{len(text)} rows from the tool's text, {len(binary)} from the binary decoders")
    for n, (t, b) in enumerate(zip(text, binary, strict=False)):
        t_fields, b_fields = fields_in_text(t), fields_in_text(b)
        if t_fields != b_fields:
            names = sorted(k for k in t_fields.keys() | b_fields.keys() if t_fields.get(k) != b_fields.get(k))
            side_by_side = (f"{k}: tool={t_fields.get(k)!r} binary={b_fields.get(k)!r}" for k in names)
            out.append(f"row {n} ({t_fields['type']}): " + ", ".join(side_by_side))
        if len(out) >= 10:
            break
    return out


def cross_check(files: Iterable[Path], version: str = KAFKA_VERSION) -> Counter[str]:
    """Assert that the tool (of Kafka `version`) and the binary decoders give the same rows for every
    file; count them."""
    files = list(files)
    by_file, unreadable = text_rows_by_file(files, version)
    assert unreadable == [], "DumpLogSegments printed lines the parser cannot read:\n" + "\n".join(
        map(str, unreadable[:10])
    )
    failures = {}
    seen: Counter[str] = Counter()
    for path in files:
        text, binary = by_file.pop(str(path), []), binary_rows(path)
        problems = differences(text, binary)
        if problems:
            failures[str(path)] = problems
        seen.update(type(row).__name__ for row in text)
        for batch in (row for row in text if isinstance(row, BatchHeader)):
            seen.update(
                [f"codec:{batch.compression}"]
                + ([f"control:{batch.control_type}"] if batch.is_control else [])
            )
    assert by_file == {}, f"rows for files that were not dumped: {sorted(by_file)}"
    assert failures == {}, "\n".join(f"{file}:\n  " + "\n  ".join(p) for file, p in failures.items())
    return seen


def test_real_fixture_files_read_through_dump_log_segments_match_the_binary_decoders() -> None:
    # One text per broker's tree: one text is read as one replica's, and a second broker's file of the
    # same partition and name in it is left out as another copy (`__cluster_metadata-0` of each tree).
    seen: Counter[str] = Counter()
    for tree in sorted(p for p in REAL.iterdir() if p.is_dir()):
        seen += cross_check(dumped_files(tree))
    # What the fixtures are known to hold (fixtures/real/PROVENANCE.md): KRaft control batches,
    # idempotent data, index entries and producer snapshot entries.
    assert seen["BatchHeader"] > 50_000 and seen["Record"] > 50_000
    for control_type in ("LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER"):
        assert seen[f"control:{control_type}"], seen
    assert seen["IndexEntry"] and seen["TimeIndexEntry"] and seen["SnapshotEntry"] >= 4


def test_broker_log_dir_read_through_dump_log_segments_matches_the_binary_decoders(
    broker_dump: BrokerDump,
) -> None:
    seen = cross_check(dumped_files(broker_dump.log_dir))
    # Not vacuous: the scenarios wrote all of this, so the tool printed it and both sides agreed on it.
    assert seen["control:COMMIT"] and seen["control:ABORT"], seen
    assert {f"codec:{c}" for c in ("none", "gzip", "snappy", "lz4", "zstd")} <= set(seen), seen
    for row_type in (Record, IndexEntry, SnapshotEntry, TxnIndexEntry):
        assert seen[row_type.__name__], f"no {row_type.__name__} rows in the broker's files: {seen}"


def tool_command(files: Iterable[Path], *options: str) -> list[str]:
    """The Kafka 4.3.1 tool's command line, run as a user runs it (no harness JVM options)."""
    ensure_kafka_jars(KAFKA_VERSION)
    return [
        java_executable(),
        "-cp",
        kafka_classpath(KAFKA_VERSION),
        DUMP_LOG_SEGMENTS_CLASSES[KAFKA_VERSION],
        "--files",
        ",".join(map(str, files)),
        *options,
    ]


def captured_with_stderr(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    """`cmd > text 2>&1`: stdout and stderr in one stream."""
    return subprocess.run(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600, **kwargs
    )


def test_a_text_captured_with_the_tools_stderr_reads_as_its_stdout_alone(tmp_path: Path) -> None:
    """`kafka-dump-log.sh --files ... --print-data-log > dump.txt 2>&1` where the JVM has options to
    warn about (JAVA_TOOL_OPTIONS) and log4j2 finds no configuration: the real tool's stderr lines land
    before and after its first `Dumping` line. The text is recognised, and it reads as the same rows
    as the tool's stdout alone, with no unreadable line."""
    files = [p for p in dumped_files(REAL) if p.suffix == ".log"][:2]
    cmd = tool_command(files, "--print-data-log")
    options = "-XX:+UseBiasedLocking -Xloggc:" + str(tmp_path / "gc.log")
    options += " -Dlog4j2.configurationFile=" + str(tmp_path / "none.xml")
    env = dict(os.environ, JAVA_TOOL_OPTIONS=options)
    captured = captured_with_stderr(cmd, env=env)
    alone = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=600)
    assert captured.returncode == 0 and alone.returncode == 0, alone.stderr
    # Not vacuous: the JVM and log4j2 wrote lines of their own, ahead of the first `Dumping` line too.
    assert alone.stderr.count(b"\n") >= 3 and not captured.stdout.startswith(b"Dumping "), alone.stderr
    merged, stdout_only = tmp_path / "orders-0.txt", tmp_path / "stdout" / "orders-0.txt"
    stdout_only.parent.mkdir()
    merged.write_bytes(captured.stdout)
    stdout_only.write_bytes(alone.stdout)
    found = discover([merged, stdout_only])
    assert [type(f) for f in found] == [DumpLogText, DumpLogText]
    assert found[0].dumped == found[1].dumped == str(files[0])
    rows, expected = list(read_dump_log_text(merged)), list(read_dump_log_text(stdout_only))
    assert not [r for r in rows if isinstance(r, DecodeError)]
    assert [fields_in_text(r) for r in rows] == [fields_in_text(r) for r in expected]
    assert sum(isinstance(r, Record) for r in rows) > 0


def test_the_tools_exception_on_a_segments_tail_is_the_segments_finding(tmp_path: Path) -> None:
    """The tool stops with an exception on bytes it cannot read (here a zero length after the last
    batch: the preallocated tail of an active segment dumped in place). Captured with `2>&1`, its line
    was an unreadable line of the text, and the segment had nothing after its last batch. It is one
    TRUNCATED_TAIL of the segment at that batch's end, naming what the tool said; the batches before
    it read as the binary decoders read them."""
    source = next(p for p in dumped_files(REAL) if p.suffix == ".log" and p.stat().st_size > 1000)
    segment = tmp_path / source.parent.name / source.name
    segment.parent.mkdir()
    segment.write_bytes(source.read_bytes() + bytes(200))
    captured = captured_with_stderr(tool_command([segment], "--deep-iteration"))
    assert captured.returncode != 0 and b"CorruptRecordException" in captured.stdout, captured.stdout[-500:]
    text = tmp_path / "dump.txt"
    text.write_bytes(captured.stdout)
    rows = list(read_dump_log_text(text))
    errors = [r for r in rows if isinstance(r, DecodeError)]
    binary = [r for r in read_log_segment(segment, records=True) if not isinstance(r, DecodeError)]
    assert [fields_in_text(r) for r in rows if not isinstance(r, DecodeError)] == [
        fields_in_text(r) for r in binary
    ]
    assert [(e.file, e.position, e.kind) for e in errors] == [
        (str(segment), source.stat().st_size, CorruptionKind.TRUNCATED_TAIL)
    ], errors
    assert "DumpLogSegments stopped here: CorruptRecordException: Found record size 0" in errors[0].message


def test_a_batch_whose_magic_byte_is_unknown_is_unreadable_as_the_binary_decoders_say(tmp_path: Path) -> None:
    """The magic byte lies outside the CRC: the tool prints the batch (`magic: 5 ... isvalid: true`) and
    its records, read as v2. The binary decoders skip it as unreadable by its length; the text's rows
    were a valid batch of magic 5 and its records. Now the same rows: an UNREADABLE_BATCH over the
    batch's bytes, its records left out, the batches around it read."""
    source = next(
        p
        for p in dumped_files(REAL)
        if p.suffix == ".log" and sum(isinstance(r, BatchHeader) for r in read_log_segment(p)) >= 3
    )
    headers = [r for r in read_log_segment(source) if isinstance(r, BatchHeader)]
    second = headers[1]
    assert second.magic == 2
    segment = tmp_path / source.parent.name / source.name
    segment.parent.mkdir()
    data = bytearray(source.read_bytes())
    data[second.position + 16] = 5
    segment.write_bytes(bytes(data))
    text = tmp_path / "dump.txt"
    text.write_text(run_dump_log_segments([segment], deep_iteration=True))
    assert "magic: 5" in text.read_text()
    rows = list(read_dump_log_text(text))
    binary = list(read_log_segment(segment, records=True))
    assert (
        [(e.position, e.length, e.kind) for e in rows if isinstance(e, DecodeError)]
        == [(e.position, e.length, e.kind) for e in binary if isinstance(e, DecodeError)]
        == [(second.position, second.size_bytes, CorruptionKind.UNREADABLE_BATCH)]
    )
    assert [fields_in_text(r) for r in rows if not isinstance(r, DecodeError)] == [
        fields_in_text(r) for r in binary if not isinstance(r, DecodeError)
    ]


def test_a_deep_dump_that_stops_inside_a_batchs_records_blames_that_batch(tmp_path: Path) -> None:
    """A gzip batch whose CRC holds but whose stream does not inflate (its trailer corrupt): the tool
    prints the batch's line, then dies reading its records. The stop was placed after the batch, as
    if the next, healthy batch were unreadable, and the failed batch counted as read. Now it is the
    failed batch's UNREADABLE_BATCH, as the binary decoders say."""
    import crc32c

    from tests.builders import V2Batch, build_v2

    first = build_v2(V2Batch(base_offset=0, records=[(b"k", b"v0")], producer_id=9, base_sequence=0))
    records = [(b"k", b"x" * 200), (b"k", b"y" * 200)]
    bad = bytearray(
        build_v2(V2Batch(base_offset=1, records=records, codec="gzip", producer_id=9, base_sequence=1))
    )
    bad[-6] ^= 0xFF
    struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
    last = build_v2(V2Batch(base_offset=3, records=[(b"k", b"v3")], producer_id=9, base_sequence=3))
    segment = tmp_path / "orders-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(first + bytes(bad) + last)
    captured = captured_with_stderr(tool_command([segment], "--deep-iteration"))
    assert captured.returncode != 0 and b"GZIP" in captured.stdout, captured.stdout[-800:]
    text = tmp_path / "dump.txt"
    text.write_bytes(captured.stdout)
    errors = [(e.file, e.position, e.kind) for e in read_dump_log_text(text) if isinstance(e, DecodeError)]
    binary = [
        (e.file, e.position, e.kind)
        for e in read_log_segment(segment, records=True)
        if isinstance(e, DecodeError)
    ]
    assert errors == binary == [(str(segment), len(first), CorruptionKind.UNREADABLE_BATCH)]


def test_a_snapshot_the_tool_refuses_is_the_snapshots_corruption(tmp_path: Path) -> None:
    """A producer snapshot whose CRC fails: the tool prints why instead of its entries, a line that was
    an unreadable line of the text. It is the snapshot's SNAPSHOT_CORRUPT, as its binary decode says."""
    source = next(p for p in dumped_files(REAL) if p.suffix == ".snapshot" and p.stat().st_size > 30)
    snapshot = tmp_path / source.parent.name / source.name
    snapshot.parent.mkdir()
    data = bytearray(source.read_bytes())
    data[-3] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    captured = captured_with_stderr(tool_command([snapshot]))
    text = tmp_path / "dump.txt"
    text.write_bytes(captured.stdout)
    errors = [(e.file, e.kind) for e in read_dump_log_text(text) if isinstance(e, DecodeError)]
    binary = [(e.file, e.kind) for e in binary_rows(snapshot) if isinstance(e, DecodeError)]
    assert errors == binary == [(str(snapshot), CorruptionKind.SNAPSHOT_CORRUPT)], captured.stdout


def test_the_3_9_tools_deprecated_decoder_notice_is_no_unreadable_line() -> None:
    """Kafka 3.8-3.9 print `kafka.serializer.StringDecoder is deprecated. ...` on stdout after each `.log`'s
    `Dumping` line when --value-decoder-class names the old class (as older docs say). The rows are the
    binary decoders' all the same (the records' printed values aside)."""
    version = ZK_KAFKA_VERSION
    ensure_kafka_jars(version)
    segment = REAL / "codecrafters-kraft-3x" / "foo-0" / "00000000000000000000.log"
    args = ["--print-data-log", "--value-decoder-class", "kafka.serializer.StringDecoder"]
    text = run_dump_log_segments([segment, segment], deep_iteration=True, extra_args=args, version=version)
    assert text.count("kafka.serializer.StringDecoder is deprecated.") == 2, text[:1000]
    rows = list(parse_dump_log_text(text.splitlines(keepends=True)))
    # The second copy of the file is one error at its `Dumping` line, not read, and no other line is.
    (again,) = [r for r in rows if isinstance(r, DecodeError)]
    assert "is dumped again" in again.message
    batches = [fields_in_text(r) for r in rows if isinstance(r, BatchHeader)]
    binary = [fields_in_text(r) for r in read_log_segment(segment) if isinstance(r, BatchHeader)]
    assert binary and batches == binary


def test_payloads_ending_in_carriage_returns_read_as_the_binary_decoders_read_them(tmp_path: Path) -> None:
    """Values ending in `\r` (kafka-python's builder writes them), printed by the real tool with
    `--print-data-log`: the tool ends its lines with `\n`, so the `\r` before it is the value's, not a
    CRLF line end; a copy of the same text saved with CRLF line ends reads the same."""
    from tests.builders import V2Batch, build_v2

    values = (b"a\r", b"b\r\r", b"c")
    segment = tmp_path / "orders-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(build_v2(V2Batch(records=tuple((b"k", v) for v in values))))
    done = subprocess.run(
        tool_command([segment], "--deep-iteration", "--print-data-log"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=600,
        check=True,
    )
    assert b"payload: a\r\n" in done.stdout, done.stdout[-500:]
    binary = [r.value for r in read_log_segment(segment, records=True) if isinstance(r, Record)]
    assert binary == list(values)
    for name, text in (("lf.txt", done.stdout), ("crlf.txt", done.stdout.replace(b"\n", b"\r\n"))):
        (tmp_path / name).write_bytes(text)
        rows = list(read_dump_log_text(tmp_path / name))
        assert [r.value for r in rows if isinstance(r, Record)] == binary, (name, rows)
        assert [r for r in rows if isinstance(r, DecodeError)] == [], name
