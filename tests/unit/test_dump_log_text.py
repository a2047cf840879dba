"""`kafka-dump-log.sh` text → rows: golden dumps of every format variant (formats §6.4), the rows
the binary decoders give for the same segments, and text that is not what the tool prints.

Set DUMP_LOG_TEXT_UPDATE_GOLDEN=1 to rewrite the `*.expected.json` files (then review the diff).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_log_decoder.constants import CONTROL_FLAG_MASK
from kafka_log_decoder.dump import iter_file_items
from kafka_log_decoder.dump_log_text import (
    DumpLogItem,
    fields_in_text,
    parse_dump_log_text,
    read_dump_log_text,
)
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.rows import (
    BatchHeader,
    IndexEntry,
    Record,
    SnapshotEntry,
    TimeIndexEntry,
    TxnIndexEntry,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "dump_log_text"
GOLDEN_TEXTS = sorted(GOLDEN.glob("*.txt"))
UPDATE = os.environ.get("DUMP_LOG_TEXT_UPDATE_GOLDEN") == "1"

# A real 4.3.1 batch line and record line (kafka-4.3.1-java-deep-iteration.txt), reused below.
V2_BATCH = (
    "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 1000 "
    "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000002 size: 88 magic: 2 "
    "compresscodec: none crc: 179343200 isvalid: true"
)
MARKER_BATCH = (
    "baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1000 "
    "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true "
    "deleteHorizonMs: OptionalLong.empty position: 88 CreateTime: 1700000000100 size: 78 magic: 2 "
    "compresscodec: none crc: 321896316 isvalid: true"
)


def record_line(offset: int, tail: str = "", key_size: int = -1, value_size: int = 2) -> str:
    return (
        f"| offset: {offset} CreateTime: 170000000000{offset} keySize: {key_size} valueSize: {value_size} "
        f"sequence: {offset} headerKeys: []{tail}"
    )


def parse(*lines: str) -> list[Any]:
    return list(parse_dump_log_text(lines, source="dump.txt"))


def log_dump(*lines: str) -> list[Any]:
    return parse("Dumping orders-3/00000000000000000000.log", "Log starting offset: 0", *lines)


def of_type(items: list[Any], kind: type) -> list[Any]:
    return [i for i in items if isinstance(i, kind)]


def golden_lines(path: Path) -> Iterator[str]:
    with path.open("rb") as f:
        for raw in f:
            yield raw.decode("utf-8", "surrogateescape")


def to_json(item: DumpLogItem) -> dict[str, Any]:
    out = {"type": type(item).__name__, **dataclasses.asdict(item)}
    for name, value in out.items():
        if isinstance(value, bytes):
            out[name] = value.decode("utf-8", "surrogateescape")
        elif isinstance(value, CorruptionKind):
            out[name] = value.value
    return out


# ---------------------------------------------------------------- golden files, one per variant


@pytest.mark.parametrize("text", GOLDEN_TEXTS, ids=lambda p: p.stem)
def test_golden_dump_parses_to_its_expected_rows(text: Path) -> None:
    rows = [to_json(i) for i in parse_dump_log_text(golden_lines(text), source=text.name)]
    expected_path = text.with_suffix(".expected.json")
    if UPDATE:
        expected_path.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    expected = json.loads(expected_path.read_text())
    assert len(rows) == len(expected), f"{len(rows)} rows, expected {len(expected)}"
    for n, (got, want) in enumerate(zip(rows, expected, strict=True)):
        assert got == want, f"row {n}: differs in {sorted(k for k in want if got.get(k) != want[k])}"


@pytest.mark.parametrize("text", [p for p in GOLDEN_TEXTS if p.name != "garbage-and-partial-lines.txt"])
def test_tool_output_of_every_variant_parses_without_unreadable_lines(text: Path) -> None:
    unreadable = [
        i
        for i in parse_dump_log_text(golden_lines(text))
        if isinstance(i, DecodeError) and i.kind is CorruptionKind.UNREADABLE_BATCH
    ]
    assert unreadable == []


def test_every_golden_has_its_expected_rows_file() -> None:
    assert GOLDEN_TEXTS, GOLDEN
    assert [p for p in GOLDEN_TEXTS if not p.with_suffix(".expected.json").is_file()] == []


# ------------------------------------------- the same segments through the binary decoders
#
# Every variant below renders segments/orders-3 and segments/legacy-0. What a variant cannot
# know is stated as a change to the binary rows; everything else must be equal.

Rows = list[Any]


def without_records(rows: Rows) -> Rows:
    """Shallow dumps (and --skip-record-metadata) print no record metadata."""
    return [r for r in rows if not isinstance(r, Record)]


def without_control_types(rows: Rows) -> Rows:
    """The control type is only printed on the control record's line."""
    return [
        dataclasses.replace(r, control_type=None, coordinator_epoch=None) if _is_batch(r) else r for r in rows
    ]


def pre_2_2_deep(rows: Rows) -> Rows:
    """≤ 2.1 deep dumps have no batch lines: no CRC, leader epoch, or size of a file's last batch."""
    out: Rows = []
    last_batch: dict[str, BatchHeader] = {}
    for r in rows:
        if _is_batch(r):
            r = dataclasses.replace(r, crc=0, partition_leader_epoch=-1)
            last_batch[r.file] = r
        elif isinstance(r, DecodeError) and r.kind is CorruptionKind.TRUNCATED_TAIL:
            r = dataclasses.replace(r, position=last_batch[r.file].position)
        out.append(r)
    for header in last_batch.values():
        out[out.index(header)] = dataclasses.replace(header, size_bytes=-1)
    return out


def snapshot_without_last_timestamp(rows: Rows) -> Rows:
    """Before 3.1 a snapshot entry's timestamp is printed only with its batch part."""
    return [
        dataclasses.replace(r, timestamp=-1) if isinstance(r, SnapshotEntry) and r.last_offset < 0 else r
        for r in rows
    ]


def _is_batch(row: Any) -> bool:
    return isinstance(row, BatchHeader)


