"""Decoding what a real Kafka 4.3.1 broker wrote gives back exactly what the scenarios produced.

The broker ran kafka_harness.scenarios and was stopped cleanly (see conftest.py); every expectation
comes from the producers' manifest (delivery reports + librdkafka statistics), never from the decoder.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from kafka_harness.dump_log_segments import run_dump_log_segments
from kafka_harness.scenarios import (
    ABORTED,
    CODEC_TOPICS,
    COMMITTED,
    HEADERS_TOPIC,
    PLAIN_TOPIC,
    SEGMENTED_TOPIC,
    TRANSACTIONAL_TOPIC,
    Manifest,
    partition_key,
)
from kafka_log_decoder.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from kafka_log_decoder.discovery import LogDir, PartitionDir, discover
from kafka_log_decoder.dump_log_text import parse_dump_log_text
from kafka_log_decoder.errors import DecodeError
from kafka_log_decoder.index_files import read_txn_index
from kafka_log_decoder.producer_snapshot import read_producer_snapshot
from kafka_log_decoder.rows import BatchHeader, Record, SnapshotEntry, TxnIndexEntry
from kafka_log_decoder.segment import read_log_segment

pytestmark = pytest.mark.integration


@dataclass
class DecodedPartition:
    """Everything decoded from one partition directory, in offset order."""

    directory: PartitionDir
    batches: list[BatchHeader] = field(default_factory=list)
    records: dict[int, list[Record]] = field(default_factory=dict)  # by batch base offset
    segment_bases: list[int] = field(default_factory=list)
    first_base_offset_per_segment: list[int | None] = field(default_factory=list)
    errors: list[DecodeError] = field(default_factory=list)

    @property
    def data_batches(self) -> list[BatchHeader]:
        return [b for b in self.batches if not b.is_control]

    @property
    def control_batches(self) -> list[BatchHeader]:
        return [b for b in self.batches if b.is_control]


def decode_partition(directory: PartitionDir) -> DecodedPartition:
    decoded = DecodedPartition(directory)
    for segment in directory.segments:
        decoded.segment_bases.append(segment.base_offset)
        first: int | None = None
        current: BatchHeader | None = None
        for item in read_log_segment(segment.log.path, records=True):
            if isinstance(item, DecodeError):
                decoded.errors.append(item)
            elif isinstance(item, BatchHeader):
                current = item
                decoded.batches.append(item)
                decoded.records[item.base_offset] = []
                if first is None:
                    first = item.base_offset
            else:
                assert current is not None, f"record before any batch in {segment.log.path}"
                decoded.records[current.base_offset].append(item)
        decoded.first_base_offset_per_segment.append(first)
    return decoded


@pytest.fixture(scope="module")
def log_dir(broker_dump: tuple[Path, Manifest]) -> LogDir:
    found = discover([broker_dump[0]])
    assert len(found) == 1 and isinstance(found[0], LogDir), found
    return found[0]


@pytest.fixture(scope="module")
def manifest(broker_dump: tuple[Path, Manifest]) -> Manifest:
    return broker_dump[1]


@pytest.fixture(scope="module")
def decoded(log_dir: LogDir, manifest: Manifest) -> dict[str, DecodedPartition]:
    """Every scenario partition, decoded once with records, keyed `<topic>-<partition>`."""
    directories = {f"{p.topic}-{p.partition}": p for p in log_dir.partitions}
    missing = sorted(set(manifest.partitions) - set(directories))
    assert not missing, f"no partition directory for {missing}"
    return {name: decode_partition(directories[name]) for name in manifest.partitions}


def transactional_partitions() -> list[str]:
    return [partition_key(TRANSACTIONAL_TOPIC.name, p) for p in range(TRANSACTIONAL_TOPIC.partitions)]


# --- whole log dir -----------------------------------------------------------------------------


def test_the_manifest_on_disk_reads_back_as_the_recording(broker_dump: tuple[Path, Manifest]) -> None:
    """The workers of a parallel test run that did not record read the recording's `manifest.json`
    (conftest.recorded_once): it must give back the very manifest."""
    log_dir, manifest = broker_dump
    written = log_dir.parent / "manifest.json"
    assert Manifest.from_json(written.read_text()) == manifest
    assert manifest.partitions and all(runs for runs in manifest.partitions.values())


def test_every_batch_in_the_log_dir_decodes_with_a_valid_crc(log_dir: LogDir) -> None:
    """Including the broker's own `__cluster_metadata` and `__transaction_state` logs."""
    checked = 0
    for directory in log_dir.partitions:
        decoded = decode_partition(directory)
        assert decoded.errors == [], f"{directory.path}: {[str(e) for e in decoded.errors]}"
        bad = [(b.base_offset, b.position) for b in decoded.batches if not b.crc_valid]
        assert bad == [], f"{directory.path}: CRC mismatch at (offset, position) {bad}"
        assert all(b.magic == 2 for b in decoded.batches), directory.path
        checked += len(decoded.batches)
    assert checked > 100


