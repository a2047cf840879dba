"""Discovery of partition directories, log directories, directories of log directories and dump-log
text (audit-contract §1; formats §3.1, §3.7), with the broker's rules for non-live files."""

from __future__ import annotations

import builtins
import os
import shutil
import struct
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kafka_log_decoder.discovery import (
    DumpLogText,
    LogDir,
    PartitionDir,
    discover,
    dumped_partition,
    parse_partition_dir_name,
    segment_base_offset,
)
from kafka_log_decoder.errors import NotAKafkaArtifact
from tests.unit.test_producer_snapshot import CODECRAFTERS, DONALDY, INDUSWARGODS, REAL


def names(log_dir: LogDir) -> list[str]:
    return [f"{p.topic}-{p.partition}" for p in log_dir.partitions]


def partition(log_dir: LogDir, name: str) -> PartitionDir:
    (found,) = [p for p in log_dir.partitions if f"{p.topic}-{p.partition}" == name]
    return found


Found = TypeVar("Found", LogDir, PartitionDir, DumpLogText)


def only(found: list[Any], kind: type[Found]) -> Found:
    assert len(found) == 1 and isinstance(found[0], kind), found
    return found[0]


def all_of(found: list[Any], kind: type[Found]) -> list[Found]:
    assert all(isinstance(item, kind) for item in found), found
    return [item for item in found if isinstance(item, kind)]