# A shallow line of a legacy wrapper names its last offset only; on these uncompacted segments its first
# offset and count follow from the previous entry's, as the binary decoders read them.
SHALLOW = (without_records, without_control_types)
WHAT_EACH_VARIANT_CANNOT_KNOW: dict[str, tuple[Callable[[Rows], Rows], ...]] = {
    "kafka-0.11-shallow": SHALLOW,
    "kafka-2.0-shallow": SHALLOW,
    "kafka-2.1-shallow": SHALLOW,
    "kafka-2.1-deep-iteration-print-data-log": (pre_2_2_deep,),
    "kafka-2.2-2.7-print-data-log": (snapshot_without_last_timestamp,),
    "kafka-2.8-print-data-log": (),
    "kafka-3.0-deep-iteration": (snapshot_without_last_timestamp,),
    "kafka-3.3-3.4-print-data-log": (),
    "kafka-3.5-3.9-print-data-log": (),
    "kafka-3.5-3.9-skip-record-metadata": SHALLOW,
    "kafka-4.3.1-java-deep-iteration": (),
    "kafka-4.3.1-java-print-data-log": (),
    "kafka-4.3.1-java-shallow": SHALLOW,
    "kafka-4.3.1-java-skip-record-metadata": SHALLOW,
}
# Up to 2.7 the default decoder printed neither key nor payload of a record with a null value.
KEY_HIDDEN_WITH_NULL_VALUE = {"kafka-2.1-deep-iteration-print-data-log", "kafka-2.2-2.7-print-data-log"}


def comparable(rows: Rows, *, with_payloads: bool) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        fields = fields_in_text(r)
        if with_payloads and isinstance(r, Record):
            fields.update(key=r.key, value=r.value)
        out.append(fields)
    return out


