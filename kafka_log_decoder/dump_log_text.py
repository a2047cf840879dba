"""Parse `kafka-dump-log.sh` (DumpLogSegments) text into the rows the binary decoders produce.

Every output variant of formats §6.4 is read: ≤ 2.1 (deep mode prints record lines only), 2.2-2.7,
2.8 (long record lines), 3.0-3.1, ≥ 3.2 (`deleteHorizonMs:`), the Scala stray `}` after a legacy
record's crc and the later Java port. Lines are read as `name: value` pairs by name, never by
position, so fields added or reordered between versions need no new code. Bad text never raises:
a line that cannot be read becomes a `DecodeError` (UNREADABLE_BATCH) located in the text file; so
does a number outside the range of its bronze column (`producerEpoch: 70000` is no int16). A batch
line that cannot be read takes its record lines into its error: none of them is read, and none joins
the batch before it.

What the text does not carry is filled in the same way for every variant:

* `BatchHeader.base_timestamp` is None; `attributes` is rebuilt from the printed codec,
  timestamp type, `isTransactional`, `isControl` and `deleteHorizonMs` (other bits are lost).
* `Record.key`/`value` are the printed `key:`/`payload:` text, UTF-8 encoded (None when not
  printed); `header_values` is None. Header keys are split on `,` as the tool joined them. Key
  and payload are free text: `keySize`/`valueSize` choose where one ends, and a payload shorter
  than its size continues on the next lines (it held a newline) unless they are tool lines.
* A legacy (magic 0/1) entry line only gives its last offset: `base_offset` and `count` come
  from its record lines in deep mode. In a shallow dump a compressed wrapper starts after the
  previous entry of its file (the first one at the file's base offset), as the offsets of a segment
  do until the log cleaner removes some (a compacted wrapper's count is then too high), unless that
  would make 2^31 messages or more (then it is one message at its offset, as an uncompressed entry is).
* A ≤ 2.1 deep-mode dump has no batch lines. One `BatchHeader` is made per distinct `position:`
  of its record lines: offsets, count, sequences and max timestamp from those records,
  `size_bytes` from the next batch's position (-1 for the last batch of a file),
  `partition_leader_epoch` -1, `crc` 0 and `crc_valid` = every record line's `isvalid`.
* Control records set the preceding batch's `control_type` (and `coordinator_epoch` for
  COMMIT/ABORT) and, as from the binary decoders, yield no `Record`; a shallow dump of a control
  batch leaves both None.
* A batch of more records than `segment.MAX_BATCH_RECORDS` (its count, or its record lines) gives,
  as from the binary decoders, its header and an UNREADABLE_BATCH error naming its count instead of
  its records (over its bytes, or over a legacy entry's header fields). A v2 batch's header is given
  once the batch has held `HELD_RECORDS` records, then its records as they are read: a batch's rows
  held at once stay bounded, however many records it has.
* `SnapshotEntry`: `snapshot_offset` from the dumped file name; an entry printed without its
  `firstSequence:` part has last_sequence -1, last_offset -1 and offset_delta 0; `timestamp` is
  `lastTimestamp` (3.1+), else the printed batch `timestamp`, else -1.
* `Found N invalid bytes at the end of F` becomes TRUNCATED_TAIL at the end of the last batch
  (in a ≤ 2.1 deep dump, whose last batch has no known size, at that batch's position).
  A batch printed with `isvalid: false` is followed by a CRC_MISMATCH error, as from the binary
  decoder. Lines with `--skip-record-metadata` content only, the tool's own notes (`... is empty.`,
  `Log starting offset:`) and its stderr summaries and the JVM's and loggers' stderr lines (when
  2>&1 was captured; `CAPTURED_STDERR`), before the first `Dumping` line or between entries, yield
  nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, TypeVar

from kafka_log_decoder import segment, text_lines
from kafka_log_decoder.constants import (
    COMPRESSION_NAMES,
    CONTROL_FLAG_MASK,
    CONTROL_TYPE_NAMES,
    CONTROL_TYPE_UNKNOWN,
    DELETE_HORIZON_FLAG_MASK,
    END_TXN_MARKER_TYPES,
    INDEX_FILE_SUFFIX,
    LEGACY_TIMESTAMP_TYPE_MASK,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TIME_INDEX_FILE_SUFFIX,
    TIMESTAMP_TYPE_MASK,
    TIMESTAMP_TYPE_NAMES,
    TRANSACTIONAL_FLAG_MASK,
    TXN_INDEX_ENTRY_SIZE,
    TXN_INDEX_FILE_SUFFIX,
    int_bounds,
)
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.rows import (
    BatchHeader,
    IndexEntry,
    Record,
    SnapshotEntry,
    TimeIndexEntry,
    TxnIndexEntry,
)

DumpLogItem = BatchHeader | Record | SnapshotEntry | IndexEntry | TimeIndexEntry | TxnIndexEntry | DecodeError

DEFAULT_SOURCE = "<dump-log text>"

# Row fields that kafka-dump-log.sh never prints: a cross-check against the binary decoders leaves
# them out (key/value only appear with --print-data-log, and then as decoded text).
FIELDS_NOT_IN_TEXT: dict[type, frozenset[str]] = {
    BatchHeader: frozenset({"base_timestamp"}),
    Record: frozenset({"key", "value", "header_values"}),
    # The tool words its own messages; where and what kind of corruption is what both can tell.
    DecodeError: frozenset({"message"}),
}

_CODEC_IDS = {name: codec for codec, name in COMPRESSION_NAMES.items()}
_TIMESTAMP_TYPES = frozenset({*TIMESTAMP_TYPE_NAMES.values(), NO_TIMESTAMP_TYPE})
# Control records printed as `<Name> {json}` (KRaft types) or `LeaderChange: {json}` (Java port).
_JSON_CONTROL_TYPES = {
    "LeaderChange": "LEADER_CHANGE",
    "SnapshotHeader": "SNAPSHOT_HEADER",
    "SnapshotFooter": "SNAPSHOT_FOOTER",
    "KRaftVersion": "KRAFT_VERSION",
    "KRaftVoters": "KRAFT_VOTERS",
}
_CONTROL_TYPE_IDS = {name: type_id for type_id, name in CONTROL_TYPE_NAMES.items()}
_KEY = "key: "
_PAYLOAD = "payload: "
# What the coordinator decoders (--offsets-decoder, ...) print as the payload of a tombstone.
_DELETE = "<DELETE>"

_PAIR = re.compile(r" *([A-Za-z][A-Za-z0-9]*): (\S*)")
# Names after which the value is not one token: free text to the end of the line, JSON, a list.
_SPECIAL_NAMES = {"key": "free", "payload": "free", "LeaderChange": "json", "headerKeys": "list"}
# A line of `name: value` pairs only (most lines): the fast path of `_scan_fields` reads it at once.
# A header key list with a space in it does not match and takes the slow path. Each value is taken
# whole (possessive) and pairs are apart by spaces, so a line matches in one way or none, in linear time:
# with `(?: *NAME: \S+)*`, a payload of chained exceptions (`IOException: SocketException: ...`) that
# does not match was tried in every split of its tokens, 15 times longer for each one.
_PAIRS = re.compile(r"([A-Za-z][A-Za-z0-9]*): (\S+)")
_ONLY_PAIRS = re.compile(r" *[A-Za-z][A-Za-z0-9]*: \S++(?: +[A-Za-z][A-Za-z0-9]*: \S++)* *")
# The KRaft control records print as `<Name> {json}`, without a colon.
_KRAFT_JSON_NAMES = "|".join(name for name in _JSON_CONTROL_TYPES if name != "LeaderChange")
_JSON_CONTROL = re.compile(rf"({_KRAFT_JSON_NAMES}) (?=\{{)")
# `headerKeys: [k1,k2]` ends at the first `]` that the rest of a record line can follow: keys are
# free text, so this is the only place where a `]` inside a key could cut short.
_HEADER_KEYS = re.compile(
    rf"\[(.*?)\](?=$| (?:endTxnMarker|controlType|LeaderChange|key|payload): | (?:{_KRAFT_JSON_NAMES}) \{{)"
)
_OPTIONAL_LONG = re.compile(r"^(?:OptionalLong\.empty|None|OptionalLong\[(-?\d+)\]|Some\((-?\d+)\))$")
_CONTROL_TYPE = re.compile(r"^([A-Z_]+)\((-?\d+)\)$")
_TRAILING_BYTES = re.compile(r"^Found (\d+) invalid bytes at the end of (.*)$")
# The tool's own end on bytes it cannot read, in a text captured with `2>&1`: the JVM's line for the
# exception that stopped it (Kafka's ApiExceptions have no stack trace; any other's `\tat ...`,
# `Caused by: ...` and `\t... N more` lines follow). Kafka 4.3.1 on a segment whose tail holds a zero
# length: `Exception in thread "main" org.apache.kafka.common.errors.CorruptRecordException: Found
# record size 0 smaller than minimum record overhead (14) in file <F>.`
_TOOL_EXCEPTION = re.compile(r'^Exception in thread "[^"]*" ([\w.$]+)(?::\s*(.*))?$')
# What the tool says of a producer snapshot it cannot read (`CorruptSnapshotException`'s message; Kafka
# 4.3.1: `Snapshot is corrupt (CRC is no longer valid). Stored crc: N. Computed crc: M`; a version other
# than 1: `Snapshot contained an unknown file version 2`), after its `Dumping` line, instead of its entries.
_SNAPSHOT_REFUSED = re.compile(
    r"^Snapshot (?:is corrupt|failed schema validation|contained an unknown file version)\b"
)
# The exceptions of a file the tool could not open (the dumped one, or the .log beside a dumped index,
# which dumpIndex/dumpTimeIndex open first) or type (`StringIndexOutOfBoundsException`: a name without a
# `.`, whose suffix `substring(lastIndexOf("."))` takes): no byte of the dumped file was read.
_FILE_NOT_READ = frozenset(
    {
        "NoSuchFileException",
        "AccessDeniedException",
        "FileNotFoundException",
        "StringIndexOutOfBoundsException",
    }
)
# The bytes of one entry of each index the tool dumps, for where it stopped in one.
_INDEX_ENTRY_SIZES = {
    INDEX_FILE_SUFFIX: OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_FILE_SUFFIX: TIME_INDEX_ENTRY_SIZE,
    TXN_INDEX_FILE_SUFFIX: TXN_INDEX_ENTRY_SIZE,
}
# The packages of the exceptions the tool's readers throw on a log's bytes (CorruptRecordException,
# InvalidRecordException, KafkaException).
_KAFKA_PACKAGES = ("org.apache.kafka.", "kafka.")
_STACK_LINE = re.compile(r"^(?:\tat |\t\.\.\. \d+ more$|Caused by: |\tSuppressed: )")
_STARTING_OFFSET = re.compile(r"^(?:Log starting offset|Starting offset): -?\d+$")
# Lines the tool prints besides entries (notes, and its stderr summaries when 2>&1 was captured).
_TOOL_NOTES = re.compile(
    r"^(?:Snapshot end offset: -?\d+, epoch: -?\d+$|KRaft bootstrap snapshot$"
    r"|Ignoring unknown file |Mismatches in :|  Index offset: "
    r"|Found timestamp mismatch in :|Found out of order timestamp in :|  Index timestamp: "
    r"|The following indexed offsets are not found in the log\.$|Indexed offset: -?\d+, found log offset: "
    r"|Non-consecutive offsets in |  -?\d+ is followed by -?\d+$"
    # 3.8-3.9, after `Dumping` when --key/--value-decoder-class names an old kafka.serializer decoder.
    r"|kafka\.serializer\.\w+ is deprecated\. Please use org\.apache\.kafka\.tools\.api\.\w+ instead$)"
)
# What a JVM tool writes to stderr besides the tool's own summaries, in a text captured with `2>&1`
# (`kafka-dump-log.sh --files ... > dump.txt 2>&1`): the JVM's notes and warnings (`Picked up
# JAVA_TOOL_OPTIONS: ...`, `OpenJDK 64-Bit Server VM warning: ...`, unified logging's `[0.001s][warning]
# [gc] ...`, `WARNING: A terminally deprecated method ...`), log lines in the tools' log4j pattern `[%d]
# %p %m (%c)%n` (config/tools-log4j.properties; tools-log4j2.yaml since 4.0), log4j 1's and log4j2's own
# status lines (`log4j:WARN ...`; `2024-05-01T10:00:00.123Z main ERROR Reconfiguration failed: ...`), and
# SLF4J's notes (`SLF4J: ` before 2.0, `SLF4J(W): ` since).
_LOG_LEVEL = r"(?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL)"
CAPTURED_STDERR = re.compile(
    r"^(?:(?:NOTE: )?Picked up (?:JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS): "
    r"|(?:OpenJDK|Java HotSpot\(TM\)) (?:64-Bit )?(?:Server|Client) VM warning: "
    r"|\[\d+\.\d+s\]\[(?:error|warning|info|debug|trace)\s*\]|WARNING: "
    rf"|\[\d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}},\d{{3}}\] {_LOG_LEVEL} "
    rf"|log4j:(?:WARN|ERROR) |\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d+)?Z? \S+ {_LOG_LEVEL} "
    rf"|{_LOG_LEVEL} StatusLogger |SLF4J(?:\([A-Z]\))?: )"
)
# A line that starts one of these is tool output in its own right, never the continuation of a
# payload that contained a newline.
_STRUCTURAL = re.compile(
    r"^(?:Dumping |\| |baseOffset: |offset: -?\d+ |Found \d+ invalid bytes |Log starting offset: "
    r"|Starting offset: |producerId: |timestamp: -?\d+ offset: |version: -?\d+ producerId: | payload: "
    r"|SLF4J(?:\([A-Z]\))?: |Non-consecutive offsets in |Mismatches in :)"
)
# Of the lines `_STRUCTURAL` names, those that read as the tool's whole line begins: inside a payload
# its size says goes on (a value holding a newline and then `| a | b |`, a Markdown table), a line
# that only starts like one is the payload's.
_TOOL_LINE = re.compile(
    r"^(?:Dumping \S|\| offset: -?\d+ [A-Za-z]+: |baseOffset: -?\d+ lastOffset: |offset: -?\d+ [A-Za-z]+: "
    r"|Found \d+ invalid bytes at the end of |(?:Log starting offset|Starting offset): -?\d+$"
    r"|producerId: -?\d+ [A-Za-z]+: |timestamp: -?\d+ offset: -?\d+|version: -?\d+ producerId: -?\d+"
    r"| payload: |SLF4J(?:\([A-Z]\))?: |Non-consecutive offsets in |Mismatches in :)"
)
_DECIMAL = re.compile(r"-?[0-9]+")
# Lines that end a payload printed shorter than its size (a decoder's output) unless they fit in what
# the size leaves: the tool's summaries after its last file and stderr lines (2>&1). A payload holding
# a log line (`[2024-05-01 10:00:00,123] INFO ...`) keeps it where the sizes say it is the payload's.
_NOISE = re.compile(
    r"^(?:Found timestamp mismatch in :|Found out of order timestamp in :"
    r"|The following indexed offsets are not found in the log\.$)"
    rf"|{CAPTURED_STDERR.pattern}"
)


class _LineError(ValueError):
    """A line that is not what the tool prints (the message names what was expected)."""


class _BatchLineError(_LineError):
    """A batch (or legacy entry) line that cannot be read: its record lines are part of the bad region."""


# The integer fields that the ingest stores narrower than int64: each one's width in bits, that of
# its column in `schemas.tables` (tests/unit/test_dump_log_text.py holds the two together; this
# package imports no Spark). Every other integer field is an int64 column. A number printed outside
# its column's range is unreadable text: it would otherwise fail the Arrow batch of the whole file.
_NARROW_FIELDS: dict[type, dict[str, int]] = {
    BatchHeader: {
        "count": 32,
        "magic": 8,
        "attributes": 16,
        "partition_leader_epoch": 32,
        "producer_epoch": 16,
        "base_sequence": 32,
        "last_sequence": 32,
        "size_bytes": 32,
        "coordinator_epoch": 32,
    },
    Record: {"sequence": 32, "key_size": 32, "value_size": 32},
    SnapshotEntry: {"producer_epoch": 16, "last_sequence": 32, "offset_delta": 32, "coordinator_epoch": 32},
    TxnIndexEntry: {"version": 16},
}


_Row = TypeVar("_Row", BatchHeader, Record, SnapshotEntry, IndexEntry, TimeIndexEntry, TxnIndexEntry)


def _ranges_of(row_type: type) -> tuple[tuple[str, int, int], ...]:
    narrow = _NARROW_FIELDS.get(row_type, {})
    return tuple(
        (f.name, *int_bounds(narrow.get(f.name, 64)))
        for f in dataclass_fields(row_type)
        if f.type in ("int", "int | None")
    )


_RANGES = {
    row_type: _ranges_of(row_type)
    for row_type in (BatchHeader, Record, SnapshotEntry, IndexEntry, TimeIndexEntry, TxnIndexEntry)
}
_INT32_MAX = int_bounds(32)[1]
_INT64_MAX = int_bounds(64)[1]


def _in_range(row: _Row) -> _Row:
    """`row`, when every integer of it fits its column; else a `_LineError` naming the first that does not."""
    for name, low, high in _RANGES[type(row)]:
        value = getattr(row, name)
        if value is not None and not low <= value <= high:
            raise _LineError(f"{name} {value} is out of range ({low} to {high})")
    return row


def _in_range_of(row_type: type, name: str, value: int) -> None:
    """A `_LineError` unless `value` fits the column of `row_type`'s field `name`."""
    low, high = int_bounds(_NARROW_FIELDS.get(row_type, {}).get(name, 64))
    if not low <= value <= high:
        raise _LineError(f"{name} {value} is out of range ({low} to {high})")


