"""Independent encoders for tests: kafka-python's batch builders, never our own code."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c as crc32c_package
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass
class V2Batch:
    base_offset: int = 0
    records: Sequence[tuple[bytes | None, bytes | None]] = ((None, b"v"),)
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    codec: str = "none"
    transactional: bool = False
    base_timestamp: int = 1_700_000_000_000
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)
    partition_leader_epoch: int = 0


def build_v2(batch: V2Batch) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODEC_IDS[batch.codec],
        is_transactional=batch.transactional,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        batch_size=1 << 30,
    )
    for delta, (key, value) in enumerate(batch.records):
        builder.append(
            delta, timestamp=batch.base_timestamp + delta, key=key, value=value, headers=list(batch.headers)
        )
    raw = bytearray(builder.build())
    # baseOffset and partitionLeaderEpoch lie outside the CRC: set them as a broker would.
    struct.pack_into(">q", raw, 0, batch.base_offset)
    struct.pack_into(">i", raw, 12, batch.partition_leader_epoch)
    return bytes(raw)


def build_legacy(
    magic: int,
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    first_offset: int,
    codec: str = "none",
    timestamp: int = 1_500_000_000_000,
) -> bytes:
    """A legacy message set as a broker stores it: absolute offsets, wrapper offset = last inner offset."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODEC_IDS[codec], batch_size=1 << 30)
    for i, (key, value) in enumerate(records):
        # v1 compressed inner offsets are relative; uncompressed ones absolute.
        inner = i if (codec != "none" and magic == 1) else first_offset + i
        builder.append(inner, timestamp=timestamp + i if magic == 1 else None, key=key, value=value)
    raw = bytearray(builder.build())
    if codec != "none":
        struct.pack_into(">q", raw, 0, first_offset + len(records) - 1)
    return bytes(raw)


def segment(*entries: bytes) -> bytes:
    return b"".join(entries)


# ProducerSnapshot.json version 1 (formats §4.1): producerId, epoch, lastSequence, lastOffset,
# offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset; CRC by the `crc32c` PyPI package.
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def producer_snapshot(
    entries: Sequence[tuple[int, ...]], *, version: int = 1, crc: int | None = None
) -> bytes:
    """A `<offset>.snapshot` file holding `entries` (fields in SNAPSHOT_ENTRY order)."""
    body = struct.pack(">i", len(entries)) + b"".join(SNAPSHOT_ENTRY.pack(*entry) for entry in entries)
    stored = crc32c_package.crc32c(body) if crc is None else crc
    return struct.pack(">hI", version, stored) + body
