"""Typed access to the C batch walker (`_native.c`): column names, widths and stop reasons."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kafka_log_decoder import _native

# Why `walk_batches` stopped.
REACHED_STOP = 0
NEED_MORE_DATA = 1
NOT_V2 = 2
BAD_LENGTH = 3
FULL = 4

# records_decoded per batch
RECORDS_NOT_DECODED = 0
RECORDS_DECODED = 1
RECORDS_FRAMING_ERROR = 2
# More header rows than `MAX_BATCH_HEADERS` (28 bytes of columns each): the batch's records not kept.
RECORDS_TOO_MANY_HEADERS = 3
# An uncompressed batch counting more records than the walk's `max_records`: not decoded in place.
RECORDS_TOO_MANY_RECORDS = 4
MAX_BATCH_HEADERS: int = _native.MAX_BATCH_HEADERS

# control_type of a batch that is not a control batch; -1 = a control batch of unknown type (also one
# whose control record is invalid: a key or EndTransactionMarker Kafka refuses; `segment` reports why).
NOT_CONTROL = -2

BATCH_COLUMNS: dict[str, str] = {
    "position": "q",
    "base_offset": "q",
    "last_offset": "q",
    "size_bytes": "i",
    "partition_leader_epoch": "i",
    "magic": "b",
    "crc": "I",
    "crc_valid": "B",
    "attributes": "h",
    "last_offset_delta": "i",
    "base_timestamp": "q",
    "max_timestamp": "q",
    "producer_id": "q",
    "producer_epoch": "h",
    "base_sequence": "i",
    "last_sequence": "i",
    "count": "i",
    "control_type": "h",
    "coordinator_epoch": "i",
    "records_decoded": "B",
    "err_offset": "i",
}

RECORD_COLUMNS: dict[str, str] = {
    "batch_index": "i",
    "offset": "q",
    "timestamp": "q",
    "sequence": "i",
    "key_pos": "q",
    "key_len": "i",
    "value_pos": "q",
    "value_len": "i",
    "headers_count": "i",
    "key_hash": "Q",
    "value_hash": "Q",
    "hdr_record_index": "i",
    "hdr_key_pos": "q",
    "hdr_key_len": "i",
    "hdr_value_pos": "q",
    "hdr_value_len": "i",
}

crc32c = _native.crc32c


@dataclass(slots=True)
class WalkResult:
    n: int
    batches: Columns
    next_pos: int
    reason: int
    records: Columns | None


class Columns(Mapping[str, memoryview]):
    """Read-only typed column views, each cast on first access: most consumers touch a few of the
    16 record columns, and casting all of them cost a sixth of decoding a compressed batch."""

    __slots__ = ("_raw", "_types", "_views")

    def __init__(self, raw: dict[str, bytes], types: dict[str, str]) -> None:
        self._raw = raw
        self._types = types
        self._views: dict[str, memoryview] = {}

    def __getitem__(self, name: str) -> memoryview:
        view = self._views.get(name)
        if view is None:
            view = memoryview(self._raw[name]).cast(self._types[name])  # type: ignore[call-overload]
            self._views[name] = view
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def _cast(raw: dict[str, bytes], types: dict[str, str]) -> Columns:
    return Columns(raw, types)


def walk_batches(
    buf: bytes | bytearray | memoryview,
    start: int,
    stop: int,
    *,
    decode_records: bool,
    max_batches: int,
    hash_values: bool = False,
    max_records: int = -1,
) -> WalkResult:
    """Walk v2 batches; `hash_values` also fills key_hash/value_hash (XXH64), else they are 0. An
    uncompressed batch counting more than `max_records` records (>= 0) has them not decoded
    (`RECORDS_TOO_MANY_RECORDS`)."""
    n, columns, next_pos, reason, record_columns = _native.walk_batches(
        buf, start, stop, decode_records, max_batches, hash_values, max_records
    )
    return WalkResult(
        n,
        _cast(columns, BATCH_COLUMNS),
        next_pos,
        reason,
        None if record_columns is None else _cast(record_columns, RECORD_COLUMNS),
    )


def decode_records(
    data: bytes | memoryview,
    *,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    base_sequence: int,
    count: int,
    hash_values: bool = False,
) -> tuple[Columns, int, int]:
    """Decode a plain (decompressed) records blob: the columns, -1 or where framing failed (or the
    record whose headers passed `MAX_BATCH_HEADERS`), and the status (`RECORDS_DECODED`,
    `RECORDS_FRAMING_ERROR`, `RECORDS_TOO_MANY_HEADERS`)."""
    columns, error_position, status = _native.decode_records(
        data, base_offset, base_timestamp, max_timestamp, log_append_time, base_sequence, count, hash_values
    )
    return _cast(columns, RECORD_COLUMNS), error_position, status
