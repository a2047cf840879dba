"""`kafka-dump-log.sh` text saved with `2>&1` where the tool stopped on a dumped file, or refused a
producer snapshot: the finding is the one of the file the tool was reading, never an unreadable batch
of a log that was not dumped."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_log_decoder.dump_log_text import parse_dump_log_text
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.rows import IndexEntry

DIR = "/var/kafka/orders-3"
BASE = f"{DIR}/00000000000000000000"


def parse(*lines: str) -> list[Any]:
    return list(parse_dump_log_text(lines, source="dump.txt"))


def only_error(items: list[Any]) -> DecodeError:
    (error,) = items
    assert isinstance(error, DecodeError), items
    return error


def stack(*frames: str) -> tuple[str, ...]:
    return tuple(f"\tat {frame}" for frame in frames)


# DumpLogSegments.dumpIndex/dumpTimeIndex open the segment's .log (FileRecords.open) before the index.
NO_LOG = (
    f'Exception in thread "main" java.nio.file.NoSuchFileException: {BASE}.log',
    *stack(
        "java.base/sun.nio.fs.UnixException.translateToIOException(UnixException.java:92)",
        "java.base/sun.nio.fs.UnixFileSystemProvider.newFileChannel(UnixFileSystemProvider.java:224)",
        "java.base/java.nio.channels.FileChannel.open(FileChannel.java:309)",
        "org.apache.kafka.common.utils.Utils.openChannel(Utils.java:1014)",
        "org.apache.kafka.common.record.FileRecords.open(FileRecords.java:436)",
        "org.apache.kafka.tools.DumpLogSegments.dumpIndex(DumpLogSegments.java:205)",
    ),
)


@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".log"])
def test_a_file_whose_log_is_missing_is_an_unreadable_file_not_an_unreadable_batch(suffix: str) -> None:
    """`--files X.index` (or .timeindex) with no X.log beside it, or a missing X.log itself: the tool
    could not open the .log, so the dumped file was not read at all; no batch of it is bad."""
    error = only_error(parse(f"Dumping {BASE}{suffix}", *NO_LOG))
    assert (error.file, error.position, error.kind) == (f"{BASE}{suffix}", 0, CorruptionKind.UNREADABLE_FILE)
    assert f"{BASE}.log" in error.message and "\n" not in error.message


def test_a_snapshot_that_cannot_be_opened_is_an_unreadable_file_not_a_corrupt_snapshot() -> None:
    snapshot = f"{DIR}/00000000000000000013.snapshot"
    error = only_error(
        parse(
            f"Dumping {snapshot}",
            f'Exception in thread "main" java.nio.file.AccessDeniedException: {snapshot}',
            *stack("java.base/java.nio.file.Files.readAllBytes(Files.java:3226)"),
        )
    )
    assert (error.file, error.kind) == (snapshot, CorruptionKind.UNREADABLE_FILE)


def test_a_dotless_file_name_the_tool_cannot_type_is_an_unreadable_file() -> None:
    """`--files leader-epoch-checkpoint`: the tool takes a file's type from its name after the last `.`
    (`substring(lastIndexOf("."))`), and stops on a name without one."""
    error = only_error(
        parse(
            f"Dumping {DIR}/leader-epoch-checkpoint",
            'Exception in thread "main" java.lang.StringIndexOutOfBoundsException: '
            "begin -1, end 23, length 23",
            *stack(
                "java.base/java.lang.String.checkBoundsBeginEnd(String.java:4606)",
                "java.base/java.lang.String.substring(String.java:2709)",
                "org.apache.kafka.tools.DumpLogSegments.main(DumpLogSegments.java:121)",
            ),
        )
    )
    assert (error.file, error.position, error.kind) == (
        f"{DIR}/leader-epoch-checkpoint",
        0,
        CorruptionKind.UNREADABLE_FILE,
    )


@pytest.mark.parametrize(
    ("suffix", "thrown"),
    [
        (
            ".index",
            "org.apache.kafka.storage.internals.log.CorruptIndexException: Corrupt index found, index file "
            f"({BASE}.index) has non-zero size but the last offset is 0 which is less than the base "
            "offset 0.",
        ),
        (
            ".timeindex",
            "org.apache.kafka.storage.internals.log.CorruptIndexException: Corrupt time index found, time "
            f"index file ({BASE}.timeindex) has non-zero size but the last timestamp is 5 which is less "
            "than the first timestamp 9",
        ),
        (
            ".txnindex",
            "org.apache.kafka.common.KafkaException: Unexpected aborted transaction version 1 in "
            f"transaction index {BASE}.txnindex, current version is 0",
        ),
    ],
)
def test_an_index_the_tool_stopped_on_is_an_index_mismatch_not_a_truncated_log(
    suffix: str, thrown: str
) -> None:
    """`--index-sanity-check` on a bad index (CorruptIndexException), a .txnindex entry of a version
    above 0 (TransactionIndex's KafkaException): a finding on the index, not on a log's batches."""
    error = only_error(
        parse(
            f"Dumping {BASE}{suffix}",
            f'Exception in thread "main" {thrown}',
            *stack("org.apache.kafka.tools.DumpLogSegments.main(DumpLogSegments.java:130)"),
        )
    )
    assert (error.file, error.position, error.kind) == (f"{BASE}{suffix}", 0, CorruptionKind.INDEX_MISMATCH)


def test_an_index_dump_stopped_after_some_entries_is_a_mismatch_after_the_entries_dumped() -> None:
    """The tool reads the batch each entry points at before printing the entry: two entries (8 bytes
    each) were dumped, the third points at bytes that are no batch."""
    items = parse(
        f"Dumping {BASE}.index",
        "offset: 5 position: 166",
        "offset: 9 position: 4262",
        'Exception in thread "main" org.apache.kafka.common.errors.CorruptRecordException: Found record '
        f"size 0 smaller than minimum record overhead (14) in file {BASE}.log.",
    )
    assert items[:2] == [IndexEntry(f"{BASE}.index", 5, 166), IndexEntry(f"{BASE}.index", 9, 4262)]
    error = only_error(items[2:])
    assert (error.file, error.position, error.kind) == (f"{BASE}.index", 16, CorruptionKind.INDEX_MISMATCH)


def test_a_snapshot_of_an_unknown_version_is_refused_as_a_corrupt_snapshot() -> None:
    """ProducerStateManager.readSnapshot: `CorruptSnapshotException("Snapshot contained an unknown file
    version " + version)`, whose message DumpLogSegments prints instead of the entries."""
    snapshot = f"{DIR}/00000000000000000013.snapshot"
    error = only_error(parse(f"Dumping {snapshot}", "Snapshot contained an unknown file version 2"))
    assert (error.file, error.position, error.kind) == (snapshot, 0, CorruptionKind.SNAPSHOT_CORRUPT)
    assert "unknown file version 2" in error.message


STOPPED = (
    'Exception in thread "main" org.apache.kafka.common.errors.CorruptRecordException: Found record size 0 '
    f"smaller than minimum record overhead (14) in file {BASE}.log."
)
BATCH = (
    "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 producerEpoch: 0 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 0 CreateTime: 5 size: 200 magic: 2 compresscodec: none crc: 1 isvalid: true"
)


def test_the_tools_stop_after_skipped_record_content_is_still_the_logs_truncated_tail() -> None:
    """--skip-record-metadata prints `| key: k payload: v` with no sizes: the content goes on until a
    line the tool prints, and the stop of its reader (a Kafka exception) is one."""
    items = parse(f"Dumping {BASE}.log", BATCH, "| key: k1 payload: v1", "| key: k2 payload: v2", STOPPED)
    error = items[-1]
    assert isinstance(error, DecodeError) and error.kind == CorruptionKind.TRUNCATED_TAIL, items
    assert error.position == 200
    # A payload's own Java stack trace (a log line shipped as a value) is not the tool's stop.
    items = parse(
        f"Dumping {BASE}.log",
        BATCH,
        "| key: k1 payload: crashed:",
        'Exception in thread "main" java.lang.NullPointerException: boom',
    )
    assert not any(isinstance(i, DecodeError) for i in items), items


def test_the_tools_stop_ends_a_payload_printed_shorter_than_its_size() -> None:
    """A --value-decoder-class prints an 8-byte value as `5`: the exception line after it does not fit
    in the 7 bytes its size leaves, so it is the tool's stop, not more of the value."""
    record = "| offset: 0 CreateTime: 5 keySize: -1 valueSize: 8 sequence: 0 headerKeys: [] payload: 5"
    items = parse(f"Dumping {BASE}.log", BATCH, record, STOPPED)
    values = [i.value for i in items if hasattr(i, "value")]
    assert values == [b"5"], items
    assert isinstance(items[-1], DecodeError) and items[-1].kind == CorruptionKind.TRUNCATED_TAIL


RECORDS_STOPPED = (
    'Exception in thread "main" org.apache.kafka.common.KafkaException: Error checking for remaining bytes '
    "after reading batch"
)


def test_a_deep_dumps_stop_inside_a_batchs_records_is_that_batchs_and_a_shallow_dumps_the_next() -> None:
    """With record lines (--deep-iteration), a stop after a batch line and fewer record lines than its
    count is inside its records: its UNREADABLE_BATCH, over its bytes. Without them, the tool read no
    records: the stop is at the next batch's header, after the last batch printed."""
    record = "| offset: 0 CreateTime: 5 keySize: -1 valueSize: 1 sequence: 0 headerKeys: [] payload: a"
    deep = parse(f"Dumping {BASE}.log", BATCH, record, RECORDS_STOPPED)
    error = deep[-1]
    assert isinstance(error, DecodeError)
    assert (error.position, error.length, error.kind) == (0, 200, CorruptionKind.UNREADABLE_BATCH)
    assert "after 1 of 2" in error.message
    shallow = parse(f"Dumping {BASE}.log", BATCH, RECORDS_STOPPED)
    error = shallow[-1]
    assert isinstance(error, DecodeError)
    assert (error.position, error.kind) == (200, CorruptionKind.UNREADABLE_BATCH)
