"""A producer the ack ledger names, of which the log holds no batch at all, is judged as a whole
(contract §4, `UNKNOWN_PRODUCER_LOSS`: "a producer known earlier (earlier dump, snapshot or ack
ledger, last offset L)"): lost where acknowledged records of it lie at or above the log start,
retention where all of them lie below it, beside the per-record ack findings.

The cases of kafka-3.4 are audited together (tests/integration/together.py): each writes its logs and
its ledger's acks in a partition of its own."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import ACKS, BATCHES
from tests.integration.together import Case, Found, Place, Together
from tests.strategies import LogBuilder
from tests.table_rows import unreadable_region

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

KAFKA_3_4 = load_profile("kafka-3.4")
TOGETHER = Together()


def _ack(offset: int, producer_id: int, position: int, at: Place | None = None) -> dict[str, Any]:
    """A ledger row of `orders`: in `at`'s partition (its ledger `<case>/ledger`), else partition 0."""
    return {
        "dump_id": f"{at.case}/ledger" if at else "ledger",
        "replica": None,
        "topic": "orders",
        "partition": at.partition if at else 0,
        "file": "/acks.jsonl",
        "position": position,
        "offset": offset,
        "producer_id": producer_id,
        "producer_epoch": 0,
        "sequence": None,
        "key": None,
        "timestamp": None,
        "app_producer": None,
        "app_sequence": None,
    }


def audited(spark: SparkSession, case: str) -> tuple[Case, Found]:
    return TOGETHER.audited(spark, KAFKA_3_4, case)


def _lost_or_retained(at: Place) -> Case:
    log = at.log(start_offset=10)
    log.data(8, 0, 0, 2)
    log.data(8, 0, 2, 3)
    acked = [(2, 7), (3, 7), (12, 9), (20, 6), (21, 6), (10, 8), (11, 8), (30, -1)]
    return Case(log.rows, log_start_offset=10, acks=[_ack(o, p, i, at) for i, (o, p) in enumerate(acked)])


TOGETHER.add(KAFKA_3_4, "lost-or-retained", _lost_or_retained)


def test_a_producer_the_ledger_names_and_the_log_lacks_is_lost_or_retained(spark: SparkSession) -> None:
    """The log starts at 10 and holds producer 8's batches at 10-14. The ledger acknowledged producer 7
    at 2-3 (below the log start: retention), producer 9 at 12 (held by producer 8's batch: rewritten),
    producer 6 at 20-21 (past the log's end, no other replica: lost), producer 8 at 10-11 (held), and a
    producer without idempotence (id -1) at 30: its record is missing, but it names no producer."""
    _, found = audited(spark, "lost-or-retained")
    producers = {
        (f["kind"], f["producer_id"], f["related_offset"], f["missing_records"])
        for f in found
        if f["kind"].startswith("UNKNOWN_PRODUCER")
    }
    assert producers == {
        ("UNKNOWN_PRODUCER_RETENTION", 7, 3, None),
        ("UNKNOWN_PRODUCER_LOSS", 9, 12, 1),
        ("UNKNOWN_PRODUCER_LOSS", 6, 21, 2),
    }, [f["message"] for f in found]
    records = sorted((f["kind"], f["producer_id"], f["first_offset"]) for f in found if "ACKED" in f["kind"])
    assert records == [
        ("ACKED_RECORD_MISSING", -1, 30),
        ("ACKED_RECORD_MISSING", 6, 20),
        ("ACKED_RECORD_MISSING", 9, 12),
        ("ACKED_RECORD_RETENTION", 7, 2),
    ]
    (lost,) = [f for f in found if f["kind"] == "UNKNOWN_PRODUCER_LOSS" and f["producer_id"] == 6]
    assert "acknowledged at offsets 20-21" in lost["message"] and lost["severity"] == "critical"


def _timed_after_the_dump(at: Place) -> Case:
    log = at.log(start_offset=10)
    log.data(8, 0, 0, 5)
    captured = log.clock + 1_000
    acks = [
        {**_ack(15, 6, 0, at), "timestamp": captured - 1_000},
        {**_ack(16, 5, 1, at), "timestamp": captured + 60_000},
        {**_ack(12, 8, 2, at), "timestamp": captured + 60_000},
    ]
    dump = log.rows[0]["dump_id"]
    return Case(
        log.rows, log_start_offset=10, acks=acks, captured={dump: captured}, facts={"captured": captured}
    )


TOGETHER.add(KAFKA_3_4, "timed-after", _timed_after_the_dump)


