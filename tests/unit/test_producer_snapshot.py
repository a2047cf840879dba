"""Producer-state snapshots (`<offset>.snapshot`, formats §4): real broker files, corruption, and the
real DumpLogSegments tool as the reference decoder."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import crc32c as crc32c_package
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_harness.jars import java_executable, kafka_classpath
from kafka_log_decoder.errors import CorruptionKind, NotAKafkaArtifact
from kafka_log_decoder.native import crc32c
from kafka_log_decoder.producer_snapshot import decode_producer_snapshot, read_producer_snapshot
from kafka_log_decoder.rows import SnapshotEntry
from tests.builders import SNAPSHOT_ENTRY, producer_snapshot
from tests.paths import REAL_FIXTURES

REAL = REAL_FIXTURES
CODECRAFTERS = REAL / "codecrafters-kraft-3x"
DONALDY = REAL / "donaldy-zk-2.7.1"
INDUSWARGODS = REAL / "induswargods-kraft"
FOO_0_SNAPSHOT = CODECRAFTERS / "foo-0" / "00000000000000000003.snapshot"
MY_TOPIC_SNAPSHOT = DONALDY / "myTopic-0" / "00000000000000000038.snapshot"
ALL_REAL_SNAPSHOTS = sorted(REAL.glob("*/*/*.snapshot"))
EMPTY_REAL_SNAPSHOTS = [path for path in ALL_REAL_SNAPSHOTS if path.stat().st_size == 10]

# An independent encoder of ProducerSnapshot.json v1 (the crc32c PyPI package, not our checksums module).
encode_snapshot = producer_snapshot
ENTRY = SNAPSHOT_ENTRY
NAME = "00000000000000000120.snapshot"


def fields(entry: SnapshotEntry) -> tuple[int, ...]:
    return (
        entry.producer_id,
        entry.producer_epoch,
        entry.last_sequence,
        entry.last_offset,
        entry.offset_delta,
        entry.timestamp,
        entry.coordinator_epoch,
        entry.current_txn_first_offset,
    )


# --------------------------------------------------------------------------------------------
# Real broker files (PROVENANCE.md)


def test_codecrafters_foo_snapshot_at_3_holds_the_one_idempotent_producer() -> None:
    entries, errors = read_producer_snapshot(FOO_0_SNAPSHOT)
    assert errors == []
    assert entries == [
        SnapshotEntry(
            file=str(FOO_0_SNAPSHOT),
            snapshot_offset=3,
            producer_id=0,
            producer_epoch=0,
            last_sequence=2,
            last_offset=2,
            offset_delta=0,
            timestamp=1725272041932,
            coordinator_epoch=-1,
            current_txn_first_offset=-1,
        )
    ]


def test_donaldy_my_topic_snapshot_at_38_keeps_three_producers_whose_data_was_retained_away() -> None:
    entries, errors = read_producer_snapshot(MY_TOPIC_SNAPSHOT)
    assert errors == []
    by_producer = {entry.producer_id: entry for entry in entries}
    assert sorted(by_producer) == [4001, 4002, 4003]
    assert [by_producer[p].last_offset for p in (4001, 4002, 4003)] == [11, 23, 37]
    assert [by_producer[p].last_sequence for p in (4001, 4002, 4003)] == [11, 11, 13]
    assert [by_producer[p].offset_delta for p in (4001, 4002, 4003)] == [2, 11, 13]
    assert {entry.snapshot_offset for entry in entries} == {38}
    assert {entry.producer_epoch for entry in entries} == {0}
    assert {entry.coordinator_epoch for entry in entries} == {-1}
    assert {entry.current_txn_first_offset for entry in entries} == {-1}
    # Every last offset lies below the log start (the only segment starts at 38).
    assert all(entry.last_offset < 38 for entry in entries)


@pytest.mark.parametrize(
    "path", EMPTY_REAL_SNAPSHOTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}"
)
def test_real_ten_byte_snapshots_are_valid_and_hold_no_producer(path: Path) -> None:
    assert read_producer_snapshot(path) == ([], [])


def test_real_fixture_trees_hold_the_expected_empty_snapshots() -> None:
    names = {f"{p.parent.parent.name}/{p.parent.name}/{p.name}" for p in EMPTY_REAL_SNAPSHOTS}
    assert {
        "codecrafters-kraft-3x/__cluster_metadata-0/00000000000000000081.snapshot",
        "codecrafters-kraft-3x/__cluster_metadata-0/00000000000000000116.snapshot",
        "induswargods-kraft/__cluster_metadata-0/00000000000000003575.snapshot",
        "donaldy-zk-2.7.1/__consumer_offsets-28/00000000000000000002.snapshot",
    } <= names


# --------------------------------------------------------------------------------------------
# Layout


def test_snapshot_offset_is_the_twenty_digit_file_name() -> None:
    entries, _ = decode_producer_snapshot(
        encode_snapshot([(7, 1, 4, 9, 4, 5, -1, -1)]), "x/00000000000000368769.snapshot"
    )
    assert entries[0].snapshot_offset == 368769


def test_every_field_decodes_in_schema_order_including_negative_and_extreme_values() -> None:
    raw = [
        (2**63 - 1, 32767, 2**31 - 1, 2**63 - 1, 2**31 - 1, 2**63 - 1, 2**31 - 1, 2**63 - 1),
        (-1, -1, -1, -1, 0, -1, -1, -1),
        (5000, 3, 41, 900, 4, 1_700_000_000_000, 7, 880),
    ]
    entries, errors = decode_producer_snapshot(encode_snapshot(raw), NAME)
    assert errors == []
    assert [fields(entry) for entry in entries] == raw
    assert {entry.file for entry in entries} == {NAME}


def test_checksum_module_computes_the_castagnoli_check_value() -> None:
    # RFC 3720 / iSCSI check value of CRC-32C over "123456789".
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


@given(st.binary(max_size=300), st.integers(0, 2**32 - 1))
def test_checksum_agrees_with_the_crc32c_package(data: bytes, start: int) -> None:
    assert crc32c(data, start) == crc32c_package.crc32c(data, start)


# --------------------------------------------------------------------------------------------
# Corruption: one SNAPSHOT_CORRUPT per failed check, no entries, never an exception


def test_empty_snapshot_file_is_corrupt() -> None:
    entries, errors = decode_producer_snapshot(b"", NAME)
    assert entries == []
    assert [(e.kind, e.position, e.file) for e in errors] == [(CorruptionKind.SNAPSHOT_CORRUPT, 0, NAME)]
    assert "empty" in errors[0].message


def test_snapshot_cut_inside_its_header_is_corrupt() -> None:
    entries, errors = decode_producer_snapshot(encode_snapshot([])[:7], NAME)
    assert entries == []
    assert [(e.kind, e.position, e.length) for e in errors] == [(CorruptionKind.SNAPSHOT_CORRUPT, 0, 7)]
    assert "header" in errors[0].message


def test_unknown_version_is_corrupt_even_with_a_valid_crc() -> None:
    entries, errors = decode_producer_snapshot(encode_snapshot([(1, 0, 0, 0, 0, 0, -1, -1)], version=2), NAME)
    assert entries == []
    assert [(e.kind, e.position) for e in errors] == [(CorruptionKind.SNAPSHOT_CORRUPT, 0)]
    assert "version 2" in errors[0].message


def test_flipped_byte_in_a_real_snapshot_fails_the_crc_and_names_both_values(tmp_path: Path) -> None:
    copy = tmp_path / MY_TOPIC_SNAPSHOT.name
    data = bytearray(MY_TOPIC_SNAPSHOT.read_bytes())
    stored = struct.unpack_from(">I", data, 2)[0]
    data[60] ^= 0x01
    copy.write_bytes(data)
    entries, errors = read_producer_snapshot(copy)
    assert entries == []
    assert len(errors) == 1
    error = errors[0]
    assert (error.kind, error.position, error.file) == (CorruptionKind.SNAPSHOT_CORRUPT, 2, str(copy))
    computed = crc32c_package.crc32c(bytes(data[6:]))
    assert (
        error.message == f"producer snapshot CRC mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}"
    )


def test_snapshot_truncated_inside_an_entry_reports_crc_and_length_at_the_partial_entry(
    tmp_path: Path,
) -> None:
    copy = tmp_path / MY_TOPIC_SNAPSHOT.name
    copy.write_bytes(MY_TOPIC_SNAPSHOT.read_bytes()[:-5])
    entries, errors = read_producer_snapshot(copy)
    assert entries == []
    assert [(e.kind, e.position) for e in errors] == [
        (CorruptionKind.SNAPSHOT_CORRUPT, 2),
        (CorruptionKind.SNAPSHOT_CORRUPT, 10 + 46 * 2),
    ]
    assert "truncated: 3 entries need 148 bytes, the file has 143" in errors[1].message


def test_bytes_after_the_last_entry_make_the_snapshot_corrupt() -> None:
    body = encode_snapshot([(1, 0, 0, 0, 0, 0, -1, -1)])[6:] + b"\x00\x00"
    data = struct.pack(">hI", 1, crc32c_package.crc32c(body)) + body
    entries, errors = decode_producer_snapshot(data, NAME)
    assert entries == []
    assert [(e.position, e.length) for e in errors] == [(56, 2)]


def test_negative_entry_count_is_corrupt() -> None:
    body = struct.pack(">i", -1)
    data = struct.pack(">hI", 1, crc32c_package.crc32c(body)) + body
    entries, errors = decode_producer_snapshot(data, NAME)
    assert entries == []
    assert [(e.position, e.kind) for e in errors] == [(6, CorruptionKind.SNAPSHOT_CORRUPT)]


@given(st.binary(max_size=200))
def test_any_bytes_decode_to_entries_or_errors_never_both_never_an_exception(data: bytes) -> None:
    entries, errors = decode_producer_snapshot(data, NAME)
    assert not (entries and errors)
    assert all(e.kind is CorruptionKind.SNAPSHOT_CORRUPT and 0 <= e.position <= len(data) for e in errors)


@given(
    st.lists(
        st.tuples(*(st.integers(-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (64, 16, 32, 64, 32, 64, 32, 64)))
    )
)
def test_any_well_formed_snapshot_round_trips(raw: list[tuple[int, ...]]) -> None:
    entries, errors = decode_producer_snapshot(encode_snapshot(raw), NAME)
    assert errors == []
    assert [fields(entry) for entry in entries] == raw


# --------------------------------------------------------------------------------------------
# Usage errors


def test_a_missing_snapshot_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(NotAKafkaArtifact, match=re.escape("00000000000000000001.snapshot")):
        read_producer_snapshot(tmp_path / "00000000000000000001.snapshot")


def test_a_file_name_without_an_offset_is_a_usage_error() -> None:
    with pytest.raises(NotAKafkaArtifact, match=re.escape("producer.snapshot")):
        decode_producer_snapshot(encode_snapshot([]), "producer.snapshot")


# --------------------------------------------------------------------------------------------
# Cross-check against DumpLogSegments (Kafka 4.3.1)


def dump_log_segments(paths: list[Path]) -> tuple[dict[str, list[dict[str, str]]], str]:
    """Run the real tool once over `paths`: per file, its entry lines as `key: value` dicts; and stderr."""
    completed = subprocess.run(
        [
            java_executable(),
            "-cp",
            kafka_classpath(),
            "org.apache.kafka.tools.DumpLogSegments",
            "--files",
            ",".join(str(path) for path in paths),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    sections: dict[str, list[dict[str, str]]] = {}
    current: list[dict[str, str]] = []
    for line in completed.stdout.splitlines():
        if line.startswith("Dumping "):
            current = sections.setdefault(line.removeprefix("Dumping "), [])
        elif line.endswith(" is empty."):
            continue
        else:
            tokens = line.split()
            current.append({tokens[i].rstrip(":"): tokens[i + 1] for i in range(0, len(tokens) - 1, 2)})
    return sections, completed.stderr


def copies_for_the_tool(paths: list[Path], directory: Path) -> list[Path]:
    """Copies of real files (with their segment's .log/.index) to dump: the tool can rewrite what it opens."""
    copies = []
    for path in paths:
        target = directory / path.parent.parent.name / path.parent.name
        target.mkdir(parents=True, exist_ok=True)
        base = path.name.split(".")[0]
        for sibling in [path, *(path.parent / f"{base}{suffix}" for suffix in (".log", ".index"))]:
            if sibling.exists() and not (target / sibling.name).exists():
                shutil.copyfile(sibling, target / sibling.name)
        copies.append(target / path.name)
    return copies


def as_tool_line(entry: SnapshotEntry) -> dict[str, str]:
    """What DumpLogSegments.dumpProducerIdSnapshot prints for an entry (formats §6.2)."""
    txn = entry.current_txn_first_offset
    line = {
        "producerId": str(entry.producer_id),
        "producerEpoch": str(entry.producer_epoch),
        "coordinatorEpoch": str(entry.coordinator_epoch),
        "currentTxnFirstOffset": f"OptionalLong[{txn}]" if txn >= 0 else "OptionalLong.empty",
        "lastTimestamp": str(entry.timestamp),
    }
    if entry.last_offset >= 0:
        line |= {
            "lastSequence": str(entry.last_sequence),
            "lastOffset": str(entry.last_offset),
            "offsetDelta": str(entry.offset_delta),
            "timestamp": str(entry.timestamp),
        }
    return line


SYNTHETIC = [
    (1000, 0, 2, 2, 2, 1_700_000_000_002, -1, -1),
    (2001, 5, 99, 480, 9, 1_700_000_000_500, 3, 470),
    # No data batch known (only a marker): the tool prints no batch fields.
    (3002, 1, -1, -1, 0, 1_700_000_000_900, 4, -1),
]


@pytest.mark.integration
def test_decoded_snapshots_match_dump_log_segments_field_by_field(tmp_path: Path) -> None:
    synthetic = tmp_path / NAME
    synthetic.write_bytes(encode_snapshot(SYNTHETIC))
    paths = [*copies_for_the_tool(ALL_REAL_SNAPSHOTS, tmp_path / "real"), synthetic]
    sections, _ = dump_log_segments(paths)
    for path in paths:
        entries, errors = read_producer_snapshot(path)
        assert errors == []
        tool = sections[str(path)]
        ours = [as_tool_line(entry) for entry in entries]
        # `firstSequence` is derived (decrementSequence), not stored: compare the stored fields.
        assert [{k: v for k, v in line.items() if k != "firstSequence"} for line in tool] == ours, path


@pytest.mark.integration
def test_dump_log_segments_rejects_the_snapshots_we_call_corrupt(tmp_path: Path) -> None:
    flipped = tmp_path / "a" / NAME
    wrong_version = tmp_path / "b" / NAME
    flipped.parent.mkdir()
    wrong_version.parent.mkdir()
    data = bytearray(encode_snapshot(SYNTHETIC))
    data[20] ^= 0xFF
    flipped.write_bytes(data)
    wrong_version.write_bytes(encode_snapshot(SYNTHETIC, version=3))
    sections, stderr = dump_log_segments([flipped, wrong_version])
    assert sections[str(flipped)] == [] and sections[str(wrong_version)] == []
    assert "Snapshot is corrupt (CRC is no longer valid)" in stderr
    assert "unknown file version 3" in stderr
    for path in (flipped, wrong_version):
        entries, errors = read_producer_snapshot(path)
        assert entries == [] and [e.kind for e in errors] == [CorruptionKind.SNAPSHOT_CORRUPT]