@dataclass(slots=True)
class _Fields:
    """The `name: value` pairs of one line (names lowercased, first occurrence kept) and its free tail."""

    values: dict[str, str] = field(default_factory=dict)
    first: str | None = None
    timestamp_type: str | None = None
    tail: str | None = None
    json_control: str | None = None

    def has(self, name: str) -> bool:
        return (_LOWER.get(name) or name.lower()) in self.values

    def get(self, name: str, default: str) -> str:
        return self.values.get(_LOWER.get(name) or name.lower(), default)

    def text(self, name: str) -> str:
        try:
            return self.values[_LOWER.get(name) or name.lower()]
        except KeyError:
            raise _LineError(f"no {name}: field") from None

    def integer(self, name: str, default: int | None = None) -> int:
        if default is not None and not self.has(name):
            return default
        value = self.text(name)
        # As the tool prints a number (Long.toString): no `+`, `_` or non-ASCII digits, which int() takes.
        if not _DECIMAL.fullmatch(value):
            raise _LineError(f"{name}: {value!r} is not a number")
        return int(value)

    def flag(self, name: str, default: bool | None = None) -> bool:
        if default is not None and not self.has(name):
            return default
        value = self.text(name)
        if value not in ("true", "false"):
            raise _LineError(f"{name}: {value!r} is not true/false")
        return value == "true"


