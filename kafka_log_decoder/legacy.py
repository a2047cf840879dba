"""Legacy message sets, magic v0 (<= 0.9) and v1 (0.10.x, KIP-31/32): kafka-formats §2.

A legacy log entry is `offset int64 | size int32 | message`; a compressed entry is a wrapper whose
value holds an inner message set. Legacy entries carry no producer id or sequence.

The CRC-32 is checked first, as Kafka does (`LegacyRecord.ensureValid`; a legacy batch is valid when its
outer record is): an entry whose CRC fails is a header read from its own fields (its payload is not
trusted, so not decompressed) for a CRC_MISMATCH. The inner messages of a wrapper are never kept as
objects: they are framed in one pass over the decompressed set for the header (count, first offset,
first timestamp), and records are made from it again, a list at a time (`LegacyEntry.record_lists`).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from kafka_log_decoder.codecs import CodecError, decompress
from kafka_log_decoder.constants import (
    COMPRESSION_CODEC_MASK,
    COMPRESSION_NAMES,
    LEGACY_TIMESTAMP_TYPE_MASK,
    LOG_OVERHEAD,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_NAMES,
)
from kafka_log_decoder.rows import BatchHeader, Record

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_ENTRY_HEAD = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
# The attribute bits a legacy message may have: the codec (bits 0-2), and in v1 the timestamp type.
LEGACY_ATTRIBUTE_BITS = {MAGIC_VALUE_V0: COMPRESSION_CODEC_MASK, MAGIC_VALUE_V1: 0x0F}
# Roughly what one `Record` of a legacy message takes besides its key and value bytes (the object, its
# ints, its empty header list and the two bytes objects' headers): `record_lists` budgets by it.
RECORD_OBJECT_BYTES = 400


class LegacyFormatError(ValueError):
    """A legacy message whose framing or compressed content is unreadable."""


# An inner (or single) message as framed: offset (absolute, or relative in a v1 wrapper), timestamp, and
# the start and length (-1: null) of its key and value in the buffer it was framed in.
_Framed = tuple[int, int, int, int, int, int, int]


class LegacyEntry:
    """One legacy entry: its header, and its records made on demand from the bytes it holds.

    `problem` is why a CRC-failed uncompressed message gives no record: its key or value do not frame.
    `frames`: its bytes are what its length says, a message whose key and value fill it, or a wrapper
    whose inner set opens and holds together (so a CRC that fails is flipped bits, not a wrong length)."""

    __slots__ = (
        "_base",
        "_buffer",
        "_lenient",
        "_log_append_time",
        "_wrapper_timestamp",
        "file",
        "frames",
        "header",
        "problem",
    )

    def __init__(
        self,
        header: BatchHeader,
        *,
        buffer: bytes | memoryview | None = None,
        base: int | None = None,
        wrapper_timestamp: int = NO_TIMESTAMP,
        problem: str | None = None,
        frames: bool = True,
    ) -> None:
        self.header = header
        self.file = header.file
        self.problem = problem
        self.frames = frames and problem is None
        # The message set whose messages are the records (the decompressed inner set, or the entry's own
        # message framed as a one-message set); None: no records.
        self._buffer = buffer
        self._base = base  # v1 wrapper: what its relative inner offsets are added to
        self._wrapper_timestamp = wrapper_timestamp
        self._log_append_time = header.timestamp_type == "LogAppendTime"
        # A CRC-valid entry's messages are framed as Kafka reads them (`_messages`, lenient).
        self._lenient = header.crc_valid

    def record_lists(self, budget: int) -> Iterator[list[Record]]:
        """The records in lists of about `budget` bytes each (`RECORD_OBJECT_BYTES` a record besides its
        key and value): a wrapper holds up to 256 MiB of messages, ten million of them, far more as
        objects; no list is made for an entry without records."""
        if self._buffer is None:
            return
        records: list[Record] = []
        held = 0
        position = self.header.position
        for offset, timestamp, key_at, key_len, value_at, value_len, magic in _messages(
            self._buffer, lenient=self._lenient
        ):
            if self._base is not None:
                offset += self._base
            key = None if key_len < 0 else bytes(self._buffer[key_at : key_at + key_len])
            value = None if value_len < 0 else bytes(self._buffer[value_at : value_at + value_len])
            records.append(
                Record(
                    file=self.file,
                    batch_position=position,
                    offset=offset,
                    # With a v1 LogAppendTime wrapper, inner v1 records take the wrapper's timestamp; a
                    # v0 one has none (`AbstractLegacyRecordBatch.DeepRecordsIterator`).
                    timestamp=(
                        self._wrapper_timestamp
                        if self._log_append_time and magic == MAGIC_VALUE_V1
                        else timestamp
                    ),
                    sequence=NO_SEQUENCE,
                    key_size=key_len,
                    value_size=value_len,
                    key=key,
                    value=value,
                )
            )
            held += RECORD_OBJECT_BYTES + max(key_len, 0) + max(value_len, 0)
            if held >= budget:
                yield records
                records, held = [], 0
        if records:
            yield records

    @property
    def records(self) -> list[Record]:
        """Every record in one list (a small entry's; `record_lists` bounds a large one's)."""
        return [r for chunk in self.record_lists(1 << 62) for r in chunk]


def minimum_message_size(magic: int) -> int:
    return RECORD_OVERHEAD_V1 if magic == MAGIC_VALUE_V1 else RECORD_OVERHEAD_V0


def decode_legacy_entry(
    view: memoryview, pos: int, *, file: str, file_position: int, with_records: bool
) -> LegacyEntry:
    """Decode the whole legacy entry at `view[pos:]` (the caller checked that it is all there).

    The CRC first: a message whose CRC fails gives the header its own fields make (crc_valid false); its
    payload is not read, except an uncompressed one's key and value for its record (`with_records`). Its
    attributes must still be a legacy message's (a known codec, no unused bit), or its bytes are no legacy
    message at all: a LegacyFormatError, as any framing or decompression failure of a CRC-valid one is.
    A CRC-valid compressed wrapper is always opened, records or not: the entry's base offset and count
    need the inner set (framed once, no message kept: `_scan`).
    """
    offset, size = _ENTRY_HEAD.unpack_from(view, pos)
    message = view[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size]
    magic, attributes, timestamp = _message_head(message)
    (crc,) = struct.unpack_from(">I", message, 0)
    # CRC-32 from the magic byte to the end of the message (LegacyRecord.computeChecksum).
    crc_valid = zlib.crc32(message[4:]) == crc
    codec = attributes & COMPRESSION_CODEC_MASK
    if codec not in COMPRESSION_NAMES or codec == 4:
        # zstd is only valid in magic v2 ("Invalid wrapper compressionType").
        raise LegacyFormatError(f"invalid legacy compression codec id {codec}")
    if not crc_valid and attributes & ~LEGACY_ATTRIBUTE_BITS[magic]:
        raise LegacyFormatError(f"attributes {attributes:#04x} set bits no legacy v{magic} message has")
    timestamp_type = (
        NO_TIMESTAMP_TYPE
        if magic == MAGIC_VALUE_V0
        else TIMESTAMP_TYPE_NAMES[(attributes & LEGACY_TIMESTAMP_TYPE_MASK) >> 3]
    )

    def header(base_offset: int, count: int, base_timestamp: int | None) -> BatchHeader:
        return BatchHeader(
            file=file,
            position=file_position,
            base_offset=base_offset,
            last_offset=offset,
            count=count,
            magic=magic,
            crc=crc,
            crc_valid=crc_valid,
            attributes=attributes,
            compression=COMPRESSION_NAMES[codec],
            timestamp_type=timestamp_type,
            is_transactional=False,
            is_control=False,
            partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
            base_timestamp=base_timestamp,
            # AbstractLegacyRecordBatch.maxTimestamp() is the wrapper's own timestamp.
            max_timestamp=timestamp,
            producer_id=NO_PRODUCER_ID,
            producer_epoch=NO_PRODUCER_EPOCH,
            base_sequence=NO_SEQUENCE,
            last_sequence=NO_SEQUENCE,
            size_bytes=LOG_OVERHEAD + size,
        )

    # The entry's own message as a one-message set: `_messages` frames it as an inner set's.
    single = view[pos : pos + LOG_OVERHEAD + size]
    if codec == 0:
        try:
            next(_messages(single, lenient=crc_valid))
        except LegacyFormatError as exc:
            if crc_valid:
                raise  # a CRC-valid message that does not frame is unreadable
            return LegacyEntry(header(offset, 1, timestamp), problem=str(exc))
        return LegacyEntry(
            header(offset, 1, timestamp), buffer=single if with_records else None, wrapper_timestamp=timestamp
        )
    if not crc_valid:
        # Its inner set, if it still opens, gives the first offset and count (contract §5: a legacy
        # entry's base offset is its first inner one), so the offsets it covers stay covered; a payload
        # that does not open, or whose inner offsets pass the wrapper's, leaves them unknown. As a
        # dump-log line of the entry says them (`dump_log_text`): one message at the wrapper's offset.
        try:
            inner: tuple[int, int, int, memoryview, int | None] | None = _opened(
                single, offset, magic, codec, trusted=False
            )
        except LegacyFormatError:
            inner = None
        if inner is None:
            return LegacyEntry(
                header(offset, 1, NO_TIMESTAMP if magic == MAGIC_VALUE_V0 else None), frames=False
            )
    else:
        inner = _opened(single, offset, magic, codec)
    first_offset, count, first_timestamp, plain, base = inner
    return LegacyEntry(
        header(first_offset, count, first_timestamp),
        buffer=plain if with_records else None,
        base=base,
        wrapper_timestamp=timestamp,
    )


def _opened(
    single: memoryview, offset: int, magic: int, codec: int, *, trusted: bool = True
) -> tuple[int, int, int, memoryview, int | None]:
    """The inner set of the compressed wrapper entry `single` (at `offset`): its first offset, count,
    first timestamp, the decompressed set and what its v1 relative offsets are added to. A
    LegacyFormatError where it does not open or frame; and, not `trusted` (its CRC failed: snappy and
    lz4 carry no checksum of their own, so flipped bits may still decompress), where its offsets do not
    hold together as a broker writes them: from a first offset >= 0, the least, up to the wrapper's
    offset, the greatest and last, with no more messages than offsets between."""
    value = _wrapper_value(single, lenient=trusted)
    try:
        plain = memoryview(decompress(COMPRESSION_NAMES[codec], value, magic=magic))
    except CodecError as exc:
        raise LegacyFormatError(str(exc)) from None
    count, first_offset, first_timestamp, low, high, last_relative = _scan(plain, lenient=trusted)
    base = None
    if magic == MAGIC_VALUE_V1:
        # v1 inner offsets are relative; the wrapper carries the absolute offset of the last one
        # (AbstractLegacyRecordBatch.DeepRecordsIterator). A wrapper offset of 0 means base 0.
        base = 0 if offset == 0 else offset - last_relative
        if base < 0:
            raise LegacyFormatError(
                f"wrapper offset {offset} is below its last relative inner offset {last_relative}"
            )
        for relative in (low, high):
            # A corrupt relative offset can put an inner message past int64: no offset Kafka could
            # hold, and no value the offset columns (int64) can store.
            if not _INT64_MIN <= base + relative <= _INT64_MAX:
                raise LegacyFormatError(
                    f"inner offset {relative} from base {base} is {base + relative}, outside int64"
                )
        first_offset += base
    if not trusted:
        last = last_relative + (base or 0)
        if not (
            low + (base or 0) == first_offset
            and high == last_relative
            and first_offset >= 0
            and last == offset
            and count <= offset - first_offset + 1
        ):
            raise LegacyFormatError("the inner offsets of a wrapper whose CRC fails do not hold together")
    return first_offset, count, first_timestamp, plain, base


def _message_head(message: memoryview) -> tuple[int, int, int]:
    """Magic, attributes and timestamp (-1 in v0) of a message long enough for its magic's fields."""
    if len(message) < RECORD_OVERHEAD_V0:
        raise LegacyFormatError(f"legacy message of {len(message)} bytes is shorter than the minimum")
    magic, attributes = message[4], message[5]
    if magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1):
        raise LegacyFormatError(f"unknown magic {magic}")
    if len(message) < minimum_message_size(magic):
        raise LegacyFormatError(f"legacy v{magic} message of {len(message)} bytes is too short")
    timestamp = _INT64.unpack_from(message, 6)[0] if magic == MAGIC_VALUE_V1 else NO_TIMESTAMP
    return magic, attributes, timestamp


