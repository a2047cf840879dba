"""The segment reader on corrupt legacy entries, invalid control records, resyncs and large legacy
wrappers: bytes from kafka-python's builders (`tests.builders`), then mutated."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from kafka_log_decoder import segment
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import BatchRun, iter_segment_runs, read_log_segment
from tests.builders import V2Batch, build_legacy, build_v2
from tests.unit.test_native_walker import build_batch, control_batch, recompute_crc


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path


def shape(items: list) -> list[tuple]:
    """Each row as (kind, position, a few fields): headers, errors and records in file order."""
    out: list[tuple] = []
    for item in items:
        if isinstance(item, BatchHeader):
            out.append(("B", item.position, item.magic, item.base_offset, item.last_offset, item.crc_valid))
        elif isinstance(item, DecodeError):
            out.append(("E", item.position, item.kind, item.length))
        else:
            out.append(("R", item.batch_position, item.offset))
    return out


def recrc_legacy(entry: bytearray) -> bytearray:
    """Reseal a legacy entry's CRC-32 (from the magic byte to the end of its message)."""
    struct.pack_into(">I", entry, 12, zlib.crc32(bytes(entry[16:])))
    return entry


# ---------------------------------------------------------------------------------------------
# 1. A legacy entry's CRC is checked first


@pytest.mark.parametrize("records", [False, True])
def test_a_legacy_wrapper_whose_crc_fails_is_a_header_and_a_crc_mismatch(
    tmp_path: Path, records: bool
) -> None:
    """One byte of a gzip wrapper's compressed value flipped: Kafka fails its CRC before it reads the
    payload. A header of the wrapper's own fields (crc_valid false) and a CRC_MISMATCH, as a v2 batch whose
    CRC fails gets; not an UNREADABLE_BATCH from the payload that no longer decompresses."""
    legacy = bytearray(
        build_legacy(1, [(b"k%d" % i, b"v%d" % i) for i in range(5)], first_offset=10, codec="gzip")
    )
    legacy[50] ^= 0x10
    v2 = build_v2(V2Batch(base_offset=15, records=[(None, b"x")]))
    items = list(read_log_segment(write(tmp_path, bytes(legacy) + v2), records=records))
    assert shape(items) == [
        ("B", 0, 1, 14, 14, False),
        ("E", 0, CorruptionKind.CRC_MISMATCH, len(legacy)),
        ("B", len(legacy), 2, 15, 15, True),
        *([("R", len(legacy), 15)] if records else []),
    ]
    header = items[0]
    assert (header.count, header.compression, header.base_timestamp) == (1, "gzip", None)
    assert f"byte 0: CRC_MISMATCH: stored CRC {struct.unpack_from('>I', legacy, 12)[0]}" in str(items[1])


def test_a_legacy_wrapper_whose_crc_fails_but_opens_keeps_its_first_inner_offset(tmp_path: Path) -> None:
    """A bit of a v1 gzip wrapper's timestamp flipped: its CRC fails, its payload still opens. The header
    is still the entry's whole range, offsets 10-14 (contract §5: a legacy entry's base offset is its
    first inner one), so the offsets it holds stay covered; and a CRC_MISMATCH."""
    legacy = bytearray(
        build_legacy(1, [(b"k%d" % i, b"v%d" % i) for i in range(5)], first_offset=10, codec="gzip")
    )
    legacy[20] ^= 0x10  # in the wrapper's timestamp (message bytes 6-13), outside the payload
    items = list(read_log_segment(write(tmp_path, bytes(legacy))))
    assert shape(items) == [("B", 0, 1, 10, 14, False), ("E", 0, CorruptionKind.CRC_MISMATCH, len(legacy))]
    assert items[0].count == 5


