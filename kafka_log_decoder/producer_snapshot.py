"""Producer-state snapshots, `<offset>.snapshot` (ProducerSnapshot.json version 1; formats §4).

A snapshot that fails any check is reported whole as `SNAPSHOT_CORRUPT` and yields no entries:
the broker deletes a corrupt snapshot and falls back to an older one (`ProducerStateManager.readSnapshot`).
"""

from __future__ import annotations

import os
import struct

from kafka_log_decoder.constants import (
    PRODUCER_SNAPSHOT_ENTRY_SIZE,
    PRODUCER_SNAPSHOT_HEADER_SIZE,
    PRODUCER_SNAPSHOT_VERSION,
)
from kafka_log_decoder.discovery import segment_base_offset
from kafka_log_decoder.errors import CorruptionKind, DecodeError, decode_file
from kafka_log_decoder.native import crc32c
from kafka_log_decoder.rows import SnapshotEntry

__all__ = ["decode_producer_snapshot", "read_producer_snapshot"]

# version int16 | crc uint32 | entry count int32
_HEADER = struct.Struct(">hIi")
# ProducerId int64, Epoch int16, LastSequence int32, LastOffset int64, OffsetDelta int32,
# Timestamp int64, CoordinatorEpoch int32, CurrentTxnFirstOffset int64
_ENTRY = struct.Struct(">qhiqiqiq")
# The CRC covers everything after the crc field: the entry count and the entries.
_CRC_START = 6
_CRC_POSITION = 2
_COUNT_POSITION = 6

assert _HEADER.size == PRODUCER_SNAPSHOT_HEADER_SIZE
assert _ENTRY.size == PRODUCER_SNAPSHOT_ENTRY_SIZE


def decode_producer_snapshot(data: bytes, file: str) -> tuple[list[SnapshotEntry], list[DecodeError]]:
    """Entries of one snapshot, or no entries and one `SNAPSHOT_CORRUPT` error per failed check.

    `file` must be named `<offset>.snapshot`: the offset (exclusive end of the state) comes from it.
    """
    snapshot_offset = segment_base_offset(file)
    errors = _check(data, file)
    if errors:
        return [], errors
    entries = [
        SnapshotEntry(
            file=file,
            snapshot_offset=snapshot_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            last_sequence=last_sequence,
            last_offset=last_offset,
            offset_delta=offset_delta,
            timestamp=timestamp,
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=current_txn_first_offset,
        )
        for (
            producer_id,
            producer_epoch,
            last_sequence,
            last_offset,
            offset_delta,
            timestamp,
            coordinator_epoch,
            current_txn_first_offset,
        ) in _ENTRY.iter_unpack(memoryview(data)[PRODUCER_SNAPSHOT_HEADER_SIZE:])
    ]
    return entries, []


def read_producer_snapshot(path: str | os.PathLike[str]) -> tuple[list[SnapshotEntry], list[DecodeError]]:
    """`decode_producer_snapshot` of a file; a path that cannot be read raises `NotAKafkaArtifact`."""
    return decode_file(path, decode_producer_snapshot)


def _check(data: bytes, file: str) -> list[DecodeError]:
    """Every failed check, each as its own error (version, CRC and length are independent)."""

    def corrupt(position: int, message: str, length: int | None = None) -> DecodeError:
        return DecodeError(file, position, CorruptionKind.SNAPSHOT_CORRUPT, message, length)

    size = len(data)
    if size == 0:
        return [corrupt(0, "producer snapshot is empty (0 bytes); the header alone has 10 bytes")]
    if size < PRODUCER_SNAPSHOT_HEADER_SIZE:
        return [corrupt(0, f"producer snapshot truncated inside its 10-byte header ({size} bytes)", size)]

    errors = []
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        errors.append(corrupt(0, f"unknown producer snapshot version {version} (only version 1 exists)", 2))
    computed_crc = crc32c(memoryview(data)[_CRC_START:])
    if stored_crc != computed_crc:
        errors.append(
            corrupt(
                _CRC_POSITION,
                f"producer snapshot CRC mismatch: stored 0x{stored_crc:08x}, computed 0x{computed_crc:08x}",
                4,
            )
        )
    if count < 0:
        errors.append(corrupt(_COUNT_POSITION, f"producer snapshot entry count is negative ({count})", 4))
        return errors
    # Stricter than the broker, whose `readSnapshot` checks no length, only the CRC over everything after
    # the header: bytes after the last entry fail that CRC unless the CRC was computed with them, which
    # no broker's writer does. A well-formed snapshot is exactly header + entries: anything else means
    # the file was damaged (or written by something else).
    expected = PRODUCER_SNAPSHOT_HEADER_SIZE + PRODUCER_SNAPSHOT_ENTRY_SIZE * count
    if size < expected:
        whole = (size - PRODUCER_SNAPSHOT_HEADER_SIZE) // PRODUCER_SNAPSHOT_ENTRY_SIZE
        position = PRODUCER_SNAPSHOT_HEADER_SIZE + PRODUCER_SNAPSHOT_ENTRY_SIZE * whole
        errors.append(
            corrupt(
                position,
                f"producer snapshot truncated: {count} entries need {expected} bytes, the file has {size}",
                size - position,
            )
        )
    elif size > expected:
        errors.append(
            corrupt(
                expected,
                f"producer snapshot has {size - expected} bytes after its {count} entries ({expected} bytes)",
                size - expected,
            )
        )
    return errors
