"""Segment index files: `.index`, `.timeindex` and `.txnindex` (formats §3.3-§3.5).

Offsets in `.index` and `.timeindex` are stored relative to the segment base offset, which comes
from the file name. Both files are preallocated with zeros while their segment is active, so entries
end at the first entry at position i > 0 whose relative offset is 0: exactly where
`DumpLogSegments.dumpIndex`/`dumpTimeIndex` stop. The broker stops nowhere: it counts every entry of
the file (`AbstractIndex`: the file's length over the entry size) and looks offsets up among them, so
such an entry with non-zero bytes after it (a zeroed page inside the index, not its preallocated
tail) is reported as `INDEX_MISMATCH` at the entry, and `index_check` checks the entries after it. A
file length that is not a whole number of entries is reported as `INDEX_MISMATCH` at the partial entry:
the broker reads the whole entries and ignores the rest (`AbstractIndex`: the file's length over the
entry size, rounded down; its `sanityCheck` no longer checks these files, KAFKA-7283), but
`DumpLogSegments --index-sanity-check` flags it, and no broker writes a partial entry.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from kafka_log_decoder.constants import (
    INDEX_FILE_SUFFIX,
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_CURRENT_VERSION,
    TXN_INDEX_ENTRY_SIZE,
    TXN_INDEX_FILE_SUFFIX,
)
from kafka_log_decoder.discovery import segment_base_offset
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.rows import IndexEntry, TimeIndexEntry, TxnIndexEntry

__all__ = [
    "decode_offset_index",
    "decode_time_index",
    "decode_txn_index",
    "read_offset_index",
    "read_time_index",
    "read_txn_index",
    "zero_tail_start",
]

_Row = TypeVar("_Row", IndexEntry, TimeIndexEntry, TxnIndexEntry)

# Entries per read when streaming a file: bounded memory however large the preallocation.
_ENTRIES_PER_CHUNK = 8192


class _Stop:
    """Returned by an entry builder at the zero-filled preallocated tail."""


_STOP = _Stop()


@dataclass(frozen=True, slots=True)
class _Layout(Generic[_Row]):
    name: str
    entry: struct.Struct
    relative_offsets: bool
    # (file, base offset, entry number, unpacked fields, byte position) -> row, error or stop
    build: Callable[[str, int, int, tuple[int, ...], int], _Row | DecodeError | _Stop]


def _offset_index_entry(
    file: str, base: int, number: int, fields: tuple[int, ...], position: int
) -> IndexEntry | _Stop:
    relative_offset, log_position = fields
    if relative_offset == 0 and number > 0:
        return _STOP
    return IndexEntry(file=file, offset=base + relative_offset, position=log_position)


def _time_index_entry(
    file: str, base: int, number: int, fields: tuple[int, ...], position: int
) -> TimeIndexEntry | _Stop:
    timestamp, relative_offset = fields
    # DumpLogSegments.dumpTimeIndex stops on the relative offset alone, whatever the timestamp.
    if relative_offset == 0 and number > 0:
        return _STOP
    return TimeIndexEntry(file=file, timestamp=timestamp, offset=base + relative_offset)


def _txn_index_entry(
    file: str, base: int, number: int, fields: tuple[int, ...], position: int
) -> TxnIndexEntry | DecodeError:
    version, producer_id, first_offset, last_offset, last_stable_offset = fields
    # TransactionIndex refuses newer entry versions: their layout is unknown. The version is the field's
    # first byte, signed (`AbortedTxn.version()` is `buffer.get`, though the field is written with
    # `putShort`), and only one above the current version is refused. Its iterator throws a
    # KafkaException, which `LogLoader.loadSegmentFiles` does not catch (only a missing file or a
    # CorruptIndexException): the whole index is refused and the log does not load, so nothing after the
    # entry is read either (`_iter_entries` ends the read at an entry's error, over the rest of the file).
    if version > TXN_INDEX_CURRENT_VERSION:
        return DecodeError(
            file,
            position,
            CorruptionKind.INDEX_MISMATCH,
            f"unknown aborted-transaction entry version {version} (expected {TXN_INDEX_CURRENT_VERSION}): "
            "the broker refuses the whole index (TransactionIndex throws; the log does not load), and the "
            "entries after it are not read",
            TXN_INDEX_ENTRY_SIZE,
        )
    return TxnIndexEntry(
        file=file,
        version=version,
        producer_id=producer_id,
        first_offset=first_offset,
        last_offset=last_offset,
        last_stable_offset=last_stable_offset,
    )


_OFFSET_INDEX: _Layout[IndexEntry] = _Layout(
    INDEX_FILE_SUFFIX, struct.Struct(">ii"), True, _offset_index_entry
)
_TIME_INDEX: _Layout[TimeIndexEntry] = _Layout(
    TIME_INDEX_FILE_SUFFIX, struct.Struct(">qi"), True, _time_index_entry
)
# AbortedTxn: version int16 (read by its first byte), producerId, firstOffset, lastOffset,
# lastStableOffset (absolute offsets).
_TXN_INDEX: _Layout[TxnIndexEntry] = _Layout(
    TXN_INDEX_FILE_SUFFIX, struct.Struct(">bxqqqq"), False, _txn_index_entry
)

assert _OFFSET_INDEX.entry.size == OFFSET_INDEX_ENTRY_SIZE
assert _TIME_INDEX.entry.size == TIME_INDEX_ENTRY_SIZE
assert _TXN_INDEX.entry.size == TXN_INDEX_ENTRY_SIZE


# Bytes read per step when looking for the zero-filled tail from the end of a file.
_TAIL_SCAN_SIZE = 1 << 20


def zero_tail_start(file: str, size: int, entry_size: int) -> int:
    """Where the zero-filled tail of an index file of `size` bytes starts: the entry boundary after its
    last non-zero byte among its whole entries (0 for a file of zeros). Read from the end in bounded
    steps; a preallocated index of an active segment is mostly zeros."""
    end = size - size % entry_size
    with open(file, "rb") as handle:
        while end > 0:
            start = max(0, end - _TAIL_SCAN_SIZE)
            handle.seek(start)
            kept = len(handle.read(end - start).rstrip(b"\0"))
            if kept:
                return _entry_boundary(start + kept, entry_size)
            end = start
    return 0


def _entry_boundary(length: int, entry_size: int) -> int:
    return -(-length // entry_size) * entry_size


def _tail_of(data: bytes, entry_size: int) -> int:
    return _entry_boundary(len(data[: len(data) - len(data) % entry_size].rstrip(b"\0")), entry_size)


def decode_offset_index(data: bytes, file: str) -> tuple[list[IndexEntry], list[DecodeError]]:
    """Entries of an `.index` (absolute offset, `.log` position); `file` names the segment base offset."""
    return _split(
        _iter_entries(_OFFSET_INDEX, [data], len(data), file, _tail_of(data, OFFSET_INDEX_ENTRY_SIZE))
    )


def decode_time_index(data: bytes, file: str) -> tuple[list[TimeIndexEntry], list[DecodeError]]:
    """Entries of a `.timeindex` (timestamp, absolute offset); `file` names the segment base offset. In a
    file with no zero-filled tail, its first entry out of order is an error (`_time_order`)."""
    tail = _tail_of(data, TIME_INDEX_ENTRY_SIZE)
    items = _iter_entries(_TIME_INDEX, [data], len(data), file, tail)
    trimmed = tail == len(data) - len(data) % TIME_INDEX_ENTRY_SIZE
    return _split(_time_order(items, file) if trimmed else items)


def decode_txn_index(data: bytes, file: str) -> tuple[list[TxnIndexEntry], list[DecodeError]]:
    """Aborted transactions of a `.txnindex` (offsets are absolute; not preallocated)."""
    return _split(_iter_entries(_TXN_INDEX, [data], len(data), file, len(data)))


def read_offset_index(path: str | os.PathLike[str]) -> Iterator[IndexEntry | DecodeError]:
    """Stream an `.index` file in bounded chunks, stopping at its zero-filled tail."""
    return _read(_OFFSET_INDEX, path)


def read_time_index(path: str | os.PathLike[str]) -> Iterator[TimeIndexEntry | DecodeError]:
    """Stream a `.timeindex` file in bounded chunks, stopping at its zero-filled tail; in a file with
    none, its first entry out of order is an error (`_time_order`)."""
    file, size = _checked(_TIME_INDEX, path)
    try:
        tail = zero_tail_start(file, size, TIME_INDEX_ENTRY_SIZE)
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(file, exc) from None
    items = _stream(_TIME_INDEX, file, size, tail)
    return _time_order(items, file) if tail == size - size % TIME_INDEX_ENTRY_SIZE else items


def _time_order(
    items: Iterable[TimeIndexEntry | DecodeError], file: str
) -> Iterator[TimeIndexEntry | DecodeError]:
    """The entries, with an INDEX_MISMATCH at the first that breaks the time index's order: the broker
    appends an entry only for a timestamp above the last entry's, at an offset not below it
    (`TimeIndex.maybeAppend`), and its offset is the segment's base offset or above (the relative offset
    is an int32: one below 0 is no entry the broker wrote). Kafka's tool reports the same ("Found out of
    order timestamp", `DumpLogSegments.dumpTimeIndex`); lookups by time in a file out of order find
    other offsets than the ones asked for. The first only: a file of garbage is one region.

    Only for a file trimmed to its entries (no zero-filled tail: a segment the broker rolled or closed,
    `AbstractIndex.trimToValidSize`). A preallocated one, of the active segment of a running or crashed
    broker, keeps behind its entries those a truncation left (`truncateTo` moves the index's position
    only, and `resize` to the same size changes nothing), which the entries written since need not
    precede in order: which entries the broker counts, the file does not say."""
    base = segment_base_offset(file)
    previous: TimeIndexEntry | None = None
    number = 0
    error: DecodeError | None = None  # given after the entries, as the layout's own errors are
    for item in items:
        if isinstance(item, TimeIndexEntry):
            if error is None:
                why = None
                if item.offset < base:
                    why = f"offset {item.offset} below the segment's base offset {base}"
                elif previous is not None and item.timestamp <= previous.timestamp:
                    why = f"timestamp {item.timestamp} not above the previous entry's, {previous.timestamp}"
                elif previous is not None and item.offset < previous.offset:
                    why = f"offset {item.offset} below the previous entry's, {previous.offset}"
                if why is not None:
                    error = DecodeError(
                        file,
                        number * TIME_INDEX_ENTRY_SIZE,
                        CorruptionKind.INDEX_MISMATCH,
                        f"time index entry {number} has {why}: the broker appends entries in rising "
                        "timestamps at offsets that do not fall (TimeIndex.maybeAppend)",
                        TIME_INDEX_ENTRY_SIZE,
                    )
            previous = item
            number += 1
        yield item
    if error is not None:
        yield error


def read_txn_index(path: str | os.PathLike[str]) -> Iterator[TxnIndexEntry | DecodeError]:
    """Stream a `.txnindex` file in bounded chunks."""
    return _read(_TXN_INDEX, path)


def _read(layout: _Layout[_Row], path: str | os.PathLike[str]) -> Iterator[_Row | DecodeError]:
    file, size = _checked(layout, path)
    return _stream(layout, file, size)


def _checked(layout: _Layout[_Row], path: str | os.PathLike[str]) -> tuple[str, int]:
    """The file's name and size. Checked now rather than at the first next(): a usage error surfaces
    at the call."""
    file = os.fspath(path)
    if layout.relative_offsets:
        segment_base_offset(file)
    try:
        size = os.stat(file).st_size
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(file, exc) from None
    if not os.path.isfile(file):
        raise NotAKafkaArtifact(f"{file}: not a regular file")
    return file, size


def _stream(
    layout: _Layout[_Row], file: str, size: int, tail: int | None = None
) -> Iterator[_Row | DecodeError]:
    """The file's entries; `tail`: where its zero-filled tail starts, when the caller knows it."""
    chunk_size = layout.entry.size * _ENTRIES_PER_CHUNK
    try:
        handle = open(file, "rb")  # noqa: SIM115 - closed by the with-block below, once started
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(file, exc) from None
    with handle:
        if tail is None:
            tail = zero_tail_start(file, size, layout.entry.size) if layout.relative_offsets else size
        yield from _iter_entries(layout, iter(lambda: handle.read(chunk_size), b""), size, file, tail)