def test_an_ack_the_ledger_times_after_the_dump_is_not_judged_by_it(spark: SparkSession) -> None:
    """The dump was captured at T (its files' newest mtime). Producer 6's ack at offset 15, timed a
    second before T, is missing from the log: lost. Producer 5's ack at 16, timed a minute after T,
    came after the dump was taken: the dump cannot hold it, and judges nothing of it; one
    ACKS_NOT_CHECKED (warning) says so, since a ledger that runs past the dump must not pass in silence.
    Producer 8's ack at 12, timed after T too, is in the log: checked, and said nothing of."""
    case, found = audited(spark, "timed-after")
    captured = case.facts["captured"]
    assert sorted((f["kind"], f["producer_id"] or 0, f["first_offset"], f["last_offset"]) for f in found) == [
        ("ACKED_RECORD_MISSING", 6, 15, 15),
        ("ACKS_NOT_CHECKED", 0, 16, 16),
        ("UNKNOWN_PRODUCER_LOSS", 6, 15, 15),
    ], [f["message"] for f in found]
    (late,) = [f for f in found if f["kind"] == "ACKS_NOT_CHECKED"]
    assert late["severity"] == "warning" and late["replica"] is None, late
    assert late["rule"] == "ack ledger timed after the dump", late
    message, partition = late["message"], case.rows[0]["partition"]
    assert message.startswith(f"1 acknowledged offset(s) from 16 to 16 of orders-{partition}"), message
    times = f"epoch ms {captured}; the earliest such ack at {captured + 60_000}"
    assert times in message, message


def _acked_at(at: Place, offsets: tuple[int, ...]) -> Case:
    """Producer 8's batches at 10-11, captured a second after them; the ledger's acks of producer 6 at
    `offsets`, each a second after the one before, the first a minute before the capture."""
    log = at.log(start_offset=10)
    log.data(8, 0, 0, 2)
    acks = [
        {**_ack(offset, 6, position, at), "timestamp": log.clock - 60_000 + 1_000 * position}
        for position, offset in enumerate(offsets)
    ]
    dump = log.rows[0]["dump_id"]
    return Case(log.rows, log_start_offset=10, acks=acks, captured={dump: log.clock + 1_000})


TOGETHER.add(KAFKA_3_4, "logged-twice", lambda at: _acked_at(at, (20, 21, 20, 21, 21)))


def test_a_record_the_ledger_logged_twice_counts_once(spark: SparkSession) -> None:
    """The ledger's writer logged each of producer 6's acks at offsets 20-21 twice (a retry, a second
    later), and offset 21 a third time: two records are missing, not five."""
    _, found = audited(spark, "logged-twice")
    assert sorted((f["kind"], f["first_offset"], f["last_offset"], f["missing_records"]) for f in found) == [
        ("ACKED_RECORD_MISSING", 20, 21, 2),
        ("UNKNOWN_PRODUCER_LOSS", 21, 21, 2),
    ], [f["message"] for f in found]
    (missing,) = [f for f in found if f["kind"] == "ACKED_RECORD_MISSING"]
    assert missing["message"].startswith("2 acknowledged record(s) at offsets 20-21"), missing["message"]


TOGETHER.add(KAFKA_3_4, "no-offset", lambda at: _acked_at(at, (-1, -1001)))


def test_an_ack_without_an_offset_is_not_judged(spark: SparkSession) -> None:
    """A Java `acks=0` callback's offset -1 and librdkafka's -1001 name no record: they are no records
    below the log start (retention), and producer 6, named by them alone, is not judged either."""
    _, found = audited(spark, "no-offset")
    assert [(f["kind"], f["message"]) for f in found] == []


def test_compaction_excuses_an_ack_where_offsets_are_free_but_not_past_the_end(spark: SparkSession) -> None:
    """A topic the profile names as compacted, segments at 10 and 16 (the active one): the cleaner may
    have removed the batch at 12-13 (between two it kept). This broker's cleaner never reaches the
    active segment, but offsets free there (18-19) show its leader's, in what it fetched as a follower:
    excused too. Those past the log's end (22-23, an acks=1 failover's lost tail) are lost."""
    from pyspark.sql import functions as F

    log = LogBuilder(start_offset=10)
    log.data(8, 0, 0, 2)
    log.next_offset += 2  # 12-13: cleaned away
    log.data(8, 0, 4, 2)
    log.data(8, 0, 6, 2)  # 16-17, the active segment's first batch
    log.next_offset += 2  # 18-19: free in the active segment: a leader's cleaner
    log.data(8, 0, 10, 2)
    acked = [(12, 8), (13, 8), (18, 8), (19, 8), (22, 8), (23, 8)]
    acks = spark.createDataFrame([_ack(o, p, i) for i, (o, p) in enumerate(acked)], ACKS.schema)
    bronze = Bronze.from_batches(spark.createDataFrame(log.rows, BATCHES.schema), log_start_offset=10)
    active = bronze.files.withColumns(
        {"file": F.regexp_replace("file", "10\\.log$", "16.log"), "base_offset": F.lit(16).cast("long")}
    )
    bronze = replace(bronze, files=bronze.files.unionByName(active), acks=acks)
    profile = load_profile("kafka-3.4")
    profile = replace(profile, compacted_topics=(*profile.compacted_topics, "orders"))
    found = audit(bronze, profile).findings.collect()
    missing = [(f["first_offset"], f["last_offset"]) for f in found if f["kind"] == "ACKED_RECORD_MISSING"]
    assert sorted(missing) == [(22, 23)], [f["message"] for f in found]


