"""Legacy v0/v1 message sets, built by kafka-python's legacy builder."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafka_log_decoder.legacy import LegacyFormatError, decode_legacy_entry
from tests.builders import CODEC_IDS, build_legacy

RECORDS = [(b"k0", b"v0"), (None, b"v1"), (b"k2", None)]


def decode(raw: bytes, with_records: bool = True):
    view = memoryview(raw)
    return decode_legacy_entry(view, 0, file="seg.log", file_position=4096, with_records=with_records)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_legacy_entry_is_one_message(magic: int) -> None:
    raw = build_legacy(magic, RECORDS[:1], first_offset=41)
    entry = decode(raw)
    h = entry.header
    assert (h.base_offset, h.last_offset, h.count, h.magic, h.crc_valid) == (41, 41, 1, magic, True)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (-1, -1, -1, -1)
    assert h.size_bytes == len(raw) and h.position == 4096
    assert h.timestamp_type == ("NoTimestampType" if magic == 0 else "CreateTime")
    assert [(r.offset, r.key, r.value) for r in entry.records] == [(41, b"k0", b"v0")]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_v1_compressed_wrapper_turns_relative_inner_offsets_absolute(codec: str) -> None:
    raw = build_legacy(1, RECORDS, first_offset=100, codec=codec)
    entry = decode(raw)
    assert (entry.header.base_offset, entry.header.last_offset, entry.header.count) == (100, 102, 3)
    assert entry.header.compression == codec
    assert [(r.offset, r.key, r.value) for r in entry.records] == [
        (100, b"k0", b"v0"),
        (101, None, b"v1"),
        (102, b"k2", None),
    ]
    assert [r.timestamp for r in entry.records] == [1_500_000_000_000, 1_500_000_000_001, 1_500_000_000_002]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_v0_compressed_wrapper_keeps_absolute_inner_offsets(codec: str) -> None:
    entry = decode(build_legacy(0, RECORDS, first_offset=7, codec=codec))
    assert [r.offset for r in entry.records] == [7, 8, 9]
    assert entry.header.base_offset == 7 and entry.header.last_offset == 9


def test_header_only_mode_still_counts_inner_messages() -> None:
    entry = decode(build_legacy(1, RECORDS, first_offset=5, codec="gzip"), with_records=False)
    assert entry.header.count == 3 and entry.records == []


def test_flipped_value_byte_fails_the_crc32() -> None:
    raw = bytearray(build_legacy(1, RECORDS[:1], first_offset=0))
    raw[-1] ^= 0xFF
    assert decode(bytes(raw)).header.crc_valid is False


def test_a_corrupt_compressed_value_fails_the_crc_first() -> None:
    """Kafka checks a legacy entry's CRC before it reads its payload (LegacyRecord.ensureValid): the
    wrapper's own fields make the header (crc_valid false), its payload is not opened. Its first offset
    and count need the payload: one message at the wrapper's offset (its last inner one), as a dump-log
    line of the entry says; its first timestamp is unknown."""
    raw = bytearray(build_legacy(1, RECORDS, first_offset=0, codec="gzip", timestamp=1_500_000_000_000))
    raw[40:48] = b"\xff" * 8
    entry = decode(bytes(raw))
    h = entry.header
    assert (h.crc_valid, h.magic, h.compression, h.timestamp_type) == (False, 1, "gzip", "CreateTime")
    assert (h.base_offset, h.last_offset, h.count, h.base_timestamp) == (2, 2, 1, None)
    assert h.crc == struct.unpack_from(">I", raw, 12)[0] and h.size_bytes == len(raw)
    assert entry.records == []


def test_a_crc_valid_entry_whose_payload_does_not_decompress_is_a_format_error() -> None:
    raw = bytearray(build_legacy(1, RECORDS, first_offset=0, codec="gzip"))
    raw[40:48] = b"\xff" * 8
    struct.pack_into(">I", raw, 12, zlib.crc32(bytes(raw[16:])))
    with pytest.raises(LegacyFormatError, match="gzip"):
        decode(bytes(raw))


def test_a_v1_inner_offset_past_int64_is_a_format_error() -> None:
    # kafka-python's builder writes the relative inner offsets it is given: the first is 2^63 - 1, the
    # last 0, so the wrapper's absolute offset 1 makes the base 1 and the first offset 2^63.
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=CODEC_IDS["gzip"], batch_size=1 << 30)
    builder.append(2**63 - 1, timestamp=1_500_000_000_000, key=b"a", value=b"1")
    builder.append(0, timestamp=1_500_000_000_001, key=b"b", value=b"2")
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, 1)
    with pytest.raises(LegacyFormatError, match="9223372036854775808, outside int64"):
        decode(bytes(raw))


def null_messages_wrapper(count: int, magic: int = 1) -> bytes:
    """A gzip wrapper of `count` messages with null key and value (34 bytes each in v1): a few hundred KB
    hold millions of them."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODEC_IDS["gzip"], batch_size=1 << 30)
    for i in range(count):
        builder.append(i, timestamp=1_500_000_000_000 if magic else None, key=None, value=None)
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, 1000 + count - 1)
    return bytes(raw)


