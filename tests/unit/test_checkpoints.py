"""Checkpoint and metadata text files (formats §3.6): real broker files, and what the broker's
readers would reject reported as UNREADABLE_FILE at the offending line's byte position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_log_decoder.checkpoints import (
    decode_clean_shutdown,
    decode_leader_epoch_checkpoint,
    decode_meta_properties,
    decode_offset_checkpoint,
    decode_partition_metadata,
    decode_quorum_state,
    read_clean_shutdown,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
)
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.rows import CheckpointEntry, LeaderEpochEntry
from tests.unit.test_producer_snapshot import CODECRAFTERS, DONALDY, INDUSWARGODS

RECOVERY = "recovery-point-offset-checkpoint"


def offsets(entries: list[CheckpointEntry]) -> list[tuple[str, int, int]]:
    return [(e.topic, e.partition, e.offset) for e in entries]


def epochs(entries: list[LeaderEpochEntry]) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in entries]


def positions(errors: list[DecodeError]) -> list[tuple[CorruptionKind, int]]:
    return [(e.kind, e.position) for e in errors]


# --------------------------------------------------------------------------------------------
# Real broker files


def test_codecrafters_recovery_point_and_high_watermark_of_foo_0_are_3() -> None:
    for name in (RECOVERY, "replication-offset-checkpoint"):
        path = CODECRAFTERS / name
        entries, errors = read_offset_checkpoint(path)
        assert errors == []
        assert entries == [
            CheckpointEntry(file=str(path), checkpoint=name, topic="foo", partition=0, offset=3)
        ]


def test_codecrafters_empty_cleaner_checkpoint_reads_as_no_entries_like_the_broker() -> None:
    assert (CODECRAFTERS / "cleaner-offset-checkpoint").stat().st_size == 0
    assert read_offset_checkpoint(CODECRAFTERS / "cleaner-offset-checkpoint") == ([], [])


@pytest.mark.parametrize("tree", [CODECRAFTERS, DONALDY, INDUSWARGODS], ids=lambda p: p.name)
def test_real_log_start_offset_checkpoints_have_zero_entries(tree: Path) -> None:
    assert read_offset_checkpoint(tree / "log-start-offset-checkpoint") == ([], [])


def test_donaldy_checkpoints_cover_53_partitions_and_the_compacted_ones() -> None:
    recovery, errors = read_offset_checkpoint(DONALDY / RECOVERY)
    assert errors == []
    assert len(recovery) == 53
    by_partition = {(e.topic, e.partition): e.offset for e in recovery}
    assert by_partition[("myTopic", 0)] == 38
    assert by_partition[("test_topic_0603", 0)] == 9
    assert by_partition[("__consumer_offsets", 39)] == 18
    high_watermarks = {
        (e.topic, e.partition): e.offset
        for e in read_offset_checkpoint(DONALDY / "replication-offset-checkpoint")[0]
    }
    assert high_watermarks[("__consumer_offsets", 39)] == 20
    cleaner, errors = read_offset_checkpoint(DONALDY / "cleaner-offset-checkpoint")
    assert errors == []
    assert offsets(cleaner) == [
        ("__consumer_offsets", 28, 2),
        ("__consumer_offsets", 17, 1),
        ("__consumer_offsets", 39, 18),
    ]
    assert {e.checkpoint for e in cleaner} == {"cleaner-offset-checkpoint"}


def test_induswargods_high_watermark_is_one_past_the_single_batch() -> None:
    assert offsets(read_offset_checkpoint(INDUSWARGODS / "replication-offset-checkpoint")[0]) == [
        ("test-topic", 0, 1)
    ]
    assert offsets(read_offset_checkpoint(INDUSWARGODS / RECOVERY)[0]) == [("test-topic", 0, 0)]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (CODECRAFTERS / "foo-0", [(0, 0), (2, 3)]),
        (CODECRAFTERS / "__cluster_metadata-0", [(1, 0), (2, 81)]),
        (INDUSWARGODS / "test-topic-0", [(0, 0), (2, 1)]),
        (INDUSWARGODS / "__cluster_metadata-0", [(1, 0), (2, 184), (3, 3464), (4, 3575)]),
        (DONALDY / "myTopic-0", [(0, 38)]),
        (DONALDY / "test_topic-0", [(0, 12)]),
        (DONALDY / "__consumer_offsets-28", [(0, 0)]),
    ],
    ids=lambda value: f"{value.parent.name}/{value.name}" if isinstance(value, Path) else None,
)
def test_real_leader_epoch_checkpoints(path: Path, expected: list[tuple[int, int]]) -> None:
    entries, errors = read_leader_epoch_checkpoint(path / "leader-epoch-checkpoint")
    assert errors == []
    assert epochs(entries) == expected


@pytest.mark.parametrize(
    ("path", "topic_id"),
    [
        (CODECRAFTERS / "foo-0", "fZi4qEpCTsik-rzkyV0Ypg"),
        (CODECRAFTERS / "__cluster_metadata-0", "AAAAAAAAAAAAAAAAAAAAAQ"),
        (INDUSWARGODS / "test-topic-0", "YNY5hm01SZ-bAGeCLAGqWA"),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else None,
)
def test_real_partition_metadata_without_trailing_newline(path: Path, topic_id: str) -> None:
    assert not (path / "partition.metadata").read_bytes().endswith(b"\n")
    metadata, errors = read_partition_metadata(path / "partition.metadata")
    assert errors == []
    assert metadata is not None and (metadata.version, metadata.topic_id) == (0, topic_id)


def test_donaldy_meta_properties_names_broker_0_in_zookeeper_mode() -> None:
    meta, errors = read_meta_properties(DONALDY / "meta.properties")
    assert errors == []
    assert meta.properties == {"cluster.id": "d0053poFTbGwSWThjV1DEg", "version": "0", "broker.id": "0"}
    assert meta.replica_id == "0"


def test_codecrafters_meta_properties_names_kraft_node_1() -> None:
    meta, errors = read_meta_properties(CODECRAFTERS / "meta.properties")
    assert errors == []
    assert meta.properties["node.id"] == "1" and meta.properties["version"] == "1"
    assert meta.properties["directory.id"] == "AiSXPLrdRM-HREWplhnaNA"
    assert meta.replica_id == "1"


def test_codecrafters_clean_shutdown_file_records_the_broker_epoch() -> None:
    assert read_clean_shutdown(CODECRAFTERS / ".kafka_cleanshutdown") == (
        {"version": 0, "brokerEpoch": 83},
        [],
    )


@pytest.mark.parametrize(
    ("tree", "epoch"), [(CODECRAFTERS, 2), (INDUSWARGODS, 4)], ids=lambda v: getattr(v, "name", v)
)
def test_real_quorum_state_is_returned_as_its_json_object(tree: Path, epoch: int) -> None:
    state, errors = read_quorum_state(tree / "__cluster_metadata-0" / "quorum-state")
    assert errors == []
    assert state is not None and (state["leaderId"], state["leaderEpoch"]) == (1, epoch)
    assert state["currentVoters"] == [{"voterId": 1}]


# --------------------------------------------------------------------------------------------
# Offset and leader-epoch checkpoints: the CheckpointFile rules


def test_topic_names_with_dots_dashes_and_underscores_are_kept_whole() -> None:
    data = b"0\n3\nmy.topic 0 5\nmy-topic_v2 11 7\n__consumer_offsets 49 0\n"
    entries, errors = decode_offset_checkpoint(data, RECOVERY)
    assert errors == []
    assert offsets(entries) == [("my.topic", 0, 5), ("my-topic_v2", 11, 7), ("__consumer_offsets", 49, 0)]


def test_fields_may_be_separated_by_any_whitespace_and_lines_by_crlf() -> None:
    entries, errors = decode_offset_checkpoint(
        b"0\r\n2\r\norders\t3  368769\r\norders 7 12001 \r\n", RECOVERY
    )
    assert errors == []
    assert offsets(entries) == [("orders", 3, 368769), ("orders", 7, 12001)]


def test_a_count_that_differs_from_the_lines_is_an_error_at_the_count_line() -> None:
    entries, errors = decode_offset_checkpoint(b"0\n3\norders 3 368769\norders 7 12001\n", RECOVERY)
    assert offsets(entries) == [("orders", 3, 368769), ("orders", 7, 12001)]
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 2)]
    assert errors[0].message == "checkpoint declares 3 entries but holds 2"
    assert errors[0].file == RECOVERY


def test_an_unknown_version_is_an_error_and_no_entry_is_trusted() -> None:
    entries, errors = decode_offset_checkpoint(b"1\n1\norders 3 368769\n", RECOVERY)
    assert entries == []
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 0)]
    assert "version 1" in errors[0].message


def test_a_non_integer_offset_is_an_error_at_its_line_and_other_lines_still_decode() -> None:
    data = b"0\n2\norders 3 36876x\norders 7 12001\n"
    entries, errors = decode_offset_checkpoint(data, RECOVERY)
    assert offsets(entries) == [("orders", 7, 12001)]
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, data.index(b"orders 3"))]
    assert "line 3" in errors[0].message


@pytest.mark.parametrize(
    "line",
    [
        b"orders 3",
        b"orders 3 1 extra",
        b" orders 3 1",
        b"",
        b"orders x 1",
        b"orders 3 99999999999999999999",
        b"orders 2147483648 1",
    ],
)
def test_lines_the_broker_rejects_are_errors(line: bytes) -> None:
    data = b"0\n1\n" + line + b"\n"
    entries, errors = decode_offset_checkpoint(data, RECOVERY)
    assert entries == []
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 4)]


def test_malformed_version_or_count_lines_are_errors() -> None:
    assert positions(decode_offset_checkpoint(b"zero\n0\n", RECOVERY)[1]) == [
        (CorruptionKind.UNREADABLE_FILE, 0)
    ]
    entries, errors = decode_offset_checkpoint(b"0\n-1\norders 3 1\n", RECOVERY)
    assert offsets(entries) == [("orders", 3, 1)]
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 2)]


def test_a_version_line_alone_reads_as_no_entries_like_the_broker() -> None:
    assert decode_offset_checkpoint(b"0\n", RECOVERY) == ([], [])


def test_leader_epoch_checkpoint_with_a_wrong_count_is_an_error() -> None:
    entries, errors = decode_leader_epoch_checkpoint(b"0\n3\n0 0\n2 3\n", "leader-epoch-checkpoint")
    assert epochs(entries) == [(0, 0), (2, 3)]
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 2)]


def test_leader_epoch_line_with_three_fields_is_an_error() -> None:
    entries, errors = decode_leader_epoch_checkpoint(b"0\n2\n0 0\n2 3 4\n", "leader-epoch-checkpoint")
    assert epochs(entries) == [(0, 0)]
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 8)]


def test_a_negative_leader_epoch_or_start_offset_is_an_error_as_the_broker_refuses_it() -> None:
    """LeaderEpochFileCache.assign throws on `epoch < 0 || startOffset < 0`: the log does not load."""
    entries, errors = decode_leader_epoch_checkpoint(b"0\n3\n-1 5\n0 -2\n2 3\n", "leader-epoch-checkpoint")
    assert epochs(entries) == [(2, 3)]
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 4), (CorruptionKind.UNREADABLE_FILE, 9)]
    assert "neither negative" in errors[0].message


@pytest.mark.parametrize(
    ("decode", "data", "position"),
    [
        (decode_offset_checkpoint, b"0\n1\nt\xff 0 5\n", 5),
        (decode_leader_epoch_checkpoint, b"0\n1\n0 5\xff\n", 7),
        (decode_partition_metadata, b"version: 0\ntopic_id: fZi4qEpCTsik-rzkyV0Yp\xff\n", 42),
    ],
)
def test_bytes_that_are_not_utf8_fail_the_whole_file_as_the_brokers_reader_does(
    decode: Any, data: bytes, position: int
) -> None:
    """Files.newBufferedReader(path, UTF_8) throws MalformedInputException: no line is read, rather than a
    topic `t\ufffd` that no other file names."""
    rows, errors = decode(data, "f")
    assert not rows
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, position)]
    assert "not UTF-8" in errors[0].message


def test_a_real_checkpoint_with_a_wrong_count_copied_and_edited(tmp_path: Path) -> None:
    copy = tmp_path / "leader-epoch-checkpoint"
    copy.write_bytes(
        (CODECRAFTERS / "foo-0" / "leader-epoch-checkpoint").read_bytes().replace(b"\n2\n", b"\n5\n", 1)
    )
    entries, errors = read_leader_epoch_checkpoint(copy)
    assert epochs(entries) == [(0, 0), (2, 3)]
    assert [(e.file, e.position, e.message) for e in errors] == [
        (str(copy), 2, "checkpoint declares 5 entries but holds 2")
    ]


# --------------------------------------------------------------------------------------------
# partition.metadata


def test_partition_metadata_missing_topic_id_line_is_an_error_at_the_end() -> None:
    metadata, errors = decode_partition_metadata(b"version: 0\n", "partition.metadata")
    assert metadata is None
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 11)]


@pytest.mark.parametrize(
    ("data", "position"),
    [
        (b"version 0\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg", 0),
        (b"version: -1\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg", 0),
        (b"version: 0\ntopic: fZi4qEpCTsik-rzkyV0Ypg", 11),
        (b"version: 0\ntopic_id: not-a-uuid", 11),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 11),
    ],
)
def test_partition_metadata_the_broker_rejects(data: bytes, position: int) -> None:
    metadata, errors = decode_partition_metadata(data, "partition.metadata")
    assert metadata is None
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, position)]


def test_a_padded_topic_id_is_the_same_id_as_the_unpadded_one() -> None:
    """Uuid.fromString's base64 decoder takes `==`; Uuid.toString never prints it."""
    metadata, errors = decode_partition_metadata(b"version: 0\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg==\n", "p")
    assert errors == [] and metadata is not None and metadata.topic_id == "fZi4qEpCTsik-rzkyV0Ypg"