def _scan_fields(line: str, start: int = 0) -> _Fields:
    """Read `name: value` pairs until the end of the line or a free-text part (key, payload, JSON)."""
    if not _may_have_free_text(line) and _ONLY_PAIRS.fullmatch(line, start):
        return _fields_of_pairs(_PAIRS.findall(line, start))
    return _scan_fields_slowly(line, start)


def _may_have_free_text(line: str) -> bool:
    # Plain substring tests (fast); a false alarm only sends the line down the slow path.
    return "key: " in line or "payload: " in line or "LeaderChange: " in line or " {" in line


def _scan_fields_slowly(line: str, start: int) -> _Fields:
    """Pair by pair, for lines with a free-text tail, JSON or header keys with spaces."""
    pairs: list[tuple[str, str]] = []
    tail = json_control = None
    pos, end = start, len(line)
    while True:
        match = _PAIR.match(line, pos)
        if match is None:
            while pos < end and line[pos] == " ":
                pos += 1
            if pos < end:
                json_match = _JSON_CONTROL.match(line, pos)
                if json_match is None:
                    raise _LineError(f"unexpected text at column {pos + 1}: {line[pos : pos + 40]!r}")
                json_control = _JSON_CONTROL_TYPES[json_match.group(1)]
            break
        name = match.group(1)
        special = _SPECIAL_NAMES.get(name)
        if special == "free":
            tail = line[match.start(1) :]
            break
        if special == "json":
            json_control = _JSON_CONTROL_TYPES[name]
            break
        if special == "list":
            keys = _HEADER_KEYS.match(line, match.start(2))
            if keys is None:
                raise _LineError("headerKeys: is not a [..] list")
            pairs.append((name, keys.group(0)))
            pos = keys.end()
        else:
            pairs.append((name, match.group(2)))
            pos = match.end()
    fields = _fields_of_pairs(pairs)
    fields.tail, fields.json_control = tail, json_control
    return fields


def _fields_of_pairs(pairs: list[tuple[str, str]]) -> _Fields:
    """The `_Fields` of a line's pairs: names lowercased, the first occurrence kept."""
    fields = _Fields()
    if not pairs:
        return fields
    values = fields.values
    fields.first = pairs[0][0]
    for name, value in pairs:
        if not value:
            raise _LineError(f"{name}: has no value")
        if name in _TIMESTAMP_TYPES:
            if fields.timestamp_type is None:
                fields.timestamp_type = name
            name = "timestamp"
        elif name == "headerKeys":
            if value[0] != "[" or value[-1] != "]":
                raise _LineError("headerKeys: is not a [..] list")
            value = value[1:-1]
        lowered = _LOWER.get(name)
        if lowered is None:
            lowered = _LOWER[name] = name.lower()
        if lowered not in values:
            values[lowered] = value
    return fields


# Field names are few: their lowercase forms are cached to keep the per-line cost down.
_LOWER: dict[str, str] = {}


def _optional_long(text: str, name: str) -> int | None:
    match = _OPTIONAL_LONG.match(text)
    if match is None:
        raise _LineError(f"{name}: {text!r} is neither OptionalLong nor Option")
    number = match.group(1) or match.group(2)
    return None if number is None else int(number)


def _crc(fields: _Fields) -> int:
    # Scala releases print a legacy record's crc with a stray `}` (`${r.checksum}}`).
    text = fields.text("crc").rstrip("}")
    try:
        return int(text)
    except ValueError:
        raise _LineError(f"crc: {text!r} is not a number") from None


def _compression(fields: _Fields) -> str:
    # `compresscodec` on batch lines; the 2.8 record line says `compressType`. Up to 2.8 the enum
    # constant (NONE, GZIP, ...) was printed, since 3.0 its lowercase `name`.
    name = fields.get("compresscodec", "") or fields.text("compressType")
    codec = name.lower()
    if codec not in _CODEC_IDS:
        raise _LineError(f"unknown compression codec {name!r}")
    return codec


def _timestamp_type(fields: _Fields) -> str:
    if fields.timestamp_type is None:
        raise _LineError("no CreateTime:/LogAppendTime:/NoTimestampType: field")
    return fields.timestamp_type


def _attributes(
    compression: str,
    timestamp_type: str,
    magic: int,
    *,
    is_transactional: bool = False,
    is_control: bool = False,
    has_delete_horizon: bool = False,
) -> int:
    attributes = _CODEC_IDS[compression]
    if timestamp_type == TIMESTAMP_TYPE_NAMES[1]:
        attributes |= TIMESTAMP_TYPE_MASK if magic >= MAGIC_VALUE_V2 else LEGACY_TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return attributes