@pytest.mark.parametrize("variant", sorted(WHAT_EACH_VARIANT_CANNOT_KNOW))
def test_variant_gives_the_binary_decoders_rows_less_what_it_does_not_print(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = GOLDEN / f"{variant}.txt"
    monkeypatch.chdir(GOLDEN)  # the dumps name their files relative to this folder
    dumped = [
        line[len("Dumping ") :].rstrip("\n") for line in golden_lines(text) if line.startswith("Dumping ")
    ]
    binary: Rows = [item for file in dumped for item in iter_file_items(Path(file), records=True)]
    for change in WHAT_EACH_VARIANT_CANNOT_KNOW[variant]:
        binary = change(binary)
    with_payloads = "print-data-log" in variant
    if variant in KEY_HIDDEN_WITH_NULL_VALUE:
        binary = [
            dataclasses.replace(r, key=None) if isinstance(r, Record) and r.value is None else r
            for r in binary
        ]
    parsed = list(read_dump_log_text(text.name))
    assert comparable(parsed, with_payloads=with_payloads) == comparable(binary, with_payloads=with_payloads)


def test_spec_6_3_example_batch_lines_are_what_kafka_4_3_1_printed() -> None:
    """The §6.3 lines were built from format strings; the real tool printed the same bytes."""
    spec = (GOLDEN / "spec-6.3-example-lines.txt").read_text().splitlines()[1:8]
    real = (GOLDEN / "kafka-4.3.1-java-print-data-log.txt").read_text().splitlines()[1:8]
    assert spec == real


# ------------------------------------------------------------------------- behaviours


def test_key_and_payload_are_cut_by_the_key_size_when_both_contain_the_markers() -> None:
    (record,) = of_type(
        log_dump(V2_BATCH, record_line(0, " key: k payload: 1 payload: v key: x", key_size=12, value_size=9)),
        Record,
    )
    assert (record.key, record.value) == (b"k payload: 1", b"v key: x")


def test_payload_cut_falls_back_to_the_value_size() -> None:
    # Key bytes that were not UTF-8 print as U+FFFD, so the key size no longer matches.
    (record,) = of_type(
        log_dump(V2_BATCH, record_line(0, " key: \ufffd payload: a payload: b", key_size=1, value_size=12)),
        Record,
    )
    assert (record.key, record.value) == ("\ufffd".encode(), b"a payload: b")


def test_payload_with_a_newline_continues_on_the_next_lines() -> None:
    items = log_dump(
        V2_BATCH, record_line(0, " payload: line one", value_size=22), "", "line three", record_line(1)
    )
    records = of_type(items, Record)
    assert [r.value for r in records] == [b"line one\n\nline three", None]
    assert of_type(items, DecodeError) == []


def test_a_payload_ending_in_a_carriage_return_keeps_it_unless_the_text_has_crlf_line_ends() -> None:
    """The tool ends its lines with `\n`: a `\r` before it is the payload's last byte. A copy saved with
    CRLF line ends (its first line, the tool's `Dumping` line, says so) has one on every line."""
    lines = [
        "Dumping orders-3/00000000000000000000.log",
        "Log starting offset: 0",
        V2_BATCH,
        record_line(0, " payload: a\r", value_size=2),
        record_line(1, " payload: b", value_size=1),
    ]
    lf = parse(*[line + "\n" for line in lines])
    assert [r.value for r in of_type(lf, Record)] == [b"a\r", b"b"]
    crlf = parse(*[line.removesuffix("\r") + "\r\n" for line in lines])
    assert [r.value for r in of_type(crlf, Record)] == [b"a", b"b"]
    assert of_type(lf, DecodeError) == of_type(crlf, DecodeError) == []


def test_a_binary_payload_printed_lossy_continues_past_its_size_on_the_next_lines() -> None:
    """Bytes that are not UTF-8 print as U+FFFD, 3 bytes each: b"\\xff\\xfeab\\ncd" (7 bytes) prints
    a first line of 8 bytes, already past the value size; its next line is still its own (not an
    unreadable batch on a clean log)."""
    items = log_dump(V2_BATCH, record_line(0, " payload: \ufffd\ufffdab", value_size=7), "cd", record_line(1))
    assert [r.value for r in of_type(items, Record)] == ["\ufffd\ufffdab\ncd".encode(), None]
    assert of_type(items, DecodeError) == []
    # Past what the value can hold, even with each U+FFFD one byte: not its line (an error here).
    items = log_dump(V2_BATCH, record_line(0, " payload: \ufffdab", value_size=3), "garbage", record_line(1))
    assert [r.value for r in of_type(items, Record)] == ["\ufffdab".encode(), None]
    assert len(of_type(items, DecodeError)) == 1


def test_a_tool_line_is_never_taken_as_payload_continuation() -> None:
    items = log_dump(V2_BATCH, record_line(0, " payload: cut", value_size=50), record_line(1))
    assert [r.offset for r in of_type(items, Record)] == [0, 1]


def test_decoder_tombstone_payload_is_cut_from_the_key() -> None:
    (record,) = of_type(
        log_dump(
            V2_BATCH, record_line(0, ' key: {"group":"g"} payload: <DELETE>', key_size=20, value_size=-1)
        ),
        Record,
    )
    assert (record.key, record.value) == (b'{"group":"g"}', b"<DELETE>")


def test_header_keys_are_split_on_commas_and_may_hold_spaces_and_brackets() -> None:
    line = record_line(0).replace("headerKeys: []", "headerKeys: [trace id,a]b,] payload: x") + "y"
    (record,) = of_type(log_dump(V2_BATCH, line), Record)
    assert record.header_keys == ["trace id", "a]b", ""]
    assert record.value == b"xy"


def test_a_header_key_holding_colon_space_is_one_key_with_or_without_a_payload() -> None:
    """`headerKeys: [X-Trace: id]` (the tool joins the keys as they are): the line is not all pairs."""
    for tail, value in (("", None), (" payload: v0", b"v0")):
        line = record_line(0).replace("headerKeys: []", "headerKeys: [X-Trace: id]") + tail
        (record,) = of_type(log_dump(V2_BATCH, line), Record)
        assert (record.header_keys, record.value) == (["X-Trace: id"], value)


def test_a_payload_of_chained_exceptions_is_read_in_linear_time() -> None:
    """A payload of `Name: ` tokens that ends in plain words (an error or dead-letter topic) once sent
    the pairs-only pattern into trying every split of its tokens: 21 s at five tokens, 15 times more
    for each further one, holding the GIL. Forty tokens are read at once: in a child process with a
    deadline, so that a regression fails this test instead of stalling the suite."""
    import subprocess
    import sys

    chain = " ".join(["ConnectException:"] * 40) + " Connection reset by peer"
    payload = f"ERROR: java.lang.RuntimeException: {chain}"
    line = record_line(0, f" payload: {payload}", value_size=len(payload))
    program = (
        "import sys\n"
        "from kafka_log_decoder.dump_log_text import parse_dump_log_text\n"
        "from kafka_log_decoder.rows import Record\n"
        "items = list(parse_dump_log_text(sys.stdin.read().splitlines(keepends=True)))\n"
        "print(*[i.value.decode() for i in items if isinstance(i, Record)], sep='\\n')\n"
    )
    text = "\n".join(["Dumping orders-3/00000000000000000000.log", V2_BATCH, line]) + "\n"
    try:
        done = subprocess.run(
            [sys.executable, "-c", program], input=text, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the record line was not read within 60 s")
    assert done.returncode == 0, done.stderr
    assert done.stdout == payload + "\n"


def test_record_lines_without_metadata_print_no_records() -> None:
    items = log_dump(V2_BATCH, "| key: k payload: v", "| payload: v", " payload: v", "continued", "")
    assert [type(i) for i in items] == [BatchHeader]


def test_control_record_sets_the_batch_control_type_and_yields_no_record() -> None:
    items = log_dump(MARKER_BATCH, record_line(3, " endTxnMarker: ABORT coordinatorEpoch: 7", 4, 6))
    (header,) = items
    assert (header.is_control, header.control_type, header.coordinator_epoch) == (True, "ABORT", 7)


@pytest.mark.parametrize(
    ("suffix", "control_type"),
    [
        (' LeaderChange: {"version":0,"leaderId":1,"voters":[],"grantingVoters":[]}', "LEADER_CHANGE"),
        (" controlType: LEADER_CHANGE(2)", "LEADER_CHANGE"),
        (' SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}', "SNAPSHOT_HEADER"),
        (' SnapshotFooter {"version":0}', "SNAPSHOT_FOOTER"),
        (' KRaftVersion {"version":0,"kRaftVersion":1}', "KRAFT_VERSION"),
        (' KRaftVoters {"version":0,"voters":[]}', "KRAFT_VOTERS"),
        (" controlType: UNKNOWN(-1)", "UNKNOWN"),
        (" controlType: UNKNOWN(42)", "UNKNOWN"),
    ],
)
def test_every_printed_control_record_form_names_its_control_type(suffix: str, control_type: str) -> None:
    (header,) = log_dump(
        MARKER_BATCH.replace("isTransactional: true", "isTransactional: false"), record_line(3, suffix, 4, 6)
    )
    assert (header.control_type, header.coordinator_epoch) == (control_type, None)


def test_record_of_a_batch_before_2_1_reveals_a_control_batch() -> None:
    batch = MARKER_BATCH.replace(" isControl: true", "").replace(" deleteHorizonMs: OptionalLong.empty", "")
    (header,) = log_dump(batch, record_line(3, " endTxnMarker: COMMIT coordinatorEpoch: 0", 4, 6))
    assert header.is_control and header.attributes & CONTROL_FLAG_MASK


def test_legacy_entry_takes_its_first_offset_and_count_from_its_records() -> None:
    items = log_dump(
        "offset: 3 position: 67 CreateTime: 1500000000101 size: 97 magic: 1 compresscodec: gzip "
        "crc: 1861557996 isvalid: true",
        "| offset: 2 CreateTime: 1500000000100 keySize: -1 valueSize: 40 isValid: true crc: 4164576743}",
        "| offset: 3 CreateTime: 1500000000101 keySize: -1 valueSize: 40 isValid: true crc: 2826105118}",
    )
    header = items[0]
    assert (header.base_offset, header.last_offset, header.count, header.attributes) == (2, 3, 2, 1)
    assert [r.sequence for r in of_type(items, Record)] == [-1, -1]


def test_shallow_legacy_wrapper_starts_after_the_previous_entry_of_its_file() -> None:
    """A shallow legacy line names the entry's last offset only. A compressed wrapper's messages follow
    the previous entry's (the file's base offset for the first); an uncompressed entry is one message,
    whatever lies before it (here a gap, as the log cleaner leaves)."""
    lines = (
        "offset: 12 position: 0 CreateTime: 1500000000100 size: 97 magic: 1 compresscodec: gzip "
        "crc: 1861557996 isvalid: true",
        "offset: 13 position: 97 CreateTime: 1500000000100 size: 50 magic: 1 compresscodec: none "
        "crc: 1861557996 isvalid: true",
        "offset: 16 position: 147 LogAppendTime: 1500000000101 size: 97 magic: 1 compresscodec: GZIP "
        "crc: 1861557996 isvalid: true",
        "offset: 20 position: 244 NoTimestampType: -1 size: 40 magic: 0 compresscodec: none "
        "crc: 1861557996 isvalid: true",
    )
    headers = parse("Dumping orders-3/00000000000000000010.log", "Log starting offset: 10", *lines)
    assert [(h.base_offset, h.last_offset, h.count) for h in headers] == [
        (10, 12, 3),
        (13, 13, 1),
        (14, 16, 3),
        (20, 20, 1),
    ]
    third = headers[2]
    assert (third.producer_id, third.partition_leader_epoch) == (-1, -1)
    assert (third.timestamp_type, third.attributes, third.compression) == ("LogAppendTime", 0x09, "gzip")


def test_pre_2_2_deep_lines_make_one_batch_per_position() -> None:
    deep = (
        "offset: {o} position: {p} CreateTime: 170000000000{o} isvalid: true keysize: -1 valuesize: 2 "
        "magic: 2 compresscodec: NONE producerId: 7 producerEpoch: 1 sequence: {o} isTransactional: false "
        "headerKeys: []"
    )
    items = parse(
        "Dumping t-0/00000000000000000000.log",
        "Starting offset: 0",
        deep.format(o=0, p=0),
        deep.format(o=1, p=0),
        deep.format(o=2, p=80),
        "Found 5 invalid bytes at the end of 00000000000000000000.log",
    )
    headers = of_type(items, BatchHeader)
    assert [(h.position, h.base_offset, h.last_offset, h.count, h.size_bytes) for h in headers] == [
        (0, 0, 1, 2, 80),
        (80, 2, 2, 1, -1),
    ]
    assert [(h.base_sequence, h.last_sequence, h.max_timestamp, h.producer_id) for h in headers] == [
        (0, 1, 1700000000001, 7),
        (2, 2, 1700000000002, 7),
    ]
    assert [(r.offset, r.batch_position) for r in of_type(items, Record)] == [(0, 0), (1, 0), (2, 80)]
    (tail,) = of_type(items, DecodeError)
    assert (tail.kind, tail.position, tail.length) == (CorruptionKind.TRUNCATED_TAIL, 80, 5)


def test_trailing_bytes_are_a_truncated_tail_at_the_end_of_the_last_batch() -> None:
    items = log_dump(V2_BATCH, "Found 10 invalid bytes at the end of 00000000000000000000.log")
    tail = items[-1]
    assert (tail.file, tail.kind, tail.position, tail.length) == (
        "orders-3/00000000000000000000.log",
        CorruptionKind.TRUNCATED_TAIL,
        88,
        10,
    )


def test_trailing_bytes_of_a_log_without_batches_start_at_zero() -> None:
    (tail,) = log_dump("Found 7 invalid bytes at the end of 00000000000000000000.log")
    assert (tail.position, tail.length) == (0, 7)


def test_invalid_batch_crc_is_followed_by_a_crc_mismatch() -> None:
    header, error = log_dump(V2_BATCH.replace("isvalid: true", "isvalid: false"))
    assert not header.crc_valid
    assert (error.kind, error.position, error.length) == (CorruptionKind.CRC_MISMATCH, 0, 88)


def test_delete_horizon_sets_its_attribute_bit_and_value() -> None:
    (header,) = log_dump(V2_BATCH.replace("OptionalLong.empty", "OptionalLong[1700000099999]"))
    assert (header.delete_horizon_ms, header.attributes) == (1700000099999, 0x40)


@pytest.mark.parametrize(
    ("printed", "codec"),
    [("NONE", "none"), ("GZIP", "gzip"), ("snappy", "snappy"), ("LZ4", "lz4"), ("zstd", "zstd")],
)
def test_codec_names_are_read_in_either_case(printed: str, codec: str) -> None:
    (header,) = log_dump(V2_BATCH.replace("compresscodec: none", f"compresscodec: {printed}"))
    assert header.compression == codec


def test_batch_lines_before_1_0_without_count_count_their_offsets() -> None:
    (header,) = log_dump(V2_BATCH.replace(" count: 3", ""))
    assert header.count == 3


@pytest.mark.parametrize(
    ("printed", "offset"),
    [("OptionalLong.empty", -1), ("OptionalLong[5]", 5), ("None", -1), ("Some(5)", 5)],
)
def test_current_txn_first_offset_in_java_and_scala_forms(printed: str, offset: int) -> None:
    (entry,) = parse(
        "Dumping p-0/00000000000000000120.snapshot",
        f"producerId: 9 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: {printed} "
        "lastTimestamp: 17 firstSequence: 0 lastSequence: 3 lastOffset: 118 offsetDelta: 3 timestamp: 17",
    )
    assert (entry.current_txn_first_offset, entry.snapshot_offset, entry.last_offset) == (offset, 120, 118)


def test_a_snapshot_dumped_on_windows_takes_its_offset_from_the_name_after_the_last_backslash() -> None:
    (entry,) = parse(
        "Dumping C:\\kafka-logs\\p-0\\00000000000000000120.snapshot",
        "producerId: 9 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: None lastTimestamp: 17 "
        "firstSequence: 0 lastSequence: 3 lastOffset: 118 offsetDelta: 3 timestamp: 17",
    )
    assert (entry.snapshot_offset, entry.last_offset) == (120, 118)


def test_a_tool_summary_or_a_stderr_log_line_ends_a_payload_shorter_than_its_size() -> None:
    """A decoder's output (--offsets-decoder, a custom class) is often shorter than the record's size, so
    the record waits for continuation lines: the tool's timestamp-index summary printed after the last
    file, or a log line on stderr (2>&1), is not one of them."""
    key = "Unknown record type 99 at offset 0, skipping."
    for after in (
        "Found timestamp mismatch in :/d/__consumer_offsets-0/00000000000000000000.timeindex",
        "[2026-11-30 16:23:22,601] WARN something (org.apache.kafka.tools.DumpLogSegments)",
    ):
        items = log_dump(
            V2_BATCH,
            record_line(0, f" key: {key} payload: <DELETE>", key_size=80, value_size=30),
            after,
            "  Index timestamp: 5, log timestamp: 6",
        )
        (record,) = of_type(items, Record)
        assert (record.key, record.value) == (key.encode(), b"<DELETE>")
        assert not of_type(items, DecodeError)


def test_a_text_cut_inside_its_last_line_reads_none_of_that_line(tmp_path: Path) -> None:
    """The tool ends every line with a newline: a saved text whose last line has none was cut short
    (a copy, a full disk), and that line's values may be cut too (`sequence: 1` of `sequence: 17`). It
    is a TRUNCATED_TAIL located at the line in the text, and nothing of it is read."""
    head = f"Dumping orders-3/00000000000000000000.log\nLog starting offset: 0\n{V2_BATCH}\n"
    whole = record_line(0, " payload: v0")
    # A record line cut after a whole one; a second batch's line cut.
    for before, cut, number in ((f"{whole}\n", whole[:60], 5), (f"{whole}\n", V2_BATCH[:70], 5)):
        text = tmp_path / "dump.txt"
        text.write_text(head + before + cut)
        items = list(read_dump_log_text(text))
        (error,) = of_type(items, DecodeError)
        assert [type(i) for i in items if i is not error] == [BatchHeader, Record]
        assert of_type(items, Record)[0].value == b"v0"
        assert (error.kind, error.file, error.length) == (CorruptionKind.TRUNCATED_TAIL, str(text), len(cut))
        assert error.position == len((head + before).encode())
        assert error.message.startswith(f"line {number}: the text ends inside this line")
    # Lines given without newlines (an API caller's list) are whole lines.
    assert [type(i) for i in log_dump(V2_BATCH, whole)] == [BatchHeader, Record]


def test_a_payload_holding_log_lines_keeps_them_where_its_size_says_they_are_its_own() -> None:
    """A topic of application logs: the payload's second line looks like a log4j line (or a JVM warning),
    and is still the payload's where the value's size holds it; only a line the size cannot hold ends
    a payload printed short."""
    for second in (
        "[2024-05-01 10:00:00,123] INFO connected (com.acme.Client)",
        "2024-05-01T10:00:00.123Z worker-1 ERROR lost",
        "OpenJDK 64-Bit Server VM warning: x",
        "Found timestamp mismatch in :x",
    ):
        payload = f"first log line\n{second}"
        line = record_line(0, " payload: first log line", value_size=len(payload.encode()))
        (record,) = of_type(log_dump(V2_BATCH, line, second), Record)
        assert record.value == payload.encode()


def test_lines_split_inside_a_payload_are_not_a_cut_text() -> None:
    """`text.splitlines(keepends=True)` also ends a line at `\r`, `\x0b`, `\u2028` ... inside a payload,
    with no newline after it: only the text's last line can have been cut short."""
    payload = "a\rb\u2028c"
    text = (
        "\n".join(
            [
                "Dumping orders-3/00000000000000000000.log",
                V2_BATCH,
                record_line(0, f" payload: {payload}", value_size=len(payload.encode())),
            ]
        )
        + "\n"
    )
    items = list(parse_dump_log_text(text.splitlines(keepends=True), source="dump.txt"))
    assert not of_type(items, DecodeError)
    (record,) = of_type(items, Record)
    assert record.value == payload.encode()


def test_a_file_dumped_twice_in_one_text_is_read_once() -> None:
    """`--files a.log,a.log`, or two runs' output concatenated: the second copy is one UNREADABLE_FILE
    at its `Dumping` line, none of its lines read (else one log would hold every batch twice). The same
    name in another partition's directory, or another file of the same base offset, is another file."""
    record = record_line(0, " payload: v0")
    section = ["Dumping /d/orders-3/00000000000000000000.log", "Log starting offset: 0", V2_BATCH, record]
    other = ["Dumping /d/orders-4/00000000000000000000.log", V2_BATCH]
    again = ["Dumping /d/./orders-3//00000000000000000000.log", V2_BATCH, record, "| stray"]
    elsewhere = ["Dumping /b2/orders-3/00000000000000000000.log", V2_BATCH]
    items = parse(*section, *other, *again, *elsewhere, "Dumping /d/orders-3/00000000000000000000.index")
    assert [
        (type(i).__name__, getattr(i, "file", None)) for i in items if not isinstance(i, DecodeError)
    ] == [
        ("BatchHeader", "/d/orders-3/00000000000000000000.log"),
        ("Record", "/d/orders-3/00000000000000000000.log"),
        ("BatchHeader", "/d/orders-4/00000000000000000000.log"),
    ]
    error, other_copy = of_type(items, DecodeError)
    assert (error.kind, error.file) == (CorruptionKind.UNREADABLE_FILE, "dump.txt")
    line_7 = sum(len(line) + 1 for line in (*section, *other))
    assert (error.position, error.length) == (line_7, len(again[0]) + 1)
    assert error.message.startswith(
        "line 7: /d/./orders-3//00000000000000000000.log is dumped again (first at line 1)"
    )
    # Another broker's copy of the partition in the same text: said so, and not read either.
    assert other_copy.message.startswith(
        "line 11: /b2/orders-3/00000000000000000000.log is the same partition's file as "
        "/d/orders-3/00000000000000000000.log (line 1), another broker's"
    )


def test_snapshot_entry_without_a_batch_has_no_last_sequence_or_offset() -> None:
    (entry,) = parse(
        "Dumping p-0/00000000000000000120.snapshot",
        "producerId: 9 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: None lastTimestamp: 17 ",
    )
    assert (entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp) == (-1, -1, 0, 17)


def test_snapshot_entry_before_3_1_takes_the_batch_timestamp() -> None:
    (entry,) = parse(
        "Dumping p-0/00000000000000000120.snapshot",
        "producerId: 9 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: None "
        "firstSequence: 0 lastSequence: 3 lastOffset: 118 offsetDelta: 3 timestamp: 99",
    )
    assert entry.timestamp == 99


def test_stray_brace_after_a_scala_legacy_crc_is_not_part_of_the_number() -> None:
    items = log_dump(
        "offset: 0 position: 0 NoTimestampType: -1 size: 29 magic: 0 compresscodec: none "
        "crc: 1138507695 isvalid: true",
        "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 3 isValid: true "
        "crc: 1138507695} payload: abc",
    )
    assert [type(i) for i in items] == [BatchHeader, Record]
    assert items[1].value == b"abc"


def test_tool_notes_and_captured_stderr_yield_nothing() -> None:
    items = parse(
        "SLF4J: Failed to load class",
        "Dumping a/00000000000000000000.index",
        "a/00000000000000000000.index is empty.",
        "Dumping a/00000000000000000000.timeindex",
        "a/00000000000000000000.timeindex passed sanity check.",
        "Dumping a/bootstrap.checkpoint",
        "KRaft bootstrap snapshot",
        "Dumping a/00000000000000000010-0000000001.checkpoint",
        "Snapshot end offset: 10, epoch: 1",
        "Ignoring unknown file a/x.deleted",
        "Mismatches in :/abs/a/00000000000000000000.index",
        "  Index offset: 5, log offset: 4",
        "Non-consecutive offsets in /abs/a/00000000000000000000.log",
        "  -1 is followed by 2",
        "Found timestamp mismatch in :/abs/a/00000000000000000000.timeindex",
        "  Index timestamp: 5, log timestamp: 4",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 5, found log offset: -1",
    )
    assert items == []


def test_the_jvms_and_loggers_stderr_lines_captured_with_2_to_1_yield_nothing() -> None:
    """`kafka-dump-log.sh ... > dump.txt 2>&1` with JAVA_TOOL_OPTIONS set and no log4j2 configuration
    found: the first four stderr lines are what the 4.3.1 and 3.9.1 tools printed on this machine; the
    log4j2 status line came after the `Dumping` line. A stderr line between a batch and its records
    leaves the batch whole."""
    batch = (
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 70 magic: 2 "
        "compresscodec: none crc: 1 isvalid: true"
    )
    record = "| offset: 0 CreateTime: 1 keySize: -1 valueSize: 1 sequence: 0 headerKeys: [] payload: x"
    plain = parse("Dumping orders-3/00000000000000000000.log", "Log starting offset: 0", batch, record)
    captured = parse(
        "Picked up JAVA_TOOL_OPTIONS: -XX:+UseBiasedLocking -Xloggc:/tmp/x.gc",
        "OpenJDK 64-Bit Server VM warning: Option UseBiasedLocking was deprecated in version 15.0 and will "
        "likely be removed in a future release.",
        "[0.000s][warning][gc] -Xloggc is deprecated. Will use -Xlog:gc:/tmp/x.gc instead.",
        "SLF4J(W): No SLF4J providers were found.",
        "Dumping orders-3/00000000000000000000.log",
        "2026-11-30T16:23:22.600842573Z main ERROR Reconfiguration failed: No configuration found for "
        "'30946e09' at 'null' in 'null'",
        "Log starting offset: 0",
        batch,
        "[2026-11-30 16:23:22,601] WARN a tool's log line (org.apache.kafka.tools.DumpLogSegments)",
        "log4j:WARN No appenders could be found for logger (kafka.utils.Log4jControllerRegistration$).",
        "WARNING: A terminally deprecated method in java.lang.System has been called",
        record,
    )
    assert [type(i) for i in plain] == [BatchHeader, Record]
    assert captured == plain


def test_unreadable_line_is_located_by_byte_offset_and_line_number_in_the_text() -> None:
    items: list[Any] = list(
        parse_dump_log_text(
            ["Dumping a/00000000000000000000.log\n", "Log starting offset: 0\n", "n\u00e9 pas ça\n"],
            source="d.txt",
        )
    )
    (error,) = items
    assert (error.file, error.kind, error.position, error.length) == (
        "d.txt",
        CorruptionKind.UNREADABLE_BATCH,
        58,
        12,
    )
    assert error.message.startswith("line 3: ")


def test_lines_given_without_newlines_count_one_byte_for_each() -> None:
    (error,) = parse("Dumping a/00000000000000000000.log", "garbage")
    assert (error.position, error.length) == (35, 8)


def test_index_lines_follow_their_dumping_line() -> None:
    items = parse(
        "Dumping a/00000000000000000000.index",
        "offset: 5 position: 166",
        "Dumping a/00000000000000000000.timeindex",
        "timestamp: 1700000000201 offset: 5",
        "Dumping a/00000000000000000000.txnindex",
        "version: 0 producerId: 2001 firstOffset: 4 lastOffset: 6 lastStableOffset: 7",
    )
    assert [to_json(i) for i in items] == [
        {"type": "IndexEntry", "file": "a/00000000000000000000.index", "offset": 5, "position": 166},
        {
            "type": "TimeIndexEntry",
            "file": "a/00000000000000000000.timeindex",
            "timestamp": 1700000000201,
            "offset": 5,
        },
        {
            "type": "TxnIndexEntry",
            "file": "a/00000000000000000000.txnindex",
            "version": 0,
            "producer_id": 2001,
            "first_offset": 4,
            "last_offset": 6,
            "last_stable_offset": 7,
        },
    ]


def test_read_dump_log_text_streams_and_names_the_text_file_in_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "dump.txt"
    path.write_bytes(b"Dumping a/00000000000000000000.log\r\nLog starting offset: 0\r\n\xff garbage\r\n")
    items = read_dump_log_text(path)
    assert iter(items) is items
    rows: list[Any] = list(items)
    (error,) = rows
    assert (error.file, error.position) == (str(path), 60)


# ------------------------------------------------------------------- never raises on any text

ROW_TYPES = (BatchHeader, Record, SnapshotEntry, IndexEntry, TimeIndexEntry, TxnIndexEntry, DecodeError)
_FRAGMENTS = [
    line
    for text in GOLDEN_TEXTS
    for line in (GOLDEN / text.name).read_text("utf-8", "surrogateescape").splitlines()
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_FRAGMENTS),
            st.sampled_from(_FRAGMENTS).flatmap(lambda s: st.integers(0, len(s)).map(lambda n: s[:n])),
            st.text(max_size=80),
            st.builds(
                lambda a, b, c: a[: len(a) // 2] + c + b[len(b) // 2 :],
                st.sampled_from(_FRAGMENTS),
                st.sampled_from(_FRAGMENTS),
                st.sampled_from([" ", ": ", "| ", "[", "]", "}", "-1", "payload: ", "key: ", "\n"]),
            ),
        ),
        max_size=30,
    )
)
def test_any_text_gives_rows_or_decode_errors_never_an_exception(lines: list[str]) -> None:
    for item in parse_dump_log_text(lines):
        assert isinstance(item, ROW_TYPES)