@pytest.mark.parametrize("magic", [0, 1])
def test_a_crc_failed_wrappers_inner_offsets_that_do_not_hold_together_are_not_trusted(
    tmp_path: Path, magic: int
) -> None:
    """A snappy wrapper at offset 21 whose first inner offset is far below zero (v0: -2^62 absolute, v1:
    -2^40 relative), its CRC broken: bits that flipped inside a payload with no checksum of its own can
    still decompress. Its offsets do not hold together as a broker writes them, so the header is the
    wrapper's offset alone; a range from -2^62 overflowed the per-file sums of held offsets."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=2, batch_size=1 << 30)
    builder.append(-(2**62) if magic == 0 else -(2**40), timestamp=1 if magic else None, key=None, value=b"a")
    builder.append(1 if magic else 21, timestamp=1 if magic else None, key=None, value=b"b")
    wrapper = bytearray(builder.build())
    struct.pack_into(">q", wrapper, 0, 21)
    wrapper[12] ^= 0xFF  # the stored CRC: the payload is intact
    before = build_legacy(magic, [(None, b"x")] * 20, first_offset=0, codec="none")
    for records in (False, True):
        items = list(read_log_segment(write(tmp_path, before + bytes(wrapper)), records=records))
        failed = [i for i in items if isinstance(i, BatchHeader) and not i.crc_valid]
        assert [(h.base_offset, h.last_offset, h.count) for h in failed] == [(21, 21, 1)], records


def test_a_crc_valid_legacy_wrapper_that_does_not_decompress_stays_unreadable(tmp_path: Path) -> None:
    legacy = bytearray(
        build_legacy(1, [(b"k%d" % i, b"v%d" % i) for i in range(5)], first_offset=10, codec="gzip")
    )
    legacy[50] ^= 0x10
    v2 = build_v2(V2Batch(base_offset=15, records=[(None, b"x")]))
    items = list(read_log_segment(write(tmp_path, bytes(recrc_legacy(legacy)) + v2)))
    assert shape(items) == [
        ("E", 0, CorruptionKind.UNREADABLE_BATCH, len(legacy)),
        ("B", len(legacy), 2, 15, 15, True),
    ]
    assert "gzip" in items[0].message


def test_a_legacy_message_whose_crc_fails_over_its_key_length_is_a_crc_mismatch(tmp_path: Path) -> None:
    """A bit of a v0 message's key length flipped: its CRC fails, and its key no longer frames. A header
    and a CRC_MISMATCH; with records, its record cannot be given: an UNREADABLE_BATCH says why, as bad
    record framing does for a v2 batch."""
    good = build_legacy(0, [(b"key", b"value")], first_offset=3)
    bad = bytearray(good)
    bad[12 + 6 + 3] ^= 0x01  # the low byte of the key length
    after = build_v2(V2Batch(base_offset=5))
    path = write(tmp_path, good + bytes(bad) + after)
    at = len(good)
    assert shape(list(read_log_segment(path))) == [
        ("B", 0, 0, 3, 3, True),
        ("B", at, 0, 3, 3, False),
        ("E", at, CorruptionKind.CRC_MISMATCH, len(bad)),
        ("B", at + len(bad), 2, 5, 5, True),
    ]
    items = list(read_log_segment(path, records=True))
    (framing,) = [
        i for i in items if isinstance(i, DecodeError) and i.kind == CorruptionKind.UNREADABLE_BATCH
    ]
    # Over the entry's header fields (offset to attributes), as its header is read: not a region to its end.
    assert (framing.position, framing.length) == (at, 18)
    assert "bad legacy message framing" in framing.message
    assert [r.offset for r in items if isinstance(r, Record)] == [3, 5]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_a_crc_failed_legacy_message_whose_length_runs_over_a_valid_batch_is_cut_there(
    tmp_path: Path, codec: str
) -> None:
    """Its length grown over the batch after it: its CRC fails, its bytes no longer frame as a message
    (or a wrapper) of that length, and the valid v2 batch inside the bytes it claims shows the length is
    what is corrupt, as for a v2 batch whose CRC fails over one. Its bytes up to that batch are an
    unreadable region (no header), and decoding goes on there; not a header and a CRC_MISMATCH hiding
    that batch."""
    bad = bytearray(build_legacy(1, [(b"key", b"value")], first_offset=8, codec=codec))
    after = build_v2(V2Batch(base_offset=9, records=[(None, b"x")]))
    tail = build_v2(V2Batch(base_offset=10, records=[(None, b"y")]))
    struct.pack_into(">i", bad, 8, len(bad) - 12 + len(after))
    for records in (False, True):
        items = list(read_log_segment(write(tmp_path, bytes(bad) + after + tail), records=records))
        assert shape(items) == [
            ("E", 0, CorruptionKind.UNREADABLE_BATCH, len(bad)),
            ("B", len(bad), 2, 9, 9, True),
            *([("R", len(bad), 9)] if records else []),
            ("B", len(bad) + len(after), 2, 10, 10, True),
            *([("R", len(bad) + len(after), 10)] if records else []),
        ]
        assert f"runs over a valid batch at byte {len(bad)}" in items[0].message


def test_a_crc_failed_legacy_message_that_frames_its_length_keeps_it(tmp_path: Path) -> None:
    """Its length and its value's length both say the v2 batch after them is its value's end: the bytes
    frame as that message, so the length stands (a value may hold a batch's bytes) and the CRC that fails
    is a CRC_MISMATCH, as for a v2 batch whose records frame its length (`_holds_its_records`)."""
    bad = bytearray(build_legacy(1, [(b"key", b"value")], first_offset=8))
    after = build_v2(V2Batch(base_offset=9, records=[(None, b"x")]))
    tail = build_v2(V2Batch(base_offset=10, records=[(None, b"y")]))
    struct.pack_into(">i", bad, 8, len(bad) - 12 + len(after))
    value_at = 12 + 14 + 4 + 3  # crc, magic, attributes, timestamp; key length, key
    struct.pack_into(">i", bad, value_at, 5 + len(after))
    items = list(read_log_segment(write(tmp_path, bytes(bad) + after + tail), records=True))
    size = len(bad) + len(after)
    assert shape(items) == [
        ("B", 0, 1, 8, 8, False),
        ("E", 0, CorruptionKind.CRC_MISMATCH, size),
        ("R", 0, 8),
        ("B", size, 2, 10, 10, True),
        ("R", size, 10),
    ]
    assert items[2].value == b"value" + after


@pytest.mark.parametrize("case", ["framing", "over the cap"])
def test_a_legacy_entrys_records_error_is_no_region_running_past_a_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The error of a legacy entry whose header is read but whose records are not, last in the file: a
    region over the whole entry read, to `jobs.decode_tasks`, as one running past a range ending inside
    the entry, which it decoded again from the entry's start: its header twice."""
    from jobs.decode_tasks import _runs_past_end
    from tests.unit.test_legacy import null_messages_wrapper

    if case == "framing":
        entry = bytearray(build_legacy(0, [(b"key", b"value")], first_offset=3))
        entry[12 + 6 + 3] ^= 0x01
    else:
        entry = bytearray(null_messages_wrapper(300))
        monkeypatch.setattr(segment, "MAX_BATCH_RECORDS", 200)
    first = build_v2(V2Batch(base_offset=0, records=[(None, b"x")]))
    data = first + bytes(entry)
    path = write(tmp_path, data)
    for end in range(len(first) + 1, len(data)):
        runs = list(iter_segment_runs(path, records=True, end_position=end))
        lists = [run for run in runs if isinstance(run, list)]
        assert lists and isinstance(lists[-1][0], BatchHeader)
        assert not _runs_past_end(lists[-1][-1], end, len(data)), (end, lists[-1][-1])


def test_an_uncompressed_legacy_message_whose_crc_fails_still_gives_its_record(tmp_path: Path) -> None:
    """As a v2 batch whose CRC fails still gives its records: the bytes frame, only the CRC says no."""
    bad = bytearray(build_legacy(1, [(b"key", b"value")], first_offset=8))
    bad[-1] ^= 0x20
    items = list(read_log_segment(write(tmp_path, bytes(bad)), records=True))
    assert shape(items) == [
        ("B", 0, 1, 8, 8, False),
        ("E", 0, CorruptionKind.CRC_MISMATCH, len(bad)),
        ("R", 0, 8),
    ]
    assert (items[2].key, items[2].value) == (b"key", b"valuE")


# ---------------------------------------------------------------------------------------------
# 5. A resync reads only what it searches


def test_a_resync_reads_no_further_than_the_bytes_it_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hundred small batches whose CRC fails, then a 2 MiB zero tail: each failed batch is searched for
    a valid batch inside it, and each search read 1 MiB whatever the batch's size (20,000 of them read
    20 GB). It reads that batch's bytes (and a header's more)."""
    one = build_v2(
        V2Batch(base_offset=0, records=[(None, b"x")], producer_id=1, producer_epoch=0, base_sequence=0)
    )
    parts = []
    for i in range(200):
        b = bytearray(one)
        struct.pack_into(">q", b, 0, i)
        b[-1] ^= 1
        parts.append(bytes(b))
    data = b"".join(parts) + bytes(2 << 20)
    path = write(tmp_path, data)
    read = [0]
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        chunk = real(fd, n, offset)
        read[0] += len(chunk)
        return chunk

    monkeypatch.setattr(segment.os, "pread", counting)
    items = list(read_log_segment(path))
    assert sum(isinstance(i, BatchHeader) for i in items) == 200
    assert [i.kind for i in items if isinstance(i, DecodeError)] == [CorruptionKind.CRC_MISMATCH] * 200
    assert read[0] < 2 * len(data), read[0]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("bad_size", [200, 10_000, 5])
def test_a_resync_after_a_bad_legacy_length_finds_the_legacy_entries_after_it(
    tmp_path: Path, magic: int, codec: str, bad_size: int
) -> None:
    """Six legacy entries (a 0.8-0.10 segment); the second's size field is corrupt: still inside the file
    (its CRC fails over bytes past its end), past the end of the file, or below the minimum. The resync
    searched v2 batches only, so the four whole entries after it were an unreadable region, or a
    TRUNCATED_TAIL (a warning) where the size ran past the end: their records lost to the audit. Kafka
    never resyncs (`FileLogInputStream.nextBatch` stops there); the auditor finds the next whole entry
    with a valid CRC-32 (`valid_legacy_at`), as it does a v2 batch. Snappy and lz4 leave a small
    wrapper's inner messages as literal bytes: whole messages to a resync but for their offsets (v0:
    up to the wrapper's, v1: relative from 0, or mangled by the codec's copies), none past the corrupt
    entry's offset and within 2^31 of the segment's base: not entries of the log."""
    # One message an entry uncompressed, two in a wrapper.
    per_entry = 1 if codec == "none" else 2
    entries = [
        build_legacy(
            magic, [(b"key-%d" % i, b"value-%d" % i * 3)] * per_entry, first_offset=2 * i, codec=codec
        )
        for i in range(6)
    ]
    bad = bytearray(entries[1])
    struct.pack_into(">i", bad, 8, bad_size)
    entries[1] = bytes(bad)
    at = [sum(len(e) for e in entries[:i]) for i in range(6)]
    items = list(read_log_segment(write(tmp_path, b"".join(entries)), records=True))
    batches = [i for i in shape(items) if i[0] == "B"]
    assert batches == [("B", at[i], magic, 2 * i, 2 * i + per_entry - 1, True) for i in (0, 2, 3, 4, 5)]
    (error,) = [i for i in items if isinstance(i, DecodeError)]
    assert (error.kind, error.position, error.length) == (
        CorruptionKind.UNREADABLE_BATCH,
        at[1],
        at[2] - at[1],
    )
    assert f"at byte {at[2]}" in error.message
    assert len([i for i in items if isinstance(i, Record)]) == 5 * per_entry


def test_a_resync_does_not_land_on_a_wrappers_literal_inner_messages(tmp_path: Path) -> None:
    """Snappy leaves a wrapper's inner v0 messages of incompressible values as literal bytes: whole,
    CRC-valid messages to a resync, at offsets up to the wrapper's own. The wrapper's size is corrupt;
    the resync passes over its inner messages (no offset above the corrupt entry's) to the next entry."""
    import random

    rnd = random.Random(7)
    base = 0x1122334455667788
    entries = [
        build_legacy(
            0,
            [(None, rnd.randbytes(100)), (None, rnd.randbytes(100))],
            first_offset=base + 2 * i,
            codec="snappy",
        )
        for i in range(4)
    ]
    bad = bytearray(entries[1])
    struct.pack_into(">i", bad, 8, 5)
    entries[1] = bytes(bad)
    path = tmp_path / f"{base:020d}.log"
    path.write_bytes(b"".join(entries))
    at = [sum(len(e) for e in entries[:i]) for i in range(4)]
    items = list(read_log_segment(path))
    assert [h.base_offset for h in items if isinstance(h, BatchHeader)] == [base, base + 4, base + 6]
    assert [(e.position, e.length) for e in items if isinstance(e, DecodeError)] == [(at[1], at[2] - at[1])]


def test_a_resync_lands_where_a_byte_range_of_the_segment_lands(tmp_path: Path) -> None:
    """Legacy entries at 0-9, then v2 batches at 10-12; the batch at 11 has a corrupt length and a record
    value holding a CRC-valid legacy message at offset 5. A range of the segment from the first v2
    batch (a split point) resyncs as the whole file does: to the batch at 12, not onto that message,
    whatever the walk read before the range."""
    legacy = [build_legacy(1, [(b"k", b"v%d" % i)], first_offset=i) for i in range(10)]
    embedded = build_legacy(0, [(b"k", b"embedded")], first_offset=5)
    corrupt = bytearray(build_v2(V2Batch(base_offset=11, records=[(None, embedded)])))
    struct.pack_into(">i", corrupt, 8, 3)
    parts = [*legacy, build_v2(V2Batch(base_offset=10, records=[(None, b"a")])), bytes(corrupt)]
    parts.append(build_v2(V2Batch(base_offset=12, records=[(None, b"c")])))
    path = write(tmp_path, b"".join(parts))
    start = sum(len(p) for p in legacy)
    whole = [i for i in shape(list(read_log_segment(path))) if i[1] >= start]
    assert whole == shape(list(read_log_segment(path, start_position=start)))
    assert [i for i in whole if i[0] == "B"] == [
        ("B", start, 2, 10, 10, True),
        ("B", len(b"".join(parts[:-1])), 2, 12, 12, True),
    ]


def test_a_garbage_offset_at_the_bad_entry_sets_no_floor(tmp_path: Path) -> None:
    """The corrupt entry's offset and size are both smashed (2^40, 5): that offset, outside the segment's
    2^31 span, is garbage, not a floor the entries after it must pass; they are found again."""
    entries = [build_legacy(1, [(b"k%d" % i, b"v%d" % i)], first_offset=i) for i in range(8)]
    bad = bytearray(entries[2])
    struct.pack_into(">qi", bad, 0, 1 << 40, 5)
    entries[2] = bytes(bad)
    items = list(read_log_segment(write(tmp_path, b"".join(entries))))
    assert [h.base_offset for h in items if isinstance(h, BatchHeader)] == [0, 1, 3, 4, 5, 6, 7]


def test_a_resync_does_not_take_a_legacy_looking_header_without_its_crc(tmp_path: Path) -> None:
    """Bytes that read as a legacy entry's header (offset, size, magic 1, attributes) but whose CRC-32
    does not hold are no entry: the region runs on to the v2 batch after them."""
    b0 = build_v2(V2Batch(base_offset=0, records=[(None, b"x")]))
    b1 = build_v2(V2Batch(base_offset=5, records=[(None, b"y")]))
    fake = bytearray(build_legacy(1, [(b"k", b"v")], first_offset=3))
    fake[-1] ^= 0x01
    garbage = b"\xff" * 7 + bytes(fake) + b"\xff" * 9
    items = list(read_log_segment(write(tmp_path, b0 + garbage + b1)))
    assert shape(items) == [
        ("B", 0, 2, 0, 0, True),
        ("E", len(b0), CorruptionKind.UNREADABLE_BATCH, len(garbage)),
        ("B", len(b0) + len(garbage), 2, 5, 5, True),
    ]


# ---------------------------------------------------------------------------------------------
# 6. Invalid control records


def test_invalid_control_records_are_errors_not_markers(tmp_path: Path) -> None:
    """EndTransactionMarker.deserializeValue throws on a value under 6 bytes or a negative version, and
    ControlRecordType.parseTypeId on a key under 4 bytes or a negative version: such a marker was read as
    COMMIT/ABORT with coordinator epoch -1, or UNKNOWN, silently. The header stays (an unknown control
    type, no coordinator epoch) and an UNREADABLE_BATCH names the control record's byte; a newer marker
    version is read as its v0 prefix, an unknown type is no error, and neither is an empty control batch."""
    cases = [
        (control_batch(1, 42, base_offset=0), "COMMIT", 42, None),
        (control_batch(1, base_offset=1, value=b"\x00\x00"), "UNKNOWN", None, "a value of 2 bytes"),
        (control_batch(0, base_offset=2, value=struct.pack(">hi", -1, 5)), "UNKNOWN", None, "version -1"),
        (control_batch(0, base_offset=3, value=None), "ABORT", 7, None),
        (control_batch(1, base_offset=4, version=-1), "UNKNOWN", None, "ControlRecordType version -1"),
        (control_batch(1, base_offset=5, value=struct.pack(">hi", 3, 77) + b"future"), "COMMIT", 77, None),
        (control_batch(17, base_offset=6), "UNKNOWN", None, None),
        (control_batch(-5, base_offset=7), "UNKNOWN", None, None),
    ]
    short_key = bytearray(control_batch(1, base_offset=8))
    # The record's key length (zigzag 4 -> 1) shrinks the key to one byte, the record and the batch by 3.
    record = bytearray(short_key[61:])
    assert (
        record[0] == 2 * (len(record) - 1) and record[4] == 8
    )  # Length, attrs, ts delta, offset delta, keyLen
    body = record[1:4] + b"\x02" + record[5:6] + record[9:]
    short_key = short_key[:61] + bytes([2 * len(body)]) + body
    struct.pack_into(">i", short_key, 8, len(short_key) - 12)
    cases.append((recompute_crc(short_key), "UNKNOWN", None, "a key of 1 bytes"))
    empty = bytearray(control_batch(1, base_offset=9)[:61])
    struct.pack_into(">i", empty, 8, 49)
    struct.pack_into(">i", empty, 57, 0)
    cases.append((recompute_crc(empty), "UNKNOWN", None, None))
    data = b"".join(bytes(batch) for batch, *_ in cases)
    for records in (False, True):
        items = list(read_log_segment(write(tmp_path, data), records=records))
        headers = [h for h in items if isinstance(h, BatchHeader)]
        assert [(h.control_type, h.coordinator_epoch) for h in headers] == [(t, e) for _, t, e, _ in cases]
        assert not [r for r in items if isinstance(r, Record)]
        errors = {e.position: e for e in items if isinstance(e, DecodeError)}
        for header, (batch, _, _, why) in zip(headers, cases, strict=True):
            error = errors.pop(header.position, None)
            if why is None:
                assert error is None, error
                continue
            assert error is not None and error.kind == CorruptionKind.UNREADABLE_BATCH
            assert error.length == len(batch)
            assert (
                f"byte {header.position}: UNREADABLE_BATCH: invalid control record at byte 61 of the batch"
                in str(error)
            )
            assert why in error.message
        assert not errors


def test_an_invalid_compressed_control_record_is_an_error(tmp_path: Path) -> None:
    value = struct.pack(">hi", -1, 5) + b"x" * 300  # compressible, so the builder keeps gzip
    batch = build_batch([(1_700_000_000_000, struct.pack(">hh", 0, 1), value, [])], codec=1, control=True)
    runs = list(iter_segment_runs(write(tmp_path, bytes(batch))))
    (run,) = runs
    assert isinstance(run, BatchRun)
    header = run.header(0)
    assert (header.is_control, header.control_type, header.coordinator_epoch) == (True, "UNKNOWN", None)
    (error,) = run.errors[0]
    assert error.kind == CorruptionKind.UNREADABLE_BATCH
    assert error.message == (
        "invalid control record at byte 0 of the decompressed payload: "
        "COMMIT with EndTransactionMarker version -1"
    )


# ---------------------------------------------------------------------------------------------
# 8. A batch of no records


def test_a_batch_counting_no_records_has_none_whatever_bytes_follow(tmp_path: Path) -> None:
    """Kafka's DefaultRecordBatch.iterator() is empty when count() == 0: the bytes after the header are
    not read, so not a framing error."""
    batch = bytearray(build_v2(V2Batch(base_offset=0, records=[(None, b"x")])))
    struct.pack_into(">i", batch, 57, 0)
    nxt = build_v2(V2Batch(base_offset=1, records=[(None, b"y")]))
    items = list(read_log_segment(write(tmp_path, bytes(recompute_crc(batch)) + nxt), records=True))
    assert shape(items) == [("B", 0, 2, 0, 0, True), ("B", len(batch), 2, 1, 1, True), ("R", len(batch), 1)]


# ---------------------------------------------------------------------------------------------
# 4. A legacy wrapper's records in bounded lists, and no more than a v2 batch's


def test_a_legacy_wrappers_records_come_in_lists_of_bounded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrapper's inner set may decompress to 256 MiB of messages: its records come a list at a time (a
    list holds about MAX_RUN_DECOMPRESSED_BYTES of them), the header and the first ones in the first."""
    from kafka_log_decoder.legacy import RECORD_OBJECT_BYTES
    from tests.unit.test_legacy import null_messages_wrapper

    wrapper = null_messages_wrapper(5000)
    after = build_v2(V2Batch(base_offset=6000, records=[(None, b"x")]))
    path = write(tmp_path, wrapper + after)
    whole = list(read_log_segment(path, records=True))
    monkeypatch.setattr(segment, "MAX_RUN_DECOMPRESSED_BYTES", 1000 * RECORD_OBJECT_BYTES)
    lists = [run for run in iter_segment_runs(path, records=True) if isinstance(run, list)]
    assert [len(items) for items in lists] == [1001, 1000, 1000, 1000, 1000]
    assert isinstance(lists[0][0], BatchHeader) and lists[0][0].count == 5000
    assert list(read_log_segment(path, records=True)) == whole
    assert [r.offset for r in whole if isinstance(r, Record)] == [*range(1000, 6000), 6000]


def test_a_legacy_wrapper_of_more_records_than_a_batch_may_give_keeps_its_header_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a v2 batch claiming more than MAX_BATCH_RECORDS records: its header is read, its records are
    not (one error naming it); headers only, nothing is reported."""
    from tests.unit.test_legacy import null_messages_wrapper

    wrapper = null_messages_wrapper(300)
    path = write(tmp_path, wrapper)
    monkeypatch.setattr(segment, "MAX_BATCH_RECORDS", 200)
    items = list(read_log_segment(path, records=True))
    assert shape(items) == [
        ("B", 0, 1, 1000, 1299, True),
        ("E", 0, CorruptionKind.UNREADABLE_BATCH, 26),  # over its header fields, offset to timestamp
    ]
    assert "300 records: more than the 200 decoded from one batch" in items[1].message
    assert shape(list(read_log_segment(path))) == [("B", 0, 1, 1000, 1299, True)]