def test_a_topic_id_is_the_string_of_its_16_bytes() -> None:
    """The last of 22 base64 characters carries 4 bits past the 128: Uuid.fromString's decoder ignores
    them, so `...Ypp` is the id the broker writes as `...Ypg` (one partition, not a recreated topic)."""
    metadata, errors = decode_partition_metadata(b"version: 0\ntopic_id: fZi4qEpCTsik-rzkyV0Ypp\n", "p")
    assert errors == [] and metadata is not None and metadata.topic_id == "fZi4qEpCTsik-rzkyV0Ypg"
    # Only spare bits set: the zero UUID all the same, which the broker refuses.
    metadata, errors = decode_partition_metadata(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAB\n", "p")
    assert metadata is None and "zero UUID" in errors[0].message


def test_partition_metadata_of_a_newer_version_is_accepted_for_downgrades() -> None:
    metadata, errors = decode_partition_metadata(
        b"version: 1\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg\n", "partition.metadata"
    )
    assert errors == [] and metadata is not None and metadata.version == 1


# --------------------------------------------------------------------------------------------
# meta.properties (java.util.Properties)


def test_meta_properties_syntax_comments_separators_escapes_and_continuations() -> None:
    data = (
        b"#comment\n! another\n  \n"
        b"version = 1\n"
        b"node.id:7\n"
        b"cluster.id  abc\\\n    def\n"
        b"path=C\\:\\\\logs\\u0041\n"
        b"empty=\n"
    )
    meta, errors = decode_meta_properties(data, "meta.properties")
    assert errors == []
    assert meta.properties == {
        "version": "1",
        "node.id": "7",
        "cluster.id": "abcdef",
        "path": "C:\\logsA",
        "empty": "",
    }
    assert meta.replica_id == "7"


def test_meta_properties_are_read_as_the_broker_reads_their_version() -> None:
    """`MetaProperties.Builder(Properties)`: no version is version 0, which reads `broker.id` only;
    version 1 reads `node.id` only; the version is `Integer.parseInt` of its trimmed text."""
    cases = [
        (b"broker.id=3\ncluster.id=abc\n", "3"),
        (b"version=0\nbroker.id=3\nnode.id=x\n", "3"),
        (b"version= 01 \nnode.id=4\ncluster.id=abc\nbroker.id=x\n", "4"),
    ]
    for data, replica in cases:
        meta, errors = decode_meta_properties(data, "meta.properties")
        assert (errors, meta.replica_id) == ([], replica), data


def test_a_long_bad_value_is_cut_in_its_one_line_message() -> None:
    """A zero-filled checkpoint is one line of 4,096 NULs: its message quotes 160 characters of it."""
    _, errors = decode_offset_checkpoint(b"\0" * 4096, "recovery-point-offset-checkpoint")
    assert len(errors) == 1 and len(errors[0].message) < 300, errors
    _, errors = decode_meta_properties(b"version=1\ncluster.id=x\nnode.id=" + b"9" * 5000, "meta.properties")
    assert len(errors) == 1 and len(errors[0].message) < 300, errors


@pytest.mark.parametrize(
    ("data", "position", "fragment"),
    [
        (b"version=x\nbroker.id=0\n", 0, "version 'x'"),
        (b"version=2\nbroker.id=0\n", 0, "version '2'"),
        (b"version=1\ncluster.id=x\n", 0, "no 'node.id'"),
        # MetaProperties.Builder.build: "cluster.id was not found"; Integer.parseInt of "1 " fails (a
        # Properties value keeps its trailing whitespace); Uuid.fromString of "zzz" fails.
        (b"version=1\nnode.id=1\n", 0, "no 'cluster.id'"),
        # Both missing: one error (a quarantine row's key is its file and position).
        (b"version=1\n", 0, "no 'node.id' or 'cluster.id'"),
        (b"version=1\ncluster.id=x\nnode.id=1 \n", 23, "'1 ' is not an integer"),
        (b"version=1\ncluster.id=x\nnode.id=1\ndirectory.id=zzz\n", 33, "directory.id 'zzz' is not a UUID"),
        (b"version=0\nbroker.id=zero\n", 10, "not an integer"),
        (b"version=0\nkey=\\u12x4\n", 10, "\\uxxxx"),
    ],
)
def test_meta_properties_problems_are_errors_at_their_line(data: bytes, position: int, fragment: str) -> None:
    _, errors = decode_meta_properties(data, "meta.properties")
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, position)]
    assert fragment in errors[0].message


