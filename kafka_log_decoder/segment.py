"""Streaming decoder of one `.log` segment with bounded memory.

The file is read in windows (`chunk_size`, default 2 MiB, grown only to hold one whole batch);
runs of v2 batches are decoded by the native walker into columns, legacy entries and corrupt
regions by Python. Decoding may start at any batch boundary (`start_position`) and stops at the
first batch that starts at or after `end_position`, so a large segment can be split into tasks.
"""

from __future__ import annotations

import heapq
import os
import struct
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np

from kafka_log_decoder import native
from kafka_log_decoder.codecs import MAX_DECOMPRESSED_BYTES, CodecError, decompress
from kafka_log_decoder.constants import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    COMPRESSION_NAMES,
    CONTROL_FLAG_MASK,
    CONTROL_KEY_SIZE,
    CONTROL_TYPE_NAMES,
    CONTROL_TYPE_UNKNOWN,
    DELETE_HORIZON_FLAG_MASK,
    END_TXN_MARKER_TYPES,
    END_TXN_MARKER_VALUE_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    MAX_SANE_BATCH_LENGTH,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TIMESTAMP_TYPE_NAMES,
    TRANSACTIONAL_FLAG_MASK,
)
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.legacy import (
    LEGACY_ATTRIBUTE_BITS,
    LegacyEntry,
    LegacyFormatError,
    decode_legacy_entry,
    minimum_message_size,
)
from kafka_log_decoder.native import Columns
from kafka_log_decoder.rows import BatchHeader, Record

# 2 MiB: the window stays cache-resident between the read and the CRC pass (8 MiB measured ~40% slower).
DEFAULT_CHUNK_SIZE = 2 << 20
_ZERO_SCAN_SIZE = 1 << 20
# A run ends early once its decompressed payloads hold this many bytes: a window of a few KB of
# zstd can hold gigabytes of zeros, and a run keeps all of its payloads (and `items` copies them
# again). With the one payload that passed the bound, a run holds less than this plus
# `codecs.MAX_DECOMPRESSED_BYTES`, whatever the segment; 32:1 compressed windows stay one run.
MAX_RUN_DECOMPRESSED_BYTES = 64 << 20
# The resync scans of one walk CRC at most this many times the file, plus this many bytes.
RESYNC_BUDGET_FILES = 4
RESYNC_BUDGET_BYTES = 256 << 20
# Record columns (`native.decode_records`) take 68 bytes a record however small the record (7 bytes at
# least): a few KB of zstd can hold tens of millions of empty records, whose columns would take
# gigabytes. A batch claiming more records than fit `codecs.MAX_DECOMPRESSED_BYTES` of columns is not
# decoded (its header still is), and a run counts its columns against its budget as its payloads.
RECORD_COLUMN_BYTES = 68
MAX_BATCH_RECORDS = MAX_DECOMPRESSED_BYTES // RECORD_COLUMN_BYTES

LogItem = BatchHeader | Record | DecodeError


@dataclass(slots=True)
class RecordRun:
    """Record columns whose key/value/header positions index into `source`.

    `batch_index` is None when the columns carry their own batch_index column (records decoded
    by the walker in place); otherwise every record belongs to that one (decompressed) batch.
    """

    source: bytes | bytearray
    columns: Columns
    batch_index: int | None


@dataclass(slots=True)
class BatchRun:
    """Consecutive v2 batches decoded from one window: columns indexed 0..n-1.

    `position` values index into `buffer`; add `file_offset` for the position in the file.
    """

    file: str
    buffer: bytearray
    file_offset: int
    n: int
    batches: Columns
    records: list[RecordRun] = field(default_factory=list)
    errors: dict[int, list[DecodeError]] = field(default_factory=dict)
    # (control type, coordinator epoch) of compressed control batches, read in Python.
    control: dict[int, tuple[int, int]] = field(default_factory=dict)

    def file_position(self, i: int) -> int:
        return self.file_offset + self.batches["position"][i]

    def header(self, i: int) -> BatchHeader:
        c = self.batches
        attributes = c["attributes"][i]
        base_timestamp = c["base_timestamp"][i]
        control, coordinator = self.control.get(i, (c["control_type"][i], c["coordinator_epoch"][i]))
        control_type = None if control == native.NOT_CONTROL else CONTROL_TYPE_NAMES.get(control)
        if control != native.NOT_CONTROL and control_type is None:
            control_type = CONTROL_TYPE_UNKNOWN
        coordinator_epoch = coordinator if control_type in END_TXN_MARKER_TYPES else None
        return BatchHeader(
            file=self.file,
            position=self.file_offset + c["position"][i],
            base_offset=c["base_offset"][i],
            last_offset=c["last_offset"][i],
            count=c["count"][i],
            magic=c["magic"][i],
            crc=c["crc"][i],
            crc_valid=bool(c["crc_valid"][i]),
            attributes=attributes,
            compression=compression_name(attributes),
            timestamp_type=TIMESTAMP_TYPE_NAMES[(attributes & TIMESTAMP_TYPE_MASK) >> 3],
            is_transactional=bool(attributes & TRANSACTIONAL_FLAG_MASK),
            is_control=control != native.NOT_CONTROL,
            partition_leader_epoch=c["partition_leader_epoch"][i],
            base_timestamp=base_timestamp,
            max_timestamp=c["max_timestamp"][i],
            producer_id=c["producer_id"][i],
            producer_epoch=c["producer_epoch"][i],
            base_sequence=c["base_sequence"][i],
            last_sequence=c["last_sequence"][i],
            size_bytes=c["size_bytes"][i],
            delete_horizon_ms=base_timestamp if attributes & DELETE_HORIZON_FLAG_MASK else None,
            control_type=control_type,
            coordinator_epoch=coordinator_epoch,
        )

    def items(self, *, with_records: bool) -> Iterator[LogItem]:
        """Rows in file order: each batch header, its CRC error if any, then its records."""
        records_by_batch = self._records_by_batch() if with_records else {}
        for i in range(self.n):
            header = self.header(i)
            yield header
            if not header.crc_valid:
                yield crc_mismatch(
                    self.file, header.position, header.size_bytes, header.crc, self._computed_crc(i)
                )
            yield from self.errors.get(i, ())
            yield from records_by_batch.get(i, ())

    def _computed_crc(self, i: int) -> int:
        start = self.batches["position"][i]
        return native.crc32c(memoryview(self.buffer)[start + 21 : start + self.batches["size_bytes"][i]])

    def _records_by_batch(self) -> dict[int, list[Record]]:
        by_batch: dict[int, list[Record]] = {}
        for run in self.records:
            c = run.columns
            headers_start = 0
            for r in range(len(c["offset"])):
                i = run.batch_index if run.batch_index is not None else c["batch_index"][r]
                n_headers = c["headers_count"][r]
                keys, values = _headers(run, headers_start, n_headers)
                headers_start += n_headers
                by_batch.setdefault(i, []).append(
                    Record(
                        file=self.file,
                        batch_position=self.file_position(i),
                        offset=c["offset"][r],
                        timestamp=c["timestamp"][r],
                        sequence=c["sequence"][r],
                        key_size=c["key_len"][r],
                        value_size=c["value_len"][r],
                        header_keys=keys,
                        key=_slice(run.source, c["key_pos"][r], c["key_len"][r]),
                        value=_slice(run.source, c["value_pos"][r], c["value_len"][r]),
                        header_values=values,
                    )
                )
        return by_batch