# ------------------------------------------- numbers outside their bronze column, bad batch lines

DEEP_3_0 = GOLDEN / "kafka-3.0-deep-iteration.txt"
# The marker batch of orders-3 in the 3.0 golden dump (its 2nd batch line, 7th line of the text).
MARKER_3_0 = "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true"


def golden_with(path: Path, old: str, new: str) -> tuple[list[str], int]:
    """The golden text's lines with `old` replaced by `new` once, and the index of the line changed."""
    lines = list(golden_lines(path))
    changed = next(n for n, line in enumerate(lines) if old in line)
    lines[changed] = lines[changed].replace(old, new, 1)
    return lines, changed


def byte_position(lines: list[str], n: int) -> int:
    return sum(len(line.encode("utf-8", "surrogateescape")) for line in lines[:n])


def test_schema_widths_of_the_text_fields_are_the_bronze_columns() -> None:
    from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

    from kafka_log_decoder.dump_log_text import _RANGES
    from schemas.tables import BATCHES, PRODUCER_SNAPSHOTS, RECORDS, TXN_INDEX

    bits = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}
    for row_type, spec in (
        (BatchHeader, BATCHES),
        (Record, RECORDS),
        (SnapshotEntry, PRODUCER_SNAPSHOTS),
        (TxnIndexEntry, TXN_INDEX),
    ):
        columns = {f.name: f.dataType for f in spec.schema.fields}
        for name, low, high in _RANGES[row_type]:
            if name in columns:
                width = bits[type(columns[name])]
                assert (low, high) == (-(2 ** (width - 1)), 2 ** (width - 1) - 1), (row_type, name)