def _unlisted_partition(at: Place) -> Case:
    log = at.log()
    log.data(8, 0, 0, 2)
    ledger = [_ack(0, 8, 0, at), _ack(1, 8, 1, at)]
    ledger += [{**_ack(o, 8, 2 + i, at), "topic": "payments"} for i, o in enumerate((40, 41, 41, 97))]
    return Case(log.rows, acks=ledger)


TOGETHER.add(KAFKA_3_4, "unlisted-partition", _unlisted_partition)


def test_acks_of_a_partition_no_dump_holds_are_said_to_be_unchecked(spark: SparkSession) -> None:
    """A ledger's acks for payments-<p> (no dump holds it: not dumped, or the topic misnamed) were
    dropped by the join with the logs without a word. They are one ACKS_NOT_CHECKED warning per
    partition, with how many offsets and their range; the dumped partition's acks are judged as before."""
    case, found = audited(spark, "unlisted-partition")
    assert [f["kind"] for f in found if f["severity"] != "info"] == ["ACKS_NOT_CHECKED"]
    (unchecked,) = [f for f in found if f["kind"] == "ACKS_NOT_CHECKED"]
    partition = case.rows[0]["partition"]
    fields = ("dump_id", "replica", "topic", "partition", "first_offset", "last_offset", "severity")
    assert tuple(unchecked[k] for k in fields) == ("ledger", None, "payments", partition, 40, 97, "warning")
    assert unchecked["message"].startswith(
        f"3 acknowledged offset(s) from 40 to 97 name payments-{partition}, a partition"
    )


def _below_the_log_start(at: Place, checkpointed: bool) -> Case:
    log = at.log(start_offset=10)
    log.data(8, 0, 0, 2)
    checkpoint = {
        **{k: log.rows[0][k] for k in ("dump_id", "replica", "topic", "partition")},
        "file": f"/x/{at.case}/log-start-offset-checkpoint",
        "position": 4,
        "state": "log_start_offset",
        "offset": 10,
        "leader_epoch": None,
        "topic_id": None,
    }
    state = [checkpoint] if checkpointed else []
    return Case(log.rows, log_start_offset=10, acks=[_ack(4, 8, 0, at)], partition_state=state)


TOGETHER.add(KAFKA_3_4, "start-not-checkpointed", lambda at: _below_the_log_start(at, False))
TOGETHER.add(KAFKA_3_4, "start-checkpointed", lambda at: _below_the_log_start(at, True))


def test_an_ack_below_a_log_start_no_checkpoint_gave_may_only_be_missing_from_the_dump(
    spark: SparkSession,
) -> None:
    """Below a log start taken from the dump's first segment (no log-start-offset checkpoint dumped:
    a `kafka-dump-log.sh` text of the later segments, say), an acknowledged offset may only be missing
    from the dump, and the message says so; below a checkpointed log start it was deleted by retention."""
    messages = []
    for case in ("start-not-checkpointed", "start-checkpointed"):
        _, found = audited(spark, case)
        (retained,) = [f["message"] for f in found if f["kind"] == "ACKED_RECORD_RETENTION"]
        messages.append(retained)
    assert "deleted by retention, or not in this dump (no log-start-offset checkpoint" in messages[0]
    assert messages[1].endswith("lie below the log start offset 10: deleted by retention, not lost.")