def _batch_header(file: str, fields: _Fields) -> BatchHeader:
    """A v2 batch line (`baseOffset: ...`) or a legacy entry line (`offset: <last> position: ...`)."""
    magic = fields.integer("magic")
    compression = _compression(fields)
    timestamp_type = _timestamp_type(fields)
    if fields.first == "baseOffset":
        base_offset, last_offset = fields.integer("baseOffset"), fields.integer("lastOffset")
        delete_horizon = (
            _optional_long(fields.text("deleteHorizonMs"), "deleteHorizonMs")
            if fields.has("deleteHorizonMs")
            else None
        )
        is_transactional = fields.flag("isTransactional")
        if fields.has("isControl"):
            is_control = fields.flag("isControl")
        else:
            # Absent before 2.1. A transactional batch without sequences is a marker: a transactional
            # producer is idempotent, and the broker refuses its data without a sequence
            # (`ProducerAppendInfo`), while the coordinator's markers carry none (formats §1.7). Read as
            # data, a 0.11-2.0 text's markers were a producer's sequence-less batches and left every
            # transaction open.
            is_control = (
                magic >= 2
                and is_transactional
                and fields.integer("baseSequence") == -1
                and fields.integer("producerId") >= 0
            )
        # 0.11-1.x batch lines have no count; lastOffset - baseOffset + 1 is the written count.
        count = (
            fields.integer("count")
            if fields.get("count", "null") != "null"
            else last_offset - base_offset + 1
        )
        return BatchHeader(
            file=file,
            position=fields.integer("position"),
            base_offset=base_offset,
            last_offset=last_offset,
            count=count,
            magic=magic,
            crc=fields.integer("crc"),
            crc_valid=fields.flag("isvalid"),
            attributes=_attributes(
                compression,
                timestamp_type,
                magic,
                is_transactional=is_transactional,
                is_control=is_control,
                has_delete_horizon=delete_horizon is not None,
            ),
            compression=compression,
            timestamp_type=timestamp_type,
            is_transactional=is_transactional,
            is_control=is_control,
            partition_leader_epoch=fields.integer("partitionLeaderEpoch"),
            base_timestamp=None,
            max_timestamp=fields.integer("timestamp"),
            producer_id=fields.integer("producerId"),
            producer_epoch=fields.integer("producerEpoch"),
            base_sequence=fields.integer("baseSequence"),
            last_sequence=fields.integer("lastSequence"),
            size_bytes=fields.integer("size"),
            delete_horizon_ms=delete_horizon,
        )
    last_offset = fields.integer("offset")
    return BatchHeader(
        file=file,
        position=fields.integer("position"),
        base_offset=last_offset,
        last_offset=last_offset,
        count=1,
        magic=magic,
        crc=_crc(fields),
        crc_valid=fields.flag("isvalid"),
        attributes=_attributes(compression, timestamp_type, magic),
        compression=compression,
        timestamp_type=timestamp_type,
        is_transactional=False,
        is_control=False,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        base_timestamp=None,
        max_timestamp=fields.integer("timestamp"),
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
        last_sequence=NO_SEQUENCE,
        size_bytes=fields.integer("size"),
    )


def _header_keys(text: str) -> list[str]:
    return text.split(",") if text else []


def _split_key_payload(tail: str, key_size: int, value_size: int) -> tuple[str | None, str | None, bool]:
    """Cut the free-text `key: K payload: V` tail; the sizes choose the cut and tell if text is missing.

    Both parts are free text (either may contain ` payload: `), so the cut is where the key has
    `key_size` UTF-8 bytes, else where the payload has `value_size`, else the first one (no cut for
    a null value: the tool prints no payload then, except a decoder's `<DELETE>`). The bool is
    False while the printed text is shorter than the sizes say (a newline inside the data).
    """
    text = _KeyPayloadText(tail, key_size, value_size)
    key, value = text.split()
    return key, value, text.complete


_CUT = " " + _PAYLOAD
_CUT_DELETE = _CUT + _DELETE


class _KeyPayloadText:
    """The free-text tail of a record line, as its lines arrive: `complete` after each line and the cut
    of `_split_key_payload` at the end, in time linear in the text.

    Each ` payload: ` is found once, in the line that holds it (it holds no newline, so never spans
    two), with its UTF-8 byte position; the cut is then a lookup by byte position. The text is joined
    once, by `split`.
    """

    __slots__ = (
        "chars",
        "cut_at",
        "cuts",
        "key_size",
        "parts",
        "payload_only",
        "replaced",
        "size",
        "value_size",
    )

    def __init__(self, tail: str, key_size: int, value_size: int) -> None:
        self.key_size, self.value_size = key_size, value_size
        self.payload_only = tail.startswith(_PAYLOAD)
        body = tail[len(_PAYLOAD) :] if self.payload_only else tail[len(_KEY) :]
        self.parts: list[str] = []
        self.chars = self.size = 0  # the body's length in characters and in UTF-8 bytes
        self.replaced = 0  # its U+FFFD: each printed 3 bytes for 1 to 3 bytes that were not UTF-8
        self.cuts: list[tuple[int, int]] = []  # (character, byte) position of each ` payload: `
        self.cut_at: dict[int, int] = {}  # byte position -> index in `cuts`
        self._append(body)

    def extend(self, line: str) -> None:
        """The next line of the text (the tool printed a newline inside the key or payload)."""
        self._append("\n" + line)

    def _append(self, text: str) -> None:
        if not self.payload_only:
            done = 0
            size = self.size
            for match in re.finditer(_CUT, text):
                size += _utf8_len(text[done : match.start()])
                done = match.start()
                self.cut_at[size] = len(self.cuts)
                self.cuts.append((self.chars + match.start(), size))
        self.parts.append(text)
        self.chars += len(text)
        self.size += _utf8_len(text)
        self.replaced += text.count(_REPLACEMENT)

    def may_hold(self, line: str) -> bool:
        """Whether the text, its bytes that were not UTF-8 counted at the fewest (1 byte per U+FFFD), can
        go on over `line` within the key and value sizes."""
        if self.value_size < 0 or (not self.payload_only and self.key_size < 0):
            return False
        sizes = self.value_size + (0 if self.payload_only else self.key_size + len(_CUT))
        least = self.size - 2 * self.replaced + 1 + _utf8_len(line) - 2 * line.count(_REPLACEMENT)
        return least <= sizes

    def _cut(self) -> tuple[int, int] | None:
        """The (character, byte) position of the chosen ` payload: `, if any."""
        if not self.cuts:
            return None
        chosen = self.cut_at.get(self.key_size)
        if chosen is None and self.value_size >= 0:
            # The payload after a cut at byte b has size - b - len(_CUT) bytes (_CUT is ASCII).
            chosen = self.cut_at.get(self.size - len(_CUT) - self.value_size, 0)
        elif chosen is None and self.parts[-1].endswith(_CUT_DELETE):
            chosen = len(self.cuts) - 1
        return None if chosen is None else self.cuts[chosen]

    @property
    def complete(self) -> bool:
        if self.payload_only:
            return self.size >= self.value_size
        cut = self._cut()
        if cut is None:
            return self.size >= self.key_size and self.value_size < 0
        return cut[1] >= self.key_size and self.size - cut[1] - len(_CUT) >= self.value_size

    def split(self) -> tuple[str | None, str | None]:
        """(key, payload) as printed: None where the line printed none."""
        body = "".join(self.parts)
        if self.payload_only:
            return None, body
        cut = self._cut()
        if cut is None:
            return body, None
        return body[: cut[0]], body[cut[0] + len(_CUT) :]


_REPLACEMENT = "\ufffd"


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


@dataclass(slots=True)
class _PendingRecord:
    """A record line whose printed key/payload may continue on the next lines; `finish` sets its key and
    value once no more follow."""

    record: Record
    text: _KeyPayloadText

    @property
    def complete(self) -> bool:
        return self.text.complete

    def may_take(self, line: str) -> bool:
        """Whether `line` can still be part of a key/payload printed with U+FFFD: bytes that were not
        UTF-8 (an Avro or Protobuf value) print as 3 bytes each, so the printed size passes the sizes
        before the text ends; counted at 1 byte each, it may not pass them."""
        return self.text.replaced > 0 and self.text.may_hold(line)

    def extend(self, line: str) -> None:
        self.text.extend(line)

    def finish(self) -> None:
        key, value = self.text.split()
        self.record.key, self.record.value = _encode(key), _encode(value)