def test_a_batch_line_with_a_number_outside_its_column_is_one_unreadable_region_the_rest_kept() -> None:
    lines, n = golden_with(
        DEEP_3_0, MARKER_3_0, MARKER_3_0.replace("producerEpoch: 0", "producerEpoch: 70000")
    )
    assert lines[n + 1].startswith("| offset: 3 ")  # the marker's control record line
    good = list(parse_dump_log_text(golden_lines(DEEP_3_0), source="dump.txt"))
    bad = list(parse_dump_log_text(lines, source="dump.txt"))
    errors = [i for i in bad if isinstance(i, DecodeError) and i.kind is CorruptionKind.UNREADABLE_BATCH]
    assert [(e.file, e.position, e.length) for e in errors] == [
        ("dump.txt", byte_position(lines, n), byte_position(lines, n + 2) - byte_position(lines, n))
    ]
    assert "line 7: producer_epoch 70000 is out of range (-32768 to 32767)" in errors[0].message
    # Every other row as from the unchanged text: the marker batch alone is gone, and its control
    # record did not make the batch before it a control batch.
    assert [i for i in bad if i not in errors] == [
        i
        for i in good
        if not (
            isinstance(i, BatchHeader)
            and i.position == 88
            and i.file.endswith("orders-3/00000000000000000000.log")
        )
    ]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("sequence: 1 headerKeys", "sequence: 2147483648 headerKeys", "sequence 2147483648"),
        ("valueSize: 2 sequence: 1", "valueSize: -2147483649 sequence: 1", "value_size -2147483649"),
        ("| offset: 1 ", "| offset: 9223372036854775808 ", "offset 9223372036854775808"),
        (
            "endTxnMarker: COMMIT coordinatorEpoch: 0",
            "endTxnMarker: COMMIT coordinatorEpoch: 2147483648",
            "coordinator_epoch",
        ),
        (
            "producerId: 1000 producerEpoch: 0 coordinatorEpoch: -1",
            "producerId: 1000 producerEpoch: 32768 coordinatorEpoch: -1",
            "producer_epoch 32768",
        ),
    ],
    ids=[
        "record-sequence",
        "record-value-size",
        "record-offset",
        "marker-coordinator-epoch",
        "snapshot-epoch",
    ],
)
def test_a_line_with_a_number_outside_its_column_is_unreadable_and_the_others_kept(
    old: str, new: str, message: str
) -> None:
    lines, n = golden_with(DEEP_3_0, old, new)
    good = list(parse_dump_log_text(golden_lines(DEEP_3_0), source="dump.txt"))
    bad = list(parse_dump_log_text(lines, source="dump.txt"))
    (error,) = [i for i in bad if isinstance(i, DecodeError) and i.kind is CorruptionKind.UNREADABLE_BATCH]
    assert (error.position, error.length) == (byte_position(lines, n), len(lines[n].encode()))
    assert f"line {n + 1}: {message}" in error.message
    # One row fewer of the line's kind (its batch stays); nothing else changes but the marker's control type.
    kept = [i for i in bad if i is not error]
    assert len(kept) == len(good) - (0 if "coordinatorEpoch: 2147483648" in new else 1)


