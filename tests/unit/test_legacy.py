"""Legacy v0/v1 message sets, built by kafka-python's legacy builder."""

from __future__ import annotations

import struct

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


def test_corrupt_compressed_value_is_a_format_error() -> None:
    raw = bytearray(build_legacy(1, RECORDS, first_offset=0, codec="gzip"))
    raw[40:48] = b"\xff" * 8
    with pytest.raises(LegacyFormatError):
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
