"""Checkpoint and metadata text files of log and partition directories (formats §3.6).

Each decoder follows the broker's reader (`CheckpointFile.CheckpointReadBuffer`,
`PartitionMetadataReadBuffer`, `java.util.Properties`, `CleanShutdownFileHandler`) and reports what
that reader would reject as an `UNREADABLE_FILE` error at the byte position of the offending line,
keeping whatever lines are well formed.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from kafka_log_decoder.constants import (
    LEADER_EPOCH_CHECKPOINT_VERSION,
    OFFSET_CHECKPOINT_VERSION,
    PARTITION_METADATA_VERSION,
)
from kafka_log_decoder.errors import CorruptionKind, DecodeError, decode_file
from kafka_log_decoder.remote_log_metadata import kafka_uuid
from kafka_log_decoder.rows import CheckpointEntry, LeaderEpochEntry, MetaProperties, PartitionMetadata

__all__ = [
    "decode_clean_shutdown",
    "decode_leader_epoch_checkpoint",
    "decode_meta_properties",
    "decode_offset_checkpoint",
    "decode_partition_metadata",
    "decode_quorum_state",
    "read_clean_shutdown",
    "read_leader_epoch_checkpoint",
    "read_meta_properties",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "read_quorum_state",
]

_Entry = TypeVar("_Entry", CheckpointEntry, LeaderEpochEntry)
_Result = TypeVar("_Result")

# BufferedReader.readLine: a line ends at \n, \r or \r\n.
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
# java.util.regex `\s` (ASCII only), as in the checkpoint formatters' WHITESPACES_PATTERN.
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
# Integer.parseInt / Long.parseLong accept an optional sign and decimal digits, nothing else.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# Uuid.fromString: URL-safe base64 of 16 bytes, 22 characters (padding optional).
_UUID = re.compile(r"[A-Za-z0-9_-]{22}(==)?")
_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


# ---------------------------------------------------------------------------------------------
# CheckpointFile: `<version>\n<count>\n<entry>\n...`


def decode_offset_checkpoint(data: bytes, file: str) -> tuple[list[CheckpointEntry], list[DecodeError]]:
    """`topic partition offset` lines of a replication/recovery-point/log-start/cleaner offset checkpoint.

    The entries' `checkpoint` is the file's base name (e.g. `recovery-point-offset-checkpoint`).
    """
    checkpoint = os.path.basename(file)

    def parse(parts: list[str]) -> CheckpointEntry | None:
        if len(parts) != 3:
            return None
        partition = _java_int(parts[1], _INT32)
        offset = _java_int(parts[2], _INT64)
        if partition is None or offset is None:
            return None
        return CheckpointEntry(
            file=file, checkpoint=checkpoint, topic=parts[0], partition=partition, offset=offset
        )

    return _decode_checkpoint(data, file, OFFSET_CHECKPOINT_VERSION, "topic partition offset", parse)


def decode_leader_epoch_checkpoint(
    data: bytes, file: str
) -> tuple[list[LeaderEpochEntry], list[DecodeError]]:
    """`epoch startOffset` lines of a partition's `leader-epoch-checkpoint`."""

    def parse(parts: list[str]) -> LeaderEpochEntry | None:
        if len(parts) != 2:
            return None
        epoch = _java_int(parts[0], _INT32)
        start_offset = _java_int(parts[1], _INT64)
        # LeaderEpochFileCache.assign refuses a negative epoch or start offset: the log fails to load.
        if epoch is None or start_offset is None or epoch < 0 or start_offset < 0:
            return None
        return LeaderEpochEntry(file=file, epoch=epoch, start_offset=start_offset)

    return _decode_checkpoint(
        data, file, LEADER_EPOCH_CHECKPOINT_VERSION, "epoch startOffset, neither negative", parse
    )