def _crashed_leader(at: Place, mark: int, new_epoch: int = 1) -> Case:
    """One dump of brokers 2 and 3 (`test_a_crashed_leaders_uncommitted_tail_is_judged_by_the_new_leader`),
    broker 2's high watermark at `mark`, broker 3's batches after its first in leader epoch `new_epoch`."""
    old = at.log(dump_id="d", replica="2", file=f"/d/{at.case}/2/orders-{at.partition}/0.log")
    new = at.log(dump_id="d", replica="3", file=f"/d/{at.case}/3/orders-{at.partition}/0.log")
    for log in (old, new):
        log.data(5, 0, 0, 10)
    old.data(5, 0, 10, 5)
    new.data(6, 0, 0, 3)
    new.data(5, 0, 10, 5)
    for row in new.rows[1:]:
        row["partition_leader_epoch"] = new_epoch
    # Broker 3's acks, then one of broker 2's (offset 10, producer 5) that broker 3 does not hold:
    # broker 3's mark (10) lags too, but its batch there is the newest leader's: missing there.
    ledger = [(o, 5) for o in range(10)] + [(o, 6) for o in (10, 11, 12)] + [(o, 5) for o in range(13, 18)]
    ledger.append((10, 5))
    state = [
        {
            **{k: old.rows[0][k] for k in ("dump_id", "topic", "partition")},
            "replica": replica,
            "file": f"/d/{at.case}/{replica}/replication-offset-checkpoint",
            "position": 4,
            "state": "high_watermark",
            "offset": offset,
            "leader_epoch": None,
            "topic_id": None,
        }
        for replica, offset in (("2", mark), ("3", 10))
    ]
    acks = [_ack(o, p, i, at) for i, (o, p) in enumerate(ledger)]
    return Case(old.rows + new.rows, acks=acks, partition_state=state)


TOGETHER.add(KAFKA_3_4, "crashed-leader", lambda at: _crashed_leader(at, 10))
TOGETHER.add(KAFKA_3_4, "crashed-leader-committed", lambda at: _crashed_leader(at, 15))
TOGETHER.add(KAFKA_3_4, "crashed-leader-same-epoch", lambda at: _crashed_leader(at, 10, new_epoch=0))


def test_a_crashed_leaders_uncommitted_tail_is_judged_by_the_new_leader(spark: SparkSession) -> None:
    """One dump of two brokers. Broker 2 led (leader epoch 0), wrote producer 5's sequences 10-14 at
    offsets 10-14 past its high watermark (10) and crashed; broker 3 took over (epoch 1), wrote producer
    6 at 10-12 and producer 5's retry at 13-17, all acknowledged. Broker 2's tail is uncommitted: it
    truncates it once it follows again. It was ACKED_RECORD_MISSING and UNKNOWN_PRODUCER_LOSS for
    producer 6 (critical); broker 3's log judges those offsets. Not where broker 2's mark says 15 (it
    committed them), nor where broker 3's batches there are of the same epoch (nothing superseded
    broker 2's: which holds the acknowledged records is not told by the logs), and not for broker 3,
    whose newer batches a stale replica's older ones never excuse."""

    def found(case: str) -> list[tuple[str, str | None]]:
        return sorted((f["kind"], f["replica"]) for f in audited(spark, case)[1] if f["severity"] != "info")

    assert found("crashed-leader") == [("ACKED_RECORD_MISSING", "3")]
    assert ("ACKED_RECORD_MISSING", "2") in found("crashed-leader-committed")
    assert ("ACKED_RECORD_MISSING", "2") in found("crashed-leader-same-epoch")


def _unreadable_bytes(at: Place) -> Case:
    log = at.log(start_offset=10)
    log.data(8, 0, 0, 2)
    torn_at = log.position
    log.position += 500
    log.next_offset += 3
    log.data(8, 0, 5, 1)
    acks = [{**_ack(13, 8, 0, at), "timestamp": log.clock}, {**_ack(20, 6, 1, at), "timestamp": log.clock}]
    return Case(
        log.rows,
        log_start_offset=10,
        quarantine=[unreadable_region(log.rows[0], torn_at)],
        acks=acks,
        captured={log.rows[0]["dump_id"]: log.clock + 1_000},
        facts={"torn_at": torn_at},
    )


TOGETHER.add(KAFKA_3_4, "unreadable-bytes", _unreadable_bytes)


def test_an_ack_where_unreadable_bytes_lie_names_them(spark: SparkSession) -> None:
    """Producer 8's batches at 10-11, then bytes no header could be read from (offsets 12-14 by the next
    batch's), then its batch at 15. Its ack at 13 is missing: the finding stays (critical), and names
    the region, where the record may be. Producer 6's ack at 20, past the log's end, names none."""
    case, found = audited(spark, "unreadable-bytes")
    messages = {f["first_offset"]: f["message"] for f in found if f["kind"] == "ACKED_RECORD_MISSING"}
    assert set(messages) == {13, 20}, messages
    segment = case.rows[0]["file"]
    region = f"{segment} at byte {case.facts['torn_at']}, UNREADABLE_BATCH"
    named = f"Unreadable bytes lie where they would be ({region})"
    assert named in messages[13], messages[13]
    assert "Unreadable" not in messages[20], messages[20]


