"""Find the Kafka artifacts under the paths a user gives (audit-contract §1; formats §3.1, §3.7).

Discovery only lists files (path, size, mtime) and reads the small text files that name things
(`meta.properties`); it never reads `.log` contents. It applies the broker's own startup rules
(`LogLoader`) to decide which files are part of the live log: `.deleted`, `.cleaned` and `.tmp`
files and `-delete`/`-stray`/`-future` directories are listed as excluded with the reason, and
`.swap` files replace the segments they supersede.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka_log_decoder.checkpoints import read_meta_properties
from kafka_log_decoder.constants import (
    CLEAN_SHUTDOWN_FILE_NAME,
    CLEANED_FILE_SUFFIX,
    DELETE_DIR_SUFFIX,
    DELETED_FILE_SUFFIX,
    FILE_STATE_SUFFIXES,
    FUTURE_DIR_SUFFIX,
    INDEX_FILE_SUFFIX,
    KRAFT_BOOTSTRAP_FILENAME,
    KRAFT_SNAPSHOT_DELETE_SUFFIX,
    KRAFT_SNAPSHOT_PARTIAL_SUFFIX,
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    LOCK_FILENAME,
    LOG_FILE_SUFFIX,
    META_PROPERTIES_FILENAME,
    OFFSET_CHECKPOINT_FILENAMES,
    PARTITION_METADATA_FILENAME,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    QUORUM_STATE_FILENAME,
    STRAY_DIR_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TMP_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
)
from kafka_log_decoder.dump_log_text import CAPTURED_STDERR, dumped_parts
from kafka_log_decoder.errors import DecodeError, NotAKafkaArtifact

__all__ = [
    "Discovered",
    "DumpLogText",
    "ExcludedFile",
    "FileInfo",
    "KraftSnapshotFile",
    "LogDir",
    "PartitionDir",
    "SegmentFiles",
    "SnapshotFile",
    "discover",
    "parse_partition_dir_name",
    "segment_base_offset",
]

_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
# Topic.java: legal topic characters and maximum length.
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_PARTITION = re.compile(r"[0-9]{1,10}")
_NODE_ID = _PARTITION
_OFFSET = re.compile(r"[0-9]{1,20}")
# Snapshots.java: `<end offset>-<epoch>.checkpoint` (20 and 10 digits).
_KRAFT_SNAPSHOT = re.compile(r"([0-9]{1,20})-([0-9]{1,10})\.checkpoint")
_SEGMENT_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
_INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
_PARTITION_FILE_NAMES = (LEADER_EPOCH_CHECKPOINT_FILENAME, PARTITION_METADATA_FILENAME, QUORUM_STATE_FILENAME)
_NOT_LIVE_DIR_REASONS = {
    DELETE_DIR_SUFFIX: "partition directory marked for deletion (-delete): not part of the live log",
    FUTURE_DIR_SUFFIX: "replica being moved between log directories (-future): not part of the live log",
    STRAY_DIR_SUFFIX: "stray partition found by a KRaft broker (-stray): not part of the live log",
}
_DUMP_LOG_FIRST_LINE = b"Dumping "
_UTF8_BOM = b"\xef\xbb\xbf"
# The most read of a text's head for its first `Dumping` line (after any captured stderr lines).
_FIRST_LINE_MAX = 65536


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A listed file: its path as found, size in bytes and modification time in epoch milliseconds."""

    path: str
    size: int
    mtime_ms: int


class ExcludedFile(NamedTuple):
    """A file or directory that is not part of the live log, and why."""

    path: str
    reason: str


class SnapshotFile(NamedTuple):
    """A producer-state snapshot `<offset>.snapshot`; the offset is the exclusive end of its state."""

    offset: int
    file: FileInfo


class KraftSnapshotFile(NamedTuple):
    """A KRaft metadata snapshot `<end offset>-<epoch>.checkpoint` (record batches; `__cluster_metadata`)."""

    end_offset: int
    epoch: int
    file: FileInfo


