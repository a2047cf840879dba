"""Memory bounds of a `kafka-dump-log.sh` text's batches: one of more records than
`segment.MAX_BATCH_RECORDS` gives the binary decoders' rows (its header and the error of its records,
none of them), and a large v2 batch's records are given as they are read, not held to its end."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_harness.dump_log_segments import run_dump_log_segments
from kafka_harness.jars import ensure_kafka_jars
from kafka_log_decoder import dump_log_text, segment
from kafka_log_decoder.dump import iter_file_items
from kafka_log_decoder.dump_log_text import fields_in_text, parse_dump_log_text, read_dump_log_text
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import read_log_segment
from tests.unit.test_bounded_record_batches import kafka_batch, write_log
from tests.unit.test_dump_log_text import (
    GOLDEN,
    V2_BATCH,
    WHAT_EACH_VARIANT_CANNOT_KNOW,
    golden_lines,
    log_dump,
    of_type,
    record_line,
    without_records,
)
from tests.unit.test_legacy import null_messages_wrapper

REPO = Path(__file__).resolve().parents[2]


def rows_of(items: list[Any]) -> list[tuple[dict[str, Any], str | None]]:
    """Each row's fields the text carries, and the message of a refusal too (worded by the binary
    decoders' own function; the text words its other errors its own way)."""
    return [(fields_in_text(i), i.message if is_refusal(i) else None) for i in items]


def is_refusal(item: Any) -> bool:
    return isinstance(item, DecodeError) and item.message.endswith(" decoded from one batch")


def parsed(text: str) -> list[Any]:
    return list(parse_dump_log_text(text.splitlines(keepends=True), source="dump.txt"))


# ---------------------------------------------------------------------------------------------
# The same rows as the binary decoders, from Kafka's own DumpLogSegments


@pytest.mark.integration
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_a_v2_batch_over_the_record_cap_gives_the_binary_decoders_rows_from_the_tools_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    """Batches of 10, 11 and 3 records (kafka-python's encoder), the cap at 10: the tool prints all 11
    records of the second; its header and one UNREADABLE_BATCH over its bytes come out, as from the
    binary decoder, and the batches around it keep their records. Held or given as read, the same."""
    ensure_kafka_jars()
    monkeypatch.setattr(segment, "MAX_BATCH_RECORDS", 10)
    batches = [kafka_batch(10, codec=codec), kafka_batch(11, codec=codec, base_offset=10)]
    path = write_log(tmp_path, *batches, kafka_batch(3, codec=codec, base_offset=21))
    text = run_dump_log_segments([path], deep_iteration=True)
    assert text.count("\n| offset: ") == 24
    binary = list(read_log_segment(path, records=True))
    error = DecodeError(
        str(path),
        len(batches[0]),
        CorruptionKind.UNREADABLE_BATCH,
        "11 records: more than the 10 decoded from one batch",
        len(batches[1]),
    )
    assert of_type(binary, DecodeError) == [error]
    assert [h.compression for h in of_type(binary, BatchHeader) if h.count == 11] == [codec]
    assert rows_of(parsed(text)) == rows_of(binary)
    monkeypatch.setattr(dump_log_text, "HELD_RECORDS", 2)
    assert rows_of(parsed(text)) == rows_of(binary)