def test_a_count_computed_from_offsets_past_int32_is_unreadable() -> None:
    # Batch lines before 1.0 print no count: lastOffset - baseOffset + 1 is the count, an int32.
    lines, n = golden_with(
        GOLDEN / "kafka-0.11-shallow.txt",
        "baseOffset: 0 lastOffset: 2 ",
        "baseOffset: 0 lastOffset: 2147483647 ",
    )
    bad = list(parse_dump_log_text(lines, source="dump.txt"))
    (error,) = [i for i in bad if isinstance(i, DecodeError) and i.kind is CorruptionKind.UNREADABLE_BATCH]
    assert error.position == byte_position(lines, n) and "count 2147483648 is out of range" in error.message


def test_a_shallow_legacy_wrapper_past_an_int32_gap_is_one_message_at_its_offset() -> None:
    items = parse(
        "Dumping legacy-0/00000000000000000000.log",
        "offset: 4294967296 position: 0 CreateTime: 1 isvalid: true size: 97 magic: 1 compresscodec: gzip "
        "crc: 1",
    )
    (header,) = of_type(items, BatchHeader)
    assert (header.base_offset, header.last_offset, header.count) == (2**32, 2**32, 1)


def test_a_dumped_file_name_past_int64_has_no_snapshot_offset() -> None:
    items = parse(
        "Dumping orders-3/9999999999999999999.snapshot",  # 19 digits, above 2^63 - 1
        "producerId: 1 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: None",
    )
    (entry,) = of_type(items, SnapshotEntry)
    assert entry.snapshot_offset == -1


