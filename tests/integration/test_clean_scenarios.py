"""The clean logs of kafka_harness.clean_scenarios really hold what the audit must accept (issue 4):
a log truncated by retention and one by DeleteRecords, producer restarts, epoch bumps and aborted
transactions. Every fact is decoded from the broker's files with kafka_log_decoder and compared
with the producers' manifest (delivery reports, librdkafka statistics, ListOffsets).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from kafka_harness.clean_scenarios import (
    CLEAN_TOPICS,
    DELETE_RECORDS_PRODUCER,
    DELETE_RECORDS_TOPIC,
    FENCED_SUCCESSOR,
    FENCED_ZOMBIE,
    IDLE_PRODUCER,
    LONG_RUN_PRODUCER,
    LONG_RUN_TOPIC,
    MIXED_OUTCOMES,
    MIXED_PRODUCER,
    REINIT_INSTANCES,
    RESTART_AFTER,
    RESTART_BEFORE,
    RESTART_TOPIC,
    RETAINED_PRODUCER,
    RETENTION_TOPIC,
    TRANSACTIONS_TOPIC,
    CleanManifest,
    reinit_client_id,
)
from kafka_harness.scenarios import ABORTED, COMMITTED, ProducerRun, partition_key
from kafka_log_decoder.checkpoints import read_offset_checkpoint
from kafka_log_decoder.discovery import LogDir, discover
from kafka_log_decoder.producer_snapshot import read_producer_snapshot
from kafka_log_decoder.rows import BatchHeader, SnapshotEntry
from tests.integration.conftest import CleanBrokerDump
from tests.integration.test_broker_decode import (
    DecodedPartition,
    decode_partition,
    expected_producer_state,
    snapshot_state,
    txn_index_entries,
)

pytestmark = pytest.mark.integration

RETENTION = partition_key(RETENTION_TOPIC.name)
DELETE_RECORDS = partition_key(DELETE_RECORDS_TOPIC.name)
RESTART = partition_key(RESTART_TOPIC.name)
LONG_RUN = [partition_key(LONG_RUN_TOPIC.name, p) for p in range(LONG_RUN_TOPIC.partitions)]
TRANSACTIONS = [partition_key(TRANSACTIONS_TOPIC.name, p) for p in range(TRANSACTIONS_TOPIC.partitions)]
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


@pytest.fixture(scope="module")
def log_dir(clean_broker_dump: CleanBrokerDump) -> LogDir:
    found = discover([clean_broker_dump.log_dir])
    assert len(found) == 1 and isinstance(found[0], LogDir), found
    return found[0]


@pytest.fixture(scope="module")
def manifest(clean_broker_dump: CleanBrokerDump) -> CleanManifest:
    return clean_broker_dump.manifest


@pytest.fixture(scope="module")
def decoded(log_dir: LogDir, manifest: CleanManifest) -> dict[str, DecodedPartition]:
    """Every clean partition, decoded once with records, keyed `<topic>-<partition>`."""
    directories = {f"{p.topic}-{p.partition}": p for p in log_dir.partitions}
    expected = [partition_key(spec.name, p) for spec in CLEAN_TOPICS for p in range(spec.partitions)]
    assert sorted(manifest.outcomes) == sorted(expected)
    missing = sorted(set(expected) - set(directories))
    assert not missing, f"no partition directory for {missing}"
    return {name: decode_partition(directories[name]) for name in expected}


def only_producer_id(runs: list[ProducerRun]) -> int:
    ids = {run.producer_id for run in runs}
    assert len(ids) == 1, ids
    return ids.pop()


def final_snapshot(partition: DecodedPartition) -> list[SnapshotEntry]:
    """The producer snapshot the clean shutdown wrote at the log end offset."""
    snapshot = partition.directory.snapshots[-1]
    log_end = partition.batches[-1].last_offset + 1
    assert snapshot.offset == log_end, f"{partition.directory.path}: last snapshot at {snapshot.offset}"
    entries, errors = read_producer_snapshot(snapshot.file.path)
    assert errors == [], [str(e) for e in errors]
    return entries


def log_start_checkpoint(log_dir: LogDir) -> dict[str, int]:
    entries, errors = read_offset_checkpoint(log_dir.checkpoint_files[LOG_START_OFFSET_CHECKPOINT].path)
    assert errors == [], [str(e) for e in errors]
    return {partition_key(e.topic, e.partition): e.offset for e in entries}


def batches_of(partition: DecodedPartition, producer_id: int) -> list[BatchHeader]:
    return [b for b in partition.batches if b.producer_id == producer_id]


# --- the whole log dir ---------------------------------------------------------------------------------


def test_the_broker_shut_down_cleanly_and_every_clean_partition_decodes(
    log_dir: LogDir, decoded: dict[str, DecodedPartition]
) -> None:
    assert log_dir.replica_id == 1 and log_dir.clean_shutdown is not None
    for name, partition in decoded.items():
        assert partition.errors == [], f"{name}: {[str(e) for e in partition.errors]}"
        assert all(b.crc_valid and b.magic == 2 for b in partition.batches), name
        assert partition.directory.excluded == [], f"{name}: {partition.directory.excluded}"
        assert partition.first_base_offset_per_segment == partition.segment_bases, name


def test_the_manifest_file_round_trips(clean_broker_dump: CleanBrokerDump, manifest: CleanManifest) -> None:
    written = Path(clean_broker_dump.log_dir).parent / "clean-manifest.json"
    assert CleanManifest.from_json(written.read_text()) == manifest


def test_data_on_disk_is_every_acknowledged_record_from_the_first_segment_on(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    """Deletion works a segment at a time: what is gone is exactly what lay below the first segment."""
    for name, partition in decoded.items():
        produced = manifest.produced.records_by_offset(name)
        first_segment = partition.segment_bases[0]
        on_disk = {o for b in partition.data_batches for o in range(b.base_offset, b.last_offset + 1)}
        assert on_disk == {o for o in produced if o >= first_segment}, name
        outcome = manifest.outcomes[name]
        assert first_segment <= outcome.log_start_offset, name
        assert outcome.deleted_offsets == sorted(o for o in produced if o < outcome.log_start_offset), name
        assert partition.batches[-1].last_offset + 1 == outcome.log_end_offset, name


def test_batches_carry_the_manifest_producer_id_epoch_and_sequences(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    for name, partition in decoded.items():
        produced = manifest.produced.records_by_offset(name)
        for batch in partition.data_batches:
            where = f"{name} batch at offset {batch.base_offset}"
            offsets = range(batch.base_offset, batch.last_offset + 1)
            run = produced[batch.base_offset][0]
            assert all(produced[o][0] is run for o in offsets), f"{where} mixes producer steps"
            assert (batch.producer_id, batch.producer_epoch) == (run.producer_id, run.producer_epoch), where
            assert batch.is_transactional == (run.transactional is not None), where
            assert [batch.base_sequence + o - batch.base_offset for o in offsets] == [
                produced[o][1].sequence for o in offsets
            ], where


def test_producer_snapshots_agree_with_the_batches_on_disk_and_keep_deleted_producers(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    """A snapshot holds each producer's last batch below its offset; producers whose batches there
    were all deleted stay in it (KIP-360, Kafka >= 2.5) and must have had records deleted."""
    kept_deleted = 0
    for name, partition in decoded.items():
        deleted_producers = {
            run.producer_id
            for run in manifest.produced.partitions[name]
            if set(run.offsets) & set(manifest.outcomes[name].deleted_offsets)
        }
        for snapshot in partition.directory.snapshots:
            entries, errors = read_producer_snapshot(snapshot.file.path)
            assert errors == [], [str(e) for e in errors]
            state = snapshot_state(entries)
            expected = expected_producer_state(partition.batches, snapshot.offset)
            where = f"{name}: {snapshot.file.path}"
            assert {pid: state[pid] for pid in expected if pid in state} == expected, where
            assert set(state) - set(expected) <= deleted_producers, where
            kept_deleted += len(set(state) - set(expected))
    assert kept_deleted >= 3


# --- retention -------------------------------------------------------------------------------------


def test_retention_moved_the_log_start_offset_to_a_segment_boundary(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[RETENTION]
    outcome = manifest.outcomes[RETENTION]
    assert outcome.log_start_offset > 0
    assert outcome.log_start_offset == outcome.log_start_offset_at_deletion
    assert partition.segment_bases[0] == outcome.log_start_offset == partition.batches[0].base_offset
    assert len(outcome.deleted_offsets) == outcome.log_start_offset  # everything below it was acked data
    assert len(partition.segment_bases) >= 2


def test_retention_at_a_segment_boundary_writes_no_log_start_offset_checkpoint_entry(log_dir: LogDir) -> None:
    """The broker checkpoints a log start offset only past the first segment's base offset
    (LogManager.checkpointLogStartOffsetsInDir): after retention the first segment is the truth."""
    assert RETENTION not in log_start_checkpoint(log_dir)


def test_the_retained_producer_history_starts_mid_sequence(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[RETENTION]
    producer_id = only_producer_id(manifest.runs_of(RETAINED_PRODUCER))
    first = partition.data_batches[0]
    assert first.producer_id == producer_id
    assert first.base_offset == manifest.outcomes[RETENTION].log_start_offset
    assert first.base_sequence > 0
    deleted_sequences = [
        r.sequence
        for run in manifest.runs_of(RETAINED_PRODUCER)
        for r in run.records
        if r.offset < first.base_offset
    ]
    assert first.base_sequence == max(deleted_sequences) + 1


def test_the_retained_producer_wrote_on_after_the_deletion_with_the_same_id(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[RETENTION]
    runs = manifest.runs_of(RETAINED_PRODUCER)
    batches = batches_of(partition, only_producer_id(runs))
    after = manifest.outcomes[RETENTION].log_end_offset_at_deletion
    assert after is not None and any(b.base_offset >= after for b in batches)
    assert {b.producer_epoch for b in batches} == {runs[0].producer_epoch}
    for previous, batch in pairwise(batches):
        assert batch.base_sequence == previous.last_sequence + 1, f"batch at offset {batch.base_offset}"


def test_the_idle_producer_has_no_batch_left_but_stays_in_the_final_snapshot(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[RETENTION]
    runs = manifest.runs_of(IDLE_PRODUCER)
    producer_id = only_producer_id(runs)
    assert batches_of(partition, producer_id) == []
    last = runs[-1].records[-1]
    assert last.offset < manifest.outcomes[RETENTION].log_start_offset
    snapshot = {e.producer_id: e for e in final_snapshot(partition)}
    assert producer_id in snapshot, f"producer {producer_id} left the snapshot: {sorted(snapshot)}"
    entry = snapshot[producer_id]
    assert (entry.producer_epoch, entry.last_sequence, entry.last_offset, entry.timestamp) == (
        runs[-1].producer_epoch,
        last.sequence,
        last.offset,
        last.timestamp,
    )


# --- DeleteRecords -------------------------------------------------------------------------------------


def test_delete_records_cut_a_batch_and_the_checkpoint_holds_the_log_start_offset(
    log_dir: LogDir, decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[DELETE_RECORDS]
    outcome = manifest.outcomes[DELETE_RECORDS]
    assert log_start_checkpoint(log_dir)[DELETE_RECORDS] == outcome.log_start_offset
    assert 0 < partition.segment_bases[0] < outcome.log_start_offset
    cut = [b for b in partition.batches if b.base_offset < outcome.log_start_offset <= b.last_offset]
    assert len(cut) == 1
    producer_id = only_producer_id(manifest.runs_of(DELETE_RECORDS_PRODUCER))
    assert cut[0].producer_id == producer_id
    after = outcome.log_end_offset_at_deletion
    assert after is not None and partition.batches[-1].base_offset >= after


# --- producer restarts and long runs -------------------------------------------------------------------


def test_a_restarted_idempotent_producer_gets_a_new_id_and_starts_at_sequence_zero(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[RESTART]
    before = only_producer_id(manifest.runs_of(RESTART_BEFORE))
    after = only_producer_id(manifest.runs_of(RESTART_AFTER))
    assert before != after
    old, new = batches_of(partition, before), batches_of(partition, after)
    assert old[-1].last_offset < new[0].base_offset
    assert (old[0].base_sequence, new[0].base_sequence) == (0, 0)
    assert old[-1].last_sequence > 0
    assert {e.producer_id for e in final_snapshot(partition)} == {before, after}


@pytest.mark.parametrize("name", LONG_RUN)
def test_a_long_running_producer_has_contiguous_sequences_across_batches_and_segments(
    name: str, decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[name]
    producer_id = only_producer_id(manifest.runs_of(LONG_RUN_PRODUCER))
    batches = partition.data_batches
    assert {b.producer_id for b in batches} == {producer_id}
    assert len(batches) >= 60 and len(partition.segment_bases) >= 3
    assert batches[0].base_sequence == 0
    for previous, batch in pairwise(batches):
        assert batch.base_sequence == previous.last_sequence + 1, f"{name} batch at {batch.base_offset}"


# --- transactions -----------------------------------------------------------------------------------


def test_a_reinitialised_transactional_id_keeps_its_producer_id_and_bumps_the_epoch(
    decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    instances = [manifest.runs_of(reinit_client_id(i)) for i in range(REINIT_INSTANCES)]
    producer_id = only_producer_id([run for runs in instances for run in runs])
    epochs = [{run.producer_epoch for run in runs} for runs in instances]
    assert all(len(e) == 1 for e in epochs), epochs
    first = min(epochs[0])
    assert [min(e) for e in epochs] == [first + i for i in range(REINIT_INSTANCES)]
    for name in TRANSACTIONS:
        data = [b for b in batches_of(decoded[name], producer_id) if not b.is_control]
        assert [b.producer_epoch for b in data] == sorted(b.producer_epoch for b in data), name
        # Each new epoch starts its sequences at 0 again.
        for previous, batch in pairwise(data):
            expected = 0 if batch.producer_epoch != previous.producer_epoch else previous.last_sequence + 1
            assert batch.base_sequence == expected, f"{name} batch at {batch.base_offset}"
    assert {b.producer_epoch for b in batches_of(decoded[TRANSACTIONS[0]], producer_id)} == {
        first + i for i in range(REINIT_INSTANCES)
    }


@pytest.mark.parametrize("name", TRANSACTIONS)
def test_each_transaction_ends_with_its_commit_or_abort_marker(
    name: str, decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[name]
    transactions = manifest.produced.transactions(name)
    markers = partition.control_batches
    assert [(m.producer_id, m.control_type) for m in markers] == [
        (runs[0].producer_id, "COMMIT" if runs[0].transactional == COMMITTED else "ABORT")
        for runs in transactions
    ]
    assert sum(m.control_type == "ABORT" for m in markers) >= 3
    for marker, runs in zip(markers, transactions, strict=True):
        assert runs[-1].offsets[-1] < marker.base_offset, f"{name} marker at {marker.base_offset}"
        assert marker.producer_epoch >= runs[0].producer_epoch


def test_the_mixed_producer_commits_and_aborts_in_turn(manifest: CleanManifest) -> None:
    runs = manifest.runs_of(MIXED_PRODUCER)
    by_transaction: dict[int, set[str | None]] = {}
    for run in runs:
        assert run.transaction is not None
        by_transaction.setdefault(run.transaction, set()).add(run.transactional)
    outcomes = [by_transaction[n] for n in sorted(by_transaction)]
    assert outcomes == [{COMMITTED} if commit else {ABORTED} for commit in MIXED_OUTCOMES]


@pytest.mark.parametrize("name", TRANSACTIONS)
def test_the_fenced_zombie_transaction_was_aborted_by_the_coordinator_at_a_bumped_epoch(
    name: str, decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    """InitProducerId on an open transaction: the coordinator bumps the epoch to write the ABORT
    markers (so they carry the zombie's epoch + 1), then bumps it again for the successor."""
    zombie = [
        run for run in manifest.runs_of(FENCED_ZOMBIE) if run.partition == decoded[name].directory.partition
    ]
    successor = manifest.runs_of(FENCED_SUCCESSOR)
    producer_id = only_producer_id(zombie + successor)
    assert zombie and all(run.transactional == ABORTED for run in zombie)
    zombie_epoch = zombie[0].producer_epoch
    batches = batches_of(decoded[name], producer_id)
    kinds = [(b.control_type, b.producer_epoch) for b in batches]
    assert kinds == [
        (None, zombie_epoch),
        ("ABORT", zombie_epoch + 1),
        (None, zombie_epoch + 2),
        ("COMMIT", zombie_epoch + 2),
    ]
    assert {run.producer_epoch for run in successor} == {zombie_epoch + 2}


@pytest.mark.parametrize("name", TRANSACTIONS)
def test_aborted_transactions_are_in_the_txnindex(
    name: str, decoded: dict[str, DecodedPartition], manifest: CleanManifest
) -> None:
    partition = decoded[name]
    markers = partition.control_batches
    expected = [
        (runs[0].producer_id, runs[0].offsets[0], marker.base_offset)
        for runs, marker in zip(manifest.produced.transactions(name), markers, strict=True)
        if runs[0].transactional == ABORTED
    ]
    assert len(expected) >= 3
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in txn_index_entries(partition)] == expected


def test_only_the_transactions_topic_has_markers(decoded: dict[str, DecodedPartition]) -> None:
    for name, partition in decoded.items():
        if name not in TRANSACTIONS:
            assert partition.control_batches == [], name