def _producer_verdicts(found: list[Any], dump_id: str = "dump-1") -> set[tuple[str, int, int]]:
    return {
        (f["kind"], f["producer_id"], f["related_offset"])
        for f in found
        if f["dump_id"] == dump_id
        and f["kind"] in ("UNKNOWN_PRODUCER_LOSS", "UNKNOWN_PRODUCER_RETENTION", "PRODUCER_STATE_RETAINED")
    }


def _staler_snapshot(at: Place, acked: list[tuple[int, int]]) -> Case:
    """Producer 8's batches at 10-14; the snapshot lists producer 7 with its last batch at 5; the
    ledger's acks `acked` (offset, producer)."""
    log = at.log(start_offset=10)
    log.data(8, 0, 0, 5)
    acks = [_ack(o, p, i, at) for i, (o, p) in enumerate(acked)]
    return Case(log.rows, log_start_offset=10, acks=acks, snapshots=[log.snapshot_entry(10, 7, 0, 5, 5)])


TOGETHER.add(KAFKA_3_4, "snapshot-later-ack", lambda at: _staler_snapshot(at, [(20, 7), (12, 8)]))
TOGETHER.add(KAFKA_3_4, "snapshot-earlier-ack", lambda at: _staler_snapshot(at, [(3, 7)]))


def test_a_later_ack_judges_a_producer_a_staler_snapshot_lists(spark: SparkSession) -> None:
    """The log starts at 10 and holds producer 8's batches at 10-14. Its snapshot lists producer 7 with
    its last batch at offset 5, below the start: state retained, not loss. But the ledger acknowledged
    producer 7 at offset 20, past the log's end, which holds nothing of it: that later write is lost. It
    was both verdicts at once for one producer, PRODUCER_STATE_RETAINED (info, "not loss") and
    UNKNOWN_PRODUCER_LOSS (critical); the latest knowledge of the producer judges it, as where the
    snapshot is the later one."""
    _, found = audited(spark, "snapshot-later-ack")
    assert _producer_verdicts(found) == {("UNKNOWN_PRODUCER_LOSS", 7, 20)}, [f["message"] for f in found]
    # Where the ledger's last ack of it lies below the snapshot's entry, the snapshot judges it.
    _, found = audited(spark, "snapshot-earlier-ack")
    assert _producer_verdicts(found) == {("PRODUCER_STATE_RETAINED", 7, 10)}, [f["message"] for f in found]


def test_a_later_ack_judges_a_producer_an_earlier_dump_shows(spark: SparkSession) -> None:
    """Dump d1 holds producer 7 at offsets 0-4 and producer 8 at 5-9; dump d2, an hour later, starts at
    5 (retention deleted the first segment) and holds producer 8 alone: producer 7 is gone by retention.
    But the ledger acknowledged producer 7 at offset 20 too, past both logs' ends: lost. One verdict
    for d2's log, the ack's."""
    from pyspark.sql import functions as F

    t1 = 1_700_000_000_000
    first = LogBuilder(dump_id="d1", file="/d1/orders-0/00000000000000000000.log", clock=t1)
    second = LogBuilder(dump_id="d2", start_offset=5, file="/d2/orders-0/00000000000000000005.log", clock=t1)
    for producer_id in (7, 8):
        for sequence in range(5):
            if producer_id == 8:
                second.data(8, 0, sequence)
            first.data(producer_id, 0, sequence)
    acks = spark.createDataFrame([_ack(20, 7, 0)], ACKS.schema)
    bronze = Bronze.from_batches(spark.createDataFrame(first.rows + second.rows, BATCHES.schema))
    files = bronze.files
    files = files.withColumn("base_offset", F.when(files["dump_id"] == "d2", 5).otherwise(0)).withColumn(
        "mtime_ms", F.when(files["dump_id"] == "d2", t1 + 3_600_000).otherwise(t1)
    )
    bronze = replace(bronze, files=files, acks=acks)
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    assert _producer_verdicts(found, "d2") == {("UNKNOWN_PRODUCER_LOSS", 7, 20)}, [
        (f["dump_id"], f["kind"], f["related_offset"]) for f in found
    ]
    # Without the ack, retention explains it.
    found = audit(replace(bronze, acks=acks.limit(0)), load_profile("kafka-3.4")).findings.collect()
    assert _producer_verdicts(found, "d2") == {("UNKNOWN_PRODUCER_RETENTION", 7, 4)}, [
        f["message"] for f in found
    ]