@dataclass(slots=True)
class SegmentFiles:
    """The live files of one segment. A file taken from a `.swap` keeps its `.swap` path."""

    base_offset: int
    log: FileInfo
    index: FileInfo | None = None
    timeindex: FileInfo | None = None
    txnindex: FileInfo | None = None


@dataclass(slots=True)
class PartitionDir:
    """One partition of one replica: `<topic>-<partition>` (`__`-prefixed topics are internal)."""

    path: str
    topic: str
    partition: int
    segments: list[SegmentFiles] = field(default_factory=list)
    snapshots: list[SnapshotFile] = field(default_factory=list)
    leader_epoch_checkpoint: FileInfo | None = None
    partition_metadata: FileInfo | None = None
    quorum_state: FileInfo | None = None
    kraft_snapshots: list[KraftSnapshotFile] = field(default_factory=list)
    excluded: list[ExcludedFile] = field(default_factory=list)

    @property
    def is_internal(self) -> bool:
        return self.topic.startswith("__")


@dataclass(slots=True)
class LogDir:
    """A broker log directory: every partition of one replica, named by `node.id`/`broker.id`.

    `checkpoint_files` maps the offset-checkpoint file names present (`recovery-point-offset-checkpoint`,
    ...) to the files; `errors` holds problems reading `meta.properties`.
    """

    path: str
    replica_id: int | None
    checkpoint_files: dict[str, FileInfo] = field(default_factory=dict)
    partitions: list[PartitionDir] = field(default_factory=list)
    meta_properties: FileInfo | None = None
    clean_shutdown: FileInfo | None = None
    bootstrap_checkpoint: FileInfo | None = None
    excluded: list[ExcludedFile] = field(default_factory=list)
    errors: list[DecodeError] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DumpLogText:
    """A `kafka-dump-log.sh` output file (first line `Dumping <path>`, after blank lines or the JVM's
    and loggers' stderr lines when it was captured with `2>&1`). `partition`: where the first
    dumped path lies in no `<topic>-<partition>` directory (the tool run inside it, or on a copy), the
    partition the text's own name or directory names (`orders-0.txt`, `orders-0/dump.txt`)."""

    path: str
    file: FileInfo
    partition: tuple[str, int] | None = None
    # The first `Dumping` line's path.
    dumped: str = ""


Discovered = LogDir | PartitionDir | DumpLogText

# A batch's first 27 bytes: offset, length, then (v2) leader epoch, magic, CRC, attributes, last offset
# delta; v0/v1 entries have their magic at the same byte.
_NEXT_OFFSET_HEAD = struct.Struct(">qiibihi")

# Given the path of a `.log.swap` file, the offset after its last batch (LogSegment.readNextOffset).
NextOffset = Callable[[str], int]