# The records a v2 batch (with its batch line) holds before its header is given and its records follow
# as they are read. Its line prints the whole header but for what a control record adds: a 0.11-2.0
# text does not print `isControl`, and a marker batch its line does not reveal is one by its record
# (`_Batch.set_control`), the first of the batch. Held, a record took ~300 bytes (a deep dump of one
# batch of 1M one-byte payloads raised the peak RSS by 290 MiB, larger payloads more), where the
# binary decoders hold a batch's records as columns of 68 bytes each: below the cap of
# `segment.MAX_BATCH_RECORDS` (3.9M records), holding them to the batch's end took gigabytes.
HELD_RECORDS = 1000


@dataclass(slots=True)
class _Batch:
    """The batch being read: its header, then its records and errors, held until the batch ends, or for
    a v2 batch of more than `HELD_RECORDS` records given as they are read.

    Held because a control record, a legacy entry's records and (≤ 2.1) the next batch's position
    complete the header. A batch of more than `segment.MAX_BATCH_RECORDS` records holds none of them:
    the rows held stay bounded whatever the batch.
    """

    header: BatchHeader
    items: list[Record | DecodeError] = field(default_factory=list)
    records: int = 0
    synthesized: bool = False
    all_valid: bool = True
    # More records than `segment.MAX_BATCH_RECORDS`: none is given (those held are let go), and its
    # error follows the header, as the binary decoders give a batch whose records they do not decode.
    records_refused: bool = False
    # Whether its records are wanted (`parse_dump_log_text(records=...)`): without, none is held or
    # given, and none is refused for its count, as the binary decoders decode no records then.
    keep_records: bool = True
    # The header (and its CRC error) was given already, the error of its refused records too.
    header_given: bool = False
    refusal_given: bool = False

    def add_record(self, record: Record) -> None:
        header = self.header
        self.records += 1
        # A legacy entry line names only its last offset; a ≤ 2.1 deep dump has no batch line.
        if header.magic < MAGIC_VALUE_V2 or self.synthesized:
            header.count = self.records
            if self.records == 1:
                header.base_offset = record.offset
                header.base_sequence = record.sequence
            if self.synthesized:
                header.last_offset = record.offset
                header.last_sequence = record.sequence
                header.max_timestamp = max(header.max_timestamp, record.timestamp)
        # Like the binary decoders, a control batch yields its header only, not its control records;
        # nor is it refused for its count (the walker decodes no control batch's records as data).
        if header.is_control or self.records_refused or not self.keep_records:
            return
        # The binary decoders' cap, read from their module at each record: one value for both paths,
        # a test's smaller one too. The count a v2 line prints decides, as the binary decoders decide
        # on the header's before decoding; the lines decide when they pass it (a legacy entry's or a
        # ≤ 2.1 batch's count is its lines').
        if max(header.count, self.records) > segment.MAX_BATCH_RECORDS:
            self.records_refused = True
            self.items = [item for item in self.items if not isinstance(item, Record)]
            return
        self.items.append(record)

    @property
    def streamed(self) -> bool:
        """Whether its rows go out as they are read: a v2 batch line's header is complete at the line
        (a control batch, completed by its record, holds no records), after `HELD_RECORDS` records."""
        header = self.header
        return (
            self.records > HELD_RECORDS
            and header.magic >= MAGIC_VALUE_V2
            and not self.synthesized
            and not header.is_control
        )

    def rows_so_far(self, pending: Record | None) -> list[BatchHeader | Record | DecodeError]:
        """The rows of a streamed batch read so far (the header first, the first time), but `pending`,
        the record whose key or payload may go on over the next lines; none of a batch still held."""
        if not self.streamed:
            return []
        rows = self._opening_rows()
        held = self.items
        if pending is not None and held and held[-1] is pending:
            rows.extend(held[:-1])
            self.items = [pending]
        else:
            rows.extend(held)
            self.items = []
        return rows

    def _opening_rows(self) -> list[BatchHeader | Record | DecodeError]:
        """The header and its CRC error if not given yet, and the error of refused records if not yet."""
        header = self.header
        rows: list[BatchHeader | Record | DecodeError] = []
        if not self.header_given:
            self.header_given = True
            if self.synthesized:
                header.crc_valid = self.all_valid
            rows.append(header)
            if not header.crc_valid:
                rows.append(
                    DecodeError(
                        header.file,
                        header.position,
                        CorruptionKind.CRC_MISMATCH,
                        "the stored CRC does not match (isvalid: false in dump-log text)",
                        header.size_bytes if header.size_bytes >= 0 else None,
                    )
                )
        if self.records_refused and not self.refusal_given:
            self.refusal_given = True
            rows.append(self._refusal())
        return rows

    def _refusal(self) -> DecodeError:
        """The binary decoders' error of a batch whose records are not decoded for their number: over the
        bytes of a v2 batch, over the header fields of a legacy entry (`segment._records_not_decoded`)."""
        header = self.header
        # The count its line printed (a v2 batch's, as the binary decoders name it), else its lines'.
        message = segment._too_many_records(max(header.count, self.records))
        if header.magic < MAGIC_VALUE_V2:
            return segment._records_not_decoded(header.file, header.position, header.magic, message)
        size = header.size_bytes if header.size_bytes >= 0 else None
        return DecodeError(header.file, header.position, CorruptionKind.UNREADABLE_BATCH, message, size)

    def set_control(self, control_type: str, coordinator_epoch: int | None) -> None:
        header = self.header
        if header.control_type is not None:
            return
        header.control_type = control_type
        header.coordinator_epoch = coordinator_epoch if control_type in END_TXN_MARKER_TYPES else None
        if not header.is_control:
            header.is_control = True
            header.attributes |= CONTROL_FLAG_MASK

    def rows(self) -> list[BatchHeader | Record | DecodeError]:
        """The rows not given yet, at the batch's end."""
        rows = self._opening_rows()
        rows.extend(self.items)
        self.items = []
        return rows