def test_the_log_dir_is_the_one_node_and_shut_down_cleanly(log_dir: LogDir) -> None:
    assert log_dir.replica_id == 1
    assert log_dir.clean_shutdown is not None


# --- offsets, producer ids, epochs and sequences --------------------------------------------------


def test_offsets_are_contiguous_from_zero_in_every_scenario_partition(
    decoded: dict[str, DecodedPartition],
) -> None:
    for name, partition in decoded.items():
        assert partition.errors == []
        expected_base = 0
        for batch in partition.batches:
            assert batch.base_offset == expected_base, f"{name}: batch at {batch.position} of {batch.file}"
            assert batch.last_offset - batch.base_offset + 1 == batch.count, f"{name}: {batch}"
            expected_base = batch.last_offset + 1


def test_each_segment_is_named_after_its_first_batch(decoded: dict[str, DecodedPartition]) -> None:
    for name, partition in decoded.items():
        assert partition.first_base_offset_per_segment == partition.segment_bases, name


def test_the_segmented_topic_has_several_segments_and_producer_snapshots(
    decoded: dict[str, DecodedPartition],
) -> None:
    partition = decoded[partition_key(SEGMENTED_TOPIC.name)]
    assert len(partition.segment_bases) >= 3
    assert len(partition.directory.snapshots) >= 2
    # Rolls snapshot at the new segment's base; the clean shutdown adds one at the log end.
    snapshot_offsets = [s.offset for s in partition.directory.snapshots]
    assert set(partition.segment_bases[1:]) <= set(snapshot_offsets)