def _iter_entries(
    layout: _Layout[_Row], chunks: Iterable[bytes], total_size: int, file: str, tail: int
) -> Iterator[_Row | DecodeError]:
    """The entries up to the first the layout stops at; `tail`: where the file's zero-filled tail starts
    (`zero_tail_start`), which tells a stop before it, with non-zero entries after, from the tail."""
    entry_size = layout.entry.size
    base = segment_base_offset(file) if layout.relative_offsets else 0
    position = 0
    pending = b""
    stopped = False
    for chunk in chunks:
        buffer = pending + chunk if pending else chunk
        usable = len(buffer) - len(buffer) % entry_size
        for fields in layout.entry.iter_unpack(memoryview(buffer)[:usable]):
            item = layout.build(file, base, position // entry_size, fields, position)
            if isinstance(item, DecodeError):
                # An entry that makes the broker refuse the file: the region runs to its end.
                yield replace(item, length=total_size - position)
                return
            if isinstance(item, _Stop):
                stopped = True
                if position < tail:
                    what = (
                        f"non-zero entries follow up to byte {tail}"
                        if position + entry_size < tail
                        else "the entry itself is not zero"
                    )
                    yield DecodeError(
                        file,
                        position,
                        CorruptionKind.INDEX_MISMATCH,
                        f"entry {position // entry_size} has relative offset 0, where DumpLogSegments stops "
                        f"reading this {layout.name} file, but {what}: the broker counts every entry of "
                        "the file and looks offsets up among them",
                        entry_size,
                    )
                break
            yield item
            position += entry_size
        if stopped:
            break
        pending = buffer[usable:]
    if stopped:
        # The tail was not read; its length still tells whether the file ends mid-entry.
        partial = total_size % entry_size
        partial_position = total_size - partial
    else:
        partial = len(pending)
        partial_position = position
    if partial:
        yield DecodeError(
            file,
            partial_position,
            CorruptionKind.INDEX_MISMATCH,
            f"{layout.name} file ends with {partial} bytes that do not form a whole {entry_size}-byte entry",
            partial,
        )


def _split(items: Iterable[_Row | DecodeError]) -> tuple[list[_Row], list[DecodeError]]:
    rows: list[_Row] = []
    errors: list[DecodeError] = []
    for item in items:
        if isinstance(item, DecodeError):
            errors.append(item)
        else:
            rows.append(item)
    return rows, errors