# --------------------------------------------------------------------------------------------
# JSON files


def test_an_empty_clean_shutdown_file_from_an_older_broker_is_valid() -> None:
    assert decode_clean_shutdown(b"", ".kafka_cleanshutdown") == ({}, [])


def test_malformed_json_is_an_error_at_the_byte_where_parsing_failed() -> None:
    state, errors = decode_quorum_state(b'{"leaderId": 1, "leaderEpoch": }', "quorum-state")
    assert state is None
    assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 31)]


@pytest.mark.parametrize(
    "data",
    [b"[" * 100_000 + b"]" * 100_000, b'{"leaderEpoch": ' + b"9" * 5000 + b"}", b'{"leaderEpoch": NaN}'],
    ids=["nested-deeper-than-the-stack", "a-5000-digit-number", "nan"],
)
def test_json_python_reads_but_no_json_reader_should_is_an_error_not_a_crash(data: bytes) -> None:
    """A RecursionError or a ValueError from `json.loads` once escaped the decoder (a failed task), and
    NaN (which Jackson refuses) was read as a value and then printed as invalid JSON by `dump`."""
    for decode in (decode_quorum_state, decode_clean_shutdown):
        state, errors = decode(data, "quorum-state")
        assert state is None
        assert positions(errors) == [(CorruptionKind.UNREADABLE_FILE, 0)]