class _DumpLogTextParser:
    """Line-at-a-time state machine; `feed` and `finish` return the rows completed so far."""

    def __init__(self, source: str, records: bool = True) -> None:
        self.source = source
        self.records = records
        self.line_number = 0
        self.byte_offset = 0
        # Whether a line so far ended in a newline: then the text is read from a file, where only the
        # last line can lack one, and the tool ends every line it prints (println).
        self.newlines_seen = False
        self.crlf: bool | None = None  # whether the text's lines end in CRLF, from its first line
        # Each dumped file's line, by its directory and name: a second `Dumping` of one file in one text
        # (`--files a.log,a.log`, two runs' output concatenated) is not read again.
        self.dumped: dict[tuple[str, ...], tuple[int, str]] = {}
        self.repeat = False
        self.line_start = self.line_length = 0
        self.file: str | None = None
        self.snapshot_offset = -1
        self.batch: _Batch | None = None
        self.pending: _PendingRecord | None = None
        self.in_skipped_content = False
        # A batch line that could not be read, held while its record lines (and their payloads'
        # continuation lines) follow: one error spans them all, and no record joins another batch.
        self.unreadable_batch: DecodeError | None = None
        self.unreadable_lines = 0
        # The end of the last batch of the current file (position + size), for TRUNCATED_TAIL.
        self.end_of_batches = 0
        # The index entries dumped from the current file, for where the tool stopped in an index.
        self.index_entries = 0
        # A record line was read: the tool was run with --deep-iteration (or --print-data-log), so it
        # read every batch's records after printing its line.
        self.deep = False
        # The offset after the last batch of the current file (at first the file's base offset): where a
        # shallow legacy wrapper, whose line names only its last offset, starts.
        self.next_offset = -1

    def feed(self, raw: str, *, last: bool = False) -> list[DumpLogItem]:
        """The rows one line completes; `last`: the text's last line (only it can be cut short)."""
        self.line_number += 1
        line_start = self.byte_offset
        length = _utf8_len(raw) + (0 if raw.endswith("\n") else 1)
        self.byte_offset += length
        line = raw[:-1] if raw.endswith("\n") else raw
        # The text's line ends are those of its first line (the tool's `Dumping` line, never data): a
        # copy saved with CRLF ends ends every line so, while in a text with LF ends a `\r` before the
        # newline is the payload's last byte.
        if self.crlf is None and raw.endswith("\n"):
            self.crlf = raw.endswith("\r\n")
        if self.crlf and line.endswith("\r"):
            line = line[:-1]
        if self.line_number == 1:
            line = line.removeprefix("\ufeff")  # a UTF-8 BOM (output saved by some Windows editors)
        out: list[DumpLogItem] = []
        if raw.endswith("\n"):
            self.newlines_seen = True
        elif last and self.newlines_seen and line.strip():
            self._cut_line(line, line_start, length - 1, out)  # its bytes: no newline
            return out
        if self.repeat and not line.startswith("Dumping "):
            return out
        self.line_start, self.line_length = line_start, length
        if self.pending is not None:
            # The tool's stop (its exception on stderr, 2>&1) ends a payload printed shorter than its
            # size (a --value-decoder-class's), unless it fits in what the size leaves.
            noise = _NOISE.match(line) or _TOOL_EXCEPTION.match(line)
            fits = self.pending.text.may_hold(line)
            incomplete = not self.pending.complete
            payload = not _STRUCTURAL.match(line) or (incomplete and fits and not _TOOL_LINE.match(line))
            if payload and ((incomplete and (fits or not noise)) or self.pending.may_take(line)):
                self.pending.extend(line)
                return out
            self._end_pending()
        if self.unreadable_batch is not None:
            if line.startswith("| ") or (self.in_skipped_content and not _STRUCTURAL.match(line)):
                self.unreadable_lines += 1
                error = self.unreadable_batch
                if error.file == self.source:
                    # A bad region of the text: it runs over the batch's lines.
                    self.unreadable_batch = replace(error, length=line_start + length - error.position)
                # A record line with a key or payload may go on over the next lines.
                self.in_skipped_content = not line.startswith("| ") or _may_have_free_text(line)
                return out
            self._end_unreadable_batch(out)
            self.in_skipped_content = False
        if self.in_skipped_content:
            # The rest of a --skip-record-metadata key/payload that contained a newline; one that no size
            # bounds ends at the tool's own stop too: a Kafka exception's line (its reader's).
            stopped = _TOOL_EXCEPTION.match(line)
            if not _STRUCTURAL.match(line) and not (stopped and stopped.group(1).startswith(_KAFKA_PACKAGES)):
                return out
            self.in_skipped_content = False
        try:
            self._dispatch(line, out)
        except (_LineError, ValueError) as exc:  # ValueError: a number int() refuses (4,300+ digits)
            error = DecodeError(
                self.source,
                line_start,
                CorruptionKind.UNREADABLE_BATCH,
                f"line {self.line_number}: {exc}: {line[:160]!r}",
                length,
                section=self.file,
            )
            if isinstance(exc, _BatchLineError):
                self.unreadable_batch, self.unreadable_lines = error, 0
            elif self.batch is not None:
                self.batch.items.append(error)
            else:
                out.append(error)
        if self.batch is not None:
            out.extend(self.batch.rows_so_far(None if self.pending is None else self.pending.record))
        return out

    def overlong(self, length: int) -> list[DumpLogItem]:
        """A line of `length` bytes, longer than `text_lines.MAX_LINE_BYTES`, that was not read (a payload
        of gigabytes printed on one line): an error over its bytes, as a line that cannot be read is.

        Last in the text without a newline it is no TRUNCATED_TAIL (a cut last line, `_cut_line`): read
        whole it would not be read either, as the binary decoders judge a batch length past their bound
        unreadable before they judge it past the end of the file (a cut tail is a warning, and hides no
        data that a whole copy would have given). `length` does not tell whether it ended in a newline."""
        self.line_number += 1
        line_start = self.byte_offset
        self.byte_offset += length
        self.newlines_seen = True
        out: list[DumpLogItem] = []
        if self.repeat:
            return out
        if self.pending is not None:
            self._end_pending()
        self._end_unreadable_batch(out)
        self.in_skipped_content = False
        self.line_start, self.line_length = line_start, length
        message = f"line {self.line_number}: {text_lines.overlong(length)}"
        self._text_error(CorruptionKind.UNREADABLE_BATCH, message, line_start, length, out)
        return out

    def _cut_line(self, line: str, line_start: int, length: int, out: list[DumpLogItem]) -> None:
        """The text's last line, with no newline after it: the copy was cut inside it (a transfer or
        a full disk), so its values may be cut too (`sequence: 1` of `sequence: 17`); it is not read."""
        if self.pending is not None:
            self._end_pending()
        self._end_unreadable_batch(out)
        message = (
            f"line {self.line_number}: the text ends inside this line (no newline after it, where the tool "
            f"ends every line): the copy was cut short, and the line is not read: {line[:160]!r}"
        )
        self._text_error(CorruptionKind.TRUNCATED_TAIL, message, line_start, length, out)

    def _text_error(
        self, kind: CorruptionKind, message: str, line_start: int, length: int, out: list[DumpLogItem]
    ) -> None:
        """An error over a line of the text, in the current file's section: with the open batch's items
        (it comes out after that batch), else at once."""
        error = DecodeError(self.source, line_start, kind, message, length, section=self.file)
        if self.batch is not None:
            self.batch.items.append(error)
        else:
            out.append(error)

    def finish(self) -> list[DumpLogItem]:
        out: list[DumpLogItem] = []
        self._end_file(out)
        return out

    def _end_pending(self) -> None:
        assert self.pending is not None
        self.pending.finish()
        self.pending = None

    def _end_unreadable_batch(self, out: list[DumpLogItem]) -> None:
        error, self.unreadable_batch = self.unreadable_batch, None
        if error is None:
            return
        if self.unreadable_lines:
            lines = f"{self.unreadable_lines} line{'s' if self.unreadable_lines > 1 else ''}"
            error = replace(error, message=f"{error.message}; the batch's next {lines} (its records) with it")
        out.append(error)

    def _dispatch(self, line: str, out: list[DumpLogItem]) -> None:
        if line.startswith("Dumping "):
            self._end_file(out)
            dumped = line[len("Dumping ") :]
            key = tuple(dumped_parts(dumped)[-2:])
            self.repeat = key in self.dumped
            if self.repeat:
                self.file = None
                first_line, first_path = self.dumped[key]
                same = dumped_parts(first_path) == dumped_parts(dumped)
                why = (
                    f"{dumped} is dumped again (first at line {first_line})"
                    if same
                    else f"{dumped} is the same partition's file as {first_path} (line {first_line}), "
                    "another broker's or directory's copy: one text is read as one replica's, so give each "
                    "broker's text as an input of its own"
                )
                message = (
                    f"line {self.line_number}: {why}; this second copy is not read, as one log holding it "
                    "twice would read every batch as a copy of another"
                )
                error = DecodeError(
                    self.source, self.line_start, CorruptionKind.UNREADABLE_FILE, message, self.line_length
                )
                out.append(error)
                return
            self.dumped[key] = (self.line_number, dumped)
            self.file = dumped
            # The file's name after its last `/` or backslash (the tool run on Windows prints backslashes).
            stem = re.split(r"[\\/]", self.file)[-1].split(".", 1)[0]
            numeric = stem.isascii() and stem.isdigit() and int(stem) <= _INT64_MAX
            self.snapshot_offset = self.next_offset = int(stem) if numeric else -1
            return
        if not line.strip() or _STARTING_OFFSET.match(line) or _TOOL_NOTES.match(line):
            return
        if CAPTURED_STDERR.match(line) or _STACK_LINE.match(line):
            return
        stopped = _TOOL_EXCEPTION.match(line)
        if stopped and self.file is not None:
            self._tool_stopped(stopped.group(1), stopped.group(2) or "", out)
            return
        if self.file is not None and self.file.endswith(".snapshot") and _SNAPSHOT_REFUSED.match(line):
            out.append(DecodeError(self.file, 0, CorruptionKind.SNAPSHOT_CORRUPT, f"DumpLogSegments: {line}"))
            return
        if line in (f"{self.file} is empty.", f"{self.file} passed sanity check."):
            return
        if line.startswith(("| key: ", "| payload: ", " payload: ")):
            # --skip-record-metadata: content without an offset to attach it to.
            self.in_skipped_content = True
            return
        trailing = _TRAILING_BYTES.match(line)
        if trailing:
            self._trailing_bytes(int(trailing.group(1)), trailing.group(2), out)
            return
        if self.file is None:
            raise _LineError("no `Dumping <file>` line before this line")
        if line.startswith("| "):
            if self.batch is None:
                raise _LineError("record line without a batch line before it")
            self._add_record(self.batch, _scan_fields(line, 2))
            return
        fields = _scan_fields(line)
        first = fields.first
        if first == "baseOffset" or (first == "offset" and fields.has("size")):
            # The line ends the batch before it, whether or not it can be read itself.
            self._flush_batch(out)
            try:
                header = _in_range(_batch_header(self.file, fields))
            except (_LineError, ValueError) as exc:
                raise _BatchLineError(str(exc)) from None
            if header.magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1, MAGIC_VALUE_V2):
                # The magic byte lies outside the CRC: the tool prints the batch (and reads its records
                # as v2) where the binary decoders skip the entry, unreadable. So here: the batch's
                # region of the segment, its record lines with it.
                size = header.size_bytes if header.size_bytes > 0 else None
                self.unreadable_batch = DecodeError(
                    header.file,
                    header.position,
                    CorruptionKind.UNREADABLE_BATCH,
                    f"unknown magic {header.magic} (DumpLogSegments printed the batch: its magic byte lies "
                    "outside the CRC)",
                    size,
                )
                self.unreadable_lines = 0
                self.end_of_batches = header.position + (size or 0)
                return
            self._start_batch(header, out)
        elif first == "offset" and fields.has("keySize"):
            self._pre_2_2_deep_line(fields, out)
        elif first == "offset" and set(fields.values) == {"offset", "position"}:
            self._flush_batch(out)
            # Counted before it is read: a line the tool printed is an entry it dumped, read or not.
            self.index_entries += 1
            out.append(_in_range(IndexEntry(self.file, fields.integer("offset"), fields.integer("position"))))
        elif first == "timestamp" and fields.timestamp_type is None and fields.has("offset"):
            self._flush_batch(out)
            self.index_entries += 1
            out.append(
                _in_range(TimeIndexEntry(self.file, fields.integer("timestamp"), fields.integer("offset")))
            )
        elif first == "version":
            self._flush_batch(out)
            self.index_entries += 1
            out.append(
                _in_range(
                    TxnIndexEntry(
                        self.file,
                        fields.integer("version"),
                        fields.integer("producerId"),
                        fields.integer("firstOffset"),
                        fields.integer("lastOffset"),
                        fields.integer("lastStableOffset"),
                    )
                )
            )
        elif first == "producerId":
            self._flush_batch(out)
            out.append(_in_range(self._snapshot_entry(fields)))
        else:
            raise _LineError("not a line kafka-dump-log.sh prints")

    def _snapshot_entry(self, fields: _Fields) -> SnapshotEntry:
        assert self.file is not None
        has_batch = fields.has("lastSequence")
        timestamp = (
            fields.integer("lastTimestamp")
            if fields.has("lastTimestamp")
            else fields.integer("timestamp", NO_TIMESTAMP)
        )
        first_offset = _optional_long(fields.text("currentTxnFirstOffset"), "currentTxnFirstOffset")
        return SnapshotEntry(
            file=self.file,
            snapshot_offset=self.snapshot_offset,
            producer_id=fields.integer("producerId"),
            producer_epoch=fields.integer("producerEpoch"),
            last_sequence=fields.integer("lastSequence") if has_batch else NO_SEQUENCE,
            last_offset=fields.integer("lastOffset") if has_batch else -1,
            offset_delta=fields.integer("offsetDelta") if has_batch else 0,
            timestamp=timestamp,
            coordinator_epoch=fields.integer("coordinatorEpoch"),
            current_txn_first_offset=-1 if first_offset is None else first_offset,
        )

    def _start_batch(self, header: BatchHeader, out: list[DumpLogItem]) -> None:
        self._flush_batch(out)
        self.batch = _Batch(header, keep_records=self.records)
        self.end_of_batches = header.position + header.size_bytes

    def _pre_2_2_deep_line(self, fields: _Fields, out: list[DumpLogItem]) -> None:
        """A ≤ 2.1 deep-iteration line: a record, carrying the fields of its batch."""
        assert self.file is not None
        position = fields.integer("position")
        batch = self.batch
        if batch is None or not batch.synthesized or batch.header.position != position:
            if batch is not None and batch.synthesized and batch.header.size_bytes < 0:
                batch.header.size_bytes = position - batch.header.position
            self._flush_batch(out)
            batch = self.batch = self._synthesized_batch(fields, position)
            self.end_of_batches = position
        if not fields.flag("isvalid", True):
            batch.all_valid = False
        self._add_record(batch, fields)

    def _synthesized_batch(self, fields: _Fields, position: int) -> _Batch:
        assert self.file is not None
        magic = fields.integer("magic")
        compression = _compression(fields)
        timestamp_type = _timestamp_type(fields)
        is_transactional = fields.flag("isTransactional", False)
        header = BatchHeader(
            file=self.file,
            position=position,
            base_offset=fields.integer("offset"),
            last_offset=fields.integer("offset"),
            count=1,
            magic=magic,
            crc=0,
            crc_valid=True,
            attributes=_attributes(compression, timestamp_type, magic, is_transactional=is_transactional),
            compression=compression,
            timestamp_type=timestamp_type,
            is_transactional=is_transactional,
            is_control=False,
            partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
            base_timestamp=None,
            max_timestamp=NO_TIMESTAMP,
            producer_id=fields.integer("producerId", NO_PRODUCER_ID),
            producer_epoch=fields.integer("producerEpoch", NO_PRODUCER_EPOCH),
            base_sequence=NO_SEQUENCE,
            last_sequence=NO_SEQUENCE,
            size_bytes=-1,
        )
        return _Batch(_in_range(header), synthesized=True, keep_records=self.records)

    def _add_record(self, batch: _Batch, fields: _Fields) -> None:
        self.deep = True
        key_size, value_size = fields.integer("keySize"), fields.integer("valueSize")
        record = Record(
            file=batch.header.file,
            batch_position=batch.header.position,
            offset=fields.integer("offset"),
            timestamp=fields.integer("timestamp"),
            sequence=fields.integer("sequence") if batch.header.magic >= MAGIC_VALUE_V2 else NO_SEQUENCE,
            key_size=key_size,
            value_size=value_size,
            header_keys=_header_keys(fields.get("headerKeys", "")),
        )
        _in_range(record)
        control = _control(fields)
        if control is not None:
            if batch.header_given:
                # Its header went out as that of no control batch (`HELD_RECORDS`): the tool prints a
                # control record in a control batch only, and a batch's marker is its first record.
                raise _LineError(
                    f"a control record after {batch.records} records of a batch that is no control batch"
                )
            if control[1] is not None:
                _in_range_of(BatchHeader, "coordinator_epoch", control[1])
            batch.set_control(*control)
        batch.add_record(record)
        if fields.tail is not None:
            # Key and value are set when the text ends (`_PendingRecord.finish`): it may go on.
            self.pending = _PendingRecord(record, _KeyPayloadText(fields.tail, key_size, value_size))

    def _tool_stopped(self, exception: str, message: str, out: list[DumpLogItem]) -> None:
        """The tool stopped on the dumped file (its exception's line): what follows its last entry was
        not dumped. What that says depends on the exception and the file's suffix, as the tool chose its
        reader by the suffix. A file it could not open or type is UNREADABLE_FILE: none of its bytes was
        read, so none is a bad batch. An index's failed check or entry (CorruptIndexException, a
        .txnindex entry of an unknown version, a batch it points at) is INDEX_MISMATCH after the
        entries dumped: the log's own batches are read when the log is dumped. A snapshot's failed
        check is SNAPSHOT_CORRUPT; a log's unreadable bytes a TRUNCATED_TAIL at the end of its last
        batch (length unknown), as the tool reads no further."""
        assert self.file is not None
        stopped_in = self.batch
        self._flush_batch(out)
        thrown = exception.rsplit(".", 1)[-1]
        said = f"DumpLogSegments stopped here: {thrown}: {message}".rstrip(": ")
        name = re.split(r"[\\/]", self.file)[-1]
        suffix = name[name.rfind(".") :] if "." in name else ""
        if thrown in _FILE_NOT_READ:
            why = (
                "the tool takes a file's type from its name after the last `.`, and this name has none"
                if thrown == "StringIndexOutOfBoundsException"
                else f"the tool could not open {'the file named' if message else 'a file it reads'}"
            )
            out.append(
                DecodeError(
                    self.file, 0, CorruptionKind.UNREADABLE_FILE, f"{said}; {why}: this file was not dumped"
                )
            )
        elif suffix in _INDEX_ENTRY_SIZES:
            position = self.index_entries * _INDEX_ENTRY_SIZES[suffix]
            out.append(
                DecodeError(
                    self.file,
                    position,
                    CorruptionKind.INDEX_MISMATCH,
                    f"{said}; the index's entries from here on were not dumped",
                )
            )
        elif self.file.endswith(".snapshot"):
            out.append(DecodeError(self.file, 0, CorruptionKind.SNAPSHOT_CORRUPT, said))
        elif (
            self.deep
            and stopped_in is not None
            and not stopped_in.synthesized
            and not stopped_in.header.is_control
            and stopped_in.records < stopped_in.header.count
            # FileLogInputStream's own stops (reading the next batch's header) name the file.
            and " in file " not in message
        ):
            # A deep dump prints a batch's line, then reads its records: it stopped inside them (a
            # compressed payload that does not inflate, a record that does not frame), where the binary
            # decoders keep the header and call the batch's records unreadable.
            header = stopped_in.header
            out.append(
                DecodeError(
                    self.file,
                    header.position,
                    CorruptionKind.UNREADABLE_BATCH,
                    f"{said}; the tool stopped reading this batch's records after {stopped_in.records} of "
                    f"{header.count}, and the rest of the file was not dumped",
                    header.size_bytes if header.size_bytes > 0 else None,
                )
            )
        else:
            kind = (
                CorruptionKind.TRUNCATED_TAIL if "Corrupt" in exception else CorruptionKind.UNREADABLE_BATCH
            )
            out.append(
                DecodeError(
                    self.file, self.end_of_batches, kind, f"{said}; the rest of the file was not dumped"
                )
            )

    def _trailing_bytes(self, count: int, name: str, out: list[DumpLogItem]) -> None:
        file = self.file if self.file is not None else name
        self._flush_batch(out)
        out.append(
            DecodeError(
                file,
                self.end_of_batches,
                CorruptionKind.TRUNCATED_TAIL,
                f"{count} bytes at the end do not form a whole batch (dump-log text: invalid bytes)",
                count,
            )
        )

    def _flush_batch(self, out: list[DumpLogItem]) -> None:
        if self.pending is not None:
            self._end_pending()
        self._end_unreadable_batch(out)
        if self.batch is not None:
            header = self.batch.header
            if (
                header.magic < MAGIC_VALUE_V2
                and header.compression != "none"
                and self.batch.records == 0
                and 0 <= self.next_offset < header.last_offset
                # A wrapper holds fewer than 2^31 messages: a wider gap is no run of its offsets.
                and header.last_offset - self.next_offset < _INT32_MAX
            ):
                # A shallow line of a compressed legacy wrapper names its last offset only; its messages
                # follow the previous entry's (a segment's offsets are contiguous until the cleaner
                # removes some: then this overstates the count of a compacted wrapper).
                header.base_offset = self.next_offset
                header.count = header.last_offset - header.base_offset + 1
            self.next_offset = header.last_offset + 1
            out.extend(self.batch.rows())
            self.batch = None

    def _end_file(self, out: list[DumpLogItem]) -> None:
        self._flush_batch(out)
        self.end_of_batches = self.index_entries = 0


