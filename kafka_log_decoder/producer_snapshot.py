"""Producer-state snapshots, `<offset>.snapshot` (ProducerSnapshot.json version 1; formats §4).

A snapshot that fails any check is reported whole as `SNAPSHOT_CORRUPT` and yields no entries:
the broker deletes a corrupt snapshot and falls back to an older one (`ProducerStateManager.readSnapshot`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from kafka_log_decoder.constants import (
    PRODUCER_SNAPSHOT_ENTRY_SIZE,
    PRODUCER_SNAPSHOT_HEADER_SIZE,
    PRODUCER_SNAPSHOT_VERSION,
)
from kafka_log_decoder.discovery import segment_base_offset
from kafka_log_decoder.errors import CorruptionKind, DecodeError, decode_file
from kafka_log_decoder.native import crc32c
from kafka_log_decoder.rows import SnapshotEntry

__all__ = [
    "ENTRY_DTYPE",
    "check_producer_snapshot",
    "decode_producer_snapshot",
    "iter_entry_chunks",
    "read_producer_snapshot",
]

# version int16 | crc uint32 | entry count int32
_HEADER = struct.Struct(">hIi")
# ProducerId int64, Epoch int16, LastSequence int32, LastOffset int64, OffsetDelta int32,
# Timestamp int64, CoordinatorEpoch int32, CurrentTxnFirstOffset int64
_ENTRY = struct.Struct(">qhiqiqiq")
# The CRC covers everything after the crc field: the entry count and the entries.
_CRC_START = 6
_CRC_POSITION = 2
_COUNT_POSITION = 6

# The entry as a numpy record (big-endian, packed): a chunk of entries is one array, not an object each.
ENTRY_DTYPE = np.dtype(
    [
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("last_sequence", ">i4"),
        ("last_offset", ">i8"),
        ("offset_delta", ">i4"),
        ("timestamp", ">i8"),
        ("coordinator_epoch", ">i4"),
        ("current_txn_first_offset", ">i8"),
    ]
)
# A snapshot is read this many bytes at a time for its CRC: it holds one entry per live producer, and
# nothing bounds their number (2 million producers: 92 MiB, which read whole and made objects took 1.6 GB).
_CRC_CHUNK_BYTES = 1 << 20

assert _HEADER.size == PRODUCER_SNAPSHOT_HEADER_SIZE
assert _ENTRY.size == PRODUCER_SNAPSHOT_ENTRY_SIZE == ENTRY_DTYPE.itemsize


def decode_producer_snapshot(data: bytes, file: str) -> tuple[list[SnapshotEntry], list[DecodeError]]:
    """Entries of one snapshot, or no entries and one `SNAPSHOT_CORRUPT` error per failed check.

    `file` must be named `<offset>.snapshot`: the offset (exclusive end of the state) comes from it.
    """
    snapshot_offset = segment_base_offset(file)
    header = data[:PRODUCER_SNAPSHOT_HEADER_SIZE]
    computed_crc = (
        crc32c(memoryview(data)[_CRC_START:]) if len(header) == PRODUCER_SNAPSHOT_HEADER_SIZE else 0
    )
    errors = _check(len(data), header, computed_crc, file)
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


def check_producer_snapshot(handle: BinaryIO, file: str) -> tuple[int, list[DecodeError]]:
    """The entry count of an open snapshot and the errors `decode_producer_snapshot` reports for it (the
    count is 0 where there are any), its CRC computed a chunk at a time: no entry is made."""
    header = handle.read(PRODUCER_SNAPSHOT_HEADER_SIZE)
    size = len(header)
    computed_crc = crc32c(header[_CRC_START:])
    for chunk in iter(lambda: handle.read(_CRC_CHUNK_BYTES), b""):
        computed_crc = crc32c(chunk, computed_crc)
        size += len(chunk)
    errors = _check(size, header, computed_crc, file)
    return (0 if errors else _HEADER.unpack(header)[2]), errors


def iter_entry_chunks(handle: BinaryIO, count: int, entries_per_chunk: int) -> Iterator[np.ndarray]:
    """The `count` entries of an open snapshot that `check_producer_snapshot` found whole, as `ENTRY_DTYPE`
    arrays of at most `entries_per_chunk` entries; ends early where the file does (shortened since)."""
    handle.seek(PRODUCER_SNAPSHOT_HEADER_SIZE)
    left = count
    while left > 0:
        raw = handle.read(min(left, entries_per_chunk) * PRODUCER_SNAPSHOT_ENTRY_SIZE)
        entries = np.frombuffer(raw, dtype=ENTRY_DTYPE, count=len(raw) // PRODUCER_SNAPSHOT_ENTRY_SIZE)
        if not len(entries):
            return
        yield entries
        left -= len(entries)


def _check(size: int, header: bytes, computed_crc: int, file: str) -> list[DecodeError]:
    """Every failed check of a snapshot of `size` bytes, its `header` bytes and the CRC-32C of its bytes
    after the crc field, each as its own error (version, CRC and length are independent)."""

    def corrupt(position: int, message: str, length: int | None = None) -> DecodeError:
        return DecodeError(file, position, CorruptionKind.SNAPSHOT_CORRUPT, message, length)

    if size == 0:
        return [corrupt(0, "producer snapshot is empty (0 bytes); the header alone has 10 bytes")]
    if size < PRODUCER_SNAPSHOT_HEADER_SIZE:
        return [corrupt(0, f"producer snapshot truncated inside its 10-byte header ({size} bytes)", size)]

    errors = []
    version, stored_crc, count = _HEADER.unpack_from(header)
    if version != PRODUCER_SNAPSHOT_VERSION:
        errors.append(corrupt(0, f"unknown producer snapshot version {version} (only version 1 exists)", 2))
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