def _decode_checkpoint(
    data: bytes,
    file: str,
    version: int,
    entry_format: str,
    parse: Callable[[list[str]], _Entry | None],
) -> tuple[list[_Entry], list[DecodeError]]:
    errors: list[DecodeError] = []
    not_utf8 = _not_utf8(data, file)
    if not_utf8 is not None:
        return [], [not_utf8]
    lines = _lines(data)
    # An empty file, or one with only a version line, reads as no entries (CheckpointReadBuffer.read).
    if not lines:
        return [], errors
    version_position, version_line = lines[0]
    read_version = _java_int(version_line, _INT32)
    if read_version is None:
        return [], [
            _unreadable(file, version_position, f"malformed version line {_cut(version_line)}", version_line)
        ]
    if read_version != version:
        return [], [
            _unreadable(
                file,
                version_position,
                f"unrecognised checkpoint version {read_version} (expected {version})",
                version_line,
            )
        ]
    if len(lines) == 1:
        return [], errors
    count_position, count_line = lines[1]
    expected = _java_int(count_line, _INT32)
    if expected is None or expected < 0:
        errors.append(
            _unreadable(file, count_position, f"malformed entry count line {_cut(count_line)}", count_line)
        )
    entries: list[_Entry] = []
    for number, (position, line) in enumerate(lines[2:], start=3):
        entry = parse(_java_split(line))
        if entry is None:
            errors.append(
                _unreadable(
                    file, position, f"malformed line {number} {_cut(line)} (expected '{entry_format}')", line
                )
            )
        else:
            entries.append(entry)
    found = len(lines) - 2
    # The broker stops at the first malformed line (CheckpointReadBuffer.read): no count check after one.
    if expected is not None and expected >= 0 and expected != found and len(entries) == found:
        errors.append(
            _unreadable(
                file, count_position, f"checkpoint declares {expected} entries but holds {found}", count_line
            )
        )
    return entries, errors


# ---------------------------------------------------------------------------------------------
# partition.metadata: `version: 0\ntopic_id: <uuid>` (PartitionMetadataReadBuffer)


def decode_partition_metadata(data: bytes, file: str) -> tuple[PartitionMetadata | None, list[DecodeError]]:
    """The topic id of a partition directory; None with an error when the file is malformed."""
    not_utf8 = _not_utf8(data, file)
    if not_utf8 is not None:
        return None, [not_utf8]
    lines = _lines(data)
    version_field = _metadata_field(data, lines, 0, "version", file)
    if isinstance(version_field, DecodeError):
        return None, [version_field]
    version_position, version_value, version_line = version_field
    version = _java_int(version_value, _INT32)
    if version is None:
        return None, [
            _unreadable(file, version_position, f"malformed version {_cut(version_value)}", version_line)
        ]
    # Newer versions are accepted, for downgrades; only negative ones are rejected.
    if version < PARTITION_METADATA_VERSION:
        return None, [
            _unreadable(
                file, version_position, f"unrecognised partition metadata version {version}", version_line
            )
        ]
    topic_id_field = _metadata_field(data, lines, 1, "topic_id", file)
    if isinstance(topic_id_field, DecodeError):
        return None, [topic_id_field]
    topic_id_position, topic_id, topic_id_line = topic_id_field
    if not _is_uuid(topic_id):
        message = f"topic_id {_cut(topic_id)} is not a base64 UUID"
        return None, [_unreadable(file, topic_id_position, message, topic_id_line)]
    # Uuid.toString prints no padding; Uuid.fromString's decoder takes it, and ignores the last
    # character's 4 bits past the 128: one id, written one way (the string of its 16 bytes).
    canonical = kafka_uuid(_uuid_bytes(topic_id))
    if canonical == _ZERO_UUID:
        return None, [_unreadable(file, topic_id_position, "topic_id is the zero UUID", topic_id_line)]
    return PartitionMetadata(file, version, canonical, topic_id_position), []


def _metadata_field(
    data: bytes, lines: list[tuple[int, str]], number: int, key: str, file: str
) -> tuple[int, str, str] | DecodeError:
    """`key: value` on line `number` (0-based), split on `:` plus whitespace like the broker: the line's
    position, the value and the line."""
    if number >= len(lines):
        return _unreadable(file, len(data), f"missing line {number + 1} '{key}: ...'")
    position, line = lines[number]
    parts = re.split(r":[ \t\n\x0b\f\r]+", line, maxsplit=1)
    if len(parts) != 2 or parts[0] != key:
        message = f"malformed line {number + 1} {_cut(line)} (expected '{key}: ...')"
        return _unreadable(file, position, message, line)
    return position, parts[1], line


def _is_uuid(text: str) -> bool:
    if not _UUID.fullmatch(text):
        return False
    try:
        return len(_uuid_bytes(text)) == 16
    except (binascii.Error, ValueError):
        return False