def _slice(source: bytes | bytearray, pos: int, length: int) -> bytes | None:
    return None if length < 0 else bytes(source[pos : pos + length])


def _headers(run: RecordRun, start: int, count: int) -> tuple[list[str], list[bytes | None]]:
    c = run.columns
    keys: list[str] = []
    values: list[bytes | None] = []
    for h in range(start, start + count):
        raw_key = _slice(run.source, c["hdr_key_pos"][h], c["hdr_key_len"][h]) or b""
        keys.append(raw_key.decode("utf-8", errors="replace"))
        values.append(_slice(run.source, c["hdr_value_pos"][h], c["hdr_value_len"][h]))
    return keys, values


def compression_name(attributes: int) -> str:
    codec = attributes & COMPRESSION_CODEC_MASK
    return COMPRESSION_NAMES.get(codec, f"unknown({codec})")


def crc_mismatch(file: str, position: int, size: int, stored: int, computed: int) -> DecodeError:
    return DecodeError(
        file,
        position,
        CorruptionKind.CRC_MISMATCH,
        f"stored CRC {stored} differs from computed {computed}",
        size,
    )


class _Window:
    """A read-only view of `[start, start + len(buf))` of the file, refilled on demand.

    Refills alternate between two buffers. A buffer is reused only when nothing else refers to it
    (runs already handed out keep theirs intact); otherwise a fresh one is allocated. Reuse
    avoids zero-filling and page-faulting a new window on every refill.
    """

    def __init__(self, fd: int, size: int, chunk_size: int) -> None:
        self.fd = fd
        self.size = size
        # Bytes the resync scans may CRC in this walk (`_resync`): a few times the file. A healthy
        # file's resyncs check a handful of candidates; crafted bytes can make every 61st position a
        # candidate whose length claims the rest of the file, which made the scan quadratic (8 MiB:
        # 32 s; a 1 GiB segment days). Spent, a resync finds no further batch.
        self.resync_budget = RESYNC_BUDGET_FILES * size + RESYNC_BUDGET_BYTES
        # The offset the file's name gives (`00000000000000368769.log`): every offset of a segment lies
        # within 2^31 of it (the offset index holds them relative, as int32). None: a name without one.
        self.base_offset: int | None = None
        self.chunk_size = chunk_size
        self.buf = bytearray()
        self.spare: bytearray | None = None
        self.start = 0

    @property
    def end(self) -> int:
        return self.start + len(self.buf)

    def ensure(self, pos: int, need: int) -> None:
        """Make the window start at or before `pos` and hold `need` bytes from it (file permitting)."""
        need = min(need, self.size - pos)
        if self.start <= pos and pos + need <= self.end:
            return
        want = min(max(self.chunk_size, need), self.size - pos)
        new = self._free_buffer(want)
        keep = 0
        if self.start <= pos < self.end:
            keep = self.end - pos
            new[:keep] = memoryview(self.buf)[pos - self.start :]
        view = memoryview(new)
        got = keep
        while got < want:
            n = os.preadv(self.fd, [view[got:]], pos + got)
            if n <= 0:
                break
            got += n
        view.release()
        if got < want:
            del new[got:]
            # The file is shorter than when it was opened (truncated meanwhile: a follower's log, or a
            # copy still being written over): it ends here now, or the walk would wait for bytes forever.
            self.size = pos + got
        self.spare, self.buf = self.buf, new
        self.start = pos

    def _free_buffer(self, want: int) -> bytearray:
        spare, self.spare = self.spare, None
        # References: the local name and getrefcount's argument. Any more means a run still uses it.
        if spare is not None and len(spare) == want and sys.getrefcount(spare) == _UNREFERENCED:
            return spare
        return bytearray(want)


_UNREFERENCED = 2