def dumped_parts(dumped: str) -> list[str]:
    """A dumped file's path as a `Dumping` line prints it, in its parts: split at `/` and at `\\` (the
    tool run on Windows), `.` parts left out."""
    return [part for part in re.split(r"[\\/]+", dumped) if part not in ("", ".")]


def _control(fields: _Fields) -> tuple[str, int | None] | None:
    """The control type (and coordinator epoch) a record line prints, if any."""
    if fields.has("endTxnMarker"):
        marker = fields.text("endTxnMarker")
        if marker not in END_TXN_MARKER_TYPES:
            raise _LineError(f"endTxnMarker: {marker!r} is neither COMMIT nor ABORT")
        return marker, fields.integer("coordinatorEpoch")
    if fields.has("controlType"):
        match = _CONTROL_TYPE.match(fields.text("controlType"))
        if match is None:
            raise _LineError("controlType: is not NAME(id)")
        name = match.group(1)
        return (name if _CONTROL_TYPE_IDS.get(name) == int(match.group(2)) else CONTROL_TYPE_UNKNOWN), None
    if fields.json_control is not None:
        return fields.json_control, None
    return None


def fields_in_text(item: DumpLogItem) -> dict[str, Any]:
    """The fields of a row (from text or from a binary decoder) that dump-log text carries."""
    left_out = FIELDS_NOT_IN_TEXT.get(type(item), frozenset())
    fields = {name: value for name, value in asdict(item).items() if name not in left_out}
    return {"type": type(item).__name__, **fields}