# ------------------------------------------- payloads over many lines: linear time, same rows


def _split_key_payload_reference(
    tail: str, key_size: int, value_size: int
) -> tuple[str | None, str | None, bool]:
    """The cut as first written (cubic on long multi-line payloads): the oracle of the linear one."""

    def utf8(text: str) -> int:
        return len(text.encode("utf-8", "surrogateescape"))

    if tail.startswith("payload: "):
        value = tail[len("payload: ") :]
        return None, value, utf8(value) >= value_size
    body = tail[len("key: ") :]
    cuts = [m.start() for m in re.finditer(" payload: ", body)]
    chosen = next((c for c in cuts if utf8(body[:c]) == key_size), None)
    if chosen is None and value_size >= 0:
        chosen = next((c for c in cuts if utf8(body[c + 10 :]) == value_size), None)
        if chosen is None and cuts:
            chosen = cuts[0]
    elif chosen is None and cuts and body.endswith(" payload: <DELETE>"):
        chosen = cuts[-1]
    if chosen is None:
        return body, None, utf8(body) >= key_size and value_size < 0
    key, value = body[:chosen], body[chosen + 10 :]
    return key, value, utf8(key) >= key_size and utf8(value) >= value_size


_TEXT_PIECES = st.sampled_from(
    ["a", "é", "\udcff", " payload: ", "payload: ", " key: ", "<DELETE>", " ", "x" * 7]
)


