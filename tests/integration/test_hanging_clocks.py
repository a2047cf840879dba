"""HANGING_TRANSACTION reads a transaction's age on one clock at a time: a data batch carries its
producer's timestamp (an exactly-once application forwards its input's event time), a marker the time
its partition leader wrote it. The longer age counts."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES, QUARANTINE
from tests.reference_replay import reference_findings
from tests.strategies import LogBuilder
from tests.table_rows import unreadable_region

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
MINUTE = 60_000


def test_an_open_transaction_is_hanging_only_by_one_clock(spark: SparkSession) -> None:
    timeout = load_profile("kafka-3.4").transaction_max_timeout_ms
    assert timeout == 15 * MINUTE
    # catching-up: an application replays two-hour-old input; its last commit was written now, and its
    # next transaction, open for a second, holds records of the same old event time. Not hanging.
    app = LogBuilder(topic="catching-up", file="/d/catching-up-0/0.log")
    app.data(5, 0, 0, transactional=True, timestamp=T0 - 120 * MINUTE)
    app.marker(5, 0, "COMMIT", timestamp=T0)
    app.data(5, 0, 1, transactional=True, timestamp=T0 - 120 * MINUTE + 1_000)
    # by-data: producer 6's transaction opened an hour before producer 7's newest record.
    data = LogBuilder(topic="by-data", file="/d/by-data-0/0.log")
    data.data(6, 0, 0, transactional=True, timestamp=T0 - 60 * MINUTE)
    data.data(7, 0, 0, timestamp=T0)
    # by-markers: producer 8 writes old event times too; producer 9's transactions committed for an
    # hour after its transaction began, by the coordinator's clock.
    markers = LogBuilder(topic="by-markers", file="/d/by-markers-0/0.log")
    markers.data(8, 0, 0, transactional=True, timestamp=T0 - 300 * MINUTE)
    for i, minute in enumerate((0, 30, 60)):
        markers.data(9, 0, i, transactional=True, timestamp=T0 - 300 * MINUTE)
        markers.marker(9, 0, "COMMIT", timestamp=T0 + minute * MINUTE)

    # markers-stop: producer 11 commits once right after producer 10's transaction began, and producer
    # 12 writes for two hours after: the brokers' clock stops at that marker, the producers' goes on.
    stop = LogBuilder(topic="markers-stop", file="/d/markers-stop-0/0.log")
    stop.data(10, 0, 0, transactional=True, timestamp=T0)
    stop.data(11, 0, 0, transactional=True, timestamp=T0)
    stop.marker(11, 0, "COMMIT", timestamp=T0 + 1_000)
    stop.data(12, 0, 0, timestamp=T0 + 120 * MINUTE)

    # fast-leader: a leader whose clock ran an hour ahead wrote producer 13's markers; after a leader
    # change, producer 14 opens a transaction and producer 15 commits a minute later. A marker before a
    # transaction began tells nothing of its age: open for a minute, not hanging.
    fast = LogBuilder(topic="fast-leader", file="/d/fast-leader-0/0.log")
    fast.data(13, 0, 0, transactional=True, timestamp=T0 - MINUTE)
    fast.marker(13, 0, "COMMIT", timestamp=T0 + 60 * MINUTE)
    fast.data(14, 0, 0, transactional=True, timestamp=T0)
    fast.data(15, 0, 0, transactional=True, timestamp=T0)
    fast.marker(15, 0, "COMMIT", timestamp=T0 + MINUTE)

    # in-buffer: producer 16's transaction is open 17 minutes at the log's end, past the timeout (hanging,
    # contract §4) but within the broker's 5-minute late-transaction buffer: the message says the
    # coordinator's abort may not have landed yet.
    buffer = LogBuilder(topic="in-buffer", file="/d/in-buffer-0/0.log")
    buffer.data(16, 0, 0, transactional=True, timestamp=T0)
    buffer.data(17, 0, 0, timestamp=T0 + 17 * MINUTE)

    logs = (app, data, markers, stop, fast, buffer)
    rows = [row for log in logs for row in log.rows]
    found = audit(Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema)), load_profile("kafka-3.4"))
    rows = [f for f in found.findings.collect() if f["kind"] == "HANGING_TRANSACTION"]
    hanging = sorted((f["topic"], f["producer_id"], f["first_offset"]) for f in rows)
    assert hanging == [("by-data", 6, 0), ("by-markers", 8, 0), ("in-buffer", 16, 0), ("markers-stop", 10, 0)]
    buffered = {f["topic"] for f in rows if "the coordinator's abort may not have landed" in f["message"]}
    assert buffered == {"in-buffer"}
    # The reference replay reads the clocks alike.
    profile = load_profile("kafka-3.4")
    expected = sorted(
        (log._log["topic"], f["producer_id"], f["first_offset"])
        for log in logs
        for f in reference_findings(log.rows, profile=profile, log_start_offset=0)
        if f["kind"] == "HANGING_TRANSACTION"
    )
    assert hanging == expected


def test_a_transaction_a_later_epoch_swept_up_is_hanging(spark: SparkSession) -> None:
    """Transactions V1 before transaction verification (KIP-890 part 1): producer 5's epoch-3
    transaction aborted (0-1), then a produce request of it landed late (2). Its producer state opened a
    transaction that no coordinator knew of; three hours later the next session (epoch 4, 3) committed
    (4), closing it: read_committed consumers were stuck at 2 for three hours, and its record committed.
    The same with the fencing ABORT between (the normal path), within the timeout, on a topic the
    profile names as compacted (the cleaner may have removed a marker between), or with bytes no header
    could be read from between (the marker may be there): no HANGING_TRANSACTION."""
    torn_at: dict[str, int] = {}

    def log(
        topic: str, wait_min: int = 180, marker_between: bool = False, torn: bool = False, then_min: int = 0
    ) -> LogBuilder:
        built = LogBuilder(topic=topic, file=f"/d/{topic}-0/0.log")
        built.data(5, 3, 0, transactional=True, timestamp=T0)
        built.marker(5, 3, "ABORT", timestamp=T0 + 1_000)
        built.data(5, 3, 1, transactional=True, timestamp=T0 + 2_000)
        if marker_between:
            built.marker(5, 4, "ABORT", timestamp=T0 + wait_min * MINUTE)
        if torn:
            torn_at[topic] = built.position
            built.position += 500
            built.next_offset += 1
        built.data(5, 4, 0, transactional=True, timestamp=T0 + wait_min * MINUTE + 1_000)
        if then_min:
            built.data(5, 4, 1, transactional=True, timestamp=T0 + then_min * MINUTE)
        built.marker(5, 4, "COMMIT", timestamp=T0 + max(wait_min, then_min) * MINUTE + 2_000)
        return built

    logs = [
        log("swept"),
        log("fenced", marker_between=True),
        log("quick", wait_min=5),
        # Epoch 4 starts within the timeout, but its transaction runs on for three hours before the
        # COMMIT: the late epoch-3 batch was open all that time.
        log("swept-late", wait_min=5, then_min=180),
        log("c-swept"),
        log("torn", torn=True),
    ]
    rows = [row for built in logs for row in built.rows]
    profile = replace(load_profile("kafka-3.4"), compacted_topics=("c-*",))
    region = unreadable_region(logs[-1].rows[0], torn_at["torn"])
    bronze = replace(
        Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema), rolled=True),
        quarantine=spark.createDataFrame([region], QUARANTINE.schema),
    )
    found = audit(bronze, profile).findings.collect()
    above_info = [f for f in found if f["severity"] != "info" and f["kind"] != "UNREADABLE_BATCH"]
    assert sorted((f["topic"], f["kind"]) for f in above_info) == [
        ("swept", "HANGING_TRANSACTION"),
        ("swept-late", "HANGING_TRANSACTION"),
    ], [f["message"] for f in above_info]
    for swept in above_info:
        assert (
            swept["producer_epoch"],
            swept["first_offset"],
            swept["last_offset"],
            swept["related_offset"],
        ) == (
            3,
            2,
            2,
            3,
        )
        assert "closed it" in swept["message"] and swept["rule"].startswith("KIP-890"), swept
    late = next(f for f in above_info if f["topic"] == "swept-late")
    assert f"its later data at offset 4, {180 * MINUTE - 2_000} ms after it" in late["message"], late
    # Where the later epoch's first batch is its newest, the message names it once.
    early = next(f for f in above_info if f["topic"] == "swept")
    assert f"at offset 3, {180 * MINUTE - 1_000} ms after it" in early["message"], early


def test_the_brokers_clock_adds_up_each_leaders_markers(spark: SparkSession) -> None:
    """Markers carry the time the partition's leader wrote them, on that leader's clock. `leader-change`:
    the first leader's clock ran 30 minutes ahead; after a leader change, another leader's marker a
    minute after the transaction began. Read against each other they made producer 10's one-minute-old
    transaction 29 minutes old (a HANGING_TRANSACTION); per leader, nothing. `rolling`: producer 1's
    transaction never ends while producer 2 (old event times) commits every minute for 40 minutes and
    the leader changes every 10: 35 minutes of markers in all, hanging, though no one leader's markers
    span 15."""
    leaders = LogBuilder(topic="leader-change", file="/d/leader-change-0/0.log")
    leaders.data(10, 0, 0, transactional=True, timestamp=T0)
    leaders.data(11, 0, 0, transactional=True, timestamp=T0)
    leaders.marker(11, 0, "COMMIT", timestamp=T0 + 30 * MINUTE)
    leaders.data(12, 0, 0, transactional=True, timestamp=T0 + 40_000)["partition_leader_epoch"] = 6
    leaders.marker(12, 0, "COMMIT", timestamp=T0 + MINUTE)["partition_leader_epoch"] = 6

    rolling = LogBuilder(topic="rolling", file="/d/rolling-0/0.log")
    rolling.data(1, 0, 0, transactional=True, timestamp=T0)
    for minute in range(1, 41):
        rolling.data(2, 0, minute - 1, transactional=True, timestamp=T0 - 180 * MINUTE)
        marker = rolling.marker(2, 0, "COMMIT", timestamp=T0 + minute * MINUTE)
        marker["partition_leader_epoch"] = minute // 10
    rows = [row for log in (leaders, rolling) for row in log.rows]
    found = audit(Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema)), load_profile("kafka-3.4"))
    hanging = [f for f in found.findings.collect() if f["kind"] == "HANGING_TRANSACTION"]
    assert [(f["topic"], f["producer_id"]) for f in hanging] == [("rolling", 1)], [
        f["message"] for f in hanging
    ]
    assert f"at least {35 * MINUTE} ms before" in hanging[0]["message"], hanging[0]["message"]


def test_read_committed_consumers_stop_at_the_log_start_where_it_passed_the_open_transaction(
    spark: SparkSession,
) -> None:
    """DeleteRecords moved the log start to offset 1 (the log-start-offset checkpoint), inside the
    segment, past producer 6's open transaction at offset 0: the broker keeps the first unstable offset
    at or above the log start (`UnifiedLog.maybeIncrementFirstUnstableOffset`), so consumers are stuck
    at 1, not 0. Without the checkpoint, at 0."""
    from schemas.tables import PARTITION_STATE

    log = LogBuilder(topic="purged", file="/d/purged-0/0.log")
    log.data(6, 0, 0, transactional=True, timestamp=T0)
    for sequence in range(3):
        log.data(7, 0, sequence, timestamp=T0 + 60 * MINUTE)
    checkpoint = {
        **{k: log.rows[0][k] for k in ("dump_id", "replica", "topic", "partition")},
        "file": "/d/log-start-offset-checkpoint",
        "position": 4,
        "state": "log_start_offset",
        "offset": 1,
        "leader_epoch": None,
        "topic_id": None,
    }
    stuck = []
    for state in ([], [checkpoint]):
        bronze = replace(
            Bronze.from_batches(spark.createDataFrame(log.rows, BATCHES.schema)),
            partition_state=spark.createDataFrame(state, PARTITION_STATE.schema),
        )
        found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
        (hanging,) = [f for f in found if f["kind"] == "HANGING_TRANSACTION"]
        stuck.append(hanging["message"].split("stuck at offset ")[1][:2])
    assert stuck == ["0.", "1."], stuck