def segment_base_offset(path: str | os.PathLike[str]) -> int:
    """The offset that names a segment file or snapshot (`00000000000000368769.log` -> 368769).

    Like `LogFileUtils.offsetFromFileName` it reads the name up to its first `.`; a name that does
    not start with a decimal offset raises `NotAKafkaArtifact`.
    """
    offset = _offset_from_file_name(os.path.basename(os.fspath(path)))
    if offset is None:
        raise NotAKafkaArtifact(
            f"{os.fspath(path)}: file name does not start with a 20-digit offset of at most 2^63-1"
        )
    return offset


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """`(topic, partition)` of a `<topic>-<partition>` directory name (topic = all before the last `-`)."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not _TOPIC.fullmatch(topic) or not _PARTITION.fullmatch(partition):
        return None
    if int(partition) > _INT32_MAX:
        return None
    return topic, int(partition)


def discover(
    paths: Iterable[str | os.PathLike[str]], *, next_offset: NextOffset | None = None
) -> list[Discovered]:
    """Describe every input path: a partition directory, a log directory, a directory of log
    directories (one `LogDir` per subdirectory) or a dump-log text file.

    `next_offset`, when given, tells where a `.log.swap` segment ends, so that discovery can drop
    the originals it replaces exactly as the broker does. Without it, the swap's end is read as
    `LogSegment.readNextOffset` reads it: its last offset-index entry, then the batch headers of the
    `.log.swap` from that entry's position (a few KiB), else from its start.
    A path that is none of these raises `NotAKafkaArtifact`.
    """
    found: list[Discovered] = []
    for given in paths:
        path = os.fspath(given)
        mode = stat_given(path)
        if stat.S_ISDIR(mode):
            found.extend(_discover_directory(path, next_offset))
        else:
            found.append(_dump_log_text(path))
    return found


def stat_given(path: str) -> int:
    """The mode of a path given as an input: a directory or a regular file, else `NotAKafkaArtifact` (a
    FIFO or device would block the reader; a symlink loop or a missing path says so)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise NotAKafkaArtifact(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(path, exc) from None
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise NotAKafkaArtifact(f"{path}: not a regular file or directory")
    return mode


def _discover_directory(path: str, next_offset: NextOffset | None) -> list[Discovered]:
    name = os.path.basename(os.path.normpath(path))
    reason = _not_live_dir_reason(name)
    if reason is not None:
        raise NotAKafkaArtifact(f"{path}: {reason}")
    parsed = parse_partition_dir_name(name)
    if parsed is not None and _holds_partition_files(path):
        return [_scan_partition_dir(path, parsed[0], parsed[1], next_offset)]
    if _is_log_dir(path):
        nested = [
            entry.name
            for entry in _sorted_entries(path)
            if entry.is_dir()
            and parse_partition_dir_name(entry.name) is not None
            and _nested_log_dir(entry.path)
        ]
        if nested:
            # Read as one log directory, each nested one would be a "partition" whose files are left out.
            raise NotAKafkaArtifact(
                f"{path}: holds log directories ({_names(nested)}) beside what a log directory holds "
                "(partition directories or checkpoint files): give each log directory as its own input"
            )
        return [_scan_log_dir(path, next_offset)]
    log_dirs: list[Discovered] = [
        _scan_log_dir(entry.path, next_offset)
        for entry in _sorted_entries(path)
        if entry.is_dir() and _is_log_dir(entry.path)
    ]
    if not log_dirs:
        raise NotAKafkaArtifact(
            f"{path}: not a Kafka partition directory, log directory or directory of log directories"
        )
    return log_dirs


def _nested_log_dir(path: str) -> bool:
    """A subdirectory named like a partition that is a log directory itself (a broker's, beside a
    partition directory); one that cannot be listed is not (it is left out as before, not refused)."""
    try:
        return not _holds_partition_files(path) and _is_log_dir(path)
    except NotAKafkaArtifact:
        return False


def _renamed_partition(path: str) -> bool:
    """A log directory's subdirectory not named like a partition that holds a partition's files; one
    that cannot be listed is not (it is left out as before, not refused)."""
    try:
        return _holds_partition_files(path)
    except NotAKafkaArtifact:
        return False


def _names(names: list[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


def first_dumping_line(path: str) -> tuple[int, bytes] | None:
    """The number and text of a dump-log text's first `Dumping ` line, if only blank lines and captured
    stderr lines (`CAPTURED_STDERR`) come before it within the text's first `_FIRST_LINE_MAX` bytes."""
    with open(path, "rb") as handle:
        budget, number = _FIRST_LINE_MAX, 0
        while budget > 0:
            line = handle.readline(budget)
            if not line:
                return None
            budget -= len(line)
            number += 1
            if number == 1:
                line = line.removeprefix(_UTF8_BOM)
            if line.startswith(_DUMP_LOG_FIRST_LINE):
                return number, line
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text.strip() and not CAPTURED_STDERR.match(text):
                return None
    return None


def _utf16(path: str) -> bool:
    """Whether a file starts with a UTF-16 byte order mark and `Dumping` in UTF-16."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2 + 2 * len(_DUMP_LOG_FIRST_LINE))
    except OSError:
        return False
    text = _DUMP_LOG_FIRST_LINE.decode()
    return head in (b"\xff\xfe" + text.encode("utf-16-le"), b"\xfe\xff" + text.encode("utf-16-be"))


def _dump_log_text(path: str) -> DumpLogText:
    try:
        first = first_dumping_line(path)
        file_stat = os.stat(path)
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(path, exc) from None
    if first is None:
        if _utf16(path):
            raise NotAKafkaArtifact(
                f"{path}: UTF-16 text (Windows PowerShell's `>` writes it): save kafka-dump-log output as "
                "UTF-8 (`... | Out-File -Encoding utf8 dump.txt`) and give that"
            )
        raise NotAKafkaArtifact(
            f"{path}: not a directory, and not kafka-dump-log.sh output (no 'Dumping ' first line, "
            "after blank lines or captured stderr lines)"
        )
    number, line = first
    dumped = line[len(_DUMP_LOG_FIRST_LINE) :].decode("utf-8", "replace").strip()
    parts = dumped_parts(dumped)
    not_live = _not_live_dir_reason(parts[-2]) if len(parts) >= 2 else None
    if not_live is not None:
        # Not read as the partition its text is named after: its directory says what it is.
        raise NotAKafkaArtifact(f"{path}: line {number}: the dumped file {dumped} lies in a {not_live}")
    partition = None
    if dumped_partition(dumped) is None:
        # The tool was run inside the partition directory, or on a copy elsewhere: the text's own name
        # (not its directory's: a broker pod's `kafka-0` would read as one) names it.
        partition = parse_partition_dir_name(os.path.splitext(os.path.basename(os.path.normpath(path)))[0])
        if partition is None:
            raise NotAKafkaArtifact(
                f"{path}: line {number}: the dumped file {dumped} lies in no <topic>-<partition> directory, "
                "and this text's name names no partition: save it as <topic>-<partition>.txt, or dump the "
                "segment by its path inside its partition directory"
            )
    return DumpLogText(path, _file_info(path, file_stat), partition, dumped)


def dumped_partition(dumped: str) -> tuple[str, int] | None:
    """The partition of the directory a dumped file lies in, if its path names one."""
    parts = dumped_parts(dumped)
    return parse_partition_dir_name(parts[-2]) if len(parts) >= 2 else None


def _scan_log_dir(path: str, next_offset: NextOffset | None) -> LogDir:
    log_dir = LogDir(path=path, replica_id=None)
    for entry in _sorted_entries(path):
        name = entry.name
        if entry.is_dir():
            reason = _not_live_dir_reason(name)
            parsed = parse_partition_dir_name(name)
            if reason is not None:
                log_dir.excluded.append(ExcludedFile(entry.path, reason))
            elif parsed is not None:
                log_dir.partitions.append(_scan_partition_dir(entry.path, parsed[0], parsed[1], next_offset))
            elif _renamed_partition(entry.path):
                # A partition's files under a name that gives no partition (`orders-0.bak`, `orders-0
                # (copy)`): left out, its data would go unread and the run say nothing of it; given
                # alone, the directory is refused the same way.
                raise NotAKafkaArtifact(
                    f"{entry.path}: holds a partition's files, but its name is no <topic>-<partition> (a "
                    "topic of letters, digits, '.', '_' and '-', then '-' and the partition number): rename "
                    "it to its partition's name, or move it out of the log directory"
                )
            else:
                log_dir.excluded.append(ExcludedFile(entry.path, "not a partition directory"))
        elif not entry.is_file():
            log_dir.excluded.append(ExcludedFile(entry.path, NOT_REGULAR_REASON))
        elif name in OFFSET_CHECKPOINT_FILENAMES:
            log_dir.checkpoint_files[name] = _file_info(entry.path, entry.stat())
        elif name == META_PROPERTIES_FILENAME:
            log_dir.meta_properties = _file_info(entry.path, entry.stat())
        elif name == CLEAN_SHUTDOWN_FILE_NAME:
            log_dir.clean_shutdown = _file_info(entry.path, entry.stat())
        elif name == KRAFT_BOOTSTRAP_FILENAME:
            log_dir.bootstrap_checkpoint = _file_info(entry.path, entry.stat())
        elif name == LOCK_FILENAME:
            continue
        elif name.endswith(TMP_FILE_SUFFIX):
            log_dir.excluded.append(ExcludedFile(entry.path, _TMP_REASON))
        else:
            log_dir.excluded.append(ExcludedFile(entry.path, "not a Kafka log directory file"))
    if log_dir.meta_properties is not None:
        log_dir.replica_id, log_dir.errors = _replica_id(log_dir.meta_properties.path)
    return log_dir


def _replica_id(meta_properties_path: str) -> tuple[int | None, list[DecodeError]]:
    meta, errors = read_meta_properties(meta_properties_path)
    replica = meta.replica_id
    if replica is None or not _NODE_ID.fullmatch(replica.strip()) or int(replica) > _INT32_MAX:
        return None, errors
    return int(replica), errors


_TMP_REASON = "temporary file of an interrupted checkpoint or metadata write (.tmp)"
NOT_REGULAR_REASON = "not a regular file (a FIFO, socket or device): not read"


def _scan_partition_dir(
    path: str, topic: str, partition: int, next_offset: NextOffset | None
) -> PartitionDir:
    """Apply LogLoader's startup passes to the listing, then group the live files by role."""
    result = PartitionDir(path=path, topic=topic, partition=partition)
    live: dict[str, FileInfo] = {}
    swaps: dict[str, FileInfo] = {}
    cleaned_offsets: list[int] = []
    for entry in _sorted_entries(path):
        name = entry.name
        if entry.is_dir():
            result.excluded.append(
                ExcludedFile(entry.path, "unexpected directory inside a partition directory")
            )
            continue
        if not entry.is_file():
            result.excluded.append(ExcludedFile(entry.path, NOT_REGULAR_REASON))
            continue
        info = _file_info(entry.path, entry.stat())
        if name.endswith(KRAFT_SNAPSHOT_DELETE_SUFFIX):
            result.excluded.append(ExcludedFile(info.path, "KRaft snapshot marked for deletion (.deleted)"))
        elif name.endswith(DELETED_FILE_SUFFIX):
            result.excluded.append(
                ExcludedFile(info.path, "marked for deletion (.deleted): no longer part of the log")
            )
        elif name.endswith(CLEANED_FILE_SUFFIX):
            result.excluded.append(
                ExcludedFile(
                    info.path, "incomplete log cleaner output (.cleaned), discarded on broker startup"
                )
            )
            offset = _offset_from_file_name(name)
            if offset is not None:
                cleaned_offsets.append(offset)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swaps[name] = info
        elif name.endswith(TMP_FILE_SUFFIX):
            result.excluded.append(ExcludedFile(info.path, _TMP_REASON))
        elif name.endswith(KRAFT_SNAPSHOT_PARTIAL_SUFFIX):
            result.excluded.append(ExcludedFile(info.path, "partial KRaft snapshot being written (.part)"))
        else:
            live[name] = info
    _apply_swaps(result, live, swaps, min(cleaned_offsets, default=None), next_offset)
    _group_live_files(result, live)
    result.excluded.sort()
    return result


def _apply_swaps(
    result: PartitionDir,
    live: dict[str, FileInfo],
    swaps: dict[str, FileInfo],
    min_cleaned_offset: int | None,
    next_offset: NextOffset | None,
) -> None:
    """LogLoader: drop swaps of an incomplete split, delete originals in the swapped range, rename swaps."""
    valid: dict[str, FileInfo] = {}
    for name, info in swaps.items():
        offset = _offset_from_file_name(name)
        if offset is None:
            result.excluded.append(ExcludedFile(info.path, "unrecognised .swap file"))
        elif min_cleaned_offset is not None and offset >= min_cleaned_offset:
            # KAFKA-6264: a .swap at or above the smallest .cleaned base is part of an unfinished split.
            result.excluded.append(
                ExcludedFile(
                    info.path,
                    f"incomplete segment split: .swap base {offset} >= smallest .cleaned base "
                    f"{min_cleaned_offset} (KAFKA-6264), deleted on broker startup",
                )
            )
        else:
            valid[name] = info
    log_swaps = [info for name, info in valid.items() if name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)]
    if log_swaps:
        start = min(segment_base_offset(info.path) for info in log_swaps)
        end = max(_swap_next_offset(info, valid, next_offset) for info in log_swaps)
        for name in list(live):
            offset = _offset_from_file_name(name)
            if offset is not None and start <= offset < end:
                result.excluded.append(
                    ExcludedFile(
                        live.pop(name).path,
                        f"replaced by .swap segment(s) covering offsets [{start}, {end}) (LogLoader)",
                    )
                )
    for name, info in valid.items():
        original = name.removesuffix(SWAP_FILE_SUFFIX)
        replaced = live.pop(original, None)
        if replaced is not None:
            result.excluded.append(ExcludedFile(replaced.path, f"replaced by {info.path}"))
        live[original] = info


def _swap_next_offset(
    log_swap: FileInfo, valid_swaps: dict[str, FileInfo], next_offset: NextOffset | None
) -> int:
    """Where a `.log.swap` ends, as `LogSegment.readNextOffset` reads it. A swap without a whole batch
    (the cleaner removed every record) ends at its base, not base + 1: LogLoader's delete range
    [min base, max end) then takes nothing of it, and the snapshot and indexes at its base stay live."""
    base = segment_base_offset(log_swap.path)
    if next_offset is not None:
        return next_offset(log_swap.path)
    # The batch headers from the offset index's last entry's position on (a few KiB:
    # index.interval.bytes), believed only where a batch there reaches the entry's offset (a stale or
    # torn index says nothing); else from the segment's start, as a broker before 3.0 read it once it
    # had recovered the swap. (index_files imports this module: imported here.)
    from kafka_log_decoder.index_files import read_offset_index
    from kafka_log_decoder.rows import IndexEntry

    index = valid_swaps.get(os.path.basename(log_swap.path).replace(LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, 1))
    # The last entry alone is kept: an index of 20 MiB is millions of entries.
    last: IndexEntry | None = None
    for entry in read_offset_index(index.path) if index else ():
        if isinstance(entry, IndexEntry):
            last = entry
    if last is not None:
        found = _next_offset_after(log_swap.path, last.position)
        if found is not None and found > last.offset:
            return max(base, found)
    found = _next_offset_after(log_swap.path, 0)
    return base if found is None else max(base, found)


# A swap's batch headers are read in blocks of this many bytes (memory stays bounded whatever the size).
_NEXT_OFFSET_BLOCK = 1 << 20


def _next_offset_after(path: str, position: int) -> int | None:
    """The offset after the last whole batch from `position` to the end of the segment at `path`, read
    from the batches' headers alone (v2: base offset + last offset delta; v0/v1: the entry's offset),
    or None; the walk stops at the first header that does not fit the file. The file is read forward in
    blocks, each header taken from the block that holds it: every batch is walked, however many there
    are (a cap would end the walk early and leave originals the swap replaces beside it, unsaid)."""
    found: int | None = None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        block, block_start, length = b"", position, 0
        while True:
            at = position - block_start
            if at + _NEXT_OFFSET_HEAD.size > len(block) and block_start + len(block) < size:
                # After a batch of more than a sixteenth of a block, the next header alone: a swap of
                # large batches is not read whole.
                want = _NEXT_OFFSET_HEAD.size if length > _NEXT_OFFSET_BLOCK // 16 else _NEXT_OFFSET_BLOCK
                block_start, block = position, os.pread(fd, want, position)
                at = 0
            head = block[at : at + _NEXT_OFFSET_HEAD.size]
            # A v0 entry of no key and no value is 26 bytes: only a v2 batch needs all 27.
            if len(head) < 17 or (head[16] == 2 and len(head) < _NEXT_OFFSET_HEAD.size):
                break
            offset, length, _, magic, _, _, last_delta = _NEXT_OFFSET_HEAD.unpack(
                head.ljust(_NEXT_OFFSET_HEAD.size, b"\0")
            )
            end = position + 12 + length
            fits = offset >= 0 and length >= 14 and end <= size and 0 <= magic <= 2
            if not fits or (magic == 2 and last_delta < 0):
                break
            found = (offset + last_delta if magic == 2 else offset) + 1
            position = end
    finally:
        os.close(fd)
    return found


def _group_live_files(result: PartitionDir, live: dict[str, FileInfo]) -> None:
    by_base: dict[int, dict[str, FileInfo]] = {}
    # Files of one role and offset under two names (`0.log` beside `00000000000000000000.log`): the
    # broker opens the 20-digit name only (LogFileUtils.filenamePrefixFromOffset,
    # Snapshots.filenameFromSnapshotId); the others are listed as excluded, never dropped unsaid.
    named: dict[tuple[str, int, int], list[tuple[str, FileInfo]]] = {}
    for name, info in live.items():
        offset = _offset_from_file_name(name)
        suffix = name[name.find(".") :] if "." in name else ""
        kraft = _KRAFT_SNAPSHOT.fullmatch(name)
        if offset is not None and suffix in (*_SEGMENT_SUFFIXES, PRODUCER_SNAPSHOT_FILE_SUFFIX):
            named.setdefault((suffix, offset, 0), []).append((name, info))
        elif kraft is not None:
            named.setdefault((".checkpoint", int(kraft.group(1)), int(kraft.group(2))), []).append(
                (name, info)
            )
        elif name == LEADER_EPOCH_CHECKPOINT_FILENAME:
            result.leader_epoch_checkpoint = info
        elif name == PARTITION_METADATA_FILENAME:
            result.partition_metadata = info
        elif name == QUORUM_STATE_FILENAME:
            result.quorum_state = info
        else:
            result.excluded.append(ExcludedFile(info.path, "not a Kafka partition file"))
    for (suffix, offset, epoch), twins in sorted(named.items()):
        canonical = (
            f"{offset:020d}-{epoch:010d}{suffix}" if suffix == ".checkpoint" else f"{offset:020d}{suffix}"
        )
        # The broker's own name if present, else the first by name: the same file on every run.
        kept_name, info = min(twins, key=lambda file: (file[0] != canonical, file[0]))
        of = f"offset {offset}" + (f", epoch {epoch}" if suffix == ".checkpoint" else "")
        if suffix == PRODUCER_SNAPSHOT_FILE_SUFFIX:
            # ProducerStateManager.loadSnapshots takes every *.snapshot, keyed by the offset its name
            # parses to: of two for one offset, the one its directory listing gives last.
            read = f"{kept_name} is read (the broker keeps one of them, the last its directory listing gives)"
        elif kept_name == canonical:
            read = f"{kept_name}, the name the broker opens, is read"
        else:
            read = f"{kept_name} is read (the broker opens {canonical} only)"
        for name, other in twins:
            if name != kept_name:
                result.excluded.append(ExcludedFile(other.path, f"a second {suffix} file for {of}: {read}"))
        if suffix in _SEGMENT_SUFFIXES:
            by_base.setdefault(offset, {})[suffix] = info
        elif suffix == PRODUCER_SNAPSHOT_FILE_SUFFIX:
            result.snapshots.append(SnapshotFile(offset, info))
        else:
            result.kraft_snapshots.append(KraftSnapshotFile(offset, epoch, info))
    for base in sorted(by_base):
        files = by_base[base]
        log = files.get(LOG_FILE_SUFFIX)
        if log is None:
            # LogLoader.loadSegmentFiles deletes index files whose .log is missing.
            for suffix in _INDEX_SUFFIXES:
                if suffix in files:
                    result.excluded.append(
                        ExcludedFile(files[suffix].path, f"orphaned index file: no {base:020d}.log")
                    )
            continue
        result.segments.append(
            SegmentFiles(
                base_offset=base,
                log=log,
                index=files.get(INDEX_FILE_SUFFIX),
                timeindex=files.get(TIME_INDEX_FILE_SUFFIX),
                txnindex=files.get(TXN_INDEX_FILE_SUFFIX),
            )
        )
    result.snapshots.sort(key=lambda s: (s.offset, s.file.path))
    result.kraft_snapshots.sort(key=lambda s: (s.end_offset, s.epoch, s.file.path))


def _offset_from_file_name(name: str) -> int | None:
    prefix = name.split(".", 1)[0]
    if not _OFFSET.fullmatch(prefix) or "." not in name:
        return None
    offset = int(prefix)
    return offset if offset <= _INT64_MAX else None


def _not_live_dir_reason(name: str) -> str | None:
    """Why a directory of this name is not part of the live log, as Kafka names such directories:
    `<topic>-<partition>.<uniqueId>-delete` (and `-future`, `-stray`; `LocalLog.DELETE_DIR_PATTERN`,
    `logDirNameWithSuffix`). A name that merely ends in `-delete` (an `incident/before-delete` copy, a
    `kafka-logs-future` log directory) is not one."""
    for suffix, reason in _NOT_LIVE_DIR_REASONS.items():
        if _NOT_LIVE_DIR.fullmatch(name.removesuffix(suffix)) and name.endswith(suffix):
            return reason
    return None


# `^(\S+)-(\S+)\.(\S+)` before the suffix (LocalLog's DELETE/FUTURE/STRAY_DIR_PATTERN).
_NOT_LIVE_DIR = re.compile(r"\S+-\S+\.\S+")


def _is_partition_file_name(name: str) -> bool:
    for suffix in FILE_STATE_SUFFIXES:
        name = name.removesuffix(suffix)
    if name in _PARTITION_FILE_NAMES or _KRAFT_SNAPSHOT.fullmatch(name):
        return True
    suffix = name[name.find(".") :] if "." in name else ""
    return _offset_from_file_name(name) is not None and (
        suffix in _SEGMENT_SUFFIXES or suffix == PRODUCER_SNAPSHOT_FILE_SUFFIX
    )


def _holds_partition_files(path: str) -> bool:
    return any(entry.is_file() and _is_partition_file_name(entry.name) for entry in _sorted_entries(path))


def _is_log_dir(path: str) -> bool:
    """A log directory holds `meta.properties`, an offset checkpoint, or partition directories."""
    for entry in _sorted_entries(path):
        if entry.is_file() and (
            entry.name == META_PROPERTIES_FILENAME or entry.name in OFFSET_CHECKPOINT_FILENAMES
        ):
            return True
        if entry.is_dir() and (
            _not_live_dir_reason(entry.name) is not None
            or (parse_partition_dir_name(entry.name) is not None and _holds_partition_files(entry.path))
        ):
            return True
    return False


def _sorted_entries(path: str) -> list[os.DirEntry[str]]:
    """The directory's entries by name. An entry that cannot be stat'ed (a dangling symlink, a symlink
    loop) is a usage error naming it: the entries' `is_dir`/`is_file`/`stat` cannot fail afterwards."""
    try:
        with os.scandir(path) as scanned:
            entries = sorted(scanned, key=lambda entry: entry.name)
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(path, exc) from None
    for entry in entries:
        try:
            entry.stat()  # follows a symlink; cached by the entry
        except OSError as exc:
            raise NotAKafkaArtifact.from_os_error(entry.path, exc) from None
    return entries


def _file_info(path: str, stat: os.stat_result) -> FileInfo:
    return FileInfo(path=path, size=stat.st_size, mtime_ms=stat.st_mtime_ns // 1_000_000)