@settings(max_examples=400, deadline=None)
@given(
    head=st.sampled_from(["key: ", "payload: "]),
    lines=st.lists(st.lists(_TEXT_PIECES, max_size=6).map("".join), min_size=1, max_size=4),
    key_size=st.integers(-1, 40),
    value_size=st.integers(-1, 40),
)
def test_a_payload_over_many_lines_is_cut_as_the_whole_text_would_be(
    head: str, lines: list[str], key_size: int, value_size: int
) -> None:
    from kafka_log_decoder.dump_log_text import _KeyPayloadText

    text = _KeyPayloadText(head + lines[0], key_size, value_size)
    for n, line in enumerate(lines[1:], start=2):
        assert (
            text.complete
            == _split_key_payload_reference(head + "\n".join(lines[: n - 1]), key_size, value_size)[2]
        )
        text.extend(line)
    whole = head + "\n".join(lines)
    key, value, complete = _split_key_payload_reference(whole, key_size, value_size)
    assert (*text.split(), text.complete) == (key, value, complete)


def test_a_payload_of_many_lines_parses_whole() -> None:
    """50,000 continuation lines, each holding ` payload: `, are one record's value (the text is cut
    once, not at every line: that took minutes here; speed itself is the bench's, not a test's)."""
    body = ["x" * 60 + " payload: y"] * 50_000
    payload = "\n".join(body)
    line = record_line(
        0, f" key: a payload: {payload.split(chr(10))[0]}", key_size=1, value_size=len(payload.encode())
    )
    (record,) = of_type(log_dump(V2_BATCH, line, *body[1:]), Record)
    assert (record.key, record.value) == (b"a", payload.encode())


def test_a_payload_line_that_only_starts_like_a_tool_line_stays_in_the_payload() -> None:
    """A 27-byte value `Report:\\n| a | b |\\n| 1 | 2 |` (a Markdown table): its lines start as a record
    line does, yet the size says the value goes on and they are no record line (`| offset: N ...`)."""
    items = log_dump(
        V2_BATCH,
        record_line(0, " payload: Report:", value_size=27),
        "| a | b |",
        "| 1 | 2 |",
        record_line(1, " payload: ok"),
        record_line(2, " payload: z\nproducerId: 5 is fenced", value_size=25).split("\n")[0],
        "producerId: 5 is fenced",
    )
    assert not of_type(items, DecodeError), items
    assert [r.value for r in of_type(items, Record)] == [
        b"Report:\n| a | b |\n| 1 | 2 |",
        b"ok",
        b"z\nproducerId: 5 is fenced",
    ]


def test_a_number_is_read_only_as_the_tool_prints_one() -> None:
    """int() takes `0_2`, `+5` and non-ASCII digits; Long.toString prints none of them."""
    for count in ("0_2", "+3", "\u0663"):
        items = log_dump(V2_BATCH.replace("count: 3", f"count: {count}"))
        (error,) = of_type(items, DecodeError)
        assert error.kind == CorruptionKind.UNREADABLE_BATCH and "count" in error.message
