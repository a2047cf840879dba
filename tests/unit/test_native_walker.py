"""kafka_log_decoder._native against an independent encoder and reader (kafka-python 3.0.12).

Batches are built with kafka-python's DefaultRecordBatchBuilder / MemoryRecordsBuilder and every
column of walk_batches / decode_records is compared, field by field, with kafka-python's
DefaultRecordBatch / MemoryRecords reader; plus two files written by real brokers.
"""

from __future__ import annotations

import gzip
import mmap
import os
import random
import struct
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import crc32c as crc32c_pypi
import pytest
from kafka.codec import gzip_decode, lz4_decode, snappy_decode, zstd_decode
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kafka_log_decoder import _native
from tests.paths import REAL_FIXTURES

FIXTURES = REAL_FIXTURES
CODECRAFTERS_LOG = FIXTURES / "codecrafters-kraft-3x/foo-0/00000000000000000000.log"
METADATA_LOG = FIXTURES / "induswargods-kraft/__cluster_metadata-0/00000000000000000000.log"

BATCH_FMT = dict(_native.BATCH_COLUMNS)
RECORD_FMT = dict(_native.RECORD_COLUMNS)
HEADER_FMT = dict(_native.HEADER_COLUMNS)
ALL_RECORD_FMT = {**RECORD_FMT, **HEADER_FMT}
WIDTH = {"b": 1, "B": 1, "h": 2, "i": 4, "I": 4, "q": 8, "Q": 8}

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DECOMPRESS = {1: gzip_decode, 2: snappy_decode, 3: lz4_decode, 4: zstd_decode}
INT32_MAX = 2**31 - 1

# (timestamp, key, value, headers) as DefaultRecordBatchBuilder.append takes them
Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


# --------------------------------------------------------------------------------------------
# helpers (also used by test_native_fuzz.py)
# --------------------------------------------------------------------------------------------


def table(columns: dict[str, bytes], fmts: dict[str, str]) -> dict[str, list[int]]:
    """Column bytes -> Python lists, asserting every column has the same row count."""
    out = {name: memoryview(columns[name]).cast(code).tolist() for name, code in fmts.items()}  # type: ignore[call-overload]
    lengths = {len(v) for v in out.values()}
    assert len(lengths) <= 1, {k: len(v) for k, v in out.items()}
    return out


def rows(tab: dict[str, list[int]]) -> list[dict[str, int]]:
    names = list(tab)
    return [dict(zip(names, values, strict=True)) for values in zip(*tab.values(), strict=True)]


def walk(
    buf: Any,
    start: int = 0,
    stop: int | None = None,
    decode: bool = True,
    max_batches: int = 1 << 40,
    hash_values: bool = True,
):
    """walk_batches -> (n, batch rows, next_pos, reason, record rows | None, header rows | None)."""
    stop = len(buf) if stop is None else stop
    n, cols, next_pos, reason, rcols = _native.walk_batches(
        buf, start, stop, decode, max_batches, hash_values
    )
    assert set(cols) == set(BATCH_FMT)
    b = rows(table(cols, BATCH_FMT))
    assert len(b) == n
    if rcols is None:
        return n, b, next_pos, reason, None, None
    assert set(rcols) == set(ALL_RECORD_FMT)
    return n, b, next_pos, reason, rows(table(rcols, RECORD_FMT)), rows(table(rcols, HEADER_FMT))


def xxh64_reference(data: bytes, seed: int = 0) -> int:
    """Straight transcription of the XXH64 specification (xxhash doc/xxhash_spec.md)."""
    m = (1 << 64) - 1
    p1, p2, p3, p4, p5 = (
        0x9E3779B185EBCA87,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0x85EBCA77C2B2AE63,
        0x27D4EB2F165667C5,
    )

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (64 - r))) & m

    def rnd(acc: int, lane: int) -> int:
        return (rotl((acc + lane * p2) & m, 31) * p1) & m

    n, i = len(data), 0
    if n >= 32:
        acc = [(seed + p1 + p2) & m, (seed + p2) & m, seed, (seed - p1) & m]
        while n - i >= 32:
            for j in range(4):
                acc[j] = rnd(acc[j], int.from_bytes(data[i + 8 * j : i + 8 * j + 8], "little"))
            i += 32
        h = (rotl(acc[0], 1) + rotl(acc[1], 7) + rotl(acc[2], 12) + rotl(acc[3], 18)) & m
        for a in acc:
            h = ((h ^ rnd(0, a)) * p1 + p4) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while n - i >= 8:
        h ^= rnd(0, int.from_bytes(data[i : i + 8], "little"))
        h = (rotl(h, 27) * p1 + p4) & m
        i += 8
    if n - i >= 4:
        h ^= (int.from_bytes(data[i : i + 4], "little") * p1) & m
        h = (rotl(h, 23) * p2 + p3) & m
        i += 4
    while i < n:
        h ^= (data[i] * p5) & m
        h = (rotl(h, 11) * p1) & m
        i += 1
    h ^= h >> 33
    h = (h * p2) & m
    h ^= h >> 29
    h = (h * p3) & m
    h ^= h >> 32
    return h


def recompute_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc32c_pypi.crc32c(bytes(batch[21:])))
    return batch


def build_batch(
    records: Sequence[Rec],
    *,
    codec: int = 0,
    transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    leader_epoch: int = 0,
    offset_deltas: list[int] | None = None,
    log_append_time: int | None = None,
    control: bool = False,
) -> bytearray:
    """One v2 batch from kafka-python's builder; records are (timestamp, key, value, headers).

    baseOffset and partitionLeaderEpoch lie outside the CRC and are patched in; LogAppendTime and
    the control flag are broker-only, so they are patched and the CRC recomputed.
    """
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    deltas = offset_deltas if offset_deltas is not None else list(range(len(records)))
    for delta, (ts, key, value, headers) in zip(deltas, records, strict=True):
        assert builder.append(delta, timestamp=ts, key=key, value=value, headers=headers) is not None
    batch = bytearray(builder.build())
    assert (batch[22] & 7) == codec, "kafka-python fell back to no compression; use compressible data"
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, leader_epoch)
    if log_append_time is not None or control:
        attrs = struct.unpack_from(">h", batch, 21)[0]
        if log_append_time is not None:
            attrs |= 0x08
            struct.pack_into(">q", batch, 35, log_append_time)
        if control:
            attrs |= 0x20
        struct.pack_into(">h", batch, 21, attrs)
        recompute_crc(batch)
    return batch