def test_header_only_mode_keeps_no_object_per_inner_message() -> None:
    """The header needs the inner set's count and first offset, not its messages: a wrapper of 100,000
    null messages (3.4 MB decompressed) built an object with key and value copies for each, 150 bytes
    apiece, to count them."""
    raw = null_messages_wrapper(100_000)
    tracemalloc.start()
    try:
        entry = decode(raw, with_records=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    h = entry.header
    assert (h.base_offset, h.last_offset, h.count, h.base_timestamp) == (
        1000,
        100_999,
        100_000,
        1_500_000_000_000,
    )
    assert entry.records == []
    assert peak < 8 << 20, peak


def test_records_come_a_bounded_list_at_a_time() -> None:
    from kafka_log_decoder.legacy import RECORD_OBJECT_BYTES

    raw = null_messages_wrapper(1000)
    entry = decode(raw)
    lists = list(entry.record_lists(100 * RECORD_OBJECT_BYTES))
    assert [len(chunk) for chunk in lists] == [100] * 10
    assert [r.offset for chunk in lists for r in chunk] == list(range(1000, 2000))
    assert [r.offset for r in entry.records] == list(range(1000, 2000))


def _log_append_time_wrapper(inner_magic: int) -> bytes:
    """A v1 gzip wrapper stamped LogAppendTime (attributes bit 3) at 999, holding two messages of
    `inner_magic` (kafka-python's builder, relative offsets 0 and 1); wrapper offset 11."""
    inner = LegacyRecordBatchBuilder(magic=inner_magic, compression_type=0, batch_size=1 << 30)
    for i in range(2):
        inner.append(i, timestamp=5 if inner_magic else None, key=None, value=b"v%d" % i)
    value = zlib.compress(bytes(inner.build()), wbits=31)
    body = struct.pack(">bbqi", 1, 1 | 0x08, 999, -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 11, len(message)) + message


@pytest.mark.parametrize(("inner_magic", "expected"), [(1, [999, 999]), (0, [-1, -1])])
def test_a_log_append_time_wrapper_stamps_its_v1_messages_only(inner_magic: int, expected: list[int]) -> None:
    """`AbstractLegacyRecordBatch.DeepRecordsIterator`: an inner message of magic 1 takes the wrapper's
    LogAppendTime timestamp; one of magic 0 has none."""
    entry = decode(_log_append_time_wrapper(inner_magic))
    assert [r.timestamp for r in entry.records] == expected
    assert [r.offset for r in entry.records] == [10, 11]


def _rewrapped(raw: bytes, inner: bytes, after_value: bytes = b"") -> bytes:
    """The v1 gzip wrapper `raw` (null key) holding `inner`, gzip-compressed, as its value, then
    `after_value`; its sizes and CRC-32 made to match."""
    value = gzip.compress(inner)
    message = bytearray(raw[16:30]) + struct.pack(">i", len(value)) + value + after_value  # magic..key
    return raw[:8] + struct.pack(">iI", 4 + len(message), zlib.crc32(message)) + bytes(message)


def _inner_set(raw: bytes) -> bytes:
    (value_length,) = struct.unpack_from(">i", raw, 30)
    return gzip.decompress(raw[34 : 34 + value_length])


@pytest.mark.parametrize(
    "case",
    ["stray bytes after the set", "last message cut short", "bytes after an inner value", "after the value"],
)
def test_a_crc_valid_wrapper_is_framed_as_kafka_reads_it(case: str) -> None:
    """What Kafka 4.3.1 reads whole (`MemoryRecords` over the entry, checked in a review against the
    broker's jars), these read the same: the three messages at 10-12. The inner set ends quietly where
    fewer bytes are left than an entry header or the message its size gives
    (`AbstractLegacyRecordBatch.DataLogInputStream.nextBatch` returns null), and a message's bytes after
    its value are let be (`LegacyRecord.value()` reads a sized field). They were one UNREADABLE_BATCH,
    the three records lost to the audit."""
    raw = build_legacy(1, RECORDS, first_offset=10, codec="gzip")
    inner = _inner_set(raw)
    if case == "stray bytes after the set":
        entry = _rewrapped(raw, inner + bytes(5))
    elif case == "last message cut short":
        fourth = _inner_set(build_legacy(1, [(b"k3", b"v3")] * 4, first_offset=0, codec="gzip"))
        entry = _rewrapped(raw, inner + fourth[-(len(fourth) // 4) : -3])
    elif case == "bytes after an inner value":
        # The last inner message grows by three bytes after its value, its size and CRC-32 made to match.
        last_at = inner.rfind(struct.pack(">q", 2))
        message = bytearray(inner[last_at + 16 :]) + b"xyz"
        grown = struct.pack(">qiI", 2, 4 + len(message), zlib.crc32(message)) + bytes(message)
        entry = _rewrapped(raw, inner[:last_at] + grown)
    else:
        entry = _rewrapped(raw, inner, after_value=b"xyz")
    decoded = decode(entry)
    assert decoded.header.crc_valid and (decoded.header.base_offset, decoded.header.count) == (10, 3)
    assert [(r.offset, r.key, r.value) for r in decoded.records] == [
        (10, b"k0", b"v0"),
        (11, None, b"v1"),
        (12, b"k2", None),
    ]


def test_a_crc_valid_message_with_bytes_after_its_value_is_read_as_kafka_reads_it() -> None:
    raw = bytearray(build_legacy(1, RECORDS[:1], first_offset=3))
    raw += b"xyz"
    struct.pack_into(">iI", raw, 8, len(raw) - 12, zlib.crc32(bytes(raw[16:])))
    assert [(r.offset, r.key, r.value) for r in decode(bytes(raw)).records] == [(3, b"k0", b"v0")]
    # Not where the CRC fails: then the bytes must frame exactly, or the record is not trusted.
    raw[12] ^= 0xFF
    failed = decode(bytes(raw))
    assert not failed.header.crc_valid and failed.records == [] and "unexpected bytes" in str(failed.problem)
