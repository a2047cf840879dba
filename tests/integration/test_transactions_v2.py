"""Transactions V2 (KIP-890 part 2) as a real Kafka 4.3.1 broker writes them for Kafka's own Java
producer: no finding per transaction.

From Kafka 4.0 a new cluster finalizes `transaction.version` 2, and the Java client then ends every
transaction with an epoch bump: the coordinator writes each COMMIT or ABORT marker one producer epoch
above the transaction's data, and the producer's next transaction goes on at the marker's epoch from
sequence 0 (librdkafka, which the other real-broker tests use, still speaks V1: its markers carry the
data's epoch). Read as KIP-360 recoveries, that is one `EPOCH_BUMP` per transaction per partition. The
log here also holds the epoch bumps that are events: a producer killed with a transaction open, which
the coordinator aborts when a new instance of its transactional id starts, and a transaction left idle
past its timeout, aborted by the coordinator and followed by a re-initialised producer.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness import java_producer
from kafka_harness.broker import KafkaBroker, wait_for_markers
from kafka_harness.faults import LogBatch, PartitionLog
from kafka_harness.jars import HarnessError
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from tests.integration.test_dump_log_text_crosscheck import cross_check, dumped_files
from tests.table_rows import above_info, kinds_above_info

TOPIC = "transactions-v2"
COPY = "transactions-v2-copy"
COMMITS = 20


class V2Dump(NamedTuple):
    log_dir: Path
    said: dict[str, list[str]]


def _kill_with_transaction_open(bootstrap: str, transactional_id: str) -> list[str]:
    process = subprocess.Popen(
        java_producer.command(bootstrap, TOPIC, transactional_id, "open"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    said = []
    try:
        for line in process.stdout:
            said.append(line.strip())
            if line.strip() == "open":
                break
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    if said[-1:] != ["open"]:
        raise HarnessError(f"the Java producer ended before its transaction was open: {said}")
    return said


@pytest.fixture(scope="module")
def v2_log(tmp_path_factory: pytest.TempPathFactory) -> V2Dump:
    work = tmp_path_factory.mktemp("transactions-v2-broker")
    # The coordinator looks for timed-out transactions every second instead of every 10 s.
    broker = KafkaBroker(work, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    said: dict[str, list[str]] = {}
    with broker:
        broker.create_topic(TOPIC, partitions=2)
        said["killed"] = _kill_with_transaction_open(broker.bootstrap, "killed")
        said["killed-again"] = java_producer.run(broker.bootstrap, TOPIC, "killed", "commits", "6")
        said["idle"] = java_producer.run(broker.bootstrap, TOPIC, "idle", "idle")
        said["many"] = java_producer.run(broker.bootstrap, TOPIC, "many", "commits", str(COMMITS))
        broker.create_topic(COPY, partitions=2)
        said["copy"] = java_producer.run(broker.bootstrap, COPY, "copier", "copy", TOPIC)
        # The copy's last markers are written after its commit returned (as every transaction's).
        wait_for_markers(
            broker.admin(), [(t, p) for t in (TOPIC, COPY) for p in range(2)] + [("__consumer_offsets", 0)]
        )
    return V2Dump(broker.log_dir, said)


def batches(log_dir: Path, partition: int, topic: str = TOPIC) -> list[BatchHeader]:
    return [
        b
        for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log"))
        for b in read_log_segment(segment)
        if isinstance(b, BatchHeader) and b.producer_id >= 0
    ]


def by_producer(rows: list[BatchHeader]) -> dict[int, list[BatchHeader]]:
    out: dict[int, list[BatchHeader]] = defaultdict(list)
    for b in sorted(rows, key=lambda b: b.base_offset):
        out[b.producer_id].append(b)
    return out


def epoch_raises(log_dir: Path, partition: int) -> tuple[int, set[tuple[int, int]]]:
    """From the log: the markers one epoch above the data they close that the producer's next batch
    goes on from (epoch kept, sequence 0), and the (offset, previous row's offset) of every data batch
    at sequence 0 above its producer's previous row's epoch (a bump the marker did not make)."""
    raised_by_marker, above = 0, set()
    for rows in by_producer(batches(log_dir, partition)).values():
        for before, batch, after in zip([None, *rows[:-1]], rows, [*rows[1:], None], strict=True):
            if before is None:
                continue
            epoch, previous_epoch = batch.producer_epoch, before.producer_epoch
            closes = batch.is_control and not before.is_control and epoch == previous_epoch + 1
            goes_on = after is None or (after.producer_epoch == epoch and after.base_sequence == 0)
            raised_by_marker += closes and goes_on
            if not batch.is_control and batch.base_sequence == 0 and epoch > previous_epoch:
                above.add((batch.base_offset, before.base_offset))
    return raised_by_marker, above


@pytest.fixture(scope="module")
def findings(spark: Any, v2_log: V2Dump, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return audited_log(spark, v2_log.log_dir, tmp_path_factory.mktemp("transactions-v2-audit"))


def test_the_broker_wrote_version_2_transactions(v2_log: V2Dump) -> None:
    """The precondition: every transaction's marker is one epoch above its data, and the coordinator
    aborted the killed producer's open transaction and the idle one."""
    assert v2_log.said["idle"][3] == "late commit refused: InvalidTxnStateException"
    transactions = 1 + 6 + 6 + COMMITS  # each marker in both partitions
    for partition in (0, 1):
        raised, above = epoch_raises(v2_log.log_dir, partition)
        assert raised >= transactions
        rows = by_producer(batches(v2_log.log_dir, partition))
        aborts_then_higher = [
            (marker.base_offset, batch.base_offset)
            for producer in rows.values()
            for marker, batch in pairwise(producer)
            if marker.control_type == "ABORT" and batch.producer_epoch > marker.producer_epoch
        ]
        # The killed producer's new instance, and the idle transaction's re-initialised producer.
        assert len(aborts_then_higher) >= 2 and len(above) >= 2


def test_no_finding_above_info(findings: list[dict[str, Any]]) -> None:
    """In the producers' topic, the copy and `__consumer_offsets` (the copier's transactional offset
    commits, each closed by a V2 marker too)."""
    assert kinds_above_info(findings) == Counter()


def test_the_copy_and_its_offset_commits_have_no_finding(
    v2_log: V2Dump, findings: list[dict[str, Any]]
) -> None:
    """Exactly-once consume-transform-produce: one transaction per poll of at most 10 records, every
    one ended by a marker one epoch up, in the copy's partitions and in `__consumer_offsets`."""
    committed = sum(line.startswith("committed") for said in v2_log.said.values() for line in said)
    assert v2_log.said["copy"] == [f"copied {10 * committed}"]
    (commits,) = by_producer(batches(v2_log.log_dir, 0, "__consumer_offsets")).values()
    markers = [(data, marker) for data, marker in pairwise(commits) if marker.is_control]
    assert len(markers) >= committed
    assert all(marker.producer_epoch == data.producer_epoch + 1 for data, marker in markers)
    assert [f for f in findings if f["topic"] in (COPY, "__consumer_offsets")] == []


def test_epoch_bumps_only_where_the_producer_went_above_the_marker(
    v2_log: V2Dump, findings: list[dict[str, Any]]
) -> None:
    """A transaction's own end is no finding; a producer re-initialised above its last marker's epoch
    (the coordinator's aborts) is an `EPOCH_BUMP` at exactly that batch."""
    for partition in (0, 1):
        _, above = epoch_raises(v2_log.log_dir, partition)
        bumps = {
            (f["first_offset"], f["related_offset"])
            for f in findings
            if f["kind"] == "EPOCH_BUMP" and (f["topic"], f["partition"]) == (TOPIC, partition)
        }
        assert bumps == above
    assert {f["kind"] for f in findings} == {"EPOCH_BUMP"}


def test_kafkas_dump_log_segments_reads_the_v2_markers_as_our_decoders_do(v2_log: V2Dump) -> None:
    """The markers one epoch up are what Kafka's own tool prints too, field by field."""
    files = [p for topic in (TOPIC, COPY) for p in dumped_files(v2_log.log_dir / f"{topic}-0")]
    seen = cross_check(files)
    assert seen["control:COMMIT"] >= 20 and seen["control:ABORT"] >= 4, seen


# Short.MAX_VALUE: the epoch of the last marker a producer id can carry. Under transactions V2 the
# coordinator ends a transaction whose data is at MAX - 1 with a marker at MAX and hands the producer
# a new producer id at epoch 0 (`TransactionMetadata.prepareAbortOrCommit` and `prepareComplete`).
LAST_EPOCH = (1 << 15) - 1


def _wrapped(epoch: int) -> int:
    """`epoch` as an int16 holds it (librdkafka #3720: a local bump past 32767 wraps to -32768)."""
    return (epoch + (1 << 15)) % (1 << 16) - (1 << 15)


def at_the_last_epoch(log_dir: Path, out: Path, *, wrap: bool) -> tuple[Path, dict[int, list[LogBatch]]]:
    """`log_dir`'s partitions of the producers' topic, with the `many` producer's transactions (the last
    in each partition) rewritten as a producer id that runs out of epochs halfway: the first half's
    epochs raised so that its last marker carries `LAST_EPOCH`, the second half under a new producer id
    from epoch 0, as the coordinator rotates it. `wrap`: the second half stays under the old producer
    id, its epochs wrapped past `LAST_EPOCH` to -32768 and up (no broker accepts that from a client).
    Returns the log directory and, per partition, the second half's batches."""
    second: dict[int, list[LogBatch]] = {}
    logs = [PartitionLog.read(log_dir / f"{TOPIC}-{partition}") for partition in (0, 1)]
    new_id = 1 + max(b.producer_id for log in logs for b in log.batches)
    for partition, log in enumerate(logs):
        many = log.producer_batches(log.batches[-1].producer_id)
        markers = [i for i, b in enumerate(many) if b.is_control]
        assert len(markers) == COMMITS and many[-1].is_control
        half = markers[COMMITS // 2 - 1] + 1
        first, second[partition] = many[:half], many[half:]
        raise_by = LAST_EPOCH - first[-1].producer_epoch
        for batch in first:
            batch.producer_epoch += raise_by
        restart = second[partition][0].producer_epoch
        for batch in second[partition]:
            if wrap:
                batch.producer_epoch = _wrapped(batch.producer_epoch + raise_by + 1)
            else:
                batch.producer_id = new_id
                batch.producer_epoch -= restart
        log.write(out / log.name)
    return out, second


def audited_log(spark: Any, log_dir: Path, out: Path) -> list[dict[str, Any]]:
    run_ingest(spark, IngestOptions(inputs=[LabeledPath("v2", str(log_dir))], output=str(out)))
    return [r.asDict() for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()]


def test_a_producer_id_that_runs_out_of_epochs_and_goes_on_under_a_new_one_has_no_finding(
    spark: Any, v2_log: V2Dump, findings: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Epoch exhaustion as a V2 coordinator handles it: data at 32766, its marker at 32767, and the
    next transactions under a new producer id from epoch 0 and sequence 0. The epochs' edge is no
    event: the same findings (the re-initialised producers' bumps) as the log as written."""
    log_dir, second = at_the_last_epoch(v2_log.log_dir, tmp_path / "logs", wrap=False)
    for partition in (0, 1):
        rows = by_producer(batches(log_dir, partition))
        (old,) = [r for r in rows.values() if r[-1].producer_epoch == LAST_EPOCH]
        new = rows[second[partition][0].producer_id]
        assert old[-1].is_control and old[-2].producer_epoch == LAST_EPOCH - 1
        assert (new[0].producer_epoch, new[0].base_sequence) == (0, 0)
        assert old[-1].base_offset < new[0].base_offset and new[0].producer_id not in {
            b.producer_id for b in old
        }
    found = audited_log(spark, log_dir, tmp_path / "out")
    assert kinds_above_info(found) == Counter()

    def topic_events(rows: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
        return sorted((f["kind"], f["partition"], f["first_offset"]) for f in rows if f["topic"] == TOPIC)

    assert topic_events(found) == topic_events(findings)


def test_an_epoch_wrapped_past_32767_is_a_regression_at_every_batch_and_marker_after_it(
    spark: Any, v2_log: V2Dump, tmp_path: Path
) -> None:
    """librdkafka #3720: a producer that bumps its own epoch past 32767 wraps to -32768. A broker
    refuses it (lower than the producer's epoch); in a log it is a write below the epoch already used,
    each row of the wrapped epochs, related to the marker that first carried 32767."""
    log_dir, second = at_the_last_epoch(v2_log.log_dir, tmp_path / "logs", wrap=True)
    found = audited_log(spark, log_dir, tmp_path / "out")
    expected = []
    for partition in (0, 1):
        rows = batches(log_dir, partition)
        last_marker = max(b.base_offset for b in rows if b.producer_epoch == LAST_EPOCH)
        assert second[partition][0].producer_epoch == -(1 << 15)
        expected += [("EPOCH_REGRESSION", partition, b.base_offset, last_marker) for b in second[partition]]
    got = [(f["kind"], f["partition"], f["first_offset"], f["related_offset"]) for f in above_info(found)]
    assert sorted(got) == sorted(expected)


def with_a_marker_written_again(
    log_dir: Path, out: Path, *, open_transaction: bool
) -> tuple[Path, dict[int, tuple[int, int]]]:
    """`log_dir`'s partitions of the producers' topic, with a COMMIT of the `many` producer's (the
    eleventh; every fifth transaction is aborted) written again as a coordinator's retry writes it:
    after the next transaction's first data batch (`open_transaction`: a broker before KAFKA-19446 took
    it so), or right after itself (the retry with no transaction open that KAFKA-19999 accepts).
    Returns the log directory and, per partition, (the copy's offset, the original's offset)."""
    placed: dict[int, tuple[int, int]] = {}
    for partition in (0, 1):
        log = PartitionLog.read(log_dir / f"{TOPIC}-{partition}")
        many = log.producer_batches(log.batches[-1].producer_id)
        markers = [i for i, b in enumerate(many) if b.is_control]
        k = markers[COMMITS // 2]
        marker, opened = many[k], many[k + 1]
        # Transactions V2: the next transaction's data goes on at the marker's epoch.
        assert marker.control_type == "COMMIT" and not opened.is_control
        assert opened.producer_epoch == marker.producer_epoch == many[k - 1].producer_epoch + 1
        again = marker.copy(marker.segment)
        log.insert_after(opened if open_transaction else marker, again)
        log.renumber()
        log.write(out / log.name)
        placed[partition] = (again.base_offset, marker.base_offset)
    return out, placed


@pytest.mark.parametrize("open_transaction", [True, False])
def test_a_commit_written_again_is_stale_only_once_the_next_transaction_is_open(
    spark: Any, v2_log: V2Dump, tmp_path: Path, open_transaction: bool
) -> None:
    """A coordinator retries its markers after a failover or a lost response. On the broker's real V2
    log, a COMMIT written again after the next transaction's first data batch (at the COMMIT's epoch:
    V2's next transaction) is one STALE_TXN_MARKER per partition, related to the original; the same
    COMMIT written again before that data is the retry KAFKA-19999 accepts, an EMPTY_TXN_MARKER (info)
    repeating it, and nothing above info. After the stale copy, the transaction's own end is an
    EMPTY_TXN_MARKER that names it."""
    log_dir, placed = with_a_marker_written_again(
        v2_log.log_dir, tmp_path / "logs", open_transaction=open_transaction
    )
    found = audited_log(spark, log_dir, tmp_path / "out")
    stale = sorted((f["partition"], f["first_offset"], f["related_offset"]) for f in above_info(found))
    empty = sorted(
        (f["partition"], f["first_offset"], f["related_offset"])
        for f in found
        if f["kind"] == "EMPTY_TXN_MARKER"
    )
    expected = sorted((p, offset, original) for p, (offset, original) in placed.items())
    if open_transaction:
        assert kinds_above_info(found) == Counter({"STALE_TXN_MARKER": 2})
        assert stale == expected
        assert all("KAFKA-19446" in f["message"] for f in above_info(found))
        # Where the copy took all the transaction's data (the producer's next batch is its own end),
        # that end closes nothing, and says why.
        closed_nothing = []
        for partition, copy, _ in expected:
            log = PartitionLog.read(log_dir / f"{TOPIC}-{partition}")
            many = log.producer_batches(log.batches[-1].producer_id)
            after = next(b for b in many if b.base_offset > copy)
            if after.is_control:
                closed_nothing.append((partition, after.base_offset, copy))
        ends = [f for f in found if f["kind"] == "EMPTY_TXN_MARKER"]
        at = sorted((f["partition"], f["first_offset"], f["related_offset"]) for f in ends)
        assert at == closed_nothing, ends
        assert all(f"marker at offset {f['related_offset']} before it" in f["message"] for f in ends), ends
        assert all("(STALE_TXN_MARKER), had already ended" in f["message"] for f in ends), ends
    else:
        assert kinds_above_info(found) == Counter()
        assert empty == expected