def control_batch(
    ctype: int,
    coordinator_epoch: int = 7,
    *,
    base_offset: int = 0,
    version: int = 0,
    value: bytes | None = None,
    producer_id: int = 99,
) -> bytearray:
    """An end-transaction marker / KRaft control batch: key (version, type), value (version, epoch)."""
    key = struct.pack(">hh", version, ctype)
    if value is None:
        value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [(1_700_000_000_000, key, value, [])],
        transactional=True,
        producer_id=producer_id,
        producer_epoch=1,
        base_sequence=-1,
        base_offset=base_offset,
        control=True,
    )


def compressible(i: int, n: int = 60) -> bytes:
    return (b"value-%06d-" % i) * (n // 13 + 1)


def sample_records(n: int, *, t0: int = 1_600_000_000_000) -> list[Rec]:
    out: list[Rec] = []
    for i in range(n):
        key = None if i % 5 == 3 else b"key-%d" % i
        value = None if i % 7 == 4 else compressible(i)
        headers = [] if i % 3 else [("h1", b"v1"), ("h-null", None), ("\u00e9t\u00e9", b"x" * i)]
        out.append((t0 + 17 * i - (i % 4) * 5, key, value, headers))
    return out


def independent_batches() -> list[bytes]:
    """A varied set of kafka-python-built batches (every codec, control, headers, nulls)."""
    out: list[bytes] = []
    offset = 0
    for codec in CODECS.values():
        out.append(
            bytes(
                build_batch(
                    sample_records(12),
                    codec=codec,
                    base_offset=offset,
                    producer_id=5,
                    producer_epoch=2,
                    base_sequence=40,
                )
            )
        )
        offset += 12
    out.append(bytes(control_batch(1, 3, base_offset=offset)))
    out.append(
        bytes(
            build_batch(
                sample_records(3),
                transactional=True,
                producer_id=8,
                producer_epoch=0,
                base_sequence=INT32_MAX - 1,
                base_offset=offset + 1,
                log_append_time=1_650_000_000_123,
            )
        )
    )
    return out


def check_batch_against_kafka_python(buf: bytes, row: dict[str, int]) -> DefaultRecordBatch:
    pos, size = row["position"], row["size_bytes"]
    ref = DefaultRecordBatch(buf[pos : pos + size])
    assert size == ref.size_in_bytes
    assert row["base_offset"] == ref.base_offset
    assert row["last_offset"] == ref.last_offset
    assert row["last_offset_delta"] == ref.last_offset_delta
    assert row["partition_leader_epoch"] == ref.leader_epoch
    assert row["magic"] == ref.magic == 2
    assert row["crc"] == ref.crc
    assert row["crc_valid"] == int(ref.validate_crc())
    assert row["attributes"] == ref.attributes
    assert row["base_timestamp"] == ref.first_timestamp
    assert row["max_timestamp"] == ref.max_timestamp
    assert row["producer_id"] == ref.producer_id
    assert row["producer_epoch"] == ref.producer_epoch
    assert row["base_sequence"] == ref.base_sequence
    assert row["last_sequence"] == ref.last_sequence
    assert row["count"] == ref.records_count
    return ref


def check_records_against_kafka_python(
    data: bytes,
    ref: DefaultRecordBatch,
    recs: list[dict[str, int]],
    hdrs: list[dict[str, int]],
    first_row: int = 0,
) -> None:
    """recs/hdrs: the rows of one batch (positions index `data`); hdr_record_index counts from first_row."""
    expected = list(ref)  # decompresses if needed
    assert len(recs) == len(expected)
    hdrs_by_record: dict[int, list[dict[str, int]]] = {}
    for h in hdrs:
        hdrs_by_record.setdefault(h["hdr_record_index"] - first_row, []).append(h)

    def blob(pos: int, length: int) -> bytes | None:
        if length < 0:
            assert pos == -1
            return None
        return data[pos : pos + length]

    for i, (row, rec) in enumerate(zip(recs, expected, strict=True)):
        assert row["offset"] == rec.offset
        assert row["timestamp"] == rec.timestamp
        delta = rec.offset - ref.base_offset
        seq = -1 if ref.base_sequence < 0 else ref._increment_sequence(ref.base_sequence, delta)
        assert row["sequence"] == seq
        assert blob(row["key_pos"], row["key_len"]) == rec.key
        assert blob(row["value_pos"], row["value_len"]) == rec.value
        # (xxh64 itself is checked against the specification in test_xxh64_reference_values)
        assert row["key_hash"] == (0 if rec.key is None else _native.xxh64(rec.key))
        assert row["value_hash"] == (0 if rec.value is None else _native.xxh64(rec.value))
        assert row["headers_count"] == len(rec.headers)
        got = [
            (
                data[h["hdr_key_pos"] : h["hdr_key_pos"] + h["hdr_key_len"]].decode(),
                blob(h["hdr_value_pos"], h["hdr_value_len"]),
            )
            for h in hdrs_by_record.get(i, [])
        ]
        assert got == list(rec.headers)


def check_walk_against_kafka_python(buf: bytes) -> tuple[list, list, list]:
    """Walk all of buf with records decoded and compare everything with kafka-python's reader."""
    n, batches, next_pos, reason, recs, hdrs = walk(buf)
    assert (next_pos, reason) == (len(buf), _native.REACHED_STOP)
    assert recs is not None and hdrs is not None
    ref_batches = []
    mr = MemoryRecords(buf)
    while (b := mr.next_batch()) is not None:
        ref_batches.append(b)
    assert n == len(ref_batches)
    assert [r["batch_index"] for r in recs] == sorted(r["batch_index"] for r in recs)
    assert [h["hdr_record_index"] for h in hdrs] == sorted(h["hdr_record_index"] for h in hdrs)
    rec_rows: dict[int, list[int]] = {}
    for j, r in enumerate(recs):
        rec_rows.setdefault(r["batch_index"], []).append(j)
    hdr_rows: dict[int, list[dict[str, int]]] = {}
    for h in hdrs:
        hdr_rows.setdefault(h["hdr_record_index"], []).append(h)
    pos = 0
    for i, row in enumerate(batches):
        assert row["position"] == pos
        pos += row["size_bytes"]
        ref = check_batch_against_kafka_python(buf, row)
        idx = rec_rows.get(i, [])
        my_recs = [recs[j] for j in idx]
        first_row = idx[0] if idx else 0
        my_hdrs = [h for j in idx for h in hdr_rows.get(j, [])]
        codec = row["attributes"] & 7
        if row["attributes"] & 0x20:
            assert row["records_decoded"] == 0 and not my_recs
            first = next(iter(ref), None)
            assert row["control_type"] == (first.type if first is not None else -1)
            if first is not None and first.type in (0, 1):
                assert row["coordinator_epoch"] == struct.unpack(">hi", first.value[:6])[1]
            else:
                assert row["coordinator_epoch"] == -1
        elif codec:
            assert row["control_type"] == -2 and row["coordinator_epoch"] == -1
            assert row["records_decoded"] == 0 and not my_recs
            # The compressed path: decompress in Python, frame with decode_records.
            blob = DECOMPRESS[codec](buf[row["position"] + 61 : row["position"] + row["size_bytes"]])
            cols, err, _ = _native.decode_records(
                blob,
                row["base_offset"],
                row["base_timestamp"],
                row["max_timestamp"],
                bool(row["attributes"] & 0x08),
                row["base_sequence"],
                row["count"],
                True,
            )
            assert err == -1
            drecs, dhdrs = rows(table(cols, RECORD_FMT)), rows(table(cols, HEADER_FMT))
            assert all(r["batch_index"] == 0 for r in drecs)
            check_records_against_kafka_python(blob, ref, drecs, dhdrs)
        else:
            assert row["records_decoded"] == 1 and row["err_offset"] == -1
            assert row["control_type"] == -2 and row["coordinator_epoch"] == -1
            check_records_against_kafka_python(buf, ref, my_recs, my_hdrs, first_row)
    return batches, recs, hdrs


# --------------------------------------------------------------------------------------------
# CRC-32C and XXH64
# --------------------------------------------------------------------------------------------


def test_crc32c_matches_pypi_package_and_chains() -> None:
    rng = random.Random(1)
    sizes = [
        0,
        1,
        3,
        7,
        8,
        9,
        15,
        16,
        63,
        64,
        255,
        256,
        767,
        768,
        769,
        3 * 8192 - 1,
        3 * 8192,
        3 * 8192 + 13,
        100_003,
        1 << 20,
    ]
    for size in sizes:
        data = rng.randbytes(size + 7)
        for skew in (0, 1, 5):  # unaligned starts
            chunk = memoryview(data)[skew : skew + size]
            expected = crc32c_pypi.crc32c(bytes(chunk))
            assert _native.crc32c(chunk) == expected
            assert _native._crc32c_portable(chunk) == expected
            cut = rng.randrange(size + 1)
            assert _native.crc32c(chunk[cut:], _native.crc32c(chunk[:cut])) == expected
            assert _native.crc32c(bytes(chunk[cut:]), crc=crc32c_pypi.crc32c(bytes(chunk[:cut]))) == expected
    assert _native.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert _native.crc32c(bytearray(b"abc")) == crc32c_pypi.crc32c(b"abc")


def test_xxh64_reference_values() -> None:
    assert _native.xxh64(b"") == 0xEF46DB3751D8E999
    assert _native.xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert _native.xxh64(b"abc") == 0x44BC2CF5AD770999
    rng = random.Random(2)
    for size in [*list(range(0, 80)), 127, 128, 129, 1000, 4099]:
        data = rng.randbytes(size)
        assert _native.xxh64(data) == xxh64_reference(data)
        assert _native.xxh64(data, 0x1234567890) == xxh64_reference(data, 0x1234567890)
    # the record hashes are the same function
    buf = bytes(build_batch([(0, b"", b"a", []), (1, b"abc", b"", [])]))
    _, _, _, _, recs, _ = walk(buf)
    assert [(r["key_hash"], r["value_hash"]) for r in recs] == [
        (0xEF46DB3751D8E999, 0xD24EC4F1A98C6E5B),
        (0x44BC2CF5AD770999, 0xEF46DB3751D8E999),
    ]


def test_record_hashes_are_opt_in_and_change_nothing_else() -> None:
    buf = bytes(build_batch([(0, b"k", b"a", []), (1, b"abc", b"", [])]))
    _, _, _, _, hashed, _ = walk(buf)
    _, _, _, _, plain, _ = walk(buf, hash_values=False)
    assert [(r["key_hash"], r["value_hash"]) for r in plain] == [(0, 0), (0, 0)]
    strip = [{k: v for k, v in r.items() if not k.endswith("_hash")} for r in hashed]
    assert strip == [{k: v for k, v in r.items() if not k.endswith("_hash")} for r in plain]


def test_xxh64_against_the_xxhash_package() -> None:
    import xxhash

    rng = random.Random(3)
    for size in range(0, 300):
        data = rng.randbytes(size)
        assert _native.xxh64(data) == xxhash.xxh64_intdigest(data)


# --------------------------------------------------------------------------------------------
# batches built by kafka-python
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("transactional", [False, True])
def test_every_codec_against_kafka_python(codec: str, transactional: bool) -> None:
    buf = b"".join(
        [
            bytes(
                build_batch(
                    sample_records(25),
                    codec=CODECS[codec],
                    transactional=transactional,
                    producer_id=1234,
                    producer_epoch=7,
                    base_sequence=100,
                    base_offset=1000,
                    leader_epoch=3,
                )
            ),
            bytes(build_batch(sample_records(1, t0=5), codec=0, base_offset=1025)),  # no producer
            bytes(
                build_batch(
                    sample_records(40),
                    codec=CODECS[codec],
                    transactional=transactional,
                    producer_id=1234,
                    producer_epoch=7,
                    base_sequence=125,
                    base_offset=1026,
                    leader_epoch=4,
                )
            ),
        ]
    )
    batches, _, _ = check_walk_against_kafka_python(buf)
    assert [b["attributes"] & 7 for b in batches] == [CODECS[codec], 0, CODECS[codec]]
    assert [b["attributes"] & 0x10 for b in batches] == [0x10 * transactional, 0, 0x10 * transactional]
    assert all(b["crc_valid"] == 1 for b in batches)


def test_memory_records_builder_batches() -> None:
    parts = []
    for codec in CODECS.values():
        builder = MemoryRecordsBuilder(
            magic=2,
            compression_type=codec,
            batch_size=1 << 20,
            producer_id=77,
            producer_epoch=1,
            base_sequence=9,
        )
        for i in range(30):
            builder.append(
                timestamp=1_000 + i,
                key=b"k%d" % (i % 4),
                value=compressible(i),
                headers=[("trace", b"%d" % i)],
            )
        builder.close()
        parts.append(bytes(builder.buffer()))
    check_walk_against_kafka_python(b"".join(parts))


def test_wrapping_sequence() -> None:
    buf = bytes(build_batch(sample_records(4), producer_id=3, producer_epoch=0, base_sequence=2147483646))
    _, batches, _, _, recs, _ = walk(buf)
    assert batches[0]["base_sequence"] == 2147483646
    assert batches[0]["last_sequence"] == 1
    assert [r["sequence"] for r in recs] == [2147483646, 2147483647, 0, 1]
    check_walk_against_kafka_python(buf)


def test_log_append_time_uses_max_timestamp() -> None:
    buf = bytes(
        build_batch(
            sample_records(5),
            log_append_time=1_777_000_000_000,
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    _, batches, _, _, recs, _ = walk(buf)
    assert batches[0]["attributes"] & 0x08
    assert batches[0]["crc_valid"] == 1
    assert [r["timestamp"] for r in recs] == [1_777_000_000_000] * 5
    check_walk_against_kafka_python(buf)
    # compressed + LogAppendTime through decode_records
    buf = bytes(build_batch(sample_records(5), codec=1, log_append_time=1_777_000_000_001))
    check_walk_against_kafka_python(buf)


def test_null_keys_values_headers_and_compaction_gaps() -> None:
    records: list[Rec] = [
        (10, None, None, []),
        (11, b"", b"", [("", b""), ("k", None)]),
        (12, b"k" * 300, b"v" * 70_000, [("big", b"h" * 200)]),  # multi-byte varints
        (9, None, b"tombstone-not", []),
    ]
    buf = bytes(build_batch(records, offset_deltas=[0, 3, 4, 9], base_offset=50))
    _, batches, _, _, recs, hdrs = walk(buf)
    assert batches[0]["last_offset"] == 59 and batches[0]["count"] == 4
    assert [r["offset"] for r in recs] == [50, 53, 54, 59]
    assert [r["key_len"] for r in recs] == [-1, 0, 300, -1]
    assert [r["value_len"] for r in recs] == [-1, 0, 70_000, 13]
    assert next(r["key_pos"] for r in recs) == -1
    assert [(h["hdr_record_index"], h["hdr_key_len"], h["hdr_value_len"]) for h in hdrs] == [
        (1, 0, 0),
        (1, 1, -1),
        (2, 3, 200),
    ]
    assert hdrs[1]["hdr_value_pos"] == -1
    check_walk_against_kafka_python(buf)


def test_empty_batch_after_compaction() -> None:
    # DefaultRecordBatch.writeEmptyHeader: 61 bytes, count 0, keeps lastOffsetDelta / sequences.
    header = bytearray(61)
    struct.pack_into(">qiibIhiqqqhii", header, 0, 500, 49, 3, 2, 0, 0x10, 4, -1, 1_700, 42, 3, 90, 0)
    buf = bytes(recompute_crc(header))
    _, batches, next_pos, reason, recs, _ = walk(buf)
    row = batches[0]
    assert (next_pos, reason) == (61, 0)
    assert row["size_bytes"] == 61 and row["count"] == 0 and row["crc_valid"] == 1
    assert row["last_offset"] == 504 and row["last_sequence"] == 94
    assert row["records_decoded"] == 1 and recs == []


def test_control_batches() -> None:
    parts = [
        control_batch(0, 11, base_offset=0),  # ABORT
        control_batch(1, 12, base_offset=1),  # COMMIT
        control_batch(2, base_offset=2, value=b"\x00\x00leader-change"),  # LEADER_CHANGE
        control_batch(17, base_offset=3),  # unknown but parseable type: kept raw
        control_batch(-5, base_offset=4),  # negative type -> -1
        control_batch(1, base_offset=5, version=-1),  # negative key version -> -1
        # An invalid EndTransactionMarker (EndTransactionMarker.deserializeValue throws) is no ABORT/COMMIT
        # with a made-up coordinator epoch: an unknown type (the decoder reports why, `_control_marker`).
        control_batch(0, base_offset=6, value=b"\x00\x00\x00\x01\x02"),  # marker value too short
        control_batch(1, base_offset=7, value=struct.pack(">hi", -1, 5)),  # negative marker version
        # a newer marker version is read as its v0 prefix
        control_batch(1, base_offset=8, value=struct.pack(">hi", 3, 77) + b"future"),
    ]
    buf = b"".join(bytes(p) for p in parts)
    _, batches, _, _, recs, _ = walk(buf)
    assert [b["control_type"] for b in batches] == [0, 1, 2, 17, -1, -1, -1, -1, 1]
    assert [b["coordinator_epoch"] for b in batches] == [11, 12, -1, -1, -1, -1, -1, -1, 77]
    assert all(b["records_decoded"] == 0 for b in batches) and recs == []
    assert all(b["attributes"] & 0x30 == 0x30 for b in batches)
    check_walk_against_kafka_python(b"".join(bytes(p) for p in parts[:4]))
    # An empty control batch (compacted) and a control batch whose record does not frame.
    empty = bytearray(parts[0][:61])
    struct.pack_into(">i", empty, 8, 49)
    struct.pack_into(">i", empty, 57, 0)
    broken = bytearray(parts[1])
    broken[61] = 0x7F  # record Length far beyond the batch
    _, batches, _, _, _, _ = walk(bytes(recompute_crc(empty)) + bytes(broken))
    assert [b["control_type"] for b in batches] == [-1, -1]
    assert [b["coordinator_epoch"] for b in batches] == [-1, -1]


def test_a_one_record_control_batch_with_bytes_after_its_record_is_no_marker() -> None:
    """`RecordIterator.next` refuses a batch's last record when bytes remain after it ("records still
    remaining"): a marker batch of one record with bytes after it is no COMMIT, whatever its record
    says. With two records the first is read alone (nothing is checked after it)."""
    one = control_batch(1, 12)
    one += b"\x00\x00"
    struct.pack_into(">i", one, 8, len(one) - 12)
    _, batches, _, _, _, _ = walk(bytes(recompute_crc(one)))
    assert (batches[0]["control_type"], batches[0]["coordinator_epoch"]) == (-1, -1)
    marker = (1_700_000_000_000, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 12), [])
    two = build_batch([marker, marker], transactional=True, producer_id=99, producer_epoch=1, control=True)
    _, batches, _, _, _, _ = walk(bytes(two))
    assert (batches[0]["control_type"], batches[0]["coordinator_epoch"]) == (1, 12)


def test_a_garbage_offset_delta_or_base_sequence_takes_javas_int_arithmetic() -> None:
    """`DefaultRecordBatch.incrementSequence` in Java ints (`Integer.MAX_VALUE - increment` wraps for a
    negative increment), and `lastSequence` is NO_SEQUENCE only for a base sequence of -1 (any other
    negative base is incremented). Each value below is what Kafka 4.3.1's reader gives."""
    records = [(1_700_000_000_000, b"k", b"v", [])]
    batch = build_batch(records, producer_id=3, producer_epoch=0, base_sequence=5, offset_deltas=[-1])
    struct.pack_into(">i", batch, 23, -1)  # lastOffsetDelta
    _, batches, _, _, recs, _ = walk(bytes(recompute_crc(batch)))
    assert [r["sequence"] for r in recs] == [-2147483644]
    assert batches[0]["last_sequence"] == -2147483644
    struct.pack_into(">i", batch, 53, -2)  # baseSequence
    struct.pack_into(">i", batch, 23, 3)
    _, batches, _, _, _, _ = walk(bytes(recompute_crc(batch)), decode=False)
    assert batches[0]["last_sequence"] == 1
    struct.pack_into(">i", batch, 53, 2147483647)
    struct.pack_into(">i", batch, 23, -1)
    _, batches, _, _, _, _ = walk(bytes(recompute_crc(batch)), decode=False)
    assert batches[0]["last_sequence"] == -2


def test_crc_valid_flag_on_every_byte_flip() -> None:
    buf = bytes(build_batch(sample_records(3), producer_id=1, producer_epoch=0, base_sequence=0))
    size = len(buf)
    for i in range(size):
        bad = bytearray(buf)
        bad[i] ^= 0x40
        n, batches, _, _reason, _, _ = walk(bytes(bad))
        if i in range(8, 12) or i == 16:  # length / magic: framing changes, not the CRC
            continue
        assert n == 1, i
        expected = 0 if i >= 17 else 1  # bytes 0-16 (offset, length, epoch, magic) are outside the CRC
        assert batches[0]["crc_valid"] == expected, i


# --------------------------------------------------------------------------------------------
# real broker-written files
# --------------------------------------------------------------------------------------------


def test_codecrafters_kraft_log_exact_values() -> None:
    buf = CODECRAFTERS_LOG.read_bytes()
    n, batches, next_pos, reason, recs, hdrs = walk(buf)
    assert (n, next_pos, reason) == (2, 150, 0)
    assert [b["position"] for b in batches] == [0, 80]
    assert [b["size_bytes"] for b in batches] == [80, 70]
    assert [(b["base_offset"], b["last_offset"]) for b in batches] == [(0, 1), (2, 2)]
    assert [(b["producer_id"], b["producer_epoch"]) for b in batches] == [(0, 0), (0, 0)]
    assert [(b["base_sequence"], b["last_sequence"]) for b in batches] == [(0, 1), (2, 2)]
    assert [b["crc"] for b in batches] == [1495201167, 3470726263]
    assert [b["crc_valid"] for b in batches] == [1, 1]
    assert [b["max_timestamp"] for b in batches] == [1725272040952, 1725272041932]
    assert [b["count"] for b in batches] == [2, 1]
    assert [b["control_type"] for b in batches] == [-2, -2]
    assert [b["records_decoded"] for b in batches] == [1, 1]
    assert [r["batch_index"] for r in recs] == [0, 0, 1]
    assert [r["offset"] for r in recs] == [0, 1, 2]
    assert [r["sequence"] for r in recs] == [0, 1, 2]
    assert [r["timestamp"] for r in recs] == [1725272040411, 1725272040952, 1725272041932]
    assert [(r["key_pos"], r["key_len"]) for r in recs] == [(-1, -1)] * 3
    assert [buf[r["value_pos"] : r["value_pos"] + r["value_len"]] for r in recs] == [b"m1", b"m2", b"m3"]
    assert hdrs == []
    check_walk_against_kafka_python(buf)


def test_kraft_metadata_log_against_kafka_python() -> None:
    buf = METADATA_LOG.read_bytes()
    batches, recs, _ = check_walk_against_kafka_python(buf)
    assert len(batches) == 51244
    control = [b for b in batches if b["control_type"] != -2]
    assert control and all(b["attributes"] & 0x20 for b in control)
    assert 2 in {b["control_type"] for b in control}  # LEADER_CHANGE
    assert all(b["crc_valid"] for b in batches)
    assert len(recs) == sum(b["count"] for b in batches if b["control_type"] == -2)


def test_software_crc_path_gives_identical_columns() -> None:
    buf = METADATA_LOG.read_bytes()[:400_000] + b"".join(independent_batches())
    hw = _native.walk_batches(buf, 0, len(buf), True, 1 << 40)
    previous = _native._set_crc_impl(False)
    try:
        sw = _native.walk_batches(buf, 0, len(buf), True, 1 << 40)
        assert _native.crc32c(buf) == crc32c_pypi.crc32c(buf)
    finally:
        _native._set_crc_impl(previous)
    assert hw == sw


# --------------------------------------------------------------------------------------------
# stop reasons and arguments
# --------------------------------------------------------------------------------------------


def legacy_v1_entry() -> bytes:
    builder = MemoryRecordsBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1_000, key=b"k", value=b"legacy")
    builder.close()
    entry = bytes(builder.buffer())
    assert entry[16] == 1
    return entry


def test_stop_reasons() -> None:
    buf = CODECRAFTERS_LOG.read_bytes()
    # truncated tail: the second batch runs past the end
    n, _, next_pos, reason, _, _ = walk(buf[:-5])
    assert (n, next_pos, reason) == (1, 80, _native.NEED_MORE_DATA)
    # fewer than 17 bytes left
    n, _, next_pos, reason, _, _ = walk(buf + b"\x00" * 16)
    assert (n, next_pos, reason) == (2, 150, _native.NEED_MORE_DATA)
    # garbage lengths (with magic 2): too small, too big, negative
    for length in (0, 48, (1 << 30) + 1, -1):
        tail = struct.pack(">qiib", 9, length, 0, 2)
        n, _, next_pos, reason, _, _ = walk(buf + tail + b"\x00" * 100)
        assert (n, next_pos, reason) == (2, 150, _native.BAD_LENGTH), length
    # the largest sane length is only "need more data"
    n, _, next_pos, reason, _, _ = walk(buf + struct.pack(">qiib", 9, 1 << 30, 0, 2))
    assert (n, next_pos, reason) == (2, 150, _native.NEED_MORE_DATA)
    # magic is checked before the length: a legacy entry (any length) is NOT_V2
    legacy = legacy_v1_entry()
    n, _, next_pos, reason, _, _ = walk(buf + legacy + buf)
    assert (n, next_pos, reason) == (2, 150, _native.NOT_V2)
    n, _, next_pos, reason, _, _ = walk(buf + struct.pack(">qiib", 9, 3, 0, 0) + b"\x00" * 64)
    assert (n, next_pos, reason) == (2, 150, _native.NOT_V2)
    # resume after the legacy entry
    n, batches, next_pos, reason, _, _ = walk(buf + legacy + buf, start=150 + len(legacy))
    assert (n, next_pos, reason) == (2, 300 + len(legacy), 0)
    assert [b["position"] for b in batches] == [150 + len(legacy), 230 + len(legacy)]


def test_stop_bound_and_max_batches() -> None:
    buf = CODECRAFTERS_LOG.read_bytes()
    assert walk(buf, stop=80)[:4:2] == (1, 80)
    n, _, next_pos, reason, _, _ = walk(buf, stop=81)  # a batch may start before stop and run past it
    assert (n, next_pos, reason) == (2, 150, _native.REACHED_STOP)
    n, _, next_pos, reason, _, _ = walk(buf, stop=0)
    assert (n, next_pos, reason) == (0, 0, _native.REACHED_STOP)
    n, _, next_pos, reason, _, _ = walk(buf, start=80)
    assert (n, next_pos, reason) == (1, 150, _native.REACHED_STOP)
    n, _, next_pos, reason, recs, _ = walk(buf, max_batches=1)
    assert (n, next_pos, reason) == (1, 80, _native.FULL)
    assert [r["batch_index"] for r in recs] == [0, 0]
    n, _, next_pos, reason, _, _ = walk(buf, max_batches=0)
    assert (n, next_pos, reason) == (0, 0, _native.FULL)
    n, _, next_pos, reason, _, _ = walk(buf, start=150, max_batches=0)  # nothing there: stop first
    assert (n, next_pos, reason) == (0, 150, _native.REACHED_STOP)
    n, _, next_pos, reason, _, _ = walk(buf[:-1], start=80, max_batches=0)  # incomplete beats FULL
    assert (n, next_pos, reason) == (0, 80, _native.NEED_MORE_DATA)
    n, _, next_pos, reason, _, _ = walk(b"")
    assert (n, next_pos, reason) == (0, 0, _native.REACHED_STOP)


def test_decode_false_gives_no_record_columns() -> None:
    buf = CODECRAFTERS_LOG.read_bytes()
    _n, batches, _next_pos, _reason, recs, hdrs = walk(buf, decode=False)
    assert recs is None and hdrs is None
    assert [b["records_decoded"] for b in batches] == [0, 0]
    assert [b["err_offset"] for b in batches] == [-1, -1]
    with_records = walk(buf, decode=True)[1]
    strip = ("records_decoded",)
    assert [{k: v for k, v in b.items() if k not in strip} for b in batches] == [
        {k: v for k, v in b.items() if k not in strip} for b in with_records
    ]


def test_buffer_types_and_bad_arguments(tmp_path: Path) -> None:
    buf = CODECRAFTERS_LOG.read_bytes()
    expected = _native.walk_batches(buf, 0, len(buf), True, 10)
    assert _native.walk_batches(bytearray(buf), 0, len(buf), True, 10) == expected
    assert _native.walk_batches(memoryview(buf), 0, len(buf), True, 10) == expected
    path = tmp_path / "seg.log"
    path.write_bytes(buf)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert _native.walk_batches(mm, 0, len(buf), True, 10) == expected
    # keyword arguments
    kwargs = {"buf": buf, "start": 0, "stop": len(buf), "decode_records": True, "max_batches": 10}
    assert _native.walk_batches(**kwargs) == expected
    with pytest.raises(ValueError):
        _native.walk_batches(buf, len(buf) + 1, len(buf) + 1, True, 10)
    with pytest.raises(ValueError):
        _native.walk_batches(buf, 0, len(buf) + 1, True, 10)
    with pytest.raises(ValueError):
        _native.walk_batches(buf, 10, 5, True, 10)
    with pytest.raises(ValueError):
        _native.walk_batches(buf, -1, 5, True, 10)
    with pytest.raises(ValueError):
        _native.walk_batches(buf, 0, 5, True, -1)
    with pytest.raises(TypeError):
        _native.walk_batches("not bytes", 0, 0, True, 10)
    with pytest.raises(TypeError):
        _native.crc32c(12)
    with pytest.raises((TypeError, BufferError, ValueError)):
        _native.walk_batches(memoryview(buf)[::2], 0, 10, True, 10)  # not contiguous
    with pytest.raises(TypeError):
        _native.decode_records(b"", 0, 0, 0, False, 0)  # missing count


# --------------------------------------------------------------------------------------------
# record framing errors
# --------------------------------------------------------------------------------------------


def record_starts(batch: bytes) -> list[int]:
    """Offsets (within the batch) where each record of an uncompressed batch starts."""
    from kafka.record.util import decode_varint

    starts, pos = [], 61
    while pos < len(batch):
        starts.append(pos)
        length, after = decode_varint(batch, pos)
        pos = after + length
    return starts


def test_framing_errors_roll_back_the_batch() -> None:
    good1 = bytes(build_batch(sample_records(3), base_offset=0))
    bad = bytearray(build_batch(sample_records(4), base_offset=3))
    starts = record_starts(bytes(bad))
    bad[starts[2] + 1] = 0x05  # attributes byte -> fine; now break the timestamp varint instead
    bad[starts[2] + 2 : starts[2] + 7] = b"\xff\xff\xff\xff\xff"  # varlong runs to the next field
    good2 = bytes(build_batch(sample_records(2), base_offset=7))
    buf = good1 + bytes(bad) + good2
    n, batches, _, _, recs, hdrs = walk(buf)
    assert n == 3
    assert [b["records_decoded"] for b in batches] == [1, 2, 1]
    assert [b["err_offset"] for b in batches] == [-1, starts[2], -1]
    assert [b["crc_valid"] for b in batches] == [1, 0, 1]
    assert [r["batch_index"] for r in recs] == [0, 0, 0, 2, 2]
    assert [r["offset"] for r in recs] == [0, 1, 2, 7, 8]
    assert all(h["hdr_record_index"] in (0, 3) for h in hdrs)  # headers of batch 1 rolled back too
    assert len(hdrs) == 3 + 3


def framing_case(mutate) -> tuple[int, int]:
    batch = bytearray(build_batch(sample_records(4)))
    mutate(batch, record_starts(bytes(batch)))
    _, batches, _, _, recs, _ = walk(bytes(batch))
    assert recs == [] or batches[0]["records_decoded"] == 1
    return batches[0]["records_decoded"], batches[0]["err_offset"]


def test_framing_error_kinds() -> None:
    def count(v):
        return lambda b, s: struct.pack_into(">i", b, 57, v)

    assert framing_case(lambda b, s: None) == (1, -1)
    size = len(build_batch(sample_records(4)))
    assert framing_case(count(5)) == (2, size)  # a record is missing: fails at the batch end
    starts = record_starts(bytes(build_batch(sample_records(4))))
    assert framing_case(count(3)) == (2, starts[3])  # bytes remain
    assert framing_case(count(-1)) == (2, 61)  # "Found invalid record count"
    # No records, whatever bytes follow: DefaultRecordBatch.iterator() is empty when count() == 0.
    assert framing_case(count(0)) == (1, -1)

    def set_byte(index_of, value):
        def f(b, s):
            b[index_of(s)] = value

        return f

    # record Length 0, negative, beyond the batch
    assert framing_case(set_byte(lambda s: s[1], 0x00)) == (2, starts[1])
    assert framing_case(set_byte(lambda s: s[0], 0x01))[0] == 2  # zigzag 1 = -1
    assert framing_case(set_byte(lambda s: s[3], 0x7E))[0] == 2

    # a varint with the continuation bit set on its 5th byte
    def long_varint(b, s):
        b[s[0] + 3 : s[0] + 8] = b"\x80\x80\x80\x80\x80"

    assert framing_case(long_varint)[0] == 2


def test_header_framing_errors() -> None:
    from kafka.record.util import decode_varint

    def batch_with_header_key_len(encoded: bytes) -> tuple[int, int]:
        batch = bytearray(build_batch([(0, b"k", b"v", [("a", b"b")])]))
        # record: len attr ts off klen k vlen v hcount hklen 'a' hvlen 'b'
        start = 61
        _, body = decode_varint(batch, start)
        hk = body + 1 + 1 + 1 + 2 + 2 + 1
        assert batch[hk] == 2 and batch[hk + 1 : hk + 2] == b"a"
        batch[hk] = encoded[0]
        _, batches, _, _, recs, hdrs = walk(bytes(batch))
        return batches[0]["records_decoded"], len(recs) + len(hdrs)

    assert batch_with_header_key_len(b"\x02") == (1, 2)
    assert batch_with_header_key_len(b"\x01") == (2, 0)  # negative header key length
    assert batch_with_header_key_len(b"\x00") == (2, 0)  # consumes fewer bytes than Length


def test_decode_records_errors_keep_complete_records() -> None:
    batch = bytes(
        build_batch(sample_records(5), base_offset=100, producer_id=1, producer_epoch=0, base_sequence=7)
    )
    blob = batch[61:]
    starts = [s - 61 for s in record_starts(batch)]
    cols, err, _ = _native.decode_records(blob, 100, 1_600_000_000_000, 0, False, 7, 5)
    assert err == -1
    recs = rows(table(cols, RECORD_FMT))
    assert [r["offset"] for r in recs] == [100, 101, 102, 103, 104]
    assert [r["sequence"] for r in recs] == [7, 8, 9, 10, 11]
    key_pos, key_len = recs[0]["key_pos"], recs[0]["key_len"]
    assert blob[key_pos : key_pos + key_len] == b"key-0"  # positions index the blob
    # truncated blob: the last record is cut
    cols, err, _ = _native.decode_records(blob[:-1], 100, 0, 0, False, 7, 5)
    assert err == starts[4]
    assert len(rows(table(cols, RECORD_FMT))) == 4
    # bytes left over
    cols, err, _ = _native.decode_records(blob + b"\x00", 100, 0, 0, False, 7, 5)
    assert err == len(blob) and len(rows(table(cols, RECORD_FMT))) == 5
    # count larger than the records
    cols, err, _ = _native.decode_records(blob, 100, 0, 0, False, 7, 6)
    assert err == len(blob) and len(rows(table(cols, RECORD_FMT))) == 5
    # negative count, empty
    assert _native.decode_records(blob, 0, 0, 0, False, -1, -3)[1] == 0
    cols, err, _ = _native.decode_records(b"", 0, 0, 0, False, -1, 0)
    assert err == -1 and all(v == b"" for v in cols.values()) and set(cols) == set(ALL_RECORD_FMT)
    # headers of the failing record are not emitted
    cols, err, _ = _native.decode_records(blob[: starts[3] + 10], 100, 0, 0, False, 7, 5)
    assert err == starts[3]
    hdrs = rows(table(cols, HEADER_FMT))
    assert {h["hdr_record_index"] for h in hdrs} == {0}


def test_decode_records_with_negative_sequence_and_timestamps() -> None:
    batch = bytes(build_batch(sample_records(3, t0=-5)))
    cols, err, _ = _native.decode_records(memoryview(batch)[61:], -10, -5, 99, False, -1, 3)
    assert err == -1
    recs = rows(table(cols, RECORD_FMT))
    assert [r["offset"] for r in recs] == [-10, -9, -8]
    assert [r["sequence"] for r in recs] == [-1, -1, -1]
    assert [r["timestamp"] for r in recs] == [t for t, *_ in sample_records(3, t0=-5)]
    cols, err, _ = _native.decode_records(batch[61:], 0, -5, 99, True, 0, 3)
    assert [r["timestamp"] for r in rows(table(cols, RECORD_FMT))] == [99, 99, 99]


# --------------------------------------------------------------------------------------------
# growth, large inputs, leaks
# --------------------------------------------------------------------------------------------


def test_growth_of_every_column_set() -> None:
    # tiny records (null key and value: 8 bytes) exceed the up-front record reservation,
    # many headers exceed the header reservation, many batches exceed the batch reservation
    tiny = bytes(build_batch([(0, None, None, [])] * 3000))
    many_headers = bytes(build_batch([(0, b"k", b"v", [(f"h{j}", b"x") for j in range(200)])] * 3))
    small = bytes(build_batch([(0, b"k", b"v", [])]))
    buf = tiny + many_headers + small * 9000
    n, batches, next_pos, reason, recs, hdrs = walk(buf)
    assert (n, next_pos, reason) == (9002, len(buf), 0)
    assert len(recs) == 3000 + 3 + 9000 and len(hdrs) == 600
    assert all(b["records_decoded"] == 1 for b in batches)
    n2, batches2, *_ = walk(buf, decode=False)
    assert n2 == n and [b["crc"] for b in batches2] == [b["crc"] for b in batches]


def test_large_input_releases_gil_and_matches_small_calls() -> None:
    buf = METADATA_LOG.read_bytes()
    whole = _native.walk_batches(buf, 0, len(buf), True, 1 << 40)
    # the same walk in chunks of 1000 batches gives the same batch columns
    pos, parts = 0, []
    while True:
        _n, cols, pos, reason, _ = _native.walk_batches(buf, pos, len(buf), False, 1000)
        parts.append(cols)
        if reason != _native.FULL:
            break
    assert pos == len(buf)
    for name in ("position", "crc", "base_offset", "control_type"):
        assert b"".join(p[name] for p in parts) == whole[1][name]


def test_no_memory_leak() -> None:
    buf = METADATA_LOG.read_bytes()[:300_000] + b"".join(independent_batches())
    for _ in range(3):
        _native.walk_batches(buf, 0, len(buf), True, 1 << 40)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(40):
            _native.walk_batches(buf, 0, len(buf), bool(i % 2), 1 << 40)
            _native.decode_records(buf[61:2000], 0, 0, 0, False, 0, 30)
            _native.crc32c(buf)
            with pytest.raises(ValueError):
                _native.walk_batches(buf, 5, 1, True, 3)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024


def test_gzip_helper_is_standard() -> None:
    # sanity for the compressed path used above: kafka-python's gzip is plain RFC 1952
    batch = build_batch(sample_records(10), codec=1)
    assert gzip.decompress(bytes(batch[61:])) == gzip_decode(bytes(batch[61:]))


def test_random_independent_batches_roundtrip() -> None:
    rng = random.Random(4)
    parts, offset = [], 0
    for _ in range(40):
        count = rng.randrange(1, 30)
        records: list[Rec] = [
            (
                rng.randrange(-(1 << 40), 1 << 40),
                None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 300)),
                None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 3000)),
                [
                    (os.urandom(rng.randrange(0, 5)).hex(), None if rng.random() < 0.3 else rng.randbytes(7))
                    for _ in range(rng.randrange(0, 4))
                ],
            )
            for _ in range(count)
        ]
        deltas = sorted(rng.sample(range(count * 3), count))
        seq = rng.choice([-1, rng.randrange(0, INT32_MAX)])
        pid = -1 if seq < 0 else rng.randrange(0, 1 << 40)
        parts.append(
            bytes(
                build_batch(
                    records,
                    base_offset=offset,
                    offset_deltas=deltas,
                    producer_id=pid,
                    producer_epoch=-1 if pid < 0 else rng.randrange(0, 1 << 15),
                    base_sequence=seq,
                    leader_epoch=rng.randrange(-1, 100),
                )
            )
        )
        offset += deltas[-1] + 1
    check_walk_against_kafka_python(b"".join(parts))


