"""DUPLICATE_RECORDS_NEW_EPOCH (record-level mode) is the re-send of in-flight batches after a client's
epoch bump (librdkafka #4953, KAFKA-14034): records of the first batches of an epoch a client raised
that repeat records of the last batches of the epoch before. What a read_committed consumer does not
read twice is no duplicate: an aborted transaction's records re-sent after the abort, and the records
of consecutive transactions of a Transactions V2 producer, whose coordinator raises the epoch with
every marker (KIP-890)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES, RECORDS
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


class Written:
    """A log of one topic and the records of its data batches (one record each: `value`, keyed by it)."""

    def __init__(self, topic: str, replica: str | None = "1") -> None:
        self.log = LogBuilder(topic=topic, replica=replica, file=f"/dump/{topic}-0/00000000000000000000.log")
        self.records: list[dict[str, Any]] = []

    def data(self, pid: int, epoch: int, seq: int, value: bytes, *, transactional: bool = False) -> int:
        return self.batch(pid, epoch, seq, [(value, None)], transactional=transactional)

    def batch(
        self,
        pid: int,
        epoch: int,
        seq: int,
        contents: list[tuple[bytes, int | None]],
        *,
        transactional: bool = False,
    ) -> int:
        """A batch of a record per (value, timestamp) (the batch's clock where None); its base offset."""
        row = self.log.data(pid, epoch, seq, len(contents), transactional=transactional)
        for i, (value, stamp) in enumerate(contents):
            self.records.append(
                {
                    **{k: row[k] for k in ("dump_id", "replica", "topic", "partition", "file")},
                    "batch_position": row["position"],
                    "offset": row["base_offset"] + i,
                    "timestamp": row["max_timestamp"] if stamp is None else stamp,
                    "sequence": seq + i,
                    "key_size": len(value),
                    "value_size": len(value),
                    "key": value,
                    "value": value,
                    "header_keys": [],
                    "header_values": [],
                }
            )
        return int(row["base_offset"])

    def stamp_of(self, offset: int) -> int:
        return next(int(r["timestamp"]) for r in self.records if r["offset"] == offset)

    def marker(self, pid: int, epoch: int, control_type: str) -> None:
        self.log.marker(pid, epoch, control_type)


def test_only_in_flight_batches_re_sent_after_a_client_bump_are_duplicates(spark: SparkSession) -> None:
    # in-flight: an idempotent producer writes v1..v8 under epoch 0 and, after its client bumped the
    # epoch, v1, v8, v9 under epoch 1. v8 was among the last 5 batches (the in-flight ones); v1 was
    # acknowledged long before, and its value repeats: no re-send.
    flight = Written("in-flight")
    originals = [flight.data(7, 0, i, b"v%d" % (i + 1)) for i in range(8)]
    flight.data(7, 1, 0, b"v1")
    resent = flight.data(7, 1, 1, b"v8")
    flight.data(7, 1, 2, b"v9")
    # aborted: a transactional producer's transaction (v1, v2) is aborted; its next instance (a client
    # bump, no marker first) writes v1, v2 again and commits: read once.
    aborted = Written("aborted")
    aborted.data(9, 0, 0, b"v1", transactional=True)
    aborted.data(9, 0, 1, b"v2", transactional=True)
    aborted.marker(9, 0, "ABORT")
    aborted.data(9, 1, 0, b"v1", transactional=True)
    aborted.data(9, 1, 1, b"v2", transactional=True)
    aborted.marker(9, 1, "COMMIT")
    # v2-commits: a Transactions V2 producer's coordinator raises the epoch with each commit; its
    # transactions write the same value (an unchanged status) one after another.
    v2 = Written("v2-commits")
    for epoch in range(3):
        v2.data(10, epoch, 0, b"status=up", transactional=True)
        v2.marker(10, epoch + 1, "COMMIT")
    # v2-skipped: the same producer's transaction at epoch 1 wrote to other partitions only; its COMMIT
    # (epoch 2) went there, and here the epoch moves from 0 to 2, the marker of epoch 1 between.
    skipped = Written("v2-skipped")
    skipped.data(15, 0, 0, b"status=up", transactional=True)
    skipped.marker(15, 1, "COMMIT")
    skipped.data(15, 2, 0, b"status=up", transactional=True)
    skipped.marker(15, 3, "COMMIT")
    # committed: a Transactions V1 producer restarted after its transaction committed (InitProducerId
    # bumps the epoch and writes no marker) and writes v2 again: nothing was in flight, consecutive
    # transactions may write the same values.
    committed = Written("committed")
    committed.data(11, 0, 0, b"v1", transactional=True)
    committed.data(11, 0, 1, b"v2", transactional=True)
    committed.marker(11, 0, "COMMIT")
    committed.data(11, 1, 0, b"v2", transactional=True)
    committed.marker(11, 1, "COMMIT")
    # open: the same, but the restart came while its next transaction was open, with no marker after
    # it in the log: its batches were in flight, and the new epoch's copy is read twice.
    open_txn = Written("open")
    open_txn.data(16, 0, 0, b"v1", transactional=True)
    open_txn.marker(16, 0, "COMMIT")
    first = open_txn.data(16, 0, 1, b"v2", transactional=True)
    again = open_txn.data(16, 1, 0, b"v2", transactional=True)
    open_txn.marker(16, 1, "COMMIT")
    # rotated: a Transactions V2 producer whose epoch is exhausted goes on under a new producer id at
    # epoch 0 after its marker at 32767 (`TransactionMetadata.prepareComplete`): its transaction had
    # ended, and the next one writes the same status.
    # (An idempotent producer 21 wrote the status before: the copy pairs with 17, the latest to write
    # it, not with 21.)
    rotated = Written("rotated")
    rotated.data(21, 0, 0, b"status=up")
    rotated.data(17, 32766, 0, b"x", transactional=True)
    rotated.data(17, 32766, 1, b"status=up", transactional=True)
    rotated.marker(17, 32767, "COMMIT")
    rotated.data(18, 0, 0, b"status=up", transactional=True)
    rotated.marker(18, 1, "COMMIT")
    # aborted-last: producer 12 commits status=up, then five batches in a transaction that is
    # aborted; its next instance (a client bump) writes status=up again. The batches in flight at the
    # bump were the aborted ones: the committed status=up was long acknowledged, no re-send.
    aborted_last = Written("aborted-last")
    aborted_last.data(12, 0, 0, b"status=up", transactional=True)
    aborted_last.marker(12, 0, "COMMIT")
    for i in range(5):
        aborted_last.data(12, 0, 1 + i, b"a%d" % i, transactional=True)
    aborted_last.marker(12, 0, "ABORT")
    aborted_last.data(12, 1, 0, b"status=up", transactional=True)
    aborted_last.marker(12, 1, "COMMIT")

    # new-pid-bare: a bare partition directory (no replica); producer 13 writes w1..w3, then producer 14
    # opens with w3 again (a pre-KIP-360 client's new idempotent session re-sending).
    bare = Written("new-pid-bare", replica=None)
    bare.data(13, 0, 0, b"w1")
    bare.data(13, 0, 1, b"w2")
    bare_original = bare.data(13, 0, 2, b"w3")
    bare_copy = bare.data(14, 0, 0, b"w3")
    bare.data(14, 0, 1, b"w4")
    # new-pid-single: producer 19's only batch re-sends producer 13's last record (its own tail, at its
    # head's offset, hid the producer before it).
    single = Written("new-pid-single")
    single.data(13, 0, 0, b"w1")
    single_original = single.data(13, 0, 1, b"w2")
    single_copy = single.data(19, 0, 0, b"w2")

    written = (flight, aborted, v2, skipped, committed, open_txn, rotated, aborted_last, bare, single)
    batches = spark.createDataFrame([r for w in written for r in w.log.rows], BATCHES.schema)
    records = spark.createDataFrame([r for w in written for r in w.records], RECORDS.schema)
    bronze = replace(Bronze.from_batches(batches), records=records)
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    dups = sorted(
        (f["topic"], f["producer_epoch"], f["first_offset"], f["related_offset"])
        for f in found
        if f["kind"] == "DUPLICATE_RECORDS_NEW_EPOCH"
    )
    assert dups == [
        ("in-flight", 1, resent, originals[7]),
        ("new-pid-bare", 0, bare_copy, bare_original),
        ("new-pid-single", 0, single_copy, single_original),
        ("open", 1, again, first),
    ], [f["message"] for f in found]


def test_a_new_producer_ids_copy_pairs_with_the_latest_earlier_session_only(spark: SparkSession) -> None:
    """Short idempotent sessions (a console producer run by cron) each opening with the same payload:
    each session's first record repeats every earlier session's, and each earlier session was paired
    with it (K sessions, K x K rows, a finding per earlier session). The copy pairs with the session
    that wrote the content last before it; a value repeated inside one epoch's batches pairs with one
    original."""
    sessions = Written("sessions")
    for producer_id in (20, 21, 22, 23):
        sessions.data(producer_id, 0, 0, b"ping")
        sessions.data(producer_id, 0, 1, b"done-%d" % producer_id)
    repeated = Written("repeated")
    for sequence in range(4):
        repeated.data(30, 0, sequence, b"1")
    resent = repeated.data(30, 1, 0, b"1")
    written = (sessions, repeated)
    batches = spark.createDataFrame([r for w in written for r in w.log.rows], BATCHES.schema)
    records = spark.createDataFrame([r for w in written for r in w.records], RECORDS.schema)
    found = audit(replace(Bronze.from_batches(batches), records=records), load_profile("kafka-3.4")).findings
    dups = sorted(
        (f["topic"], f["producer_id"], f["first_offset"], f["related_offset"])
        for f in found.where("kind = 'DUPLICATE_RECORDS_NEW_EPOCH'").collect()
    )
    # (each session's copy of "ping" names the session just before it: producer 20's at 0, 21's at 2...)
    assert dups == [
        ("repeated", 30, resent, 0),
        ("sessions", 21, 2, 0),
        ("sessions", 22, 4, 2),
        ("sessions", 23, 6, 4),
    ], dups


def test_the_copies_timestamps_say_whether_the_client_or_the_application_wrote_them_again(
    spark: SparkSession,
) -> None:
    """A client re-sending its in-flight batches sends the same records, CreateTime included; records the
    application produced again (its retry of failed sends, a heartbeat) carry new timestamps. The
    finding says which, from the copy batch's CreateTime; under LogAppendTime (the broker's clock) it
    says nothing of it."""
    client = Written("client")
    originals = [client.data(40, 0, i, b"c%d" % i) for i in range(3)]
    client.batch(40, 1, 0, [(b"c1", client.stamp_of(originals[1])), (b"c2", client.stamp_of(originals[2]))])
    app = Written("app")
    app.data(41, 0, 0, b"ping")
    app.data(41, 1, 0, b"ping")
    mixed = Written("mixed")
    kept = mixed.data(42, 0, 0, b"m0")
    mixed.data(42, 0, 1, b"m1")
    mixed.batch(42, 1, 0, [(b"m0", mixed.stamp_of(kept)), (b"m1", None)])
    # new-pid: producer 44 opens with producer 43's last record, its timestamp kept.
    new_pid = Written("new-pid")
    tail = new_pid.data(43, 0, 0, b"n0")
    new_pid.batch(44, 0, 0, [(b"n0", new_pid.stamp_of(tail))])
    append_time = Written("append-time")
    append_time.data(45, 0, 0, b"ping")
    append_time.data(45, 1, 0, b"ping")
    for row in append_time.log.rows:
        row["timestamp_type"] = "LogAppendTime"
    written = (client, app, mixed, new_pid, append_time)
    batches = spark.createDataFrame([r for w in written for r in w.log.rows], BATCHES.schema)
    records = spark.createDataFrame([r for w in written for r in w.records], RECORDS.schema)
    found = audit(replace(Bronze.from_batches(batches), records=records), load_profile("kafka-3.4")).findings
    messages = {
        f["topic"]: f["message"] for f in found.where("kind = 'DUPLICATE_RECORDS_NEW_EPOCH'").collect()
    }
    assert sorted(messages) == ["app", "append-time", "client", "mixed", "new-pid"], messages
    assert "re-wrote 2 record(s)" in messages["client"]
    assert messages["client"].endswith(
        "Each copy keeps its original's CreateTime, as a client's re-send of its batches does."
    )
    assert messages["new-pid"].endswith(
        "Each copy keeps its original's CreateTime, as a client's re-send of its batches does."
    )
    assert "No copy keeps its original's CreateTime" in messages["app"]
    assert "heartbeat" in messages["app"]
    assert " 1 of the copies keep their original's CreateTime" in messages["mixed"]
    assert "CreateTime" not in messages["append-time"]
    assert messages["append-time"].endswith("(KAFKA-14034, librdkafka #4953).")
