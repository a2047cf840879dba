"""`.index` entries checked against the batches of their `.log` (audit-contract §4 `INDEX_MISMATCH`).

The broker appends an offset-index entry after more than `index.interval.bytes` were appended since
the last one (`LogSegment.append`) and looks offsets up by them (`OffsetIndex.lookup`: the greatest
entry offset at or below the target, then a scan forward from the entry's position): a wrong entry
sends a fetch, or a recovery, to the wrong bytes. `DumpLogSegments` prints `Mismatches in` for the
entries whose offset is not the last offset of the batch at their position.

Before KAFKA-806 (apache/kafka#18012, early 2025: Kafka 4.x) an append added at most one entry: the last
offset of the whole appended chunk, at the position where the chunk starts. A leader appends one batch
per produce request, but a follower appends a whole fetch response (`appendAsFollower`), the cleaner
a whole cleaned buffer, `appendFromFile` a chunk of batches: on those, an entry such as (offset 9, the
position of the batch holding 5-6, followed by 7-9) is normal, and lookups are right with it (spec
§3.3, §6.2). So an entry is right when a batch starts at its position with a base offset at or below
the entry's offset, and that batch or a later one starting before the next entry's position (for the
last entry: before the end of the log) holds the offset; and when its offset and position are above
the previous entry's (`OffsetIndex.append` refuses an offset not above the last; positions grow with
the log).

The walk of the log that reads the batches anyway tells it (`IndexCheck.see`); where the walk met
bytes it could not read as batches, the header at the entry's position alone tells where the entry
points (`read_v2_head`), and an offset not found before the next entry is not blamed on the entry
when unreadable bytes lie in between: the batch holding it may be the corrupt one, and that is
reported as such.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from kafka_log_decoder.constants import (
    INDEX_FILE_SUFFIX,
    LOG_OVERHEAD,
    MAGIC_VALUE_V2,
    MIN_BATCH_LENGTH,
    OFFSET_INDEX_ENTRY_SIZE,
    RECORDS_OFFSET,
)
from kafka_log_decoder.discovery import segment_base_offset
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.index_files import zero_tail_start
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import BatchRun

__all__ = ["IndexCheck", "batch_holds_offset", "read_v2_head"]

_HEAD = struct.Struct(">qiib")
_UNREADABLE_REGIONS = frozenset({CorruptionKind.UNREADABLE_BATCH, CorruptionKind.TRUNCATED_TAIL})


class IndexCheck:
    """Every entry of `index_file` whose position lies in `[start, end)` of `log_file` (`end` None: to
    the end and past it; `start` 0: from before it), checked against the batches a walk of that range
    meets, given in file order to `see`; `errors` then tells the wrong ones.

    A split ingest gives each byte range of a segment its own check, so every entry is checked once and
    the rows do not depend on where the segment was cut: one INDEX_MISMATCH per wrong entry, at the
    entry's byte position in the index, and one for a file that ends mid-entry (from the range that
    starts the `.log`). An entry's offset is looked for from its position up to the next entry's (or
    `end`): the ranges of a split start at entries (`ingest.split_segment`), so the walk of the range
    sees every batch an entry of it can need. The entries are read in chunks and only the range's are
    kept: four integers and three flags each, at most one per 61 bytes of the range for an index the
    broker wrote; a walk's batches are not kept.
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
        # Entries a truncation left past the broker's count at the end of a preallocated index: not
        # checked (`_kept_entries`).
        self.leftovers = 0
        numbers, offsets, positions, backwards = self._read()
        order = np.argsort(positions, kind="stable")
        self.numbers, self.offsets, self.positions = numbers[order], offsets[order], positions[order]
        # The offset or position is not above the previous entry's (in index order).
        self.backwards = backwards[order]
        # A batch of the walk starts at the entry's position, and its base offset.
        self.at_batch = np.zeros(len(order), dtype=bool)
        self.at_base = np.zeros(len(order), dtype=np.int64)
        # A batch of the walk from the entry's position up to the next entry's holds the entry's offset.
        self.reached = np.zeros(len(order), dtype=bool)
        # Where the last entry's offset is looked for up to: the range's end (the next entry's position).
        self._last_end = np.iinfo(np.int64).max if end is None else end
        # Byte ranges the walk could not read as batches: an entry there is checked by its header.
        self.unreadable: list[tuple[int, int | None]] = []

    @classmethod
    def of(cls, log_file: str, index_file: str, start: int = 0, end: int | None = None) -> IndexCheck | None:
        """The check, or None when the index cannot be read (its bytes are then not checked)."""
        try:
            return cls(log_file, index_file, start, end)
        except (OSError, NotAKafkaArtifact):
            return None

    def _read(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        base = self._base = segment_base_offset(self.index_file)
        size = os.stat(self.index_file).st_size
        # The entries before the zero-filled preallocated tail: all of them, as the broker counts them
        # (`AbstractIndex`: the file's length), also past a zeroed entry where DumpLogSegments stops.
        count = zero_tail_start(self.index_file, size, OFFSET_INDEX_ENTRY_SIZE) // OFFSET_INDEX_ENTRY_SIZE
        if count * OFFSET_INDEX_ENTRY_SIZE < size - size % OFFSET_INDEX_ENTRY_SIZE:
            # Preallocated: the broker still held the index open. Entries left by a truncation since
            # (past the count it keeps in memory) are not its entries.
            held = self._kept_entries(count)
            self.leftovers, count = count - held, held
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        first = 0
        previous: tuple[int, int] | None = None  # the last entry read: (offset, position)
        with open(self.index_file, "rb") as handle:
            while True:
                data = handle.read(self._CHUNK_ENTRIES * OFFSET_INDEX_ENTRY_SIZE)
                whole = len(data) - len(data) % OFFSET_INDEX_ENTRY_SIZE
                entries = np.frombuffer(data, self._DTYPE, count=whole // 4).reshape(-1, 2)
                if not len(entries):
                    break
                stop = max(0, min(len(entries), count - first))
                relative = entries[:stop, 0].astype(np.int64)
                numbers = np.arange(first, first + stop, dtype=np.int64)
                positions = entries[:stop, 1].astype(np.int64)
                # A first entry of zeros is the preallocated tail of an index with no entry yet, not
                # checked: the broker never indexes the batch at position 0 (`LogSegment.append` adds an
                # entry only after more than `index.interval.bytes` since the last one).
                real = (numbers > 0) | (relative != 0) | (positions != 0)
                backwards, previous = _backwards(base + relative, positions, real, previous)
                # The first range holds the positions before the file, the last those after it.
                mine = real & (positions >= self.start) if self.start else real.copy()
                if self.end is not None:
                    mine &= positions < self.end
                kept.append((numbers[mine], base + relative[mine], positions[mine], backwards[mine]))
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
            return empty, empty, empty, np.zeros(0, dtype=bool)
        numbers, offsets, positions, backwards = (np.concatenate(parts) for parts in zip(*kept, strict=True))
        return numbers, offsets, positions, backwards

    def _kept_entries(self, count: int) -> int:
        """How many of the `count` entries of a preallocated index come before the run of entries that a
        truncation left at its end (`leftovers`).

        `OffsetIndex.truncateTo` (a follower truncating to its leader, a recovery cutting a torn tail)
        only moves the index's position (`AbstractIndex.truncateToEntries`) and `LogSegment.truncateTo`
        grows the file back to its preallocated size: the entries past the new position stay in the
        file until the appends after the truncation overwrite them, or the broker trims the index when
        it rolls or closes the segment. The broker never reads them (its lookups search its own entry
        count; a restart after a crash rebuilds an active segment's index), so a live or crashed
        broker's copy may hold entries that name offsets of the truncated log: at positions past the
        new end, or inside batches written since. They are the entries at the end, each led to no
        batch (no v2 or legacy header at its position with a first offset at or below its own), and
        in offset and position order among themselves, as the index held them before the truncation;
        and they show it: every one of them points at or past the end of the .log (a truncated log's, or
        a copy that took the .log before the index's last appends: harmless either way), or the first of
        them goes back from the entry before it (offset or position not above: `OffsetIndex.append`
        refuses such an entry, so the broker did not append it after that one; the truncated log's
        batches held fewer offsets per byte than those written since). Otherwise, as a wrong last
        entry of a live index would be, they are checked. At most `_LEFTOVER_SCAN` entries are looked
        at; a longer run of such entries is checked as it is. An index whose last entry leads to a
        batch has none."""
        first = max(0, count - _LEFTOVER_SCAN)
        with open(self.index_file, "rb") as handle:
            handle.seek(first * OFFSET_INDEX_ENTRY_SIZE)
            data = handle.read((count - first) * OFFSET_INDEX_ENTRY_SIZE)
        entries = np.frombuffer(data, self._DTYPE, count=len(data) // 4).reshape(-1, 2).astype(np.int64)
        relative, positions = entries[:, 0], entries[:, 1]
        try:
            fd = os.open(self.log_file, os.O_RDONLY)
        except OSError:
            return count
        kept = len(entries)
        try:
            size = os.fstat(fd).st_size
            while kept > 0:
                i = kept - 1
                if relative[i] < 0 or positions[i] < 0:
                    break
                if kept < len(entries) and (relative[i] >= relative[kept] or positions[i] >= positions[kept]):
                    break
                if _leads_to_batch(fd, size, int(positions[i]), self._base + int(relative[i])):
                    break
                kept -= 1
        finally:
            os.close(fd)
        if kept == len(entries) or (kept == 0 and first > 0):
            return count
        past_the_end = bool((positions[kept:] >= size).all())
        goes_back = kept > 0 and (
            relative[kept] <= relative[kept - 1] or positions[kept] <= positions[kept - 1]
        )
        return first + kept if past_the_end or goes_back else count

    def see(self, run: BatchRun | list[Any]) -> None:
        """Notes, from a run of the walk (in file order), the entries at a batch's start and the entries
        whose offset a batch from their position up to the next entry's holds."""
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
        self._see_starts(positions, bases)
        self._see_offsets(positions, bases, lasts)

    def _see_starts(self, positions: np.ndarray, bases: np.ndarray) -> None:
        lo = int(np.searchsorted(self.positions, positions[0], "left"))
        hi = int(np.searchsorted(self.positions, positions[-1], "right"))
        if lo == hi:
            return
        wanted = self.positions[lo:hi]
        at = np.minimum(np.searchsorted(positions, wanted), len(positions) - 1)
        hit = positions[at] == wanted
        self.at_batch[lo:hi] |= hit
        self.at_base[lo:hi] = np.where(hit, bases[at], self.at_base[lo:hi])

    def _see_offsets(self, positions: np.ndarray, bases: np.ndarray, lasts: np.ndarray) -> None:
        n = len(self.positions)
        # Each batch lies in the window of the entries at the greatest entry position at or below its
        # own, when it starts before the next entry position (or the range's end).
        entry = np.searchsorted(self.positions, positions, "right") - 1
        batch = np.flatnonzero(entry >= 0)
        entry = entry[batch]
        following = entry + 1
        ends = np.where(following < n, self.positions[np.minimum(following, n - 1)], self._last_end)
        inside = positions[batch] < ends
        batch, entry = batch[inside], entry[inside]
        if not len(batch):
            return
        # Entries at one position (the later ones go backwards) share its window.
        first = np.searchsorted(self.positions, self.positions[entry], "left")
        counts = entry - first + 1
        if counts.max() > 1:
            batch = np.repeat(batch, counts)
            entry = (
                np.repeat(first, counts)
                + np.arange(len(batch))
                - np.repeat(np.cumsum(counts) - counts, counts)
            )
        offsets = self.offsets[entry]
        held = (bases[batch] <= offsets) & (offsets <= lasts[batch])
        self.reached[entry[held]] = True

    def errors(self) -> Iterator[DecodeError]:
        """INDEX_MISMATCH for each wrong entry (checked by its header where the walk met unreadable
        bytes), in entry order; then the partial entry's."""
        good = self.at_batch & (self.at_base <= self.offsets) & self.reached & ~self.backwards
        bad = np.flatnonzero(~good)
        for i in bad[np.argsort(self.numbers[bad], kind="stable")]:
            problem = self._problem(int(i))
            if problem is None:
                continue
            number, offset, position = int(self.numbers[i]), int(self.offsets[i]), int(self.positions[i])
            yield DecodeError(
                self.index_file,
                number * OFFSET_INDEX_ENTRY_SIZE,
                CorruptionKind.INDEX_MISMATCH,
                f"index entry (offset {offset}, position {position}) {problem}",
                OFFSET_INDEX_ENTRY_SIZE,
            )
        if self.partial is not None:
            yield self.partial

    def _log_size(self) -> int | None:
        try:
            return os.stat(self.log_file).st_size
        except OSError:
            return None

    def _problem(self, i: int) -> str | None:
        """What is wrong with the entry `i` the walk did not find right; None when nothing is."""
        number, offset, position = int(self.numbers[i]), int(self.offsets[i]), int(self.positions[i])
        base: int | None = None
        if self.at_batch[i]:
            base = int(self.at_base[i])
        elif self._in_unreadable(position):
            head = read_v2_head(self.log_file, position)
            base = None if head is None else int(_HEAD.unpack_from(head)[0])
        if base is None:
            size = self._log_size()
            if size is not None and position >= size:
                # (A truncation's leftovers at the end of a preallocated index are not checked:
                # `_kept_entries`. A trimmed index was closed with its .log as long as its entries.)
                return (
                    f"points past the end of {self.log_file} ({size} bytes): the .log was cut short after "
                    "the entry was written (a copy taken while the segment was written, or lost bytes)"
                )
            return f"does not point at the start of a batch in {self.log_file}"
        if base > offset:
            return f"points at a batch starting at offset {base}, above the entry's, in {self.log_file}"
        following = int(np.searchsorted(self.positions, position, "right"))
        end = int(self.positions[following]) if following < len(self.positions) else self._last_end
        if not self.reached[i] and not self._unreadable_within(position, end):
            up_to = f"position {end} of" if end < np.iinfo(np.int64).max else "the end of"
            return (
                f"is not reached: no batch from its position up to {up_to} {self.log_file} holds "
                f"offset {offset}"
            )
        if self.backwards[i]:
            before = self._entry(number - 1)
            return (
                f"does not follow the entry before it (offset {before[0]}, position {before[1]}) in "
                f"{self.index_file}"
            )
        return None

    def _entry(self, number: int) -> tuple[int, int]:
        """The index's entry `number` (offset, position), read again from the file."""
        with open(self.index_file, "rb") as handle:
            handle.seek(number * OFFSET_INDEX_ENTRY_SIZE)
            relative, position = struct.unpack(">ii", handle.read(OFFSET_INDEX_ENTRY_SIZE))
        return self._base + relative, position

    def _in_unreadable(self, position: int) -> bool:
        return self._unreadable_within(position, position + 1)

    def _unreadable_within(self, start: int, end: int) -> bool:
        """Bytes of `[start, end)` lie in a region the walk could not read as batches."""
        return any(
            begin < end and (length is None or start < begin + length) for begin, length in self.unreadable
        )


def _backwards(
    offsets: np.ndarray, positions: np.ndarray, real: np.ndarray, previous: tuple[int, int] | None
) -> tuple[np.ndarray, tuple[int, int] | None]:
    """Which of the `real` entries (in index order) have a position not above the entry before them
    (`previous`: the last one of the chunk before), and the last real entry. An offset not above the
    one before is left to the other checks: an index that follows a log whose own offsets go back
    (OFFSET_OVERLAP) points at the right batches, and a wrong offset is not reached or not at its
    batch."""
    backwards = np.zeros(len(offsets), dtype=bool)
    at = np.flatnonzero(real)
    if not len(at):
        return backwards, previous
    o, p = offsets[at], positions[at]
    back = np.zeros(len(at), dtype=bool)
    back[1:] = p[1:] <= p[:-1]
    if previous is not None:
        back[0] = p[0] <= previous[1]
    backwards[at] = back
    return backwards, (int(o[-1]), int(p[-1]))


# The most entries at the end of a preallocated index looked at for a truncation's leftovers.
_LEFTOVER_SCAN = 1 << 16
# The largest legacy message whose CRC is checked there (a wrapper of a broker's 1 MB default and more).
_LEGACY_CRC_CHECKED = 16 << 20
# A v0 message's fields after the log overhead: CRC, magic, attributes, key and value lengths.
_LEGACY_V0_MIN = 14


def _leads_to_batch(fd: int, size: int, position: int, offset: int) -> bool:
    """A whole batch (v2) at `position` of the .log (`size` bytes) with its first offset at or below
    `offset`, or a whole message (magic 0/1) whose CRC-32 holds, whatever its offset (a compressed
    wrapper's is its last inner message's, and brokers before 0.11 indexed an append's first offset):
    the offset field, the length and the magic byte lie at the same bytes in both. (Inside a record's
    bytes, a byte 0 or 1 where the magic would be is common: a header alone proves nothing there.)"""
    head = os.pread(fd, _HEAD.size, position)
    if len(head) < _HEAD.size:
        return False
    first, length, crc, magic = _HEAD.unpack_from(head)
    if first < 0 or not 0 < length <= size - position - LOG_OVERHEAD:
        return False
    if magic == MAGIC_VALUE_V2:
        return length >= MIN_BATCH_LENGTH and first <= offset
    if magic not in (0, 1) or not _LEGACY_V0_MIN <= length <= _LEGACY_CRC_CHECKED:
        return False
    body = os.pread(fd, length - 4, position + LOG_OVERHEAD + 4)
    return len(body) == length - 4 and zlib.crc32(body) == crc & 0xFFFFFFFF


def batch_holds_offset(path: str, position: int, offset: int) -> bool:
    """A v2 batch header starts at `position` with a base offset at or below `offset`: the batch an
    index entry used as a split point leads to, as `IndexCheck` accepts an entry (before KAFKA-806 a
    follower's or the cleaner's entry names the last offset of a chunk of batches at the chunk's first
    batch: nearly every entry of a follower's segment). The batch itself may be corrupt (its CRC or its
    length), which the walk reports. Not enough to start a decode there: see
    `decode_tasks.resolve_start`, which also needs a whole, CRC-valid batch there."""
    head = read_v2_head(path, position)
    if head is None:
        return False
    return _HEAD.unpack_from(head)[0] <= offset


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