@pytest.mark.integration
def test_a_legacy_wrapper_over_the_record_cap_gives_the_binary_decoders_rows_from_the_tools_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gzip wrapper of 300 messages, the cap at 200: its entry line names its last offset only, and its
    count comes from its record lines; its header, and the error over its header fields (not its
    bytes), as the binary decoder gives them."""
    ensure_kafka_jars()
    monkeypatch.setattr(segment, "MAX_BATCH_RECORDS", 200)
    path = write_log(tmp_path, null_messages_wrapper(300), kafka_batch(3, base_offset=1300))
    text = run_dump_log_segments([path], deep_iteration=True)
    binary: list[Any] = list(read_log_segment(path, records=True))
    header, error = binary[:2]
    assert (header.magic, header.count, header.base_offset, error.length) == (1, 300, 1000, 26)
    assert error.message == "300 records: more than the 200 decoded from one batch"
    assert rows_of(parsed(text)) == rows_of(binary)


# ---------------------------------------------------------------------------------------------
# Every deep variant of the golden texts, the cap below their batches


def last_refusal_without_length(rows: list[Any]) -> list[Any]:
    """A ≤ 2.1 deep dump does not know the size of a file's last v2 batch (`pre_2_2_deep`), so neither the
    length of its refusal (a legacy entry's is over its header fields, whatever its size)."""
    unsized = {
        (r.file, r.position) for r in rows if isinstance(r, BatchHeader) and r.size_bytes < 0 and r.magic == 2
    }
    return [
        dataclasses.replace(r, length=None) if is_refusal(r) and (r.file, r.position) in unsized else r
        for r in rows
    ]


DEEP_VARIANTS = sorted(
    variant for variant, changes in WHAT_EACH_VARIANT_CANNOT_KNOW.items() if without_records not in changes
)


@pytest.mark.parametrize("variant", DEEP_VARIANTS)
def test_every_deep_variant_refuses_the_batches_the_binary_decoders_refuse(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap at 1: every batch of two records or more (v2 batches, gzip and legacy wrappers; a ≤ 2.1
    dump's batches made from their record lines) is refused as the binary decoders refuse it; control
    batches and one-record entries are not."""
    monkeypatch.setattr(segment, "MAX_BATCH_RECORDS", 1)
    monkeypatch.chdir(GOLDEN)  # the dumps name their files relative to this folder
    text = GOLDEN / f"{variant}.txt"
    dumped = [
        line[len("Dumping ") :].rstrip("\n") for line in golden_lines(text) if line.startswith("Dumping ")
    ]
    binary: list[Any] = [item for file in dumped for item in iter_file_items(Path(file), records=True)]
    changes: list[Callable[[list[Any]], list[Any]]] = list(WHAT_EACH_VARIANT_CANNOT_KNOW[variant])
    if variant.startswith("kafka-2.1-deep"):
        changes.append(last_refusal_without_length)
    for change in changes:
        binary = change(binary)
    refused = [e for e in binary if is_refusal(e)]
    assert len(refused) >= 4 and any(e.file.endswith("legacy-0/00000000000000000000.log") for e in refused)
    assert rows_of(list(read_dump_log_text(text.name))) == rows_of(binary)


@pytest.mark.parametrize("variant", DEEP_VARIANTS)
def test_without_records_a_text_gives_its_headers_and_refuses_no_batch(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A headers-only ingest reads a text without its records: the binary decoders decode no records
    then, and refuse no batch for its count, so the text gives neither (its record lines still complete
    legacy and ≤ 2.1 headers): the rows with records, less the records and the refusals."""
    monkeypatch.setattr(segment, "MAX_BATCH_RECORDS", 1)
    monkeypatch.chdir(GOLDEN)
    text = GOLDEN / f"{variant}.txt"
    full = list(read_dump_log_text(text.name))
    headers = list(read_dump_log_text(text.name, records=False))
    assert any(is_refusal(i) for i in full) and any(isinstance(i, Record) for i in full)
    expected = [i for i in full if not isinstance(i, Record) and not is_refusal(i)]
    assert rows_of(headers) == rows_of(expected)


# ---------------------------------------------------------------------------------------------
# Given as read


def test_a_large_v2_batchs_records_are_given_as_they_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `HELD_RECORDS` the header goes out, then each record once its payload can go on no more."""
    monkeypatch.setattr(dump_log_text, "HELD_RECORDS", 2)
    parser = dump_log_text._DumpLogTextParser("dump.txt")
    lines = [
        "Dumping orders-3/00000000000000000000.log",
        V2_BATCH.replace("lastOffset: 2 count: 3", "lastOffset: 3 count: 4"),
        *(record_line(n, " payload: v", value_size=3) for n in range(3)),
        "x",  # the third record's payload goes on
        record_line(3, " payload: v3"),
        "Dumping orders-4/00000000000000000000.log",
    ]
    given: list[list[Any]] = [parser.feed(line) for line in lines]
    assert [[type(row).__name__ for row in rows] for rows in given] == [
        [],
        [],
        [],
        [],
        ["BatchHeader", "Record", "Record"],
        [],
        ["Record"],
        ["Record"],
    ]
    assert [record.value for record in (*given[4][1:], *given[6], *given[7])] == [b"v", b"v", b"v\nx", b"v3"]


def test_a_control_record_after_a_given_header_is_an_unreadable_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A header already given as that of no control batch cannot be made one: the tool prints a control
    record in a control batch only, so such a line is not what it prints. Before, it still reveals one."""
    monkeypatch.setattr(dump_log_text, "HELD_RECORDS", 2)
    batch = V2_BATCH.replace("lastOffset: 2 count: 3", "lastOffset: 3 count: 4")
    marker = record_line(3, " endTxnMarker: COMMIT coordinatorEpoch: 0", 4, 6)
    items = log_dump(batch, *(record_line(n) for n in range(3)), marker)
    (header,) = of_type(items, BatchHeader)
    (error,) = of_type(items, DecodeError)
    assert not header.is_control and header.control_type is None
    assert len(of_type(items, Record)) == 3
    assert (error.kind, error.section) == (
        CorruptionKind.UNREADABLE_BATCH,
        "orders-3/00000000000000000000.log",
    )
    assert "a control record after 3 records of a batch that is no control batch" in error.message
    (header,) = log_dump(V2_BATCH.replace(" isControl: false", ""), marker)
    assert header.control_type == "COMMIT"


def test_a_pre_2_2_deep_batch_over_the_cap_counts_its_records_and_holds_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ≤ 2.1 dump's batch is made from its record lines to the last: refused, it still has their
    offsets, count and sequences, and its refusal spans the bytes up to the next batch's position."""
    monkeypatch.setattr(segment, "MAX_BATCH_RECORDS", 2)
    line = (
        "offset: {o} position: {p} CreateTime: 170000000000{o} isvalid: true keysize: -1 valuesize: 2 "
        "magic: 2 compresscodec: NONE producerId: 1000 producerEpoch: 0 sequence: {o} "
        "isTransactional: false headerKeys: []"
    )
    items = log_dump(*(line.format(o=o, p=0) for o in range(3)), line.format(o=3, p=88))
    first, refusal, second, record = items
    assert (first.base_offset, first.last_offset, first.count, first.last_sequence, first.size_bytes) == (
        0,
        2,
        3,
        2,
        88,
    )
    assert (refusal.position, refusal.length, refusal.message) == (
        0,
        88,
        "3 records: more than the 2 decoded from one batch",
    )
    assert (second.position, record.offset) == (88, 3)


# ---------------------------------------------------------------------------------------------
# Peak memory of one batch of a million records


PEAK_OF_ONE_BATCH = textwrap.dedent(
    """
    import sys

    from kafka_log_decoder import segment
    from kafka_log_decoder.dump_log_text import parse_dump_log_text

    records, cap, pre_2_2 = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "pre-2.2"
    if cap:
        segment.MAX_BATCH_RECORDS = cap


    def high_water_mark_kib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


    def lines():
        yield "Dumping /k/orders-0/00000000000000000000.log\\n"
        if pre_2_2:
            for o in range(records):
                yield (
                    f"offset: {o} position: 0 CreateTime: 1700000000000 isvalid: true keysize: -1 "
                    f"valuesize: 1 magic: 2 compresscodec: NONE producerId: 7 producerEpoch: 0 sequence: {o} "
                    "isTransactional: false headerKeys: [] payload: x\\n"
                )
            return
        yield (
            f"baseOffset: 0 lastOffset: {records - 1} count: {records} baseSequence: 0 lastSequence: "
            f"{records - 1} producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false "
            "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 "
            f"size: {61 + 8 * records} magic: 2 compresscodec: none crc: 1 isvalid: true\\n"
        )
        for o in range(records):
            yield (
                f"| offset: {o} CreateTime: 1700000000000 keySize: -1 valueSize: 1 sequence: {o} "
                "headerKeys: [] payload: x\\n"
            )


    before = high_water_mark_kib()
    kinds = {}
    for item in parse_dump_log_text(lines()):
        kinds[type(item).__name__] = kinds.get(type(item).__name__, 0) + 1
    print(high_water_mark_kib() - before, sorted(kinds.items()))
    """
)


def peak_growth_kib(records: int, *, cap: int = 0, variant: str = "v2") -> tuple[int, str]:
    """The growth of the peak RSS while a text of one batch of `records` records is parsed, in a process
    of its own (a high-water mark only rises), and the kinds of the rows it gave."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF_ONE_BATCH, str(records), str(cap), variant],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    growth, kinds = done.stdout.strip().split(" ", 1)
    return int(growth), kinds


# Held, a million records raised the peak by 290 MiB (~300 bytes each); given as read or let go, by 0.
BOUND_KIB = 48 << 10


def test_a_v2_batch_of_a_million_records_is_parsed_in_bounded_memory() -> None:
    """Below the cap (3.9M), every record is given, none held to the batch's end."""
    growth, kinds = peak_growth_kib(1_000_000)
    assert growth < BOUND_KIB, f"peak RSS rose by {growth >> 10} MiB"
    assert kinds == "[('BatchHeader', 1), ('Record', 1000000)]"


def test_a_pre_2_2_batch_over_the_cap_is_parsed_in_bounded_memory() -> None:
    """A ≤ 2.1 dump's batch is made from its records to the last, so it cannot be given as read: past
    the cap its records are let go (400,000 of them held took 120 MiB)."""
    growth, kinds = peak_growth_kib(400_000, cap=1000, variant="pre-2.2")
    assert growth < BOUND_KIB, f"peak RSS rose by {growth >> 10} MiB"
    assert kinds == "[('BatchHeader', 1), ('DecodeError', 1)]"