def touch(path: Path, data: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


# --------------------------------------------------------------------------------------------
# The three real fixture trees


def test_codecrafters_tree_is_the_log_directory_of_kraft_node_1() -> None:
    log_dir = only(discover([str(CODECRAFTERS)]), LogDir)
    assert log_dir.replica_id == 1
    assert log_dir.errors == [] and log_dir.excluded == []
    assert names(log_dir) == ["__cluster_metadata-0", "foo-0"]
    assert sorted(log_dir.checkpoint_files) == [
        "cleaner-offset-checkpoint",
        "log-start-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
    ]
    assert log_dir.meta_properties is not None and log_dir.meta_properties.size == 122
    assert log_dir.clean_shutdown is not None and log_dir.bootstrap_checkpoint is not None


def test_codecrafters_foo_0_has_one_segment_and_the_snapshot_at_3() -> None:
    foo = partition(only(discover([CODECRAFTERS]), LogDir), "foo-0")
    assert (foo.topic, foo.partition, foo.is_internal) == ("foo", 0, False)
    (segment,) = foo.segments
    assert segment.base_offset == 0
    assert (segment.log.size, segment.index, segment.timeindex, segment.txnindex) == (
        150,
        segment.index,
        segment.timeindex,
        None,
    )
    assert segment.index is not None and segment.index.size == 0
    assert segment.timeindex is not None and segment.timeindex.size == 12
    assert [(s.offset, Path(s.file.path).name) for s in foo.snapshots] == [(3, name(3, ".snapshot"))]
    assert foo.leader_epoch_checkpoint is not None and foo.partition_metadata is not None
    assert foo.quorum_state is None and foo.excluded == []


def test_cluster_metadata_is_an_internal_partition_with_quorum_state() -> None:
    metadata = partition(only(discover([CODECRAFTERS]), LogDir), "__cluster_metadata-0")
    assert metadata.is_internal
    assert [s.base_offset for s in metadata.segments] == [0]
    assert [s.offset for s in metadata.snapshots] == [81, 116]
    assert metadata.quorum_state is not None


def test_donaldy_tree_is_the_log_directory_of_zookeeper_broker_0() -> None:
    log_dir = only(discover([DONALDY]), LogDir)
    assert log_dir.replica_id == 0
    assert names(log_dir) == [
        "__consumer_offsets-17",
        "__consumer_offsets-28",
        "__consumer_offsets-39",
        "myTopic-0",
        "test_topic-0",
        "test_topic_0603-0",
    ]
    assert log_dir.clean_shutdown is None and log_dir.bootstrap_checkpoint is None


def test_donaldy_consumer_offsets_28_has_two_segments_0_and_2() -> None:
    offsets = partition(only(discover([DONALDY]), LogDir), "__consumer_offsets-28")
    assert offsets.is_internal
    assert [s.base_offset for s in offsets.segments] == [0, 2]
    assert [(s.index is None, s.timeindex is None) for s in offsets.segments] == [
        (False, False),
        (True, True),
    ]
    assert [s.offset for s in offsets.snapshots] == [2, 3]


def test_donaldy_my_topic_0_has_only_the_empty_active_segment_at_38() -> None:
    my_topic = partition(only(discover([DONALDY]), LogDir), "myTopic-0")
    assert [(s.base_offset, s.log.size) for s in my_topic.segments] == [(38, 0)]
    assert [s.offset for s in my_topic.snapshots] == [38]
    assert my_topic.partition_metadata is None


def test_induswargods_tree_has_kraft_snapshots_and_a_dashed_topic() -> None:
    log_dir = only(discover([INDUSWARGODS]), LogDir)
    assert log_dir.replica_id == 1
    assert names(log_dir) == ["__cluster_metadata-0", "test-topic-0"]
    assert log_dir.excluded == []  # the .lock file is known and silently skipped
    test_topic = partition(log_dir, "test-topic-0")
    assert (test_topic.topic, test_topic.partition) == ("test-topic", 0)
    assert [s.base_offset for s in test_topic.segments] == [0]
    assert [s.offset for s in test_topic.snapshots] == [1]
    metadata = partition(log_dir, "__cluster_metadata-0")
    assert [(k.end_offset, k.epoch) for k in metadata.kraft_snapshots] == [
        (10744, 4),
        (17908, 4),
        (25077, 4),
        (32233, 4),
        (39383, 4),
        (46533, 4),
    ]
    assert metadata.segments[0].log.size == 3692512


def test_the_fixture_folder_is_a_directory_of_three_log_directories() -> None:
    found = all_of(discover([REAL]), LogDir)
    assert [Path(d.path).name for d in found] == [
        "codecrafters-kraft-3x",
        "donaldy-zk-2.7.1",
        "induswargods-kraft",
    ]
    assert [d.replica_id for d in found] == [1, 0, 1]


def test_partition_directories_given_directly_in_the_order_given() -> None:
    both = all_of(discover([CODECRAFTERS / "foo-0", str(DONALDY / "myTopic-0") + "/"]), PartitionDir)
    assert [(p.topic, p.partition, p.path) for p in both] == [
        ("foo", 0, str(CODECRAFTERS / "foo-0")),
        ("myTopic", 0, str(DONALDY / "myTopic-0") + "/"),
    ]


def test_discovery_never_reads_log_contents(monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = builtins.open

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        assert not os.fspath(file).endswith(".log"), f"discovery opened {file}"
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    assert len(discover([REAL])) == 3


def test_file_info_carries_size_and_mtime_in_milliseconds(tmp_path: Path) -> None:
    log = touch(tmp_path / "t-0" / name(0, ".log"), b"x" * 42)
    os.utime(log, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    found = only(discover([tmp_path / "t-0"]), PartitionDir)
    assert (found.segments[0].log.size, found.segments[0].log.mtime_ms) == (42, 1_700_000_000_123)


# --------------------------------------------------------------------------------------------
# Names


@pytest.mark.parametrize(
    ("directory", "expected"),
    [
        ("orders-3", ("orders", 3)),
        ("test-topic-0", ("test-topic", 0)),
        ("my.topic_v2-12", ("my.topic_v2", 12)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("orders", None),
        ("orders-", None),
        ("-3", None),
        ("orders-x", None),
        ("orders-3.abc-delete", None),
        ("lost+found-1", None),
    ],
)
def test_topic_is_everything_before_the_last_dash_and_partition_an_int(
    directory: str, expected: tuple[str, int] | None
) -> None:
    assert parse_partition_dir_name(directory) == expected


def test_segment_base_offset_reads_the_twenty_digit_name() -> None:
    assert segment_base_offset("x/00000000000000368769.log") == 368769
    assert segment_base_offset(Path("00000000000000368769.timeindex.swap")) == 368769
    with pytest.raises(NotAKafkaArtifact, match="leader-epoch-checkpoint"):
        segment_base_offset("leader-epoch-checkpoint")


# --------------------------------------------------------------------------------------------
# Not live: .deleted, .cleaned, .tmp, -delete/-stray/-future


def test_deleted_cleaned_and_tmp_files_are_excluded_with_reasons(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    for file in (
        name(0, ".log.deleted"),
        name(0, ".index.deleted"),
        name(0, ".snapshot.deleted"),
        name(100, ".log.cleaned"),
        "leader-epoch-checkpoint.tmp",
        name(100, ".log"),
        "notes.txt",
    ):
        touch(directory / file)
    found = only(discover([directory]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [100]
    reasons = {Path(e.path).name: e.reason for e in found.excluded}
    assert sorted(reasons) == sorted(
        [
            name(0, ".log.deleted"),
            name(0, ".index.deleted"),
            name(0, ".snapshot.deleted"),
            name(100, ".log.cleaned"),
            "leader-epoch-checkpoint.tmp",
            "notes.txt",
        ]
    )
    assert ".deleted" in reasons[name(0, ".log.deleted")]
    assert ".cleaned" in reasons[name(100, ".log.cleaned")]
    assert ".tmp" in reasons["leader-epoch-checkpoint.tmp"]


def test_delete_stray_and_future_directories_are_excluded_from_a_log_directory(tmp_path: Path) -> None:
    log_dir = tmp_path / "kafka-logs"
    touch(log_dir / "meta.properties", b"version=0\nbroker.id=3\n")
    touch(log_dir / "orders-0" / name(0, ".log"))
    for directory in (
        "orders-1.0c6d4e3b8a1f4a5c9f7e2d1b0a9c8d7e-delete",
        "orders-2.1f2e-stray",
        "orders-3.2a3b-future",
    ):
        touch(log_dir / directory / name(0, ".log"))
    found = only(discover([log_dir]), LogDir)
    assert found.replica_id == 3
    assert names(found) == ["orders-0"]
    reasons = {Path(e.path).name: e.reason for e in found.excluded}
    assert "(-delete)" in reasons["orders-1.0c6d4e3b8a1f4a5c9f7e2d1b0a9c8d7e-delete"]
    assert "(-stray)" in reasons["orders-2.1f2e-stray"]
    assert "(-future)" in reasons["orders-3.2a3b-future"]


def test_a_partitions_files_under_a_name_that_is_no_partition_are_refused(tmp_path: Path) -> None:
    """A copy of a partition renamed `orders-0.bak` or `orders-0 (copy)` inside a log directory was left
    out as "not a partition directory": its segments went unread and the run said valid (a review). It
    is refused, as the same directory given alone is; a directory holding no partition file (an ext4
    mount's `lost+found`) is still left out with its reason."""
    for renamed in ("orders-0.bak", "orders-0 (copy)", "<b>-0"):
        log_dir = tmp_path / renamed.replace("<", "").replace(">", "") / "kafka-logs"
        touch(log_dir / "meta.properties", b"version=0\nbroker.id=3\n")
        touch(log_dir / "orders-1" / name(0, ".log"))
        touch(log_dir / "lost+found" / "#1234")
        touch(log_dir / renamed / name(0, ".log"))
        with pytest.raises(NotAKafkaArtifact, match=r"holds a partition's files, but its name is no") as err:
            discover([log_dir])
        assert str(err.value).startswith(f"{log_dir / renamed}: "), err.value
        (log_dir / renamed / name(0, ".log")).unlink()
        found = only(discover([log_dir]), LogDir)
        assert names(found) == ["orders-1"]
        reasons = {Path(e.path).name: e.reason for e in found.excluded}
        assert reasons == {"lost+found": "not a partition directory", renamed: "not a partition directory"}


def test_a_delete_directory_given_directly_is_a_usage_error(tmp_path: Path) -> None:
    directory = touch(tmp_path / "orders-1.0c6d-delete" / name(0, ".log")).parent
    with pytest.raises(NotAKafkaArtifact, match="marked for deletion"):
        discover([directory])


def test_only_kafkas_own_names_of_not_live_directories_are_excluded(tmp_path: Path) -> None:
    """Kafka names such a directory `<topic>-<partition>.<uniqueId>-delete` (`-future`, `-stray`;
    `LocalLog.DELETE_DIR_PATTERN`). A directory of log directories named `before-delete` and
    `after-delete` by the user was one log directory with both excluded, and `replay-audit dump` printed
    nothing; a log directory named `kafka-logs-future` given directly was refused."""
    incident = tmp_path / "incident"
    for copy in ("before-delete", "after-delete"):
        touch(incident / copy / "meta.properties", b"version=0\nbroker.id=3\n")
        touch(incident / copy / "orders-0" / name(0, ".log"))
    found = all_of(discover([incident]), LogDir)
    assert sorted(Path(d.path).name for d in found) == ["after-delete", "before-delete"]
    assert all(names(d) == ["orders-0"] and d.replica_id == 3 for d in found)
    future = tmp_path / "kafka-logs-future"
    touch(future / "meta.properties", b"version=0\nbroker.id=4\n")
    touch(future / "orders-0" / name(0, ".log"))
    assert names(only(discover([future]), LogDir)) == ["orders-0"]


def test_a_dump_text_of_a_segment_in_a_future_directory_is_not_the_live_partition(tmp_path: Path) -> None:
    """kafka-dump-log.sh run on an alter-log-dirs copy in progress (KIP-113): its text, named after the
    partition, was read as the live `orders-0`, beside the live directory's own segments."""
    dumped = (
        b"Dumping /var/lib/kafka/orders-0.0c6d4e3b8a1f4a5c9f7e2d1b0a9c8d7e-future/" + name(0, ".log").encode()
    )
    text = touch(tmp_path / "orders-0.txt", dumped + b"\nLog starting offset: 0\n")
    with pytest.raises(NotAKafkaArtifact, match=r"orders-0.txt: line 1: .* lies in a .*\(-future\)"):
        discover([text])


def test_an_index_without_its_log_is_excluded_as_orphaned(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    touch(directory / name(0, ".log"))
    touch(directory / name(50, ".index"))
    found = only(discover([directory]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0]
    assert [(Path(e.path).name, e.reason) for e in found.excluded] == [
        (name(50, ".index"), f"orphaned index file: no {name(50, '.log')}")
    ]


# --------------------------------------------------------------------------------------------
# .swap supersedes the originals (LogLoader)


def swap_partition(tmp_path: Path, *, swap_index_last: int | None = None) -> Path:
    """Originals at 0, 100 and 200; the cleaner's output for [0, ...) renamed to .swap."""
    directory = tmp_path / "compacted-0"
    for base in (0, 100, 200):
        for suffix in (".log", ".index", ".timeindex"):
            touch(directory / name(base, suffix))
        touch(directory / name(base, ".snapshot"))
    touch(directory / name(0, ".log.swap"), b"cleaned")
    index = b"" if swap_index_last is None else struct.pack(">ii", swap_index_last, 4096) + bytes(80)
    touch(directory / name(0, ".index.swap"), index)
    touch(directory / name(0, ".timeindex.swap"))
    return directory


def test_swap_files_replace_originals_up_to_the_swaps_next_offset(tmp_path: Path) -> None:
    directory = swap_partition(tmp_path)
    found = only(discover([directory], next_offset=lambda path: 200), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 200]
    first = found.segments[0]
    assert [Path(f.path).name for f in (first.log, first.index, first.timeindex) if f] == [
        name(0, ".log.swap"),
        name(0, ".index.swap"),
        name(0, ".timeindex.swap"),
    ]
    assert [s.offset for s in found.snapshots] == [200]
    replaced = sorted(Path(e.path).name for e in found.excluded)
    assert replaced == sorted(
        name(b, s) for b in (0, 100) for s in (".log", ".index", ".timeindex", ".snapshot")
    )
    assert all("[0, 200)" in e.reason for e in found.excluded)


def test_swap_range_reaching_into_a_later_segment_replaces_it_too(tmp_path: Path) -> None:
    found = only(discover([swap_partition(tmp_path)], next_offset=lambda path: 250), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0]


@pytest.mark.parametrize(("entry", "reach"), [(180, 183), (1000, 183), (None, 183)])
def test_without_next_offset_the_swap_is_read_from_an_index_entry_a_batch_reaches(
    tmp_path: Path, entry: int | None, reach: int
) -> None:
    """`LogSegment.readNextOffset`: the headers from the last index entry's position, where a batch
    there reaches the entry's offset; a stale entry (1000, past every batch) is not believed, and the
    segment is read from its start. Batches at 5 and 180-182: [0, 183) either way."""
    from tests.builders import V2Batch, build_v2, segment

    directory = swap_partition(tmp_path)
    first = build_v2(V2Batch(base_offset=5))
    cleaned = segment(first, build_v2(V2Batch(base_offset=180, records=((None, b"a"),) * 3)))
    (directory / name(0, ".log.swap")).write_bytes(cleaned)
    index = b"" if entry is None else struct.pack(">ii", entry, len(first))
    (directory / name(0, ".index.swap")).write_bytes(index)
    found = only(discover([directory]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 200]
    assert all(f"[0, {reach})" in e.reason for e in found.excluded if "replaced by .swap" in e.reason)


def test_a_swap_index_of_many_entries_is_read_for_its_last_alone(tmp_path: Path) -> None:
    """The swap's `.index` of 200,000 entries (1.6 MiB), the last at the batches 180-182: [0, 183), as
    from a one-entry index, with no list of the entries held (tens of MiB of objects)."""
    import tracemalloc

    from tests.builders import V2Batch, build_v2, segment

    directory = swap_partition(tmp_path)
    first = build_v2(V2Batch(base_offset=5))
    cleaned = segment(first, build_v2(V2Batch(base_offset=180, records=((None, b"a"),) * 3)))
    (directory / name(0, ".log.swap")).write_bytes(cleaned)
    entries = [struct.pack(">ii", 1 + i % 170, 0) for i in range(199_999)]
    index = b"".join(entries) + struct.pack(">ii", 179, len(first))
    (directory / name(0, ".index.swap")).write_bytes(index)
    tracemalloc.start()
    try:
        found = only(discover([directory]), PartitionDir)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [s.base_offset for s in found.segments] == [0, 200]
    assert all("[0, 183)" in e.reason for e in found.excluded if "replaced by .swap" in e.reason)
    assert peak < len(index)


def test_a_swap_of_more_batches_than_a_walk_once_read_is_read_to_its_end(tmp_path: Path) -> None:
    """A cleaned swap of 150,000 one-record batches, with no index entry: its headers are walked to its
    last batch. The walk stopped after 100,000 headers and took [0, 100000) for the swap's range, so the
    original at 120,000, which the swap replaces, stayed beside it (every batch read twice)."""
    from tests.builders import V2Batch, build_v2

    directory = swap_partition(tmp_path)
    for base in (120_000, 160_000):
        touch(directory / name(base, ".log"))
    batch = build_v2(V2Batch(base_offset=0))
    # The base offset is outside the batch's CRC: one batch at 150,000 offsets.
    data = b"".join(struct.pack(">q", offset) + batch[8:] for offset in range(150_000))
    (directory / name(0, ".log.swap")).write_bytes(data)
    found = only(discover([directory]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 160_000]
    assert all("[0, 150000)" in e.reason for e in found.excluded if "replaced by .swap" in e.reason)


def test_a_swap_of_batches_larger_than_the_walks_block_ends_where_its_last_batch_does(
    tmp_path: Path,
) -> None:
    """Batches of 1.5 MiB (past the 1 MiB block the walk reads) and small ones after them: the walk
    reads the next header alone after a large batch, and still finds the end [0, 105)."""
    from tests.builders import V2Batch, build_v2, segment

    directory = swap_partition(tmp_path)
    large = [build_v2(V2Batch(base_offset=o, records=((None, bytes(1_500_000)),))) for o in (0, 1, 2)]
    small = [build_v2(V2Batch(base_offset=o)) for o in range(3, 105)]
    (directory / name(0, ".log.swap")).write_bytes(segment(*large, *small))
    found = only(discover([directory]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 200]
    assert all("[0, 105)" in e.reason for e in found.excluded if "replaced by .swap" in e.reason)


def test_an_unreadable_swap_replaces_only_its_own_base_whatever_its_index_says(tmp_path: Path) -> None:
    found = only(discover([swap_partition(tmp_path, swap_index_last=150)]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 100, 200]


def test_without_next_offset_or_swap_index_only_the_same_base_is_replaced(tmp_path: Path) -> None:
    found = only(discover([swap_partition(tmp_path)]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 100, 200]
    assert found.segments[0].log.path.endswith(".log.swap")


def test_an_empty_swap_replaces_no_range_and_keeps_the_snapshot_and_txn_index_at_its_base(
    tmp_path: Path,
) -> None:
    """The cleaner left an empty swap (it removed every record) when the broker stopped. Its next offset
    is its base (`LogSegment.readNextOffset` of an empty segment), so LogLoader deletes nothing in
    [0, 0): only the original .log gives way to the swap, by the rename."""
    directory = tmp_path / "compacted-0"
    for suffix in (".log", ".log.swap", ".snapshot", ".txnindex"):
        touch(directory / name(0, suffix))
    found = only(discover([directory]), PartitionDir)
    (kept,) = found.segments
    assert Path(kept.log.path).name == name(0, ".log.swap")
    assert kept.txnindex is not None and Path(kept.txnindex.path).name == name(0, ".txnindex")
    assert [Path(s.file.path).name for s in found.snapshots] == [name(0, ".snapshot")]
    assert [(Path(e.path).name, e.reason) for e in found.excluded] == [
        (name(0, ".log"), f"replaced by {directory / name(0, '.log.swap')}")
    ]


def test_swap_at_or_above_the_smallest_cleaned_base_is_an_incomplete_split(tmp_path: Path) -> None:
    directory = tmp_path / "split-0"
    touch(directory / name(0, ".log"))
    touch(directory / name(0, ".index"))
    touch(directory / name(0, ".log.cleaned"))
    touch(directory / name(0, ".log.swap"))
    found = only(discover([directory], next_offset=lambda path: 100), PartitionDir)
    assert [Path(s.log.path).name for s in found.segments] == [name(0, ".log")]
    reasons = {Path(e.path).name: e.reason for e in found.excluded}
    assert "incomplete segment split" in reasons[name(0, ".log.swap")]
    assert "KAFKA-6264" in reasons[name(0, ".log.swap")]


# --------------------------------------------------------------------------------------------
# What is a log directory, a directory of them, or neither


def test_a_log_directory_named_like_a_partition_is_still_a_log_directory(tmp_path: Path) -> None:
    log_dir = tmp_path / "kafka-logs-1"
    touch(log_dir / "orders-0" / name(0, ".log"))
    found = only(discover([log_dir]), LogDir)
    assert found.replica_id is None
    assert names(found) == ["orders-0"]


def test_log_directories_named_like_partitions_inside_a_container(tmp_path: Path) -> None:
    for broker in ("broker-0", "broker-1"):
        touch(tmp_path / broker / "orders-0" / name(0, ".log"))
    found = all_of(discover([tmp_path]), LogDir)
    assert [(Path(d.path).name, names(d)) for d in found] == [
        ("broker-0", ["orders-0"]),
        ("broker-1", ["orders-0"]),
    ]


def test_log_directories_beside_a_partition_directory_are_a_usage_error_naming_them(tmp_path: Path) -> None:
    """A folder of broker log directories with a stray partition directory beside them read as one log
    directory whose "partitions" were the brokers (topic `broker`): every broker's files were left out
    and the run said nothing. Refused, naming them; alone, the log directories read as before."""
    for broker in ("broker-1", "broker-2"):
        touch(tmp_path / "dump" / broker / "meta.properties", f"broker.id={broker[-1]}\n".encode())
        touch(tmp_path / "dump" / broker / "orders-0" / name(0, ".log"))
    touch(tmp_path / "dump" / "extra-0" / name(0, ".log"))
    with pytest.raises(NotAKafkaArtifact, match=r"holds log directories \(broker-1, broker-2\) beside"):
        discover([tmp_path / "dump"])
    shutil.rmtree(tmp_path / "dump" / "extra-0")
    # A log directory's subdirectory that cannot be listed (a dangling link in a mount's lost+found) is
    # left out as before, not looked into.
    (tmp_path / "dump" / "broker-1" / "lost+found").mkdir()
    os.symlink("/nonexistent", tmp_path / "dump" / "broker-1" / "lost+found" / "#1234")
    found = all_of(discover([tmp_path / "dump"]), LogDir)
    assert [(Path(d.path).name, d.replica_id, names(d)) for d in found] == [
        ("broker-1", 1, ["orders-0"]),
        ("broker-2", 2, ["orders-0"]),
    ]


def test_a_log_directory_with_only_checkpoints_is_recognised(tmp_path: Path) -> None:
    touch(tmp_path / "logs" / "recovery-point-offset-checkpoint", b"0\n0\n")
    found = only(discover([tmp_path / "logs"]), LogDir)
    assert found.partitions == [] and list(found.checkpoint_files) == ["recovery-point-offset-checkpoint"]


def test_unreadable_meta_properties_leaves_the_replica_unnamed_with_an_error(tmp_path: Path) -> None:
    touch(tmp_path / "logs" / "meta.properties", b"broker.id=three\n")
    found = only(discover([tmp_path / "logs"]), LogDir)
    assert found.replica_id is None
    assert len(found.errors) == 1  # a non-integer broker.id (no version is version 0)


def test_dump_log_text_is_recognised_by_its_first_line(tmp_path: Path) -> None:
    text = touch(
        tmp_path / "dump.txt", b"Dumping /data/orders-3/00000000000000000000.log\nLog starting offset: 0\n"
    )
    bom = touch(tmp_path / "orders-1.txt", b"\xef\xbb\xbfDumping x.log\n")
    found = all_of(discover([text, bom]), DumpLogText)
    assert len(found) == 2
    assert found[0].path == str(text) and found[0].file.size == text.stat().st_size
    assert (found[0].partition, found[1].partition) == (None, ("orders", 1))


def test_dump_log_text_captured_with_its_stderr_is_recognised_by_its_first_dumping_line(
    tmp_path: Path,
) -> None:
    """`kafka-dump-log.sh ... > dump.txt 2>&1`: the JVM's and loggers' lines come before `Dumping` (the
    first two as JDK 17 printed them under JAVA_TOOL_OPTIONS). Any other first line is still refused,
    and a text naming no partition is refused at its `Dumping` line's number."""
    stderr = (
        b"Picked up JAVA_TOOL_OPTIONS: -XX:+UseBiasedLocking\n"
        b"OpenJDK 64-Bit Server VM warning: Option UseBiasedLocking was deprecated in version 15.0\n\n"
    )
    text = touch(tmp_path / "dump.txt", stderr + b"Dumping /data/orders-3/00000000000000000000.log\n")
    found = only(discover([text]), DumpLogText)
    assert found.dumped == "/data/orders-3/00000000000000000000.log" and found.partition is None
    nowhere = touch(tmp_path / "d" / "dump.txt", stderr + b"Dumping 00000000000000000000.log\n")
    with pytest.raises(NotAKafkaArtifact) as raised:
        discover([nowhere])
    assert f"{nowhere}: line 4: the dumped file 00000000000000000000.log" in str(raised.value)
    for head in (b"hello\nDumping /data/orders-3/00000000000000000000.log\n", stderr):
        other = touch(tmp_path / "o" / "dump.txt", head)
        with pytest.raises(NotAKafkaArtifact) as raised:
            discover([other])
        assert "not kafka-dump-log.sh output" in str(raised.value)


def test_a_dump_log_text_saved_as_utf16_is_refused_saying_so(tmp_path: Path) -> None:
    """Windows PowerShell 5's `>` writes UTF-16LE with a byte order mark: the refusal names the encoding
    and how to save the text as UTF-8, rather than "not kafka-dump-log.sh output"."""
    line = "Dumping C:\\kafka\\orders-0\\00000000000000000000.log\r\n"
    for encoded in (b"\xff\xfe" + line.encode("utf-16-le"), b"\xfe\xff" + line.encode("utf-16-be")):
        text = touch(tmp_path / "dump.txt", encoded)
        with pytest.raises(
            NotAKafkaArtifact, match=r"dump\.txt: UTF-16 text .*save kafka-dump-log output as UTF-8"
        ):
            discover([text])


def test_a_text_dumped_inside_its_partition_directory_takes_the_partition_its_name_names(
    tmp_path: Path,
) -> None:
    """`kafka-dump-log.sh --files 00000000000000000000.log`, run inside `orders-0`, writes `Dumping
    00000000000000000000.log`: the partition is the text's name (`my.topic-2.txt`), not its
    directory's (a broker pod's `kafka-0/dump.txt` would read as topic `kafka`); with none, the text is
    refused in one line naming it (not read as a log of no partition, whose rows no audit could place).
    A Windows path names its partition by its `\\` parts."""
    line = b"Dumping 00000000000000000000.log\nLog starting offset: 0\n"
    named = touch(tmp_path / "my.topic-2.txt", line)
    windows = touch(tmp_path / "w.txt", b"Dumping D:\\kafka\\orders-4\\00000000000000000000.log\n")
    found = all_of(discover([named, windows]), DumpLogText)
    assert [f.partition for f in found] == [("my.topic", 2), None]
    assert dumped_partition(found[1].dumped) == ("orders", 4)
    for nowhere in (
        touch(tmp_path / "incident" / "dump.txt", line),
        touch(tmp_path / "kafka-0" / "dump.txt", line),
    ):
        with pytest.raises(NotAKafkaArtifact) as raised:
            discover([nowhere])
        message = str(raised.value)
        assert str(nowhere) in message and "line 1" in message and "\n" not in message
        assert "lies in no <topic>-<partition> directory" in message


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: tmp / "missing",
        lambda tmp: touch(tmp / "notes.txt", b"hello"),
        lambda tmp: touch(tmp / "empty" / "x").parent,
        lambda tmp: touch(tmp / "orders-0" / "readme"),
        lambda tmp: touch(tmp / "orders-0" / "readme").parent,
    ],
    ids=[
        "missing",
        "text-file",
        "unrelated-directory",
        "file-in-partition-named-dir",
        "partition-name-no-files",
    ],
)
def test_anything_else_is_a_usage_error_naming_the_path(tmp_path: Path, make: Any) -> None:
    path = make(tmp_path)
    with pytest.raises(NotAKafkaArtifact) as raised:
        discover([path])
    assert str(path) in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_partition_copy_with_a_swap_keeps_the_real_files_untouched(tmp_path: Path) -> None:
    copy = tmp_path / "foo-0"
    shutil.copytree(CODECRAFTERS / "foo-0", copy)
    touch(copy / name(0, ".log.swap"), b"x")
    found = only(discover([copy]), PartitionDir)
    assert found.segments[0].log.path.endswith(".log.swap")
    assert sorted(os.listdir(CODECRAFTERS / "foo-0")) == sorted(
        p for p in os.listdir(copy) if not p.endswith(".swap")
    )


# --------------------------------------------------------------------------------------------
# One segment, snapshot or KRaft snapshot under two names: one is read, the other listed as excluded


def real_partition_copy(tmp_path: Path, source: Path) -> Path:
    directory = tmp_path / source.name
    shutil.copytree(source, directory)
    return directory


def test_an_unpadded_twin_of_a_segment_is_excluded_not_dropped(tmp_path: Path) -> None:
    directory = real_partition_copy(tmp_path, CODECRAFTERS / "foo-0")
    shutil.copy(directory / name(0, ".log"), directory / "0.log")
    found = only(discover([directory]), PartitionDir)
    (segment,) = found.segments
    assert Path(segment.log.path).name == name(0, ".log")
    assert [(Path(e.path).name, e.reason) for e in found.excluded] == [
        ("0.log", f"a second .log file for offset 0: {name(0, '.log')}, the name the broker opens, is read")
    ]


def test_a_snapshot_beside_its_unpadded_twin_is_read_once(tmp_path: Path) -> None:
    directory = real_partition_copy(tmp_path, CODECRAFTERS / "foo-0")
    shutil.copy(directory / name(3, ".snapshot"), directory / "3.snapshot")
    shutil.copy(directory / name(3, ".snapshot"), directory / "0.snapshot")
    shutil.copy(directory / name(3, ".snapshot"), directory / name(0, ".snapshot"))
    found = only(discover([directory]), PartitionDir)
    assert [(s.offset, Path(s.file.path).name) for s in found.snapshots] == [
        (0, name(0, ".snapshot")),
        (3, name(3, ".snapshot")),
    ]
    assert sorted(Path(e.path).name for e in found.excluded) == ["0.snapshot", "3.snapshot"]


def test_unpadded_twins_without_the_brokers_name_keep_the_first_by_name(tmp_path: Path) -> None:
    directory = real_partition_copy(tmp_path, CODECRAFTERS / "foo-0")
    (directory / name(3, ".snapshot")).rename(directory / "03.snapshot")
    shutil.copy(directory / "03.snapshot", directory / "3.snapshot")
    found = only(discover([directory]), PartitionDir)
    assert [Path(s.file.path).name for s in found.snapshots] == ["03.snapshot"]
    assert [(Path(e.path).name, e.reason) for e in found.excluded] == [
        (
            "3.snapshot",
            "a second .snapshot file for offset 3: 03.snapshot is read "
            "(the broker keeps one of them, the last its directory listing gives)",
        )
    ]


def test_a_kraft_snapshot_beside_its_unpadded_twin_is_read_once(tmp_path: Path) -> None:
    directory = real_partition_copy(tmp_path, INDUSWARGODS / "__cluster_metadata-0")
    shutil.copy(directory / "00000000000000010744-0000000004.checkpoint", directory / "10744-4.checkpoint")
    found = only(discover([directory]), PartitionDir)
    assert next((s.end_offset, s.epoch, Path(s.file.path).name) for s in found.kraft_snapshots) == (
        10744,
        4,
        "00000000000000010744-0000000004.checkpoint",
    )
    assert len(found.kraft_snapshots) == 6
    assert [(Path(e.path).name, e.reason) for e in found.excluded] == [
        (
            "10744-4.checkpoint",
            "a second .checkpoint file for offset 10744, epoch 4: "
            "00000000000000010744-0000000004.checkpoint, the name the broker opens, is read",
        )
    ]


def test_without_next_offset_the_swap_is_read_from_its_last_index_entry_as_the_broker_reads_it(
    tmp_path: Path,
) -> None:
    """A small cleaned segment has no offset-index entry: its next offset is read from its batch headers
    (`LogSegment.readNextOffset`): batches at 5 and 180-182 replace the originals in [0, 183)."""
    from tests.builders import V2Batch, build_v2, segment

    directory = swap_partition(tmp_path)
    cleaned = segment(
        build_v2(V2Batch(base_offset=5)), build_v2(V2Batch(base_offset=180, records=((None, b"a"),) * 3))
    )
    (directory / name(0, ".log.swap")).write_bytes(cleaned)
    found = only(discover([directory]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 200]
    assert all("[0, 183)" in e.reason for e in found.excluded if "replaced by .swap" in e.reason)
    # A torn last batch counts no further than the whole ones before it.
    (directory / name(0, ".log.swap")).write_bytes(cleaned[:-1])
    found = only(discover([directory]), PartitionDir)
    assert [s.base_offset for s in found.segments] == [0, 100, 200]
    assert all("[0, 6)" in e.reason for e in found.excluded if "replaced by .swap" in e.reason)