def _wrapper_value(entry: memoryview, *, lenient: bool = False) -> memoryview:
    """The value of a compressed wrapper entry, framed as a message's (not copied); `lenient`, bytes after
    it are let be, as Kafka reads a message (`LegacyRecord.value()`: `Utils.sizeDelimited`)."""
    message = entry[LOG_OVERHEAD:]
    magic = message[4]
    _, at = _field(message, 14 if magic == MAGIC_VALUE_V1 else 6)
    value_len, end = _field(message, at)
    if end != len(message) and not lenient:
        raise LegacyFormatError(f"{len(message) - end} unexpected bytes after the legacy message value")
    if value_len < 0:
        raise LegacyFormatError("compressed legacy wrapper has a null value")
    return message[end - value_len : end]


def _field(message: memoryview, pos: int) -> tuple[int, int]:
    """The length (-1: null) of the bytes field at `pos` and where it ends."""
    if pos + 4 > len(message):
        raise LegacyFormatError("legacy message ends inside a length field")
    (length,) = _INT32.unpack_from(message, pos)
    pos += 4
    if length < 0:
        return -1, pos
    if pos + length > len(message):
        raise LegacyFormatError(f"legacy field of {length} bytes overruns the message")
    return length, pos + length


def _messages(buffer: bytes | memoryview, *, lenient: bool = False) -> Iterator[_Framed]:
    """Frame the messages of a message set one by one: each checked as `LegacyRecord` reads it (its
    size, magic, key and value lengths filling it exactly), none compressed; nothing is copied.

    `lenient` (a CRC-valid entry's), as Kafka reads them: the set ends quietly where fewer bytes are left
    than an entry header or the message its size gives (`DataLogInputStream.nextBatch` returns null),
    and bytes after a message's value are let be (`LegacyRecord.key()`/`value()` read sized fields);
    a size below the minimum still fails (`CorruptRecordException`). Strict, what the CRC does not vouch
    for must frame exactly."""
    pos, end = 0, len(buffer)
    while pos < end:
        if pos + LOG_OVERHEAD > end:
            if lenient:
                return
            raise LegacyFormatError("inner message set ends inside an entry header")
        offset, size = _ENTRY_HEAD.unpack_from(buffer, pos)
        start = pos + LOG_OVERHEAD
        stop = start + size
        if lenient and size >= RECORD_OVERHEAD_V0 and stop > end:
            return
        if size < RECORD_OVERHEAD_V0 or stop > end:
            raise LegacyFormatError(f"inner message size {size} is invalid")
        message = memoryview(buffer)[start:stop]
        magic, attributes, timestamp = _message_head(message)
        key_len, at = _field(message, 14 if magic == MAGIC_VALUE_V1 else 6)
        value_len, value_end = _field(message, at)
        if value_end != size and not lenient:
            raise LegacyFormatError(f"{size - value_end} unexpected bytes after the legacy message value")
        if attributes & COMPRESSION_CODEC_MASK:
            raise LegacyFormatError("inner legacy message is itself compressed")
        key_at = start + (14 if magic == MAGIC_VALUE_V1 else 6) + 4
        yield offset, timestamp, key_at, key_len, start + at + 4, value_len, magic
        pos = stop


def _scan(plain: memoryview, *, lenient: bool = False) -> tuple[int, int, int, int, int, int]:
    """One pass over an inner message set, keeping no message: count, first offset and timestamp, the
    least and greatest offsets and the last one."""
    count = 0
    first_offset = first_timestamp = low = high = last = 0
    for offset, timestamp, *_ in _messages(plain, lenient=lenient):
        if not count:
            first_offset, first_timestamp, low, high = offset, timestamp, offset, offset
        elif offset < low:
            low = offset
        elif offset > high:
            high = offset
        last = offset
        count += 1
    if not count:
        raise LegacyFormatError("compressed legacy wrapper holds no messages")
    return count, first_offset, first_timestamp, low, high, last