def parse_dump_log_text(
    lines: Iterable[str | int], *, source: str = DEFAULT_SOURCE, records: bool = True
) -> Iterator[DumpLogItem]:
    """Rows of `kafka-dump-log.sh` output, in text order; `source` names the text in DecodeErrors. An
    int is a line of that many bytes that was not read (`text_lines.bounded_lines`). Without `records`,
    no `Record` is given (record lines are still read: they complete legacy and ≤ 2.1 headers), and no
    batch is refused for its count of records."""
    parser = _DumpLogTextParser(source, records)
    # `splitlines` also ends lines at `\r`, `\x0b`, `\u2028` ... inside a payload, with no newline: once
    # lines end in newlines, a piece without one is joined to the next (the text's bytes as they were),
    # and only a last piece without one can have been cut short. One line ahead, to know the last.
    previous: str | None = None
    joined, newlines = "", False
    for line in lines:
        if isinstance(line, int):
            # The lines before it are whole: it ends in a newline (or ends the text).
            for complete in (previous, joined):
                if complete:
                    yield from parser.feed(complete)
            previous, joined = None, ""
            yield from parser.overlong(line)
            continue
        if joined or (newlines and not line.endswith("\n")):
            joined += line
            if not line.endswith("\n"):
                continue
            line, joined = joined, ""
        newlines = newlines or line.endswith("\n")
        if previous is not None:
            yield from parser.feed(previous)
        previous = line
    if joined:
        if previous is not None:
            yield from parser.feed(previous)
        previous = joined
    if previous is not None:
        yield from parser.feed(previous, last=True)
    yield from parser.finish()


def read_dump_log_text(path: str | Path, *, records: bool = True) -> Iterator[DumpLogItem]:
    """Stream a saved `kafka-dump-log.sh` output file line by line (bounded memory); `records`: as
    `parse_dump_log_text`'s."""
    with open(path, "rb") as f:
        # surrogateescape keeps non-UTF-8 payload bytes exact through decode and re-encode.
        yield from parse_dump_log_text(
            (
                raw if isinstance(raw, int) else raw.decode("utf-8", "surrogateescape")
                for raw in text_lines.bounded_lines(f)
            ),
            source=str(path),
            records=records,
        )