def test_json_that_is_not_an_object_is_an_error() -> None:
    assert positions(decode_clean_shutdown(b"[1]", ".kafka_cleanshutdown")[1]) == [
        (CorruptionKind.UNREADABLE_FILE, 0)
    ]


# --------------------------------------------------------------------------------------------
# Never an exception on any bytes; a missing path is a usage error

DECODERS = [
    decode_offset_checkpoint,
    decode_leader_epoch_checkpoint,
    decode_partition_metadata,
    decode_meta_properties,
    decode_clean_shutdown,
    decode_quorum_state,
]


@given(
    st.binary(max_size=200) | st.text(alphabet="0123456789 -\n\r\t:=\\#abc_.u", max_size=80).map(str.encode)
)
def test_any_bytes_decode_without_an_exception(data: bytes) -> None:
    for decode in DECODERS:
        _, errors = decode(data, "file")
        assert all(e.kind is CorruptionKind.UNREADABLE_FILE and 0 <= e.position <= len(data) for e in errors)


@pytest.mark.parametrize(
    "read",
    [
        read_offset_checkpoint,
        read_leader_epoch_checkpoint,
        read_partition_metadata,
        read_meta_properties,
        read_clean_shutdown,
        read_quorum_state,
    ],
)
def test_a_missing_file_is_a_usage_error(tmp_path: Path, read: object) -> None:
    with pytest.raises(NotAKafkaArtifact, match="no-such-file"):
        read(tmp_path / "no-such-file")  # type: ignore[operator]