def _uuid_bytes(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.removesuffix("==") + "==")


# ---------------------------------------------------------------------------------------------
# meta.properties (java.util.Properties, ISO-8859-1)


def decode_meta_properties(data: bytes, file: str) -> tuple[MetaProperties, list[DecodeError]]:
    """All `key=value` properties of a log directory's `meta.properties`, with problems as errors.

    Checked beyond the syntax, as the broker's `MetaProperties.Builder(Properties)` reads them: `version`
    is 0 (ZooKeeper; also where the file has none) or 1 (KRaft), read as `Integer.parseInt` of its
    trimmed text; version 0 reads `broker.id` where present, version 1 needs `node.id` and `cluster.id`
    and reads no `broker.id`; the id read is an integer (a property's trailing whitespace is part of its
    value: `Integer.parseInt` refuses it); and a `directory.id` is a UUID.
    """
    properties, positions, errors = _parse_properties(data, file)
    text = properties.get("version")
    version = 0 if text is None else _java_int(text.strip(), _INT32)
    if version not in (0, 1):
        message = f"unknown meta.properties version {_cut(text)}"
        errors.append(_unreadable(file, positions["version"], message))
    elif version == 1:
        # One error at the version line for both (a quarantine row's key is its file and position).
        missing = " or ".join(repr(key) for key in ("node.id", "cluster.id") if key not in properties)
        if missing:
            errors.append(
                _unreadable(file, positions["version"], f"meta.properties version 1 has no {missing}")
            )
    key = "node.id" if version == 1 else "broker.id"
    value = properties.get(key)
    if version in (0, 1) and value is not None and _java_int(value, _INT32) is None:
        errors.append(_unreadable(file, positions[key], f"{key} {_cut(value)} is not an integer"))
    directory_id = properties.get("directory.id")
    if directory_id is not None and not _is_uuid(directory_id):
        errors.append(
            _unreadable(file, positions["directory.id"], f"directory.id {_cut(directory_id)} is not a UUID")
        )
    return MetaProperties(file=file, properties=properties), errors


def _parse_properties(data: bytes, file: str) -> tuple[dict[str, str], dict[str, int], list[DecodeError]]:
    properties: dict[str, str] = {}
    positions: dict[str, int] = {}
    errors: list[DecodeError] = []
    for position, logical_line in _logical_property_lines(data):
        key, value = _split_property(logical_line)
        try:
            key, value = _unescape_property(key), _unescape_property(value)
        except ValueError as exc:
            errors.append(_unreadable(file, position, str(exc)))
            continue
        properties[key] = value
        positions[key] = position
    return properties, positions, errors


def _logical_property_lines(data: bytes) -> Iterator[tuple[int, str]]:
    """Properties.LineReader: skip blanks and `#`/`!` comments, join lines ending in an odd number of `\\`."""
    pending: list[str] = []
    pending_position = 0
    for position, raw in _lines(data, encoding="latin-1"):
        line = raw.lstrip(" \t\f")
        if not pending:
            if not line or line[0] in "#!":
                continue
            pending_position = position
        trailing_backslashes = len(line) - len(line.rstrip("\\"))
        if trailing_backslashes % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield pending_position, "".join(pending)
        pending = []
    if pending:
        yield pending_position, "".join(pending)