def test_data_offsets_are_exactly_the_acknowledged_ones(
    decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    for name, partition in decoded.items():
        in_log = {o for b in partition.data_batches for o in range(b.base_offset, b.last_offset + 1)}
        assert in_log == set(manifest.records_by_offset(name)), name


def test_batches_carry_the_manifest_producer_id_epoch_and_sequences(
    decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    for name, partition in decoded.items():
        produced = manifest.records_by_offset(name)
        for batch in partition.data_batches:
            where = f"{name} batch at offset {batch.base_offset}"
            offsets = range(batch.base_offset, batch.last_offset + 1)
            runs = [produced[o][0] for o in offsets]
            assert all(run is runs[0] for run in runs), f"{where} mixes producer steps"
            run = runs[0]
            assert (batch.producer_id, batch.producer_epoch) == (run.producer_id, run.producer_epoch), where
            assert batch.is_transactional == (run.transactional is not None), where
            if run.producer_id == NO_PRODUCER_ID:
                assert (batch.base_sequence, batch.last_sequence) == (NO_SEQUENCE, NO_SEQUENCE), where
                continue
            # The sequence of the record at offset o is base_sequence + (o - base_offset).
            expected = [produced[o][1].sequence for o in offsets]
            assert [batch.base_sequence + o - batch.base_offset for o in offsets] == expected, where
            assert batch.last_sequence == expected[-1], where


def test_record_sequences_and_timestamps_equal_the_manifest(
    decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    for name, partition in decoded.items():
        produced = manifest.records_by_offset(name)
        for batch in partition.data_batches:
            for record in partition.records[batch.base_offset]:
                _, expected = produced[record.offset]
                assert record.sequence == expected.sequence, f"{name} offset {record.offset}"
                assert record.timestamp == expected.timestamp, f"{name} offset {record.offset}"


def test_scenarios_cover_two_producers_a_restart_and_an_epoch_bump(manifest: Manifest) -> None:
    """Guards the harness: the segmented partition has three producer ids (the second instance and
    the restarted one are new ids); the restarted transactional producer kept its id, epoch + 1."""
    segmented = manifest.partitions[partition_key(SEGMENTED_TOPIC.name)]
    assert len({run.producer_id for run in segmented}) == 3
    transactional = manifest.partitions[partition_key(TRANSACTIONAL_TOPIC.name)]
    identities = sorted({(run.producer_id, run.producer_epoch) for run in transactional})
    assert len(identities) == 2
    (pid_a, epoch_a), (pid_b, epoch_b) = identities
    assert pid_a == pid_b and epoch_b == epoch_a + 1


# --- producer snapshots -----------------------------------------------------------------------------


def expected_producer_state(batches: list[BatchHeader], end_offset: int) -> dict[int, tuple[int, ...]]:
    """What `ProducerStateManager` holds for batches below `end_offset`: per producer id the last
    data batch (last_sequence, last_offset, offset_delta), the epoch, the last timestamp (max
    timestamp of the last data batch or marker), the coordinator epoch and the open transaction."""
    state: dict[int, dict[str, int]] = {}
    for batch in batches:
        if batch.last_offset >= end_offset or batch.producer_id == NO_PRODUCER_ID:
            continue
        entry = state.setdefault(
            batch.producer_id,
            {
                "epoch": batch.producer_epoch,
                "last_sequence": NO_SEQUENCE,
                "last_offset": -1,
                "offset_delta": 0,
                "timestamp": -1,
                "coordinator_epoch": -1,
                "current_txn_first_offset": -1,
            },
        )
        entry["epoch"] = batch.producer_epoch
        entry["timestamp"] = batch.max_timestamp
        if batch.is_control:
            # ProducerAppendInfo.appendEndTxnMarker: the transaction ends, sequences stay.
            assert batch.coordinator_epoch is not None
            entry["coordinator_epoch"] = batch.coordinator_epoch
            entry["current_txn_first_offset"] = -1
        else:
            entry["last_sequence"] = batch.last_sequence
            entry["last_offset"] = batch.last_offset
            entry["offset_delta"] = batch.last_offset - batch.base_offset
            if batch.is_transactional and entry["current_txn_first_offset"] < 0:
                entry["current_txn_first_offset"] = batch.base_offset
    return {pid: tuple(entry.values()) for pid, entry in state.items()}


def snapshot_state(entries: list[SnapshotEntry]) -> dict[int, tuple[int, ...]]:
    return {
        e.producer_id: (
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in entries
    }


def test_producer_snapshots_hold_the_last_batch_of_each_producer_before_their_offset(
    decoded: dict[str, DecodedPartition],
) -> None:
    compared = 0
    for name, partition in decoded.items():
        for snapshot in partition.directory.snapshots:
            entries, errors = read_producer_snapshot(snapshot.file.path)
            assert errors == [], f"{snapshot.file.path}: {[str(e) for e in errors]}"
            assert all(e.snapshot_offset == snapshot.offset for e in entries)
            expected = expected_producer_state(partition.batches, snapshot.offset)
            assert snapshot_state(entries) == expected, f"{name}: {snapshot.file.path}"
            compared += len(entries)
    assert compared >= 10


def test_the_segmented_topic_snapshots_track_all_three_producers(
    decoded: dict[str, DecodedPartition],
) -> None:
    """The roll snapshots show the producers joining; the last one holds the first producer's
    last batch although it lies in an earlier segment."""
    partition = decoded[partition_key(SEGMENTED_TOPIC.name)]
    sizes = [len(read_producer_snapshot(s.file.path)[0]) for s in partition.directory.snapshots]
    assert sizes[0] == 1 and sizes[-1] == 3, sizes


def test_a_clean_shutdown_leaves_a_snapshot_at_every_log_end(decoded: dict[str, DecodedPartition]) -> None:
    for name, partition in decoded.items():
        log_end = partition.batches[-1].last_offset + 1
        assert partition.directory.snapshots[-1].offset == log_end, name


# --- transactions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", transactional_partitions())
def test_transaction_markers_follow_each_transaction(
    name: str, decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    partition = decoded[name]
    transactions = manifest.transactions(name)
    markers = partition.control_batches
    assert [m.control_type for m in markers] == [
        "COMMIT" if runs[0].transactional == COMMITTED else "ABORT" for runs in transactions
    ]
    next_first_offsets = [runs[0].offsets[0] for runs in transactions[1:]] + [
        partition.batches[-1].last_offset + 1
    ]
    for marker, runs, next_first in zip(markers, transactions, next_first_offsets, strict=True):
        where = f"{name} marker at offset {marker.base_offset}"
        assert runs[-1].offsets[-1] < marker.base_offset < next_first, where
        assert marker.count == 1 and marker.base_offset == marker.last_offset, where
        assert (marker.base_sequence, marker.last_sequence) == (NO_SEQUENCE, NO_SEQUENCE), where
        assert marker.is_transactional and marker.is_control, where
        assert marker.coordinator_epoch is not None and marker.coordinator_epoch >= 0, where
        # librdkafka 2.16 uses transactions V1: the marker keeps the data's epoch (V2 would bump it).
        assert (marker.producer_id, marker.producer_epoch) == (runs[0].producer_id, runs[0].producer_epoch), (
            where
        )


def test_only_the_transactional_topic_has_markers(decoded: dict[str, DecodedPartition]) -> None:
    for name, partition in decoded.items():
        if name not in transactional_partitions():
            assert partition.control_batches == [], name


def txn_index_entries(partition: DecodedPartition) -> list[TxnIndexEntry]:
    entries: list[TxnIndexEntry] = []
    for segment in partition.directory.segments:
        if segment.txnindex is None:
            continue
        for item in read_txn_index(segment.txnindex.path):
            assert not isinstance(item, DecodeError), str(item)
            entries.append(item)
    return entries


@pytest.mark.parametrize("name", transactional_partitions())
def test_aborted_transactions_are_in_the_txnindex(
    name: str, decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    partition = decoded[name]
    markers = partition.control_batches
    transactions = manifest.transactions(name)
    expected = [
        (runs[0].producer_id, runs[0].offsets[0], marker.base_offset)
        for runs, marker in zip(transactions, markers, strict=True)
        if runs[0].transactional == ABORTED
    ]
    assert expected, f"{name}: the scenario should abort a transaction here"
    entries = txn_index_entries(partition)
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == expected
    assert all(e.version == 0 for e in entries)
    # One transactional producer: nothing else holds the last stable offset back.
    assert all(e.last_stable_offset == e.last_offset + 1 for e in entries)


def test_partitions_without_aborted_transactions_have_no_txnindex_entries(
    decoded: dict[str, DecodedPartition],
) -> None:
    for name, partition in decoded.items():
        if name not in transactional_partitions():
            assert txn_index_entries(partition) == [], name


# --- records: codecs, headers, nulls ------------------------------------------------------------------


def assert_records_equal_manifest(partition: DecodedPartition, manifest: Manifest, name: str) -> int:
    produced = manifest.records_by_offset(name)
    seen = 0
    for batch in partition.data_batches:
        records = partition.records[batch.base_offset]
        assert [r.offset for r in records] == list(range(batch.base_offset, batch.last_offset + 1))
        for record in records:
            _, expected = produced[record.offset]
            where = f"{name} offset {record.offset}"
            assert record.key == expected.key_bytes(), where
            assert record.value == expected.value_bytes(), where
            assert record.key_size == (-1 if expected.key is None else len(expected.key_bytes() or b"")), (
                where
            )
            assert record.value_size == (
                -1 if expected.value is None else len(expected.value_bytes() or b"")
            ), where
            assert record.header_keys == [k for k, _ in expected.headers], where
            assert record.header_values == [None if v is None else v.encode() for _, v in expected.headers], (
                where
            )
            seen += 1
    return seen


@pytest.mark.parametrize("codec", sorted(CODEC_TOPICS))
def test_compressed_batches_decode_to_the_produced_records(
    codec: str, decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    name = partition_key(CODEC_TOPICS[codec].name)
    partition = decoded[name]
    assert {b.compression for b in partition.data_batches} == {codec}
    assert assert_records_equal_manifest(partition, manifest, name) == len(manifest.records_by_offset(name))


def test_null_and_empty_keys_values_and_headers_round_trip(
    decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    name = partition_key(HEADERS_TOPIC.name)
    assert assert_records_equal_manifest(decoded[name], manifest, name) == len(
        manifest.records_by_offset(name)
    )


@pytest.mark.parametrize(
    "topic", [SEGMENTED_TOPIC.name, TRANSACTIONAL_TOPIC.name, PLAIN_TOPIC.name], ids=lambda t: t
)
def test_uncompressed_records_equal_the_produced_ones(
    topic: str, decoded: dict[str, DecodedPartition], manifest: Manifest
) -> None:
    for name in [n for n in decoded if n.rpartition("-")[0] == topic]:
        partition = decoded[name]
        assert {b.compression for b in partition.data_batches} == {"none"}
        assert assert_records_equal_manifest(partition, manifest, name) > 0


def test_the_non_idempotent_topic_has_no_producer_id(decoded: dict[str, DecodedPartition]) -> None:
    batches = decoded[partition_key(PLAIN_TOPIC.name)].batches
    assert batches
    for batch in batches:
        assert (batch.producer_id, batch.producer_epoch) == (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        assert (batch.base_sequence, batch.last_sequence) == (NO_SEQUENCE, NO_SEQUENCE)
        assert not batch.is_transactional


# --- cross-check with Kafka's own tool ---------------------------------------------------------------


def test_kafka_dump_log_segments_agrees_with_the_decoder(decoded: dict[str, DecodedPartition]) -> None:
    """DumpLogSegments 4.3.1 (one JVM for every scenario segment and snapshot), parsed by
    dump_log_text, gives the same batches, data records and snapshot entries as the binary decoders.
    The text lacks base timestamps and record bytes, and it prints marker records, which the
    binary decoder folds into the control batch header."""
    logs = [segment.log.path for p in decoded.values() for segment in p.directory.segments]
    snapshots = [s.file.path for p in decoded.values() for s in p.directory.snapshots]
    items = list(parse_dump_log_text(run_dump_log_segments(logs + snapshots).splitlines()))
    assert [i for i in items if isinstance(i, DecodeError)] == []

    def header_fields(batch: BatchHeader) -> dict[str, object]:
        return {k: v for k, v in asdict(batch).items() if k != "base_timestamp"}

    def record_fields(record: Record) -> tuple[object, ...]:
        return (
            record.file,
            record.offset,
            record.timestamp,
            record.sequence,
            record.key_size,
            record.value_size,
        )

    binary_batches = [b for p in decoded.values() for b in p.batches]
    text_batches = [i for i in items if isinstance(i, BatchHeader)]
    assert [header_fields(b) for b in text_batches] == [header_fields(b) for b in binary_batches]
    data_batch_positions = {(b.file, b.position) for b in binary_batches if not b.is_control}
    text_records = [
        record_fields(r)
        for r in items
        if isinstance(r, Record) and (r.file, r.batch_position) in data_batch_positions
    ]
    binary_records = [record_fields(r) for p in decoded.values() for rs in p.records.values() for r in rs]
    assert text_records == binary_records
    text_entries = sorted(
        (e for e in items if isinstance(e, SnapshotEntry)), key=lambda e: (e.file, e.producer_id)
    )
    binary_entries = sorted(
        (e for path in snapshots for e in read_producer_snapshot(path)[0]),
        key=lambda e: (e.file, e.producer_id),
    )
    assert text_entries == binary_entries