def _kafka_python_batch(base_offset: int, values: list[bytes]) -> bytes:
    """A v2 batch by kafka-python's builder (an independent encoder), at `base_offset`."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=7,
        producer_epoch=0,
        base_sequence=base_offset,
        batch_size=1 << 20,
    )
    for delta, value in enumerate(values):
        builder.append(delta, timestamp=1_000 + delta, key=b"key", value=value, headers=[])
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, base_offset)
    return bytes(raw)


def test_a_batch_held_in_a_record_value_is_no_batch_of_the_log(tmp_path: Path) -> None:
    """A batch at offset 10 whose one record's value holds a whole, valid v2 batch's bytes (offset
    999999), then a flipped bit in its key: its CRC fails, yet its records fill exactly the bytes its
    length claims, so the length is right (Kafka reads the batch by it) and what looks like a batch
    inside is the value. One CRC_MISMATCH, then the next batch; no batch at offset 999999."""
    inner = _kafka_python_batch(999_999, [b"inner"])
    outer = bytearray(_kafka_python_batch(10, [inner]))
    after = _kafka_python_batch(11, [b"next"])
    key_at = outer.index(b"key")
    outer[key_at] ^= 0x01
    for records in (False, True):
        items = list(read_log_segment(write(tmp_path, bytes(outer) + after), records=records))
        heads = [(h.position, h.base_offset, h.crc_valid) for h in items if isinstance(h, BatchHeader)]
        assert heads == [(0, 10, False), (len(outer), 11, True)], items
        errors = [(e.kind, e.position, e.length) for e in items if isinstance(e, DecodeError)]
        assert errors == [(CorruptionKind.CRC_MISMATCH, 0, len(outer))], errors


def test_an_empty_batch_whose_length_grew_does_not_hide_the_batches_after_it(tmp_path: Path) -> None:
    """The cleaner's empty batch (no records: it keeps a producer's state) with one flipped bit in its
    length (outside the CRC): no records frame its claimed bytes but none, so its length is what is
    corrupt, and the two batches inside those bytes are read."""
    from tests.unit.test_native_walker import recompute_crc

    empty = bytearray(build_v2(V2Batch(base_offset=0, producer_id=5, producer_epoch=0, base_sequence=0))[:61])
    struct.pack_into(">i", empty, 8, 61 - 12)
    struct.pack_into(">i", empty, 57, 0)
    recompute_crc(empty)
    after = [build_v2(V2Batch(base_offset=o, records=[(b"k", b"x" * 40)])) for o in (1, 2)]
    struct.pack_into(">i", empty, 8, (61 - 12) | 128)
    items = list(read_log_segment(write(tmp_path, bytes(empty) + b"".join(after))))
    heads = [(h.position, h.base_offset) for h in items if isinstance(h, BatchHeader)]
    assert heads == [(61, 1), (61 + len(after[0]), 2)], items
    assert [(e.kind, e.position, e.length) for e in items if isinstance(e, DecodeError)] == [
        (CorruptionKind.UNREADABLE_BATCH, 0, 61)
    ]