def _split_property(line: str) -> tuple[str, str]:
    """Key ends at the first unescaped `=`, `:` or whitespace; one `=`/`:` may follow the whitespace."""
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape_property(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 >= len(text):
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1]
        if escaped == "u":
            digits = text[index + 2 : index + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ValueError(f"malformed \\uxxxx escape {text[index : index + 6]!r}")
            out.append(chr(int(digits, 16)))
            index += 6
        else:
            out.append(_PROPERTY_ESCAPES.get(escaped, escaped))
            index += 2
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# JSON files: .kafka_cleanshutdown (CleanShutdownFileHandler) and quorum-state (KRaft QuorumStateData)


def decode_clean_shutdown(data: bytes, file: str) -> tuple[dict[str, Any] | None, list[DecodeError]]:
    """`{"version": 0, "brokerEpoch": n}`; brokers before 3.7 (KIP-966) leave the file empty, read as `{}`."""
    if not data.strip():
        return {}, []
    return _decode_json_object(data, file)


def decode_quorum_state(data: bytes, file: str) -> tuple[dict[str, Any] | None, list[DecodeError]]:
    """The KRaft `quorum-state` JSON object of `__cluster_metadata-0` (leaderId, leaderEpoch, voters ...)."""
    return _decode_json_object(data, file)


def _decode_json_object(data: bytes, file: str) -> tuple[dict[str, Any] | None, list[DecodeError]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [_unreadable(file, exc.start, "not UTF-8 text")]
    try:
        value = json.loads(text, parse_constant=_no_json_constant)
    except json.JSONDecodeError as exc:
        return None, [_unreadable(file, len(text[: exc.pos].encode()), f"malformed JSON: {exc.msg}")]
    except (ValueError, RecursionError) as exc:
        # NaN/Infinity (not JSON: Jackson refuses them), a number of 4,300+ digits, or nesting deeper
        # than the interpreter's stack: unreadable, never a crash of the job that reads the file.
        return None, [_unreadable(file, 0, f"malformed JSON: {str(exc)[:160] or type(exc).__name__}")]
    if not isinstance(value, dict):
        return None, [_unreadable(file, 0, f"expected a JSON object, found {type(value).__name__}")]
    return value, []


# ---------------------------------------------------------------------------------------------
# read_* over paths


def read_offset_checkpoint(path: str | os.PathLike[str]) -> tuple[list[CheckpointEntry], list[DecodeError]]:
    return decode_file(path, decode_offset_checkpoint)


def read_leader_epoch_checkpoint(
    path: str | os.PathLike[str],
) -> tuple[list[LeaderEpochEntry], list[DecodeError]]:
    return decode_file(path, decode_leader_epoch_checkpoint)


def read_partition_metadata(
    path: str | os.PathLike[str],
) -> tuple[PartitionMetadata | None, list[DecodeError]]:
    return decode_file(path, decode_partition_metadata)


def read_meta_properties(path: str | os.PathLike[str]) -> tuple[MetaProperties, list[DecodeError]]:
    return decode_file(path, decode_meta_properties)


def read_clean_shutdown(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, list[DecodeError]]:
    return decode_file(path, decode_clean_shutdown)


def read_quorum_state(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, list[DecodeError]]:
    return decode_file(path, decode_quorum_state)


# ---------------------------------------------------------------------------------------------
# Shared helpers


def _no_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _not_utf8(data: bytes, file: str) -> DecodeError | None:
    """The broker reads checkpoints and partition.metadata as UTF-8 and fails the whole file on a
    malformed byte (MalformedInputException), rather than reading a replaced character."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _unreadable(file, exc.start, "not UTF-8 text (the broker's reader refuses the whole file)")
    return None


def _lines(data: bytes, encoding: str = "utf-8") -> list[tuple[int, str]]:
    """(byte position, text) of each line, as BufferedReader.readLine splits them (no empty last line)."""
    lines: list[tuple[int, str]] = []
    start = 0
    for match in _LINE_BREAK.finditer(data):
        lines.append((start, data[start : match.start()].decode(encoding, errors="replace")))
        start = match.end()
    if start < len(data):
        lines.append((start, data[start:].decode(encoding, errors="replace")))
    return lines


def _java_split(line: str) -> list[str]:
    """`Pattern.split(line)`: a leading separator gives an empty first field, trailing empties are dropped."""
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _java_int(text: str, bounds: tuple[int, int]) -> int | None:
    # More than a long's 19 digits (past leading zeros) is out of bounds, and int() of thousands of
    # digits raises: never parse it.
    if not _JAVA_INTEGER.fullmatch(text) or len(text.lstrip("+-").lstrip("0")) > 19:
        return None
    value = int(text)
    return value if bounds[0] <= value <= bounds[1] else None


def _cut(text: str | None) -> str:
    """`text` quoted for a one-line message, cut to about 160 characters."""
    quoted = repr(text if text is None else text[:200])
    return quoted if len(quoted) <= 160 else quoted[:160] + "..."


def _unreadable(file: str, position: int, message: str, line: str | None = None) -> DecodeError:
    """An UNREADABLE_FILE error at `position`; its region is the `line` there (its bytes, without the
    line break) where the problem is a line's."""
    length = len(line.encode()) if line else None
    return DecodeError(file, position, CorruptionKind.UNREADABLE_FILE, message, length)