def test_a_malformed_line_is_the_one_error_not_also_a_count_mismatch() -> None:
    """`CheckpointReadBuffer.read` throws at the first malformed line and never compares the count."""
    entries, errors = decode_offset_checkpoint(b"0\n1\norders 0 3\n\n", RECOVERY)
    assert [e.message for e in errors] == ["malformed line 4 '' (expected 'topic partition offset')"], errors
    assert len(entries) == 1


def test_the_topic_id_line_is_found_where_a_lone_carriage_return_ends_the_version_line() -> None:
    """`PartitionMetadataReadBuffer` reads lines with `BufferedReader.readLine`, which ends one at a
    lone \\r too: the row's byte position is that of the `topic_id` line."""
    for data, position in (
        (b"version: 0\rtopic_id: fZi4qEpCTsik-rzkyV0Ypg", 11),
        (b"version: 0\r\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg\n", 12),
    ):
        metadata, errors = decode_partition_metadata(data, "partition.metadata")
        assert errors == [] and metadata is not None
        assert metadata.topic_id_position == position


@pytest.mark.parametrize(
    ("decode", "data", "position", "length"),
    [
        # A malformed entry line, a count line the entries contradict, a version line, and the lines of a
        # partition.metadata: the region is the line's bytes (UTF-8), without its line break.
        (decode_offset_checkpoint, "0\n2\nt 0 5\nt zéro 6\n".encode(), 10, len("t zéro 6".encode())),
        (decode_offset_checkpoint, b"0\n3\nt 0 5\n", 2, 1),
        (decode_leader_epoch_checkpoint, b"7x\r\n1\n0 0\n", 0, 2),
        (decode_partition_metadata, b"version: 0\ntopic_id:   nope\n", 11, len("topic_id:   nope")),
        (decode_partition_metadata, b"version: -1\ntopic_id: x\n", 0, len("version: -1")),
        (decode_partition_metadata, b"version 0\n", 0, len("version 0")),
    ],
)
def test_a_bad_lines_error_spans_the_line(decode: Any, data: bytes, position: int, length: int) -> None:
    """Quarantine rows give a byte range: a bad line's error covers it (the length was left null)."""
    _, errors = decode(data, "f")
    assert [(e.position, e.length) for e in errors] == [(position, length)]
