"""`.index` entries checked against the batches of their `.log` (audit-contract §4 `INDEX_MISMATCH`).

The broker appends an offset-index entry (a batch's last offset, its position) after more than
`index.interval.bytes` of batches (`LogSegment.append`) and looks offsets up by them
(`OffsetIndex.lookup`): a wrong entry sends a fetch, or a recovery, to the wrong bytes.
`DumpLogSegments` checks each entry against the log too and prints `Mismatches in`.

An entry is right when a batch starts at its position and holds its offset. The walk of the log
that reads the batches anyway tells it (`IndexCheck.see`); where the walk met bytes it could not
read as batches, the header at the entry's position alone does (`batch_holds_offset`): the batch
may be corrupt, and that is reported as such, not the entry.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from kafka_log_decoder.constants import (
    INDEX_FILE_SUFFIX,
    MAGIC_VALUE_V2,
    OFFSET_INDEX_ENTRY_SIZE,
    RECORDS_OFFSET,
)
from kafka_log_decoder.discovery import segment_base_offset
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import BatchRun

__all__ = ["IndexCheck", "batch_holds_offset", "read_v2_head"]

_HEAD = struct.Struct(">qiib")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_UNREADABLE_REGIONS = frozenset({CorruptionKind.UNREADABLE_BATCH, CorruptionKind.TRUNCATED_TAIL})


class IndexCheck:
    """Every entry of `index_file` whose position lies in `[start, end)` of `log_file` (`end` None: to
    the end and past it; `start` 0: from before it), checked against the batches a walk of that range
    meets, given in file order to `see`; `errors` then tells the wrong ones.

    A split ingest gives each byte range of a segment its own check, so every entry is checked once and
    the rows do not depend on where the segment was cut: one INDEX_MISMATCH per wrong entry, at the
    entry's byte position in the index, and one for a file that ends mid-entry (from the range that
    starts the `.log`). The entries are read in chunks and only the range's are kept: three integers
    each, at most one per 61 bytes of the range for an index the broker wrote.
    """

    _DTYPE = np.dtype(">i4")
    _CHUNK_ENTRIES = 1 << 16

    def __init__(self, log_file: str, index_file: str, start: int = 0, end: int | None = None) -> None:
        """Reads the entries; raises OSError or NotAKafkaArtifact (a name without a base offset)."""
        self.log_file = log_file
        self.index_file = index_file
        self.start = start
        self.end = end
        self.partial: DecodeError | None = None
        numbers, offsets, positions = self._read()
        order = np.argsort(positions, kind="stable")
        self.numbers, self.offsets, self.positions = numbers[order], offsets[order], positions[order]
        self.ok = np.zeros(len(order), dtype=bool)
        # Byte ranges the walk could not read as batches: an entry there is checked by its header.
        self.unreadable: list[tuple[int, int | None]] = []

    @classmethod
    def of(cls, log_file: str, index_file: str, start: int = 0, end: int | None = None) -> IndexCheck | None:
        """The check, or None when the index cannot be read (its bytes are then not checked)."""
        try:
            return cls(log_file, index_file, start, end)
        except (OSError, NotAKafkaArtifact):
            return None

    def _read(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        base = segment_base_offset(self.index_file)
        size = os.stat(self.index_file).st_size
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        first = 0
        with open(self.index_file, "rb") as handle:
            while True:
                data = handle.read(self._CHUNK_ENTRIES * OFFSET_INDEX_ENTRY_SIZE)
                whole = len(data) - len(data) % OFFSET_INDEX_ENTRY_SIZE
                entries = np.frombuffer(data, self._DTYPE, count=whole // 4).reshape(-1, 2)
                if not len(entries):
                    break
                relative = entries[:, 0].astype(np.int64)
                numbers = np.arange(first, first + len(entries), dtype=np.int64)
                # The zero-filled preallocated tail starts at the first entry after the first with
                # relative offset 0 (`index_files`, `DumpLogSegments.dumpIndex`).
                tail = np.flatnonzero((relative == 0) & (numbers > 0))
                stop = int(tail[0]) if len(tail) else len(entries)
                positions = entries[:stop, 1].astype(np.int64)
                # The first range holds the positions before the file, the last those after it.
                mine = positions >= self.start if self.start else np.ones(len(positions), dtype=bool)
                if self.end is not None:
                    mine &= positions < self.end
                # A first entry of zeros is the preallocated tail of an index with no entry yet, not
                # checked: the broker never indexes the batch at position 0 (`LogSegment.append` adds an
                # entry only after more than `index.interval.bytes` since the last one).
                mine &= (numbers[:stop] > 0) | (relative[:stop] != 0) | (positions != 0)
                kept.append((numbers[:stop][mine], base + relative[:stop][mine], positions[mine]))
                if stop < len(entries):
                    break
                first += len(entries)
        if size % OFFSET_INDEX_ENTRY_SIZE and self.start == 0:
            partial = size % OFFSET_INDEX_ENTRY_SIZE
            self.partial = DecodeError(
                self.index_file,
                size - partial,
                CorruptionKind.INDEX_MISMATCH,
                f"{INDEX_FILE_SUFFIX} file ends with {partial} bytes that do not form a whole "
                f"{OFFSET_INDEX_ENTRY_SIZE}-byte entry",
                partial,
            )
        if not kept:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        numbers, offsets, positions = (np.concatenate(parts) for parts in zip(*kept, strict=True))
        return numbers, offsets, positions

    def see(self, run: BatchRun | list[Any]) -> None:
        """Marks the entries at the batches of a run of the walk (in file order) that hold their offsets."""
        if isinstance(run, BatchRun):
            if not run.n or not len(self.positions):
                return
            positions, bases, lasts = (
                np.frombuffer(column, dtype=column.format, count=run.n).astype(np.int64, copy=False)
                for column in (run.batches[name] for name in ("position", "base_offset", "last_offset"))
            )
            positions = positions + run.file_offset
        else:
            for item in run:
                if isinstance(item, DecodeError) and item.kind in _UNREADABLE_REGIONS:
                    self.unreadable.append((item.position, item.length))
            headers = [item for item in run if isinstance(item, BatchHeader)]
            if not headers or not len(self.positions):
                return
            positions = np.array([h.position for h in headers], dtype=np.int64)
            bases = np.array([h.base_offset for h in headers], dtype=np.int64)
            lasts = np.array([h.last_offset for h in headers], dtype=np.int64)
        lo = int(np.searchsorted(self.positions, positions[0], "left"))
        hi = int(np.searchsorted(self.positions, positions[-1], "right"))
        if lo == hi:
            return
        wanted = self.positions[lo:hi]
        at = np.minimum(np.searchsorted(positions, wanted), len(positions) - 1)
        offsets = self.offsets[lo:hi]
        self.ok[lo:hi] |= (positions[at] == wanted) & (bases[at] <= offsets) & (offsets <= lasts[at])

    def errors(self) -> Iterator[DecodeError]:
        """INDEX_MISMATCH for each entry no batch of the walk holds (checked by its header where the
        walk met unreadable bytes), in entry order; then the partial entry's."""
        bad = np.flatnonzero(~self.ok)
        for i in bad[np.argsort(self.numbers[bad], kind="stable")]:
            number, offset, position = int(self.numbers[i]), int(self.offsets[i]), int(self.positions[i])
            if self._in_unreadable(position) and batch_holds_offset(self.log_file, position, offset):
                continue
            yield DecodeError(
                self.index_file,
                number * OFFSET_INDEX_ENTRY_SIZE,
                CorruptionKind.INDEX_MISMATCH,
                f"index entry (offset {offset}, position {position}) does not point at a batch holding "
                f"offset {offset} in {self.log_file}",
                OFFSET_INDEX_ENTRY_SIZE,
            )
        if self.partial is not None:
            yield self.partial

    def _in_unreadable(self, position: int) -> bool:
        return any(
            start <= position and (length is None or position < start + length)
            for start, length in self.unreadable
        )


_HEAD = struct.Struct(">qiib")
_LAST_OFFSET_DELTA = struct.Struct(">i")


def batch_holds_offset(path: str, position: int, offset: int) -> bool:
    """A v2 batch header starts at `position` and its offsets include `offset`: the index entry is right.

    The batch itself may be corrupt (its CRC or its length), which the walk reports; the entry is not to
    blame. (A stale entry pointing inside a batch would have to land on bytes reading as a v2 header
    with that very offset range.) Not enough to start a decode there: see `decode_tasks.resolve_start`."""
    head = read_v2_head(path, position)
    if head is None:
        return False
    base_offset = _HEAD.unpack_from(head)[0]
    return base_offset <= offset <= base_offset + _LAST_OFFSET_DELTA.unpack_from(head, 23)[0]


def read_v2_head(path: str, position: int) -> bytes | None:
    """The header (up to the records) at `position` when it reads as a v2 batch's, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        head = os.pread(fd, RECORDS_OFFSET, position)
    finally:
        os.close(fd)
    if len(head) < RECORDS_OFFSET:
        return None
    base_offset, _, _, magic = _HEAD.unpack_from(head)
    return head if magic == MAGIC_VALUE_V2 and base_offset >= 0 else None