def iter_segment_runs(
    path: str | Path,
    *,
    records: bool = False,
    start_position: int = 0,
    end_position: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[BatchRun | list[LogItem]]:
    """The columnar stream: `BatchRun`s for v2 batches, lists of rows for legacy entries and errors (a
    legacy wrapper's records may take several lists, the first with its header: `_legacy_lists`)."""
    file = str(path)
    try:
        fd = os.open(file, os.O_RDONLY)
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(file, exc) from None
    try:
        size = os.fstat(fd).st_size
        end = size if end_position is None else min(end_position, size)
        window = _Window(fd, size, max(chunk_size, HEADER_SIZE_UP_TO_MAGIC))
        window.base_offset = _named_base_offset(file)
        max_batches = max(chunk_size // (LOG_OVERHEAD + MIN_BATCH_LENGTH), 1) + 1
        pos = start_position
        # `window.size` falls when the file is found shorter than at open (truncated meanwhile): the
        # walk ends there, at a batch boundary too, where no bytes are left to call a torn tail.
        while pos < min(end, window.size):
            window.ensure(pos, HEADER_SIZE_UP_TO_MAGIC)
            walk = _walk(window, pos, end, records, max_batches)
            cut = _inside_a_failed_batch(window, walk) if walk.n else None
            if cut is not None and cut[0] == 0:
                # Its bytes up to the valid batch inside it are an unreadable region; decoding goes on there.
                resume = cut[1]
                claimed = walk.batches["size_bytes"][0]
                message = (
                    f"batch length {claimed - LOG_OVERHEAD} runs over a valid batch at byte {resume} (its "
                    f"CRC fails over those bytes); skipped to it"
                )
                yield [_unreadable(file, pos, resume - pos, message)]
                pos = resume
                continue
            if cut is not None:
                # The batches before the failed one, walked again: a run of them, and the next walk
                # starts at the failed one.
                walk = _walk(window, pos, end, records, cut[0])
            if walk.n:
                run = _batch_run(file, window, walk, records)
                kept = run.n
                yield run
                # Not held while the next run decompresses: the budget bounds the runs alive.
                del run
                if kept < walk.n:
                    pos = window.start + walk.batches["position"][kept]
                    continue
            pos = window.start + walk.next_pos
            if walk.reason in (native.REACHED_STOP, native.FULL):
                continue
            lists, pos, stop = _python_path(file, window, pos, walk.reason, records, end)
            for items in lists:
                if items:
                    yield items
            # A legacy entry's lists, made as they are taken, hold its message set until the last one.
            del lists
            if stop:
                break
    finally:
        os.close(fd)


def read_log_segment(
    path: str | Path,
    *,
    records: bool = False,
    start_position: int = 0,
    end_position: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[LogItem]:
    """Every batch header (and with `records`, every record) of a segment, and every decode error."""
    for run in iter_segment_runs(
        path, records=records, start_position=start_position, end_position=end_position, chunk_size=chunk_size
    ):
        if isinstance(run, BatchRun):
            yield from run.items(with_records=records)
        else:
            yield from run
        del run  # not held while the next run decompresses


def _batch_run(file: str, window: _Window, walk: native.WalkResult, records: bool) -> BatchRun:
    run = BatchRun(file, window.buf, window.start, walk.n, walk.batches)
    if walk.records is not None:
        run.records.append(RecordRun(window.buf, walk.records, None))
    c = walk.batches
    # Columns hoisted out of the loop: on compressed data this loop runs once per batch.
    attributes_of, sizes, counts, control_types = (
        c["attributes"],
        c["size_bytes"],
        c["count"],
        c["control_type"],
    )
    buffer = memoryview(window.buf)

    def error(i: int, message: str) -> None:
        run.errors.setdefault(i, []).append(_unreadable(file, run.file_position(i), sizes[i], message))

    held = 0
    for i in _batches_needing_python(c, walk.n, records):
        if held >= MAX_RUN_DECOMPRESSED_BYTES:
            _end_run_before(run, window, i, records)
            break
        attributes = attributes_of[i]
        codec = attributes & COMPRESSION_CODEC_MASK
        if codec not in COMPRESSION_NAMES:
            error(i, f"unknown compression codec id {codec}")
            continue
        if c["records_decoded"][i] == native.RECORDS_FRAMING_ERROR:
            error(i, f"bad record framing at byte {c['err_offset'][i]} of the batch")
        elif c["records_decoded"][i] == native.RECORDS_TOO_MANY_HEADERS:
            error(i, _too_many_headers(c["err_offset"][i], "batch"))
        elif c["records_decoded"][i] == native.RECORDS_TOO_MANY_RECORDS:
            error(i, _too_many_records(counts[i]))
        is_control = control_types[i] != native.NOT_CONTROL
        if is_control and codec == 0:
            # The walker read its control record: of unknown type (-1), it may be invalid.
            if control_types[i] == -1 and counts[i] > 0:
                start = c["position"][i]
                problem = _control_problem(buffer[start + RECORDS_OFFSET : start + sizes[i]], counts[i])
                if problem is not None:
                    error(i, f"invalid control record at byte {RECORDS_OFFSET} of the batch: {problem}")
            continue
        if codec == 0 or counts[i] == 0 or not (records or is_control):
            continue
        # Compressed: decompress here (the walker never does) for records, or a control type.
        if records and not is_control and counts[i] > MAX_BATCH_RECORDS:
            error(i, _too_many_records(counts[i]))
            continue
        start = c["position"][i]
        try:
            plain = decompress(COMPRESSION_NAMES[codec], buffer[start + RECORDS_OFFSET : start + sizes[i]])
        except CodecError as exc:
            error(i, str(exc))
            continue
        columns, error_position, status = native.decode_records(
            plain,
            base_offset=c["base_offset"][i],
            base_timestamp=c["base_timestamp"][i],
            max_timestamp=c["max_timestamp"][i],
            log_append_time=bool(attributes & TIMESTAMP_TYPE_MASK),
            base_sequence=c["base_sequence"][i],
            count=counts[i],
        )
        if status == native.RECORDS_TOO_MANY_HEADERS:
            error(i, _too_many_headers(error_position, "decompressed payload"))
        elif error_position >= 0:
            error(i, f"bad record framing at byte {error_position} of the decompressed payload")
        elif is_control:
            control, coordinator_epoch, problem = _control_marker(plain, columns)
            run.control[i] = (control, coordinator_epoch)
            if problem is not None:
                error(i, f"invalid control record at byte 0 of the decompressed payload: {problem}")
        else:
            run.records.append(RecordRun(plain, columns, i))
            held += len(plain) + sum(memoryview(v).nbytes for v in columns.values())
    return run


def _too_many_records(count: int) -> str:
    """Why a batch's (or a legacy entry's) records are not decoded, compressed or not."""
    return f"{count} records: more than the {MAX_BATCH_RECORDS} decoded from one batch"


def _too_many_headers(at: int, where: str) -> str:
    return (
        f"more than the {native.MAX_BATCH_HEADERS} record headers decoded from one batch (passed by the "
        f"record at byte {at} of the {where}): its records are not decoded"
    )


def _end_run_before(run: BatchRun, window: _Window, i: int, records: bool) -> None:
    """Cut `run` to its first `i` batches, walked again (the walk's columns and in-place records cover
    all of its batches); the payloads, control types and errors found for them are kept."""
    start = run.batches["position"][0]
    again = native.walk_batches(
        window.buf,
        start,
        len(window.buf),
        decode_records=records,
        max_batches=i,
        max_records=MAX_BATCH_RECORDS,
    )
    run.n, run.batches = again.n, again.batches
    if again.records is not None:
        # The walk's in-place records come first (`_batch_run`).
        run.records[0] = RecordRun(window.buf, again.records, None)


def _attention_table(records: bool) -> bytes:
    """Per low attribute byte: 1 where the batch needs Python (decompression, or an unknown codec)."""
    flags = bytearray(256)
    for value in range(256):
        codec = value & COMPRESSION_CODEC_MASK
        compressed_control = codec != 0 and value & CONTROL_FLAG_MASK
        flags[value] = codec not in COMPRESSION_NAMES or bool(compressed_control) or (records and codec != 0)
    return bytes(flags)


_ATTENTION = {False: _attention_table(False), True: _attention_table(True)}
# records_decoded statuses Python reports (an uncompressed batch's, which the attention table passes).
_FRAMING_ERROR = bytes(
    1
    if v in (native.RECORDS_FRAMING_ERROR, native.RECORDS_TOO_MANY_HEADERS, native.RECORDS_TOO_MANY_RECORDS)
    else 0
    for v in range(256)
)
_LOW_BYTE = 0 if sys.byteorder == "little" else 1
# Low bytes of the control_type column that may be -1 (a control batch of unknown type; 0xFF also ends
# some types past 254, looked at and passed over).
_UNKNOWN_CONTROL = bytes(1 if v == 0xFF else 0 for v in range(256))


def _batches_needing_python(c: Columns, n: int, records: bool) -> Iterator[int]:
    """Indices of the batches the walker could not finish; found with bytes operations, not a loop.

    Plain batches (the vast majority) are never visited in Python: that per-batch loop cost more
    than the C walk itself.
    """
    # The walker writes native-endian int16 attributes: every second byte is the low byte.
    flags = _raw(c["attributes"])[_LOW_BYTE::2].translate(_ATTENTION[records])
    more = []
    if records:
        framing = _raw(c["records_decoded"]).translate(_FRAMING_ERROR)
        if framing.count(0) != n:
            more.append(framing)
    # Control batches of unknown type (-1): their control record may be invalid (`_control_problem`).
    unknown = _raw(c["control_type"])[_LOW_BYTE::2].translate(_UNKNOWN_CONTROL)
    if unknown.count(0) != n:
        more.append(unknown)
    if more:
        merged = int.from_bytes(flags, "little")
        for extra in more:
            merged |= int.from_bytes(extra, "little")
        flags = merged.to_bytes(n, "little")
    i = flags.find(1)
    while i >= 0:
        yield i
        i = flags.find(1, i + 1)


def _raw(column: memoryview) -> bytes:
    raw = column.obj
    assert isinstance(raw, bytes), "walker columns are bytes objects"
    return raw


def _control_marker(data: bytes | memoryview, columns: Columns) -> tuple[int, int, str | None]:
    """Control type, coordinator epoch and what makes it invalid (None: nothing) of a control batch's
    first record, decoded in `columns` (positions into `data`), read as Kafka reads it:
    `ControlRecordType.parseTypeId` wants a key of at least 4 bytes and a version >= 0 (an unknown type,
    negative ones too, is UNKNOWN, no error); `EndTransactionMarker.deserializeValue` an ABORT/COMMIT
    value of at least 6 bytes and a version >= 0 (a newer version is read as its v0 prefix). An invalid
    record is an unknown type (-1), never ABORT/COMMIT with a made-up coordinator epoch."""
    if not len(columns["key_len"]):
        return -1, -1, "the record does not frame"
    key_len = columns["key_len"][0]
    if key_len < CONTROL_KEY_SIZE:
        key = "a null key" if key_len < 0 else f"a key of {key_len} bytes"
        return -1, -1, f"{key}, not a ControlRecordType ({CONTROL_KEY_SIZE} bytes at least)"
    version, control = struct.unpack_from(">hh", data, columns["key_pos"][0])
    if version < 0:
        return -1, -1, f"ControlRecordType version {version}"
    if control < 0 or CONTROL_TYPE_NAMES.get(control) not in END_TXN_MARKER_TYPES:
        return max(control, -1), -1, None
    name = CONTROL_TYPE_NAMES[control]
    value_len = columns["value_len"][0]
    if value_len < END_TXN_MARKER_VALUE_SIZE:
        value = "a null value" if value_len < 0 else f"a value of {value_len} bytes"
        return (
            -1,
            -1,
            f"{name} with {value}, not an EndTransactionMarker ({END_TXN_MARKER_VALUE_SIZE} bytes at least)",
        )
    marker_version, coordinator_epoch = struct.unpack_from(">hi", data, columns["value_pos"][0])
    if marker_version < 0:
        return -1, -1, f"{name} with EndTransactionMarker version {marker_version}"
    return control, coordinator_epoch, None


def _control_problem(records: memoryview, count: int) -> str | None:
    """What makes the first record of an uncompressed control batch's `records` (of `count`) invalid,
    if anything: the walker reads it as an unknown type (-1) and leaves the why to `_control_marker`.
    A batch of one record whose bytes go on after it is refused by the record iterator that reads the
    marker (`RecordIterator.next`: "records still remaining")."""
    columns, status = _frame(records, 1)
    if count == 1 and len(columns["key_len"]) and status != native.RECORDS_DECODED:
        return "bytes remain after its only record (Kafka's record iterator refuses the batch)"
    return _control_marker(records, columns)[2]


def _python_path(
    file: str, window: _Window, pos: int, reason: int, records: bool, end: int
) -> tuple[Iterable[list[LogItem]], int, bool]:
    """Handle what the walker stopped at: more data, a legacy entry, or corruption.

    Returns the lists of rows (a legacy entry's records come a list at a time, as they are taken), the
    next position and whether decoding of this range is over.
    """
    remaining = window.size - pos
    if remaining < HEADER_SIZE_UP_TO_MAGIC:
        return [_tail(file, window, pos)], pos, True
    window.ensure(pos, HEADER_SIZE_UP_TO_MAGIC)
    local = pos - window.start
    base_offset, length = struct.unpack_from(">qi", window.buf, local)
    magic = window.buf[local + MAGIC_OFFSET]
    if base_offset == 0 and length == 0 and _zero_until_end(window, pos):
        # A preallocated segment (file.preallocate=true) ends in zeros: not data, not corruption.
        return [], window.size, True
    # The walker also stops for more data when fewer than 17 bytes of the header were in its window:
    # it never saw this magic or length, so the reason says only "batch past the window" when the
    # refilled header is a sane v2 one. Anything else is judged below, as a walk would judge it.
    if (
        reason == native.NEED_MORE_DATA
        and magic == MAGIC_VALUE_V2
        and MIN_BATCH_LENGTH <= length <= MAX_SANE_BATCH_LENGTH
    ):
        if LOG_OVERHEAD + length > remaining:
            return _one(_past_the_end(file, window, pos, end, length))
        window.ensure(pos, LOG_OVERHEAD + length)
        return [], pos, False
    if (
        magic in (MAGIC_VALUE_V0, MAGIC_VALUE_V1)
        and minimum_message_size(magic) <= length <= MAX_SANE_BATCH_LENGTH
    ):
        total = LOG_OVERHEAD + length
        if total > remaining:
            return _one(_past_the_end(file, window, pos, end, length))
        return _legacy(file, window, pos, magic, total, records)
    if (
        magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1, MAGIC_VALUE_V2)
        and MIN_BATCH_LENGTH <= length <= remaining - LOG_OVERHEAD
    ):
        # Sane length, unknown magic: skip exactly this entry and go on.
        return _one(_skipped(file, window, pos, LOG_OVERHEAD + length, f"unknown magic {magic}"))
    found = _resync(window, pos, end)
    reason_text = f"invalid batch length {length} (magic {magic})"
    if found is None:
        message = f"{reason_text}; no valid batch follows"
        return [[_unreadable(file, pos, window.size - pos, message)]], window.size, True
    message = f"{reason_text}; skipped to the next valid batch at byte {found}"
    return [[_unreadable(file, pos, found - pos, message)]], found, False


def _one(judged: tuple[list[LogItem], int, bool]) -> tuple[Iterable[list[LogItem]], int, bool]:
    items, pos, stop = judged
    return [items], pos, stop


def _legacy(
    file: str, window: _Window, pos: int, magic: int, total: int, records: bool
) -> tuple[Iterable[list[LogItem]], int, bool]:
    """The whole legacy entry of `total` bytes at `pos`: its header (CRC-32 checked first, as Kafka
    does), its CRC_MISMATCH, and its records a list at a time; or the unreadable region it is."""
    window.ensure(pos, total)
    try:
        entry = decode_legacy_entry(
            memoryview(window.buf), pos - window.start, file=file, file_position=pos, with_records=records
        )
    except LegacyFormatError as exc:
        return _one(_skipped(file, window, pos, total, f"unreadable legacy v{magic} entry: {exc}"))
    header = entry.header
    items: list[LogItem] = [header]
    if not header.crc_valid and not entry.frames:
        # As for a v2 batch whose CRC fails (`_inside_a_failed_batch`) and an unreadable entry
        # (`_skipped`): a valid batch or entry inside the bytes its length claims shows the length is
        # what is corrupt; its bytes up to it are an unreadable region. Not where its bytes frame as its
        # length says (`LegacyEntry.frames`): what reads as an entry inside is in its value (an inner
        # message a codec left as literal bytes), and flipped bits fail its CRC.
        found = _resync(window, pos, pos + total)
        if found is not None:
            message = (
                f"unreadable legacy v{magic} entry: its length {total - LOG_OVERHEAD} runs over a valid "
                f"batch at byte {found} (its CRC fails over those bytes); skipped to it"
            )
            return [[_unreadable(file, pos, found - pos, message)]], found, False
    if not header.crc_valid:
        items.append(_legacy_crc_error(file, window, pos, total, header.crc))
    if records and entry.problem is not None:
        items.append(_records_not_decoded(file, pos, magic, f"bad legacy message framing: {entry.problem}"))
    if records and header.count > MAX_BATCH_RECORDS:
        items.append(_records_not_decoded(file, pos, magic, _too_many_records(header.count)))
        return [items], pos + total, False
    return _legacy_lists(items, entry if records else None), pos + total, False


def _records_not_decoded(file: str, pos: int, magic: int, message: str) -> DecodeError:
    """The error row of a legacy entry whose header is read but whose records are not (a v2 batch's is
    one of its run's errors): over the entry's header fields (offset to timestamp), not its whole
    bytes, as the header is no unreadable region. A region to the end of the entry would, at the end of
    the file, read as running past a range's end (`jobs.decode_tasks`): decoded again, its header twice."""
    return _unreadable(file, pos, LOG_OVERHEAD + minimum_message_size(magic) - 8, message)


def _legacy_lists(items: list[LogItem], entry: LegacyEntry | None) -> Iterator[list[LogItem]]:
    """The header's rows with the first records, then the other records a list at a time: a list holds
    about `MAX_RUN_DECOMPRESSED_BYTES` of them (a wrapper of 256 MiB holds ten million messages)."""
    chunks: Iterator[list[Record]] = (
        iter(()) if entry is None else entry.record_lists(MAX_RUN_DECOMPRESSED_BYTES)
    )
    yield [*items, *next(chunks, [])]
    for chunk in chunks:
        yield cast(list[LogItem], chunk)


def _skipped(
    file: str, window: _Window, pos: int, total: int, reason: str
) -> tuple[list[LogItem], int, bool]:
    """An entry of `total` bytes that cannot be read, as an unreadable region; decoding goes on after it.

    When a valid v2 batch (or legacy entry) starts inside those bytes, the entry's length is what is
    corrupt (as for a v2 batch whose CRC fails over one, `_inside_a_failed_batch`): the region ends at
    that batch, which a range of the segment starting there would report too. Not bounded by the range's
    end."""
    found = _resync(window, pos, pos + total)
    if found is None:
        return [_unreadable(file, pos, total, reason)], pos + total, False
    message = f"{reason}; its length runs over a valid batch at byte {found}, skipped to it"
    return [_unreadable(file, pos, found - pos, message)], found, False


def _past_the_end(
    file: str, window: _Window, pos: int, end: int, length: int
) -> tuple[list[LogItem], int, bool]:
    """A batch whose length runs past the end of the file: the tail of a write cut short (a warning)
    unless a valid batch follows it, in which case the length is corrupt and the bytes up to that batch
    are an unreadable region (an error); decoding goes on there.

    In a byte range that ends before the file does (`end`), a valid batch past `end` is the unbounded
    decode's to find: the region is reported to the end of the file, which `jobs.decode_tasks` reads as
    running past the range and decodes again without the bound."""
    found = _resync(window, pos, end)
    past = f"batch length {length} runs past the end of the file ({window.size - pos} bytes left)"
    if found is not None:
        message = f"{past}; skipped to the next valid batch at byte {found}"
        return [_unreadable(file, pos, found - pos, message)], found, False
    if end < window.size:
        message = f"{past}; no valid batch follows before byte {end}"
        return [_unreadable(file, pos, window.size - pos, message)], window.size, True
    return _tail(file, window, pos), window.size, True


def _walk(window: _Window, pos: int, end: int, records: bool, batches: int) -> native.WalkResult:
    """The native walker from `pos` over the window's bytes before `end`, for at most `batches`."""
    return native.walk_batches(
        window.buf,
        pos - window.start,
        min(len(window.buf), end - window.start),
        decode_records=records,
        max_batches=batches,
        max_records=MAX_BATCH_RECORDS,
    )


def _inside_a_failed_batch(window: _Window, walk: native.WalkResult) -> tuple[int, int] | None:
    """(index, position) of the first batch of the walk whose CRC fails and of a valid batch that starts
    inside the bytes its length claims: its length is what is corrupt (a length too long, yet inside
    the file, would hide the batches after it), and its bytes up to that batch are an unreadable
    region, as a length past the end of the file is (`_past_the_end`). None when no failed batch
    holds a valid one: a batch whose CRC fails over its own bytes is a CRC_MISMATCH. Searched only
    behind a failed CRC, within the claimed bytes."""
    crc_valid = walk.batches["crc_valid"].tobytes()[: walk.n]
    i = crc_valid.find(0)
    while i >= 0:
        start = window.start + walk.batches["position"][i]
        # Not bounded by the range's end: a range decodes as the whole file does. A batch whose records,
        # as many as it counts, fill exactly the bytes its length claims has its length right: what
        # looks like a batch inside it is a record's value (one holding a batch's bytes), not the next
        # batch, and the flipped bits are elsewhere (a CRC_MISMATCH), as Kafka reads it (the length).
        if not _holds_its_records(window, walk, i):
            found = _resync(window, start, start + walk.batches["size_bytes"][i])
            if found is not None:
                return i, found
        i = crc_valid.find(0, i + 1)
    return None


# A failed batch larger than this is not decoded to tell whether its records fill it.
_FRAMING_CHECK_BYTES = 16 << 20


def _holds_its_records(window: _Window, walk: native.WalkResult, i: int) -> bool:
    """Whether the records of the walk's batch `i` (decompressed first), as many as its header counts,
    frame exactly the bytes its length claims; False where they cannot be read or it is too large."""
    size = int(walk.batches["size_bytes"][i])
    count = int(walk.batches["count"][i])
    if not 0 <= count <= MAX_BATCH_RECORDS or size > _FRAMING_CHECK_BYTES or size < RECORDS_OFFSET:
        return False
    if count == 0:
        # No records to frame (the cleaner's empty batches): only a batch of no bytes past its header.
        return size == RECORDS_OFFSET
    local = int(walk.batches["position"][i])
    payload = memoryview(window.buf)[local + RECORDS_OFFSET : local + size]
    codec = int(walk.batches["attributes"][i]) & COMPRESSION_CODEC_MASK
    try:
        plain = payload if codec == 0 else decompress(COMPRESSION_NAMES[codec], payload)
    except (CodecError, KeyError):
        return False
    return _frame(plain, count)[1] == native.RECORDS_DECODED


def _frame(records: bytes | memoryview, count: int) -> tuple[Columns, int]:
    """`count` records read from a plain records blob with no batch's fields to add (offsets and times
    relative to 0): their columns and the status (`native.RECORDS_DECODED` where they frame exactly)."""
    columns, _, status = native.decode_records(
        records,
        base_offset=0,
        base_timestamp=0,
        max_timestamp=0,
        log_append_time=False,
        base_sequence=-1,
        count=count,
    )
    return columns, status


def _legacy_crc_error(file: str, window: _Window, pos: int, total: int, stored: int) -> DecodeError:
    local = pos - window.start
    computed = zlib.crc32(memoryview(window.buf)[local + LOG_OVERHEAD + 4 : local + total])
    return crc_mismatch(file, pos, total, stored, computed)


def _tail(file: str, window: _Window, pos: int) -> list[LogItem]:
    if pos >= window.size or _zero_until_end(window, pos):
        return []
    return [
        DecodeError(
            file,
            pos,
            CorruptionKind.TRUNCATED_TAIL,
            f"{window.size - pos} bytes at the end do not form a whole batch",
            window.size - pos,
        )
    ]


def _zero_until_end(window: _Window, pos: int) -> bool:
    at = pos
    while at < window.size:
        chunk = os.pread(window.fd, min(_ZERO_SCAN_SIZE, window.size - at), at)
        if not chunk or chunk.count(0) != len(chunk):
            return bool(not chunk)
        at += len(chunk)
    return True


def _resync(window: _Window, bad: int, end: int) -> int | None:
    """The next position after `bad` (and before `end`) where a whole entry with a valid CRC starts: a v2
    batch (`valid_batch_at`) or a legacy v0/v1 entry (`valid_legacy_at`: a segment a broker wrote before
    and after a message format upgrade holds both); None also once the walk's resync budget
    (`_Window.resync_budget`) is spent. Reads no further than `end` (and a header's bytes up to its
    attributes)."""
    scan_from = bad + 1
    end = min(end, window.size)
    floor = _legacy_floor(window, bad)
    while scan_from < end:
        # Only the positions before `end` are searched: read no further (but a header's first bytes).
        span = min(_ZERO_SCAN_SIZE, end - scan_from)
        chunk = os.pread(window.fd, span + _LEGACY_CANDIDATE_BYTES, scan_from)
        for at in _candidates(chunk, span):
            candidate = scan_from + at
            if candidate >= end:
                return None
            try:
                valid = (
                    valid_batch_at(window.fd, window.size, candidate, budget=window)
                    if chunk[at + MAGIC_OFFSET] == MAGIC_VALUE_V2
                    else valid_legacy_at(
                        window.fd, window.size, candidate, after=floor, base=window.base_offset, budget=window
                    )
                )
            except _BudgetSpent:
                return None
            if valid:
                return candidate
        scan_from += span
    return None


def _named_base_offset(file: str) -> int | None:
    """The offset a segment's file name starts with (`LogFileUtils.offsetFromFileName`), if it does."""
    name = os.path.basename(file).split(".", 1)[0]
    return int(name) if len(name) == 20 and name.isdigit() and int(name) < 2**63 else None


def _legacy_floor(window: _Window, bad: int) -> int:
    """The offset a legacy entry a resync from `bad` lands on must pass: the offset of the entry at `bad`
    (its length is what is corrupt), where the file's name gives the segment's base and that offset lies
    within 2^31 of it (else it is garbage too: no floor). A wrapper's inner messages, which a codec may
    leave as literal bytes, lie at or below its offset (v0: absolute, up to it; v1: relative, from 0):
    not entries of the log. Read from the bytes at `bad` alone, so a byte range of the segment finds what
    the whole file's walk finds. Kafka itself never resyncs (`FileLogInputStream.nextBatch` stops at a
    bad size)."""
    head = os.pread(window.fd, 8, bad)
    if window.base_offset is None or len(head) < 8:
        return -1
    (offset,) = struct.unpack(">q", head)
    return offset if window.base_offset <= offset < window.base_offset + _SEGMENT_OFFSET_SPAN else -1


# The bytes of a legacy entry's header a resync's prefilter reads: offset, size, crc, magic, attributes.
_LEGACY_CANDIDATE_BYTES = MAGIC_OFFSET + 2
# What a resync charges its budget for each legacy candidate it reads (its header and a length field)
# besides the CRC: the prefilter leaves few on real data, but bytes crafted to pass it stay bounded.
_LEGACY_CANDIDATE_CHARGE = 64


def _candidates(chunk: bytes, span: int) -> Iterator[int]:
    """The positions before `span` in `chunk` where a v2 batch (its magic byte) or a legacy entry may
    start, in order."""

    def v2() -> Iterator[int]:
        at = MAGIC_OFFSET
        while (j := chunk.find(MAGIC_VALUE_V2, at)) >= 0 and j - MAGIC_OFFSET < span:
            yield j - MAGIC_OFFSET
            at = j + 1

    return heapq.merge(v2(), _legacy_candidates(chunk, span))


# Positions the legacy prefilter tests at once: its arrays stay a few MiB whatever the chunk.
_PREFILTER_POSITIONS = 1 << 16


def _legacy_candidates(chunk: bytes, span: int) -> Iterator[int]:
    """The positions before `span` in `chunk` where a legacy entry's first fields read as one, tested
    `_PREFILTER_POSITIONS` at a time: an offset >= 0, a size of at least the v0 minimum (14), a magic of
    0 with codec bits only or of 1 with the timestamp type bit besides, and, where the chunk holds them,
    key and value lengths that fill the message exactly (as `valid_legacy_at` checks): random, zero or
    numeric bytes leave few positions for it to read."""
    a = np.frombuffer(chunk, np.uint8)
    k = min(span, len(a) - _LEGACY_CANDIDATE_BYTES + 1)
    for first in range(0, max(k, 0), _PREFILTER_POSITIONS):
        n = min(_PREFILTER_POSITIONS, k - first)

        def field(offset: int, first: int = first, n: int = n) -> np.ndarray:
            return a[first + offset : first + offset + n]

        magic, attributes = field(MAGIC_OFFSET), field(MAGIC_OFFSET + 1)
        ok = ((magic == MAGIC_VALUE_V0) & (attributes <= COMPRESSION_CODEC_MASK)) | (
            (magic == MAGIC_VALUE_V1) & (attributes <= LEGACY_ATTRIBUTE_BITS[MAGIC_VALUE_V1])
        )
        # Offset >= 0; size >= 14 (and >= 0).
        ok &= (field(0) < 0x80) & (field(8) < 0x80)
        ok &= ((field(8) | field(9) | field(10)) != 0) | (field(11) >= minimum_message_size(MAGIC_VALUE_V0))
        at = first + np.flatnonzero(ok)
        if not len(at):
            continue
        # The key and value length fields, where the chunk holds them (else `valid_legacy_at` reads them):
        # the key within the message, the value filling the rest of it exactly.
        end = at + LOG_OVERHEAD + _be32(a, at + 8)
        key_at = at + LOG_OVERHEAD + np.where(a[at + MAGIC_OFFSET] == MAGIC_VALUE_V1, 14, 6)
        readable = key_at + 4 <= len(a)
        key_length = np.where(readable, _be32(a, np.where(readable, key_at, 0)), 0)
        value_at = key_at + 4 + np.maximum(key_length, 0)
        fits = ~readable | ((key_length >= -1) & (value_at + 4 <= end))
        readable &= fits & (value_at + 4 <= len(a))
        value_length = np.where(readable, _be32(a, np.where(readable, value_at, 0)), 0)
        fills = (value_length >= -1) & (value_at + 4 + np.maximum(value_length, 0) == end)
        yield from (int(p) for p in at[fits & (~readable | fills)])


def _be32(a: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The signed big-endian int32 at each of the positions `at` of the byte array `a`."""
    b = a[at[:, None] + np.arange(4)].astype(np.int64)
    value = (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]
    return np.where(value >= 1 << 31, value - (1 << 32), value)


# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta; and at byte
# 43, after the timestamps: producerId, producerEpoch, baseSequence, recordsCount.
_V2_HEAD = struct.Struct(">qiibIhi")
_V2_PRODUCER_AND_COUNT = struct.Struct(">qhii")
_CRC_CHUNK_SIZE = 1 << 20


class _BudgetSpent(Exception):
    """A resync's CRC budget is spent (`_Window.resync_budget`)."""


def valid_batch_at(fd: int, size: int, pos: int, *, budget: _Window | None = None) -> bool:
    """Whether a whole v2 batch with a valid CRC starts at `pos` of the open file of `size` bytes: where
    a resync lands, and where a split range may start (`jobs.decode_tasks`), so both find the same ones.

    Fields no broker writes (a negative offset, count or producer field below -1, unknown attribute bits,
    a length the walker refuses) are checked before the CRC, which is read in bounded chunks: on random
    bytes one position in 256 has the magic byte, and each CRC over a length of up to the rest of the
    file made the resync scan quadratic, its memory as large as the file."""
    head = os.pread(fd, RECORDS_OFFSET, pos)
    if len(head) < RECORDS_OFFSET:
        return False
    base_offset, length, _, magic, stored_crc, attributes, last_offset_delta = _V2_HEAD.unpack_from(head)
    producer_id, producer_epoch, base_sequence, count = _V2_PRODUCER_AND_COUNT.unpack_from(head, 43)
    if (
        magic != MAGIC_VALUE_V2
        or base_offset < 0
        or attributes & ~0x7F
        or last_offset_delta < 0
        or count < 0
        or min(producer_id, producer_epoch, base_sequence) < -1
        or not MIN_BATCH_LENGTH <= length <= min(MAX_SANE_BATCH_LENGTH, size - pos - LOG_OVERHEAD)
    ):
        return False
    head_crc = native.crc32c(memoryview(head)[ATTRIBUTES_OFFSET:])
    end = pos + LOG_OVERHEAD + length
    return _charged_crc(fd, pos + RECORDS_OFFSET, end, head_crc, native.crc32c, budget, length) == stored_crc


def _charged_crc(
    fd: int,
    start: int,
    end: int,
    crc: int,
    update: Callable[[bytes, int], int],
    budget: _Window | None,
    length: int,
) -> int | None:
    """The checksum `update` (CRC-32C, or CRC-32 for a legacy entry) of the file's bytes `[start, end)`
    on from `crc`, read in bounded chunks, once the resync `budget` has paid the entry's `length`
    (`_BudgetSpent` where it cannot); None where the file ends first."""
    if budget is not None:
        if budget.resync_budget < length:
            raise _BudgetSpent
        budget.resync_budget -= length
    at = start
    while at < end:
        chunk = os.pread(fd, min(_CRC_CHUNK_SIZE, end - at), at)
        if not chunk:
            return None
        crc = update(chunk, crc)
        at += len(chunk)
    return crc


# offset, size, crc, magic, attributes: a legacy entry's fields up to its timestamp (v1) or key.
_LEGACY_HEAD = struct.Struct(">qiIBB")
# A segment's offsets lie in [base, base + 2^31): `.index` entries hold them relative, as int32
# (`LogSegment.canConvertToRelativeOffset`).
_SEGMENT_OFFSET_SPAN = 1 << 31
# The highest codec id a legacy entry may carry: lz4 (zstd came with v2, KIP-110).
_LAST_LEGACY_CODEC = 3


def valid_legacy_at(
    fd: int, size: int, pos: int, *, after: int = -1, base: int | None = None, budget: _Window | None = None
) -> bool:
    """Whether a whole legacy (v0/v1) entry with a valid CRC-32 starts at `pos`, at an offset past `after`
    and, given the segment's `base` offset, within 2^31 of it (a codec may leave a wrapper's inner
    messages as literal bytes, their offsets mangled by its copies but the rest whole): a size of at least its
    magic's minimum that the file holds, a codec a legacy entry may have (`LegacyRecord`: none, gzip,
    snappy or lz4) and no attribute bit it has not, a key length that fits, then the CRC-32 over magic
    to the end (`LegacyRecord.ensureValid`), read in bounded chunks and charged to `budget` as
    `valid_batch_at` is."""
    if budget is not None:
        if budget.resync_budget < _LEGACY_CANDIDATE_CHARGE:
            raise _BudgetSpent
        budget.resync_budget -= _LEGACY_CANDIDATE_CHARGE
    head = os.pread(fd, LOG_OVERHEAD + minimum_message_size(MAGIC_VALUE_V1), pos)
    if len(head) < _LEGACY_HEAD.size:
        return False
    offset, length, stored_crc, magic, attributes = _LEGACY_HEAD.unpack_from(head)
    if (
        magic not in LEGACY_ATTRIBUTE_BITS
        or offset <= max(after, -1)
        or (base is not None and not base <= offset < base + _SEGMENT_OFFSET_SPAN)
        or attributes & ~LEGACY_ATTRIBUTE_BITS[magic]
        or attributes & COMPRESSION_CODEC_MASK > _LAST_LEGACY_CODEC
        or not minimum_message_size(magic) <= length <= min(MAX_SANE_BATCH_LENGTH, size - pos - LOG_OVERHEAD)
    ):
        return False
    if magic == MAGIC_VALUE_V1 and struct.unpack_from(">q", head, _LEGACY_HEAD.size)[0] < NO_TIMESTAMP:
        return False
    # The key and value lengths (-1: null) fill the message exactly, as every producer writes it (Kafka
    # reads past bytes after the value, but a resync is a search: these are what make random bytes
    # rarely cost a CRC over a length read from them); a wrapper's value is its inner set.
    key_at = LOG_OVERHEAD + (14 if magic == MAGIC_VALUE_V1 else 6)
    (key_length,) = struct.unpack_from(">i", head, key_at)
    value_at = key_at + 4 + max(key_length, 0)
    if not -1 <= key_length <= LOG_OVERHEAD + length - value_at - 4:
        return False
    value_field = os.pread(fd, 4, pos + value_at)
    if len(value_field) < 4:
        return False
    (value_length,) = struct.unpack(">i", value_field)
    least = 0 if attributes & COMPRESSION_CODEC_MASK else -1
    if not (least <= value_length and value_at + 4 + max(value_length, 0) == LOG_OVERHEAD + length):
        return False
    end = pos + LOG_OVERHEAD + length
    return _charged_crc(fd, pos + LOG_OVERHEAD + 4, end, 0, zlib.crc32, budget, length) == stored_crc


def _unreadable(file: str, position: int, length: int, message: str) -> DecodeError:
    return DecodeError(file, position, CorruptionKind.UNREADABLE_BATCH, message, length)
