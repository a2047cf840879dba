"""Legacy message sets, magic v0 (<= 0.9) and v1 (0.10.x, KIP-31/32): kafka-formats §2.

A legacy log entry is `offset int64 | size int32 | message`; a compressed entry is a wrapper whose
value holds an inner message set. Legacy entries carry no producer id or sequence.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

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


class LegacyFormatError(ValueError):
    """A legacy message whose framing or compressed content is unreadable."""


@dataclass(slots=True)
class _Message:
    offset: int
    crc: int
    crc_valid: bool
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass(slots=True)
class LegacyEntry:
    header: BatchHeader
    records: list[Record] = field(default_factory=list)


def minimum_message_size(magic: int) -> int:
    return RECORD_OVERHEAD_V1 if magic == MAGIC_VALUE_V1 else RECORD_OVERHEAD_V0


def decode_legacy_entry(
    view: memoryview, pos: int, *, file: str, file_position: int, with_records: bool
) -> LegacyEntry:
    """Decode the whole legacy entry at `view[pos:]` (the caller checked that it is all there).

    Compressed wrappers are always opened: the entry's base offset and count need the inner set.
    """
    offset, size = struct.unpack_from(">qi", view, pos)
    wrapper = _parse_message(view[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size], offset)
    codec = wrapper.attributes & COMPRESSION_CODEC_MASK
    if codec not in COMPRESSION_NAMES or codec == 4:
        # zstd is only valid in magic v2 ("Invalid wrapper compressionType").
        raise LegacyFormatError(f"invalid legacy compression codec id {codec}")
    inner = [wrapper] if codec == 0 else _inner_messages(wrapper, COMPRESSION_NAMES[codec])
    timestamp_type = (
        NO_TIMESTAMP_TYPE
        if wrapper.magic == MAGIC_VALUE_V0
        else TIMESTAMP_TYPE_NAMES[(wrapper.attributes & LEGACY_TIMESTAMP_TYPE_MASK) >> 3]
    )
    header = BatchHeader(
        file=file,
        position=file_position,
        base_offset=inner[0].offset,
        last_offset=offset,
        count=len(inner),
        magic=wrapper.magic,
        crc=wrapper.crc,
        crc_valid=wrapper.crc_valid,
        attributes=wrapper.attributes,
        compression=COMPRESSION_NAMES[codec],
        timestamp_type=timestamp_type,
        is_transactional=False,
        is_control=False,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        base_timestamp=inner[0].timestamp,
        # AbstractLegacyRecordBatch.maxTimestamp() is the wrapper's own timestamp.
        max_timestamp=wrapper.timestamp,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
        last_sequence=NO_SEQUENCE,
        size_bytes=LOG_OVERHEAD + size,
    )
    entry = LegacyEntry(header)
    if with_records:
        log_append_time = timestamp_type == "LogAppendTime"
        for m in inner:
            # With a v1 LogAppendTime wrapper, inner records take the wrapper's timestamp.
            ts = wrapper.timestamp if log_append_time else m.timestamp
            entry.records.append(
                Record(
                    file=file,
                    batch_position=file_position,
                    offset=m.offset,
                    timestamp=ts,
                    sequence=NO_SEQUENCE,
                    key_size=-1 if m.key is None else len(m.key),
                    value_size=-1 if m.value is None else len(m.value),
                    key=m.key,
                    value=m.value,
                )
            )
    return entry


def _parse_message(message: memoryview, offset: int) -> _Message:
    if len(message) < RECORD_OVERHEAD_V0:
        raise LegacyFormatError(f"legacy message of {len(message)} bytes is shorter than the minimum")
    (crc,) = struct.unpack_from(">I", message, 0)
    magic, attributes = message[4], message[5]
    if magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1):
        raise LegacyFormatError(f"unknown magic {magic}")
    if len(message) < minimum_message_size(magic):
        raise LegacyFormatError(f"legacy v{magic} message of {len(message)} bytes is too short")
    pos = 6
    timestamp = NO_TIMESTAMP
    if magic == MAGIC_VALUE_V1:
        (timestamp,) = struct.unpack_from(">q", message, pos)
        pos += 8
    key, pos = _read_bytes(message, pos)
    value, pos = _read_bytes(message, pos)
    if pos != len(message):
        raise LegacyFormatError(f"{len(message) - pos} unexpected bytes after the legacy message value")
    # CRC-32 from the magic byte to the end of the message (LegacyRecord.computeChecksum).
    crc_valid = zlib.crc32(message[4:]) == crc
    return _Message(offset, crc, crc_valid, magic, attributes, timestamp, key, value)


def _read_bytes(message: memoryview, pos: int) -> tuple[bytes | None, int]:
    if pos + 4 > len(message):
        raise LegacyFormatError("legacy message ends inside a length field")
    (length,) = struct.unpack_from(">i", message, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > len(message):
        raise LegacyFormatError(f"legacy field of {length} bytes overruns the message")
    return bytes(message[pos : pos + length]), pos + length


def _inner_messages(wrapper: _Message, codec: str) -> list[_Message]:
    if wrapper.value is None:
        raise LegacyFormatError("compressed legacy wrapper has a null value")
    try:
        plain = memoryview(decompress(codec, wrapper.value, magic=wrapper.magic))
    except CodecError as exc:
        raise LegacyFormatError(str(exc)) from None
    messages: list[_Message] = []
    pos = 0
    while pos < len(plain):
        if pos + LOG_OVERHEAD > len(plain):
            raise LegacyFormatError("inner message set ends inside an entry header")
        inner_offset, size = struct.unpack_from(">qi", plain, pos)
        if size < RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD + size > len(plain):
            raise LegacyFormatError(f"inner message size {size} is invalid")
        message = _parse_message(plain[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size], inner_offset)
        if message.attributes & COMPRESSION_CODEC_MASK:
            raise LegacyFormatError("inner legacy message is itself compressed")
        messages.append(message)
        pos += LOG_OVERHEAD + size
    if not messages:
        raise LegacyFormatError("compressed legacy wrapper holds no messages")
    if wrapper.magic == MAGIC_VALUE_V1:
        # v1 inner offsets are relative; the wrapper carries the absolute offset of the last one
        # (AbstractLegacyRecordBatch.DeepRecordsIterator). A wrapper offset of 0 means base 0.
        last_relative = messages[-1].offset
        base = 0 if wrapper.offset == 0 else wrapper.offset - last_relative
        if base < 0:
            raise LegacyFormatError(
                f"wrapper offset {wrapper.offset} is below its last relative inner offset {last_relative}"
            )
        for m in messages:
            # A corrupt relative offset can put an inner message past int64: no offset Kafka could
            # hold, and no value the offset columns (int64) can store.
            if not _INT64_MIN <= base + m.offset <= _INT64_MAX:
                raise LegacyFormatError(
                    f"inner offset {m.offset} from base {base} is {base + m.offset}, outside int64"
                )
            m.offset = base + m.offset
    return messages