def test_ten_byte_varlong_timestamp_delta() -> None:
    # delta 2**62 zigzags to 2**63: a 10-byte varlong (ByteUtils.readVarlong's longest form)
    records: list[Rec] = [(0, b"a", b"b", []), (2**62, b"c", b"d", []), (-(2**62), b"e", b"f", [])]
    buf = bytes(build_batch(records))
    _, batches, _, _, recs, _ = walk(buf)
    assert batches[0]["records_decoded"] == 1
    assert [r["timestamp"] for r in recs] == [0, 2**62, -(2**62)]
    check_walk_against_kafka_python(buf)
    # a continuation bit on the 10th byte is "Varlong is too long"
    start = record_starts(buf)[1]
    assert buf[start + 2 : start + 12][-1] == 0x01 and all(x & 0x80 for x in buf[start + 2 : start + 11])
    bad = bytearray(buf)
    bad[start + 11] = 0x81
    _, batches, _, _, recs, _ = walk(bytes(bad))
    assert (batches[0]["records_decoded"], batches[0]["err_offset"]) == (2, start)
    # a 5-byte varint whose 5th byte carries bits beyond bit 31: Java's `tmp << 28` drops them
    body = bytes([0x00, 0x00, 0x80, 0x80, 0x80, 0x80, 0x72, 0x01, 0x01, 0x00])
    cols, err, _ = _native.decode_records(bytes([len(body) * 2]) + body, 10, 0, 0, False, 5, 1)
    assert err == -1
    recs = rows(table(cols, RECORD_FMT))
    assert [r["offset"] for r in recs] == [10 + 0x10000000]
    assert [r["sequence"] for r in recs] == [5 + 0x10000000]
    # ... but a continuation bit on the 5th byte is "Varint is too long"
    body = bytes([0x00, 0x00, 0x80, 0x80, 0x80, 0x80, 0x82, 0x00, 0x01, 0x01, 0x00])
    assert _native.decode_records(bytes([len(body) * 2]) + body, 10, 0, 0, False, 5, 1)[1] == 0


def test_concurrent_walks_in_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    buf = METADATA_LOG.read_bytes()
    expected = _native.walk_batches(buf, 0, len(buf), True, 1 << 40)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: _native.walk_batches(buf, 0, len(buf), True, 1 << 40), range(8)))
    assert all(r == expected for r in results)
