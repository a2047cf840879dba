"""Corner cases of the replay, each a log written batch by batch, mostly against the reference replay
(tests/reference_replay.py).

The cases are audited together, one audit per profile and copy lookback (tests/integration/together.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.kinds import KINDS
from audit_rules.profile import Profile
from audit_rules.replay import COPY_LOOKBACK
from jobs.profiles import load_profile
from tests.integration.together import Case, Found, Place, Together
from tests.reference_replay import reference_findings
from tests.strategies import COMPACTED_TOPIC, DAY_MS, LogBuilder
from tests.table_rows import above_info, unreadable_region

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

TOGETHER = Together()


def profile_named(name: str, **settings: Any) -> Profile:
    """The built-in profile `name` with `settings`, and COMPACTED_TOPIC compacted (the cases on a
    compacted topic write to it; the others write to topics not named compacted)."""
    base = load_profile(name)
    return replace(base, compacted_topics=(*base.compacted_topics, COMPACTED_TOPIC), **settings)


KAFKA_0_11 = profile_named("kafka-0.11")
KAFKA_1_0 = profile_named("kafka-1.0")
KAFKA_2_4 = profile_named("kafka-2.4")
KAFKA_2_5 = profile_named("kafka-2.5")
KAFKA_3_4 = profile_named("kafka-3.4")
PROFILE = {p.name: p for p in (KAFKA_0_11, KAFKA_1_0, KAFKA_2_4, KAFKA_2_5, KAFKA_3_4)}


def messages(found: Found, kind: str) -> dict[int, str]:
    """The `kind` findings' messages by their producer ids."""
    return {f["producer_id"]: f["message"] for f in found if f["kind"] == kind}


def of_kind(found: Found, kind: str) -> Found:
    return [f for f in found if f["kind"] == kind]


def _unreadable_before_an_epoch(at: Place) -> Case:
    log = at.log()
    log.data(7, 0, 0, 2)
    log.data(7, 0, 2, 1)
    torn_at = log.position
    log.position += 500  # bytes no header could be read from (a corrupt length), then the log goes on
    log.next_offset += 3
    log.data(7, 1, 3, 2)
    log.data(8, 0, 0, 1)
    log.data(8, 1, 4, 1)  # a new epoch at sequence 4 with nothing unreadable before it
    return Case(log.rows, quarantine=[unreadable_region(log.rows[0], torn_at)], facts={"torn_at": torn_at})


TOGETHER.add(KAFKA_3_4, "unreadable-epoch", _unreadable_before_an_epoch)


def test_a_new_epoch_after_unreadable_bytes_names_them(spark: SparkSession) -> None:
    """A producer's new epoch starts at sequence 3 after bytes no header could be read from: the finding
    stays (an error), and names the region where the epoch's first records may be. One after a readable
    stretch does not."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "unreadable-epoch")
    new_epoch = messages(found, "NEW_EPOCH_NONZERO_SEQUENCE")
    assert set(new_epoch) == {7, 8}, new_epoch
    region = f"{case.rows[0]['file']} at byte {case.facts['torn_at']}"
    named = f"Unreadable bytes lie before it, after the previous epoch ({region}, "
    assert named in new_epoch[7] and "UNREADABLE_BATCH" in new_epoch[7], new_epoch[7]
    assert "Unreadable" not in new_epoch[8], new_epoch[8]


def _rotted_commit(at: Place) -> Case:
    log = at.log()
    log.data(7, 0, 0, 2, transactional=True)
    log.data(8, 0, 0, 1, transactional=True)
    rotted = log.marker(7, 0, "COMMIT", crc_valid=False)
    log.wait(2 * DAY_MS)
    log.plain(1)
    return Case(log.rows, facts={"rotted": rotted})


TOGETHER.add(KAFKA_3_4, "rotted-commit", _rotted_commit)


def test_a_hanging_transaction_names_a_failed_batch_that_claims_to_be_its_marker(spark: SparkSession) -> None:
    """Producer 7's COMMIT rotted on disk: its transaction stays open (HANGING_TRANSACTION, as a consumer
    cannot read past the corrupt batch either), and the message names the failed batch whose header
    claims to be the marker. Producer 8's transaction, with no failed batch after it, names none."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "rotted-commit")
    hanging = messages(found, "HANGING_TRANSACTION")
    assert set(hanging) == {7, 8}, hanging
    rotted = case.facts["rotted"]
    named = (
        f"The batch at offset {rotted['base_offset']} ({rotted['file']} at byte {rotted['position']}) fails "
        "its CRC and its header claims to be this producer's marker at epoch 0"
    )
    assert named in hanging[7], hanging[7]
    assert "fails its CRC" not in hanging[8], hanging[8]


def _failed_fills(at: Place) -> Case:
    log = at.log()
    log.data(7, 0, 0, 2, transactional=True, crc_valid=False)
    log.marker(7, 0, "COMMIT")
    log.data(7, 0, 2, 1)
    log.data(8, 0, 0, 2, crc_valid=False)
    log.data(8, 0, 5, 1)
    log.data(9, 0, 0, 1)
    undecodable = log.data(10, 0, 0, 1)
    log.data(9, 0, 3, 1)
    log.data(11, 0, 0, 3)
    log.data(11, 0, 6, 4)
    log.data(11, 0, 0, 2)
    late_rot = log.data(11, 0, 2, 2, crc_valid=False)
    log.data(11, 0, 4, 4)
    region = {
        **{k: undecodable[k] for k in ("dump_id", "replica", "topic", "partition", "file", "position")},
        "length": undecodable["size_bytes"],
        "kind": "UNREADABLE_BATCH",
        "message": "records do not decompress",
    }
    return Case(log.rows, quarantine=[region], facts={"late_rot": late_rot})


TOGETHER.add(KAFKA_3_4, "failed-fills", _failed_fills)


def test_failed_fills_behind_a_marker_in_part_and_at_a_readable_header(spark: SparkSession) -> None:
    """Four corner cases of the failed fill and the unreadable note, against the reference replay:
    - producer 7's first transaction rotted before its own COMMIT (transactions V1 write an epoch's
      markers after its data): the start is filled, nothing is missing;
    - producer 8's rotted first batch holds sequences 0-1 of the 0-4 its next batch skips: the other 3
      are missing, and its CRC_MISMATCH does not call the records not lost (the start is not whole);
    - producer 9 skips sequences across a region quarantined at a batch whose header was read (its
      records would not decode): that batch is producer 10's, and the gap names no unreadable bytes;
    - producer 11 jumps from 0-2 to 6-9, regresses to 0-1 and goes on at 4-7 past a rotted 2-3: the late
      4-7 holds two of the three skipped numbers, and the rotted batch fills no jump (it lies between
      two late batches), so sequence 3 is missing (Spark's audit took it as filled until 2026-12-03)."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "failed-fills")
    loss = sorted(
        (f["kind"], f["producer_id"], f["missing_records"]) for f in found if f["severity"] == "critical"
    )
    assert loss == [("HISTORY_START_MISSING", 8, 3), ("SEQUENCE_GAP", 9, 2), ("SEQUENCE_GAP", 11, 1)], found
    expected = reference_findings(case.rows, profile=KAFKA_3_4, log_start_offset=0)
    assert (
        sorted(
            (f["kind"], f["producer_id"], f["missing_records"])
            for f in expected
            if KINDS[f["kind"]].severity.label == "critical"
        )
        == loss
    )
    crc = {f["first_offset"]: f["message"] for f in of_kind(found, "CRC_MISMATCH")}
    assert "not lost" in crc[0] and "not lost" not in crc[case.rows[3]["base_offset"]], crc
    assert "not lost" not in crc[case.facts["late_rot"]["base_offset"]], crc
    (gap,) = [f for f in of_kind(found, "SEQUENCE_GAP") if f["producer_id"] == 9]
    assert "Unreadable" not in gap["message"], gap["message"]


def _copies_near_and_far(at: Place) -> Case:
    log = at.log()

    def write(producer_id: int, *sequences: int) -> list[int]:
        return [log.data(producer_id, 0, seq)["base_offset"] for seq in sequences]

    first = write(1, 0, 1, 2, 3, 4, 5)
    refused, nearest = write(1, 0, 0)
    second = write(2, 0, 1, 2, 3, 4, 5)
    second_refused, follows, second_nearest = write(2, 0, 1, 0)
    third, fourth = write(3, 0, 1, 2), write(4, 0, 1)
    log.wait(8 * DAY_MS)
    (idle_nonzero,), (idle_zero,) = write(3, 1), write(4, 0)
    facts = {
        "first": first,
        "refused": refused,
        "nearest": nearest,
        "second": second,
        "second_refused": second_refused,
        "follows": follows,
        "second_nearest": second_nearest,
        "third": third,
        "fourth": fourth,
        "idle_nonzero": idle_nonzero,
        "idle_zero": idle_zero,
    }
    return Case(log.rows, facts=facts)


DUPLICATE_VERDICTS = [("kafka-3.4", COPY_LOOKBACK), ("kafka-3.4", 1), ("kafka-1.0", COPY_LOOKBACK)]
for _name, _lookback in DUPLICATE_VERDICTS:
    TOGETHER.add(PROFILE[_name], "copies-near-and-far", _copies_near_and_far, lookback=_lookback)


@pytest.mark.parametrize(("profile_name", "lookback"), DUPLICATE_VERDICTS)
def test_duplicate_verdicts_measure_the_window_from_the_nearest_copy(
    spark: SparkSession, profile_name: str, lookback: int
) -> None:
    """DUPLICATE_BATCH verdicts, against the reference replay, as the scan finds the copies (its own
    lookback) and as the pass over the stored history does (a lookback of 1 leaves them undecided):
    - producer 1 writes sequences 0-5, then 0 twice: the first copy is outside the 5-batch window (the
      broker should have refused it as out of sequence), the second right after it, inside (the cache
      holds the appended copy), though still pointing at the original;
    - producer 2 writes 0-5, then 0, 1 and 0: the copy of 1 is outside the window but follows the copy
      of 0 in sequence, and the last copy of 0 is one batch after the copy before it, inside (a
      lookback of 1 does not reach that copy);
    - after a wait past every profile's producer.id.expiration.ms, producer 3 re-sends sequence 1 and
      producer 4 sequence 0: expiry explains a copy only where the broker takes it without state (any
      sequence on 2.5+, 0 only on 1.0-2.4: there producer 3's copy is inside the window)."""
    profile = PROFILE[profile_name]
    case, found = TOGETHER.audited(spark, profile, "copies-near-and-far", lookback=lookback)
    rows = of_kind(found, "DUPLICATE_BATCH")
    at = case.facts
    first, second, third, fourth = at["first"], at["second"], at["third"], at["fourth"]
    refused, nearest, idle_zero, idle_nonzero = (
        at["refused"],
        at["nearest"],
        at["idle_zero"],
        at["idle_nonzero"],
    )
    second_refused, follows, second_nearest = at["second_refused"], at["follows"], at["second_nearest"]
    # The expiry explains a copy the broker took from a producer it had forgotten, and only that.
    explained = {r["first_offset"]: r["explained_by"] for r in rows}
    assert explained[idle_zero] == "expiry"
    assert explained[nearest] is None
    assert explained[refused] is None
    related = {r["first_offset"]: r["related_offset"] for r in rows}
    message = {r["first_offset"]: r["message"] for r in rows}
    assert related == {
        refused: first[0],
        nearest: first[0],
        second_refused: second[0],
        follows: second[1],
        second_nearest: second[0],
        idle_nonzero: third[1],
        idle_zero: fourth[0],
    }, rows
    for offset in (refused, second_refused):
        assert "should have refused it as out of sequence" in message[offset], message[offset]
        assert "lost the producer's state" in message[offset], message[offset]
    assert "should have caught it" in message[nearest], message[nearest]
    assert (
        f"first at offset {first[0]} and last at offset {refused} (0 of its batch(es) between)"
        in message[nearest]
    )
    assert "should have caught it" in message[second_nearest], message[second_nearest]
    assert f"and last at offset {second_refused} (1 of its batch(es) between)" in message[second_nearest]
    assert f"follows the batch before it (offset {second_refused}) in sequence" in message[follows]
    assert "should have" not in message[follows], message[follows]
    assert "forgotten" in message[idle_zero], message[idle_zero]
    idle = "should have caught it" if profile_name == "kafka-1.0" else "forgotten"
    assert idle in message[idle_nonzero], message[idle_nonzero]
    expected = {
        f["first_offset"]: "should have caught" in f["message"]
        for f in reference_findings(case.rows, profile=profile, log_start_offset=0)
        if f["kind"] == "DUPLICATE_BATCH"
    }
    assert {offset: "should have caught" in m for offset, m in message.items()} == expected


def _copy_after_expiry(at: Place) -> Case:
    log = at.log()
    original = [log.data(7, 0, seq)["base_offset"] for seq in (0, 1, 2)]
    log.wait(8 * DAY_MS)
    copy = log.data(7, 0, 1)["base_offset"]
    return Case(log.rows, facts={"original": original, "copy": copy})


TOGETHER.add(KAFKA_0_11, "copy-after-expiry", _copy_after_expiry)


def test_a_copy_a_broker_before_2_5_would_have_refused_with_or_without_state(spark: SparkSession) -> None:
    """0.11 keeps one batch: sequences 0, 1, 2, then 1 again after every expiration. Held state makes it
    out of sequence, expired state an unknown producer's non-zero sequence: refused either way."""
    case, found = TOGETHER.audited(spark, KAFKA_0_11, "copy-after-expiry")
    (finding,) = of_kind(found, "DUPLICATE_BATCH")
    assert (finding["first_offset"], finding["related_offset"]) == (
        case.facts["copy"],
        case.facts["original"][1],
    )
    assert "should have refused it either way" in finding["message"], finding["message"]
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in finding["message"], finding["message"]
    assert "forgotten" not in finding["message"], finding["message"]


def _copy_after_an_abort(at: Place) -> Case:
    log = at.log()
    original = log.data(7, 0, 0, transactional=True)["base_offset"]
    log.wait(8 * DAY_MS)
    log.marker(7, 0, "ABORT")
    log.wait(3_600_000)
    copy = log.data(7, 0, 0, transactional=True)["base_offset"]
    return Case(log.rows, facts={"original": original, "copy": copy})


MARKER_RESTARTS_EXPIRY = [("kafka-1.0", "had forgotten it"), ("kafka-2.5", "should have caught it")]
for _name, _ in MARKER_RESTARTS_EXPIRY:
    TOGETHER.add(PROFILE[_name], "copy-after-an-abort", _copy_after_an_abort)


@pytest.mark.parametrize(("profile_name", "verdict"), MARKER_RESTARTS_EXPIRY)
def test_a_marker_restarts_the_expiry_only_where_the_broker_line_times_it_from_markers(
    spark: SparkSession, profile_name: str, verdict: str
) -> None:
    """Producer 7's transaction at sequence 0 is aborted eight days later, and an hour after the marker
    the batch comes again. 1.0 to 2.4 time a producer's expiry from its last data batch: the broker had
    forgotten it and took sequence 0 as a new producer's. 2.5+ time it from the marker too: it still
    held the state, and the copy is in its window."""
    profile = PROFILE[profile_name]
    case, found = TOGETHER.audited(spark, profile, "copy-after-an-abort")
    (finding,) = of_kind(found, "DUPLICATE_BATCH")
    assert (finding["first_offset"], finding["related_offset"]) == (
        case.facts["copy"],
        case.facts["original"],
    )
    assert verdict in finding["message"], finding["message"]
    (expected,) = [
        f
        for f in reference_findings(case.rows, profile=profile, log_start_offset=0)
        if f["kind"] == "DUPLICATE_BATCH"
    ]
    assert verdict in expected["message"], expected["message"]


def _copy_across_cleaned_batches(topic: str) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        log = at.log(topic=topic)
        for sequence in range(8 if topic == COMPACTED_TOPIC else 2):
            log.data(5, 0, sequence)
        copy = log.data(5, 0, 0)["base_offset"]
        log.data(5, 0, 8)
        if topic == COMPACTED_TOPIC:
            log.rows = [r for r in log.rows if not 1 <= r["base_offset"] <= 6]
        return Case(log.rows, rolled=True, facts={"copy": copy})

    return build


for _topic in (COMPACTED_TOPIC, "orders"):
    TOGETHER.add(KAFKA_3_4, f"copy-across-cleaned-batches-{_topic}", _copy_across_cleaned_batches(_topic))


def test_a_copy_on_a_compacted_log_says_the_cleaner_may_have_removed_batches_between(
    spark: SparkSession,
) -> None:
    """Producer 5 writes sequences 0-7 on a compacted topic; the cleaner removed the batches of 1-6
    (whole batches, their offsets left free), and sequence 0 comes again: one batch lies between the
    copies in the log, seven did when the broker took the copy. "Should have caught it" no longer
    stands alone: the count is the log's now. Where nothing shows the cleaner's work (no hole in the
    offsets of a topic not named compacted), the verdict is as before."""
    verdicts = {}
    for topic in (COMPACTED_TOPIC, "orders"):
        case, found = TOGETHER.audited(spark, KAFKA_3_4, f"copy-across-cleaned-batches-{topic}")
        (finding,) = of_kind(found, "DUPLICATE_BATCH")
        assert (finding["first_offset"], finding["related_offset"]) == (case.facts["copy"], 0)
        verdicts[topic] = finding["message"]
    assert "should have caught it, unless the cleaner removed more" in verdicts[COMPACTED_TOPIC]
    assert "(1 of its batch(es) between)" in verdicts[COMPACTED_TOPIC]
    assert "should have caught it." in verdicts["orders"] and "cleaner" not in verdicts["orders"]


def _log_start_inside_the_first_segment(at: Place) -> Case:
    log = at.log(start_offset=980)
    log.plain(10)
    first = log.data(7, 0, 985, 1)["base_offset"]
    log.data(7, 0, 986, 1)
    checkpoint = {
        **{k: log.rows[0][k] for k in ("dump_id", "replica", "topic", "partition")},
        "file": f"/x/{at.case}/log-start-offset-checkpoint",
        "position": 4,
        "state": "log_start_offset",
        "offset": 1000,
        "leader_epoch": None,
        "topic_id": None,
    }
    return Case(log.rows, log_start_offset=980, partition_state=[checkpoint], facts={"first": first})


TOGETHER.add(KAFKA_3_4, "log-start-inside-the-first-segment", _log_start_inside_the_first_segment)


def test_a_history_start_below_a_log_start_moved_inside_the_first_segment_is_judged_by_that_segment(
    spark: SparkSession,
) -> None:
    """DeleteRecords moved the log start to 1000 inside the segment starting at 980 (the broker deletes a
    segment only once the next one starts at or below the log start): offsets 980-989 are on disk and
    hold another producer's records, so producer 7's first batch at 990 with sequence 985 had at most
    980 offsets below it removed: 5 records are missing. Spark and the reference agree (RULES.md: the
    first kept offset, not the log start)."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "log-start-inside-the-first-segment")
    history = [
        (f["kind"], f["first_offset"], f["missing_records"])
        for f in found
        if f["kind"].startswith("HISTORY_")
    ]
    assert history == [("HISTORY_START_MISSING", case.facts["first"], 5)]
    expected = [
        (f["kind"], f["first_offset"], f.get("missing_records"))
        for f in reference_findings(
            case.rows, profile=KAFKA_3_4, log_start_offset=1000, first_segment_base=980
        )
        if f["kind"].startswith("HISTORY_")
    ]
    assert expected == history


def _gap_after_idle_days(at: Place) -> Case:
    log = at.log()
    log.data(7, 0, 0)
    log.wait(8 * DAY_MS)
    log.data(7, 0, 5)
    return Case(log.rows)


UNVERIFIED_GAP_SETTINGS = [
    ("kafka-2.5", "transactional.id.expiration.ms", "transactional.id.expiration.ms (KIP-98 "),
    ("kafka-3.4", "producer.id.expiration.ms", "KIP-854 producer.id.expiration.ms"),
]
for _name, *_ in UNVERIFIED_GAP_SETTINGS:
    TOGETHER.add(PROFILE[_name], "gap-after-idle-days", _gap_after_idle_days)


@pytest.mark.parametrize(("profile_name", "setting", "rule"), UNVERIFIED_GAP_SETTINGS)
def test_an_unverified_gap_names_the_setting_the_profiles_broker_expires_producers_by(
    spark: SparkSession, profile_name: str, setting: str, rule: str
) -> None:
    """Before 3.4 (KIP-854) the broker expired producer ids after transactional.id.expiration.ms
    (`LogManager`'s `maxPidExpirationMs`): a gap after eight idle days names that setting, and its rule."""
    _, found = TOGETHER.audited(spark, PROFILE[profile_name], "gap-after-idle-days")
    (finding,) = of_kind(found, "SEQUENCE_GAP_UNVERIFIED")
    assert f"longer than {setting} = " in finding["message"], finding["message"]
    assert finding["rule"].startswith(rule), finding["rule"]
    other = "producer.id" if setting.startswith("transactional") else "transactional.id"
    assert other not in finding["message"]


def snapshot_entry(at: int, *, epoch: int, sequence: int, last: dict[str, Any]) -> dict[str, Any]:
    """A producer snapshot at offset `at` holding one entry: producer 7 at `epoch`, last sequence
    `sequence`, last offset and timestamp those of the row `last`, no open transaction."""
    return {
        **{k: last[k] for k in ("dump_id", "replica", "topic", "partition")},
        "file": f"{at:020d}.snapshot",
        "position": 10,
        "snapshot_offset": at,
        "producer_id": 7,
        "producer_epoch": epoch,
        "last_sequence": sequence,
        "last_offset": last["base_offset"],
        "offset_delta": 0,
        "timestamp": last["max_timestamp"],
        "coordinator_epoch": 0,
        "current_txn_first_offset": -1,
    }


def _snapshot_after_a_commit(stored_last_offset: str) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        log = at.log()
        log.data(7, 0, 0, transactional=True)
        data = log.data(7, 0, 1, transactional=True)
        marker = log.marker(7, 0, "COMMIT")
        log.data(8, 0, 0)
        snapshot_offset = marker["base_offset"] + 1
        last = marker if stored_last_offset == "marker" else data
        entry = snapshot_entry(snapshot_offset, epoch=0, sequence=1, last=last)
        return Case(log.rows, snapshots=[entry], facts={"snapshot_offset": snapshot_offset})

    return build


SNAPSHOT_LAST_OFFSETS = [
    ("kafka-0.11", "marker", False),
    ("kafka-0.11", "data", True),
    ("kafka-3.4", "data", False),
    ("kafka-3.4", "marker", True),
]
for _name, _stored, _ in SNAPSHOT_LAST_OFFSETS:
    TOGETHER.add(PROFILE[_name], f"snapshot-after-a-commit-{_stored}", _snapshot_after_a_commit(_stored))


@pytest.mark.parametrize(("profile_name", "stored_last_offset", "mismatch"), SNAPSHOT_LAST_OFFSETS)
def test_a_snapshot_after_a_marker_names_the_marker_only_in_0_11(
    spark: SparkSession, profile_name: str, stored_last_offset: str, mismatch: bool
) -> None:
    """Producer 7 writes sequences 0 and 1 in a transaction and commits it; the snapshot after the marker
    stores its last offset. 0.11's `ProducerIdEntry` took the marker's offset as the producer's last
    offset; from 1.0 on the snapshot keeps the last data batch's (`lastDataOffset`). Either way its last
    sequence is the last data batch's."""
    case, found = TOGETHER.audited(
        spark, PROFILE[profile_name], f"snapshot-after-a-commit-{stored_last_offset}"
    )
    assert [(f["kind"], f["related_offset"]) for f in above_info(found)] == (
        [("SNAPSHOT_MISMATCH", case.facts["snapshot_offset"])] if mismatch else []
    )


def _sequences(*shape: tuple[int, int]) -> Callable[[Place], Case]:
    """Producer 7's batches of (base sequence, records) `shape`, in order; facts: their offsets."""

    def build(at: Place) -> Case:
        log = at.log()
        offsets = [log.data(7, 0, base, records)["base_offset"] for base, records in shape]
        return Case(log.rows, facts={"offsets": offsets})

    return build


TOGETHER.add(KAFKA_3_4, "hole-after-a-late-batch", _sequences((0, 10), (20, 10), (10, 5), (30, 10)))


def test_a_hole_after_a_late_batch_is_one_gap_counted_by_the_jump_past_it(spark: SparkSession) -> None:
    """Sequences 0-9, 20-29, 10-14, 30-39: only 15-19 are missing. The batch 30-39 goes on in order from
    the highest sequence yet (29); it was a second SEQUENCE_GAP of the same five. The reference agrees."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "hole-after-a-late-batch")
    gaps = [(f["first_offset"], f["missing_records"]) for f in of_kind(found, "SEQUENCE_GAP")]
    assert gaps == [(10, 5)]
    reference = reference_findings(case.rows, profile=KAFKA_3_4, log_start_offset=0, compacted=False)
    assert [
        (f["first_offset"], f["missing_records"]) for f in reference if f["kind"] == "SEQUENCE_GAP"
    ] == gaps


JUMPS_AFTER_REGRESSIONS = [
    # 5-9 missing (the jump to 10); 15-19 arrive last: the jump to 20 skips nothing lost.
    ([(0, 5), (10, 5), (2, 2), (20, 5), (15, 5)], [(1, 5)]),
    # 15-19 never arrive: five missing at the jump to 20, not ten (5-9 again).
    ([(0, 5), (10, 5), (2, 2), (20, 5)], [(1, 5), (3, 5)]),
    # The history starts at 10 at the log start (5-9 below it: retention); 0-4 is a regression and
    # the jump to 20 skips 15-19 only.
    ([(10, 5), (0, 5), (20, 5)], [(2, 5)]),
]
for _i, (_shape, _) in enumerate(JUMPS_AFTER_REGRESSIONS):
    TOGETHER.add(KAFKA_3_4, f"jump-after-a-regression-{_i}", _sequences(*_shape))


@pytest.mark.parametrize(("index", "expected"), [(i, e) for i, (_, e) in enumerate(JUMPS_AFTER_REGRESSIONS)])
def test_a_jump_after_a_regression_counts_only_what_it_skipped_past_the_highest(
    spark: SparkSession, index: int, expected: list[tuple[int, int]]
) -> None:
    """The jump after a late batch was measured from that batch's next sequence: in 0-4, 10-14, 2-3,
    20-24 the hole 5-9 was counted by the jump to 10 and again by the jump to 20, a false or doubled
    SEQUENCE_GAP (critical). `expected`: (the batch's index, missing records). The reference agrees."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, f"jump-after-a-regression-{index}")
    offsets = case.facts["offsets"]
    gaps = [(f["first_offset"], f["missing_records"]) for f in of_kind(found, "SEQUENCE_GAP")]
    assert sorted(gaps) == [(offsets[i], missing) for i, missing in expected]
    reference = reference_findings(case.rows, profile=KAFKA_3_4, log_start_offset=0, compacted=False)
    assert sorted(
        (f["first_offset"], f["missing_records"]) for f in reference if f["kind"] == "SEQUENCE_GAP"
    ) == sorted(gaps)


KIP_758 = profile_named("kip-758-window")
KIP_758_WINDOW = [([900, 901], 900, False), ([1, *[100] * 10], 1, True)]


def _copy_of_the_first_request(sizes: list[int], copied: int) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        log = at.log()
        sequence = 0
        for size in sizes:
            log.data(7, 0, sequence, size)
            sequence += size
        log.data(7, 0, 0, copied)
        return Case(log.rows)

    return build


for _i, (_sizes, _copied, _) in enumerate(KIP_758_WINDOW):
    TOGETHER.add(KIP_758, f"copy-of-the-first-request-{_i}", _copy_of_the_first_request(_sizes, _copied))


@pytest.mark.parametrize(("index", "caught"), [(i, c) for i, (_, _, c) in enumerate(KIP_758_WINDOW)])
def test_the_kip_758_window_reads_the_copys_first_sequence(
    spark: SparkSession, index: int, caught: bool
) -> None:
    """Seed 003's window ("within 1000 of the latest sequence number", a request's first): a copy of
    0-899 after 900-1800 is 1800 back, outside; a copy whose first sequence is exactly 1000 back is
    inside. The Spark rule and the reference agree."""
    case, found = TOGETHER.audited(spark, KIP_758, f"copy-of-the-first-request-{index}")
    (copy,) = of_kind(found, "DUPLICATE_BATCH")
    assert ("should have caught" in copy["message"]) is caught, copy["message"]
    (expected,) = [
        f
        for f in reference_findings(case.rows, profile=KIP_758, log_start_offset=0, compacted=False)
        if f["kind"] == "DUPLICATE_BATCH"
    ]
    assert ("should have caught" in expected["message"]) is caught


def _forgotten_and_started_again(at: Place) -> Case:
    log = at.log()
    for seq in range(5):
        log.data(7, 0, seq)
    log.data(8, 0, 0, 2)
    restart = log.data(7, 0, 0)["base_offset"]
    follower = log.data(7, 0, 1)["base_offset"]
    log.wait(8 * DAY_MS)
    late = log.data(7, 0, 1)["base_offset"]
    other = at.log(topic="regressed")
    for seq in range(5):
        other.data(7, 0, seq)
    other.data(8, 0, 0, 2)
    regressed = other.data(7, 0, 0, 2)["base_offset"]
    # idle: sequences 0-2, eight days idle, 0 and 1 again: every line forgot the producer and took 0 as
    # a new producer's, so the 1 after it is in sequence there, not a retry of offset 1.
    idle = at.log(topic="idle", start_offset=7)
    for seq in range(3):
        idle.data(7, 0, seq)
    idle.wait(8 * DAY_MS)
    idle_restart = idle.data(7, 0, 0)["base_offset"]
    idle_follower = idle.data(7, 0, 1)["base_offset"]
    facts = {
        "orders": log.rows,
        "restart": restart,
        "follower": follower,
        "late": late,
        "regressed": regressed,
        "idle_restart": idle_restart,
        "idle_follower": idle_follower,
    }
    return Case(log.rows + other.rows + idle.rows, log_start_offset=7, facts=facts)


FORGETTING_LINES = ["kafka-1.0", "kafka-2.4", "kafka-3.4"]
for _name in FORGETTING_LINES:
    TOGETHER.add(PROFILE[_name], "forgotten-and-started-again", _forgotten_and_started_again)


@pytest.mark.parametrize("profile_name", FORGETTING_LINES)
def test_a_broker_that_forgot_the_producer_starts_its_cache_again(
    spark: SparkSession, profile_name: str
) -> None:
    """Producer 7 writes sequences 0-4 at offsets 0-4, producer 8 offsets 5-6; DeleteRecords moved the log
    start to 7 (the segment keeps the batches below it). Producer 7 then writes 0 and 1 again, and,
    eight days idle, 1 again (a copy of offset 8's). 1.0-2.3 evicted producer 7 when the log start passed
    its last batch and took 0 as a new producer's; 2.4 and 3.4 kept its state, so both copies are
    retries their window should have caught. The 1 after eight days: 3.4 forgot the producer (any
    sequence); 1.0 and 2.4 take only 0 from a producer they forgot, so their window decides. A restart
    0-1 in one batch is no exact copy: a regression, whose message says the same."""
    profile = PROFILE[profile_name]
    case, all_found = TOGETHER.audited(spark, profile, "forgotten-and-started-again")
    at = case.facts
    restart, follower, late, idle_restart, idle_follower = (
        at["restart"],
        at["follower"],
        at["late"],
        at["idle_restart"],
        at["idle_follower"],
    )
    found = {(f["topic"], f["first_offset"]): f for f in above_info(all_found)}
    message = {offset: found[("orders", offset)]["message"] for offset in (restart, follower, late)}
    if profile_name == "kafka-1.0":
        assert "has passed the producer's previous batch (offset 4)" in message[restart], message[restart]
        # Refused as an unknown producer, the client numbered its next records from 0 again (KAFKA-7190).
        assert f"took sequence 0 at offset {restart} from a producer it had forgotten" in message[follower]
        assert found[("orders", follower)]["explained_by"] == "retention"
        assert "should have caught it" in message[late], message[late]
    else:
        assert "should have caught it" in message[restart], message[restart]
        assert "should have caught it" in message[follower], message[follower]
        late_verdict = "should have caught it" if profile_name == "kafka-2.4" else "had forgotten it"
        assert late_verdict in message[late], message[late]
    assert "had forgotten it" in found[("idle", idle_restart)]["message"]
    assert found[("idle", idle_restart)]["explained_by"] == "expiry"
    idle_message = found[("idle", idle_follower)]["message"]
    if profile_name == "kafka-3.4":
        assert f"follows the batch before it (offset {idle_restart}) in sequence" in idle_message, (
            idle_message
        )
        # Inside the window, but the broker forgot the producer after the copy: the message names where.
        forgot = f"forgotten the producer after that copy and took the batch at offset {idle_restart}"
        assert forgot in idle_message, idle_message
        assert found[("idle", idle_follower)]["explained_by"] is None
    else:
        # Before 2.5 the forgotten producer was refused but for sequence 0: the client renumbered.
        assert f"took sequence 0 at offset {idle_restart} from a producer it had forgotten" in idle_message
        assert found[("idle", idle_follower)]["explained_by"] == "expiry"
    (regression,) = [f for key, f in found.items() if key[0] == "regressed"]
    assert (regression["kind"], regression["first_offset"]) == ("SEQUENCE_REGRESSION", at["regressed"])
    restarted = "Unless the producer restarted at 0: the log start offset (now 7)" in regression["message"]
    assert restarted == (profile_name == "kafka-1.0"), regression["message"]
    assert regression["explained_by"] == ("retention" if restarted else None)
    expected = {
        f["first_offset"]: ("should have caught" in f["message"], f["explained_by"])
        for f in reference_findings(at["orders"], profile=profile, log_start_offset=7)
        if f["kind"] == "DUPLICATE_BATCH"
    }
    assert {
        offset: ("should have caught" in m, found[("orders", offset)]["explained_by"])
        for offset, m in message.items()
    } == expected


def _two_dumps(
    at: Place,
    earlier: Callable[[LogBuilder], None],
    *,
    hours_after: Callable[[LogBuilder, dict[str, Any]], int],
) -> Case:
    """Dump d1 of a compacted topic: what `earlier` writes, then producer 8's batch; dump d2 holds only
    producer 8's batch, captured at `hours_after(d1's log, producer 8's batch)` (a time in ms). The
    cleaner's segment rolled (it never cleans the active one)."""
    first = at.log(topic=COMPACTED_TOPIC, dump_id="d1")
    earlier(first)
    kept = first.data(8, 0, 0)
    second = at.log(
        topic=COMPACTED_TOPIC, dump_id="d2", start_offset=kept["base_offset"], clock=kept["max_timestamp"]
    )
    second.data(8, 0, 0)
    captured = {
        first.rows[0]["dump_id"]: kept["max_timestamp"],
        second.rows[0]["dump_id"]: hours_after(first, kept),
    }
    return Case(first.rows + second.rows, rolled=True, captured=captured)


def _transaction_committed_eight_days_on(at: Place) -> Case:
    def earlier(log: LogBuilder) -> None:
        log.data(7, 0, 0, transactional=True)
        log.wait(8 * DAY_MS)
        log.marker(7, 0, "COMMIT")

    return _two_dumps(at, earlier, hours_after=lambda _, kept: kept["max_timestamp"] + 3_600_000)


CLEANED_AFTER_A_LATE_MARKER = [("kafka-1.0", False), ("kafka-2.5", True)]
for _name, _ in CLEANED_AFTER_A_LATE_MARKER:
    TOGETHER.add(PROFILE[_name], "transaction-committed-eight-days-on", _transaction_committed_eight_days_on)


@pytest.mark.parametrize(("profile_name", "lost"), CLEANED_AFTER_A_LATE_MARKER)
def test_a_producer_the_cleaner_removed_is_timed_by_its_data_batches_before_2_5(
    spark: SparkSession, profile_name: str, lost: bool
) -> None:
    """Dump d1 of a compacted topic holds producer 7's transaction (data, then its COMMIT eight days
    later) and producer 8's batch; in d2, an hour after the marker, producer 7's batches are gone. 1.0
    to 2.4 time a producer's expiry from its data batches: eight days, past its expiration, so the
    broker forgot producer 7 and the cleaner could remove its last batch. 2.5+ count the marker: an
    hour, so the cleaner kept its last batch, and the batches are lost."""
    _, found = TOGETHER.audited(spark, PROFILE[profile_name], "transaction-committed-eight-days-on")
    assert [(f["kind"], f["dump_id"], f["producer_id"]) for f in above_info(found)] == (
        [("UNKNOWN_PRODUCER_LOSS", "d2", 7)] if lost else []
    ), [f["message"] for f in found]


def _transaction_open_in_d1(days_between_dumps: int) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        def earlier(log: LogBuilder) -> None:
            log.data(7, 0, 0, transactional=True)
            log.wait(8 * DAY_MS)

        return _two_dumps(
            at,
            earlier,
            hours_after=lambda _, kept: kept["max_timestamp"] + days_between_dumps * DAY_MS + 3_600_000,
        )

    return build


OPEN_TRANSACTIONS = [("kafka-1.0", 0, True), ("kafka-3.4", 0, True), ("kafka-3.4", 9, False)]
for _name, _days, _ in OPEN_TRANSACTIONS:
    TOGETHER.add(PROFILE[_name], f"transaction-open-in-d1-{_days}", _transaction_open_in_d1(_days))


@pytest.mark.parametrize(("profile_name", "days_between_dumps", "lost"), OPEN_TRANSACTIONS)
def test_a_producer_with_a_transaction_open_in_the_earlier_dump_was_not_forgotten_before_its_marker(
    spark: SparkSession, profile_name: str, days_between_dumps: int, lost: bool
) -> None:
    """Dump d1 of a compacted topic holds producer 7's transaction, open (no marker yet), its data eight
    days old, and producer 8's batch; in d2 producer 7's batches are gone. A broker expires no producer
    with a transaction open, and the cleaner cleans no further than the last stable offset: its
    batches could go only after a marker written after d1, which the cleaner keeps a day
    (delete.retention.ms) and which restarts 3.4's expiry time. An hour after d1 that is loss, on
    either line; nine days after, the cleaner could have removed it all."""
    _, found = TOGETHER.audited(spark, PROFILE[profile_name], f"transaction-open-in-d1-{days_between_dumps}")
    # d1's transaction, eight days open, hangs there.
    assert sorted((f["kind"], f["dump_id"], f["producer_id"]) for f in above_info(found)) == [
        ("HANGING_TRANSACTION", "d1", 7),
        *([("UNKNOWN_PRODUCER_LOSS", "d2", 7)] if lost else []),
    ], [f["message"] for f in found]


def _fencing_abort_snapshot(stored_sequence: int) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        log = at.log()
        log.data(7, 0, 0, transactional=True)
        log.data(7, 0, 1, transactional=True)
        marker = log.marker(7, 1, "ABORT")
        log.data(8, 0, 0)
        snapshot_offset = marker["base_offset"] + 1
        entry = snapshot_entry(snapshot_offset, epoch=1, sequence=stored_sequence, last=marker)
        return Case(log.rows, snapshots=[entry], facts={"snapshot_offset": snapshot_offset})

    return build


FENCING_ABORT_SNAPSHOTS = [(-1, False), (1, True)]
for _stored, _ in FENCING_ABORT_SNAPSHOTS:
    TOGETHER.add(KAFKA_0_11, f"fencing-abort-snapshot-{_stored}", _fencing_abort_snapshot(_stored))


@pytest.mark.parametrize(("stored_sequence", "mismatch"), FENCING_ABORT_SNAPSHOTS)
def test_a_0_11_snapshot_after_a_marker_that_raised_the_epoch_has_no_sequence(
    spark: SparkSession, stored_sequence: int, mismatch: bool
) -> None:
    """Producer 7 writes sequences 0 and 1 at epoch 0; the coordinator aborts the transaction with a
    marker at epoch 1 (a fencing abort). 0.11 took the marker's offset as the last offset and reset the
    sequence: the snapshot after it holds epoch 1, sequence -1."""
    case, found = TOGETHER.audited(spark, KAFKA_0_11, f"fencing-abort-snapshot-{stored_sequence}")
    assert [(f["kind"], f["related_offset"]) for f in above_info(found)] == (
        [("SNAPSHOT_MISMATCH", case.facts["snapshot_offset"])] if mismatch else []
    ), [f["message"] for f in found]


def _copy_after_the_log_start(with_marker: bool) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        log = at.log()
        log.data(7, 0, 0, transactional=True)
        log.data(7, 0, 1, transactional=True)
        log.data(8, 0, 0, 2)
        if with_marker:
            log.marker(7, 0)
        else:
            log.data(8, 0, 2)
        copy = log.data(7, 0, 0, transactional=True)["base_offset"]
        return Case(log.rows, log_start_offset=3, facts={"copy": copy})

    return build


EVICTIONS_BY_0_11 = [(True, "should have refused it"), (False, "truncateHead")]
for _with_marker, _ in EVICTIONS_BY_0_11:
    TOGETHER.add(
        KAFKA_0_11, f"copy-after-the-log-start-{_with_marker}", _copy_after_the_log_start(_with_marker)
    )


@pytest.mark.parametrize(("with_marker", "verdict"), EVICTIONS_BY_0_11)
def test_a_0_11_producer_is_evicted_by_its_last_batch_or_marker(
    spark: SparkSession, with_marker: bool, verdict: str
) -> None:
    """0.11's last offset moved with markers: producer 7's commit at offset 4, past the log start 3,
    kept the producer, so its sequence 0 after it is no restart after eviction; without it, it is."""
    case, found = TOGETHER.audited(spark, KAFKA_0_11, f"copy-after-the-log-start-{with_marker}")
    (finding,) = of_kind(found, "DUPLICATE_BATCH")
    assert finding["first_offset"] == case.facts["copy"]
    assert verdict in finding["message"], finding["message"]
    (expected,) = [
        f
        for f in reference_findings(case.rows, profile=KAFKA_0_11, log_start_offset=3)
        if f["kind"] == "DUPLICATE_BATCH"
    ]
    assert ("should have" in expected["message"]) == ("should have" in finding["message"])


def _marker_alone_in_d1(at: Place) -> Case:
    def earlier(log: LogBuilder) -> None:
        log.marker(7, 0, "ABORT")
        log.wait(8 * DAY_MS)

    return _two_dumps(at, earlier, hours_after=lambda _, kept: kept["max_timestamp"] + 3_600_000)


TOGETHER.add(KAFKA_1_0, "marker-alone-in-d1", _marker_alone_in_d1)


def test_a_producer_the_earlier_dump_shows_by_a_marker_alone_is_timed_by_it(spark: SparkSession) -> None:
    """Dump d1 of a compacted topic holds only producer 7's ABORT marker (its data was cleaned away)
    and, eight days later, producer 8's batch; in d2, an hour on, the marker is gone too. With no data
    batch of producer 7 in d1, the marker's time is the newest the audit knows: past 1.0's seven-day
    expiration at d2, so the cleaner could remove it."""
    _, found = TOGETHER.audited(spark, KAFKA_1_0, "marker-alone-in-d1")
    assert above_info(found) == [], [f["message"] for f in found]


def _fenced_by_a_marker(marker_epoch: int, data: bool, hours: int) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        marker: dict[str, Any] = {}

        def earlier(log: LogBuilder) -> None:
            if data:
                log.data(7, 0, 0, 2, transactional=True)
            log.wait(60_000)
            marker.update(log.marker(7, marker_epoch, "ABORT"))
            log.wait(3_600_000)

        return _two_dumps(at, earlier, hours_after=lambda *_: marker["max_timestamp"] + hours * 3_600_000)

    return build


FENCING_MARKERS = [
    ("kafka-1.0", {}, 1, True, 48, False),
    ("kafka-1.0", {}, 1, True, 2, True),
    ("kafka-1.0", {}, 0, True, 48, True),
    ("kafka-1.0", {}, 1, False, 48, True),
    ("kafka-2.4", {}, 1, True, 48, True),
    ("kafka-2.4", {"marker_refreshes_expiry": False}, 1, True, 48, False),
]


def _fencing_case(i: int) -> tuple[Profile, str]:
    name, settings, *_ = FENCING_MARKERS[i]
    return profile_named(name, **settings), f"fenced-by-a-marker-{i}"


for _i, (_, _, _epoch, _data, _hours, _) in enumerate(FENCING_MARKERS):
    TOGETHER.add(*_fencing_case(_i), _fenced_by_a_marker(_epoch, _data, _hours))


@pytest.mark.parametrize("index", range(len(FENCING_MARKERS)))
def test_a_marker_that_fenced_the_producer_left_it_no_time_before_2_4_1(
    spark: SparkSession, index: int
) -> None:
    """Dump d1 of a compacted topic holds producer 7's transaction (epoch 0) and, a minute later, the
    coordinator's ABORT; producer 8 writes an hour on. In d2, `hours` after the marker, producer 7's
    batches are gone. A marker that raised the epoch (the coordinator fencing a timed-out transaction)
    emptied a 1.0-2.4.0 broker's cache of the producer's batches, and with it its `lastTimestamp`: its
    next expiry check forgot producer 7, and once past the delete horizon (a day) the cleaner could
    remove all of it. Two hours on it had to keep the marker; a marker of the same epoch left the data
    batch's time (two days: kept); a producer d1 shows by the marker alone is timed by it; 2.4.1 times
    the producer from the marker (kept), 2.4.0 does not. (FENCING_MARKERS: profile, its settings, the
    marker's epoch, whether d1 holds the data, hours, lost.)"""
    *_, lost = FENCING_MARKERS[index]
    _, found = TOGETHER.audited(spark, *_fencing_case(index))
    assert [(f["kind"], f["dump_id"], f["producer_id"]) for f in above_info(found)] == (
        [("UNKNOWN_PRODUCER_LOSS", "d2", 7)] if lost else []
    ), [f["message"] for f in found]


def _new_epochs_at_sequence_5(at: Place) -> Case:
    log = at.log()
    log.data(7, 0, 0, 2)
    log.data(9, 0, 0, 2, transactional=True)
    log.marker(9, 1)
    log.wait(8 * DAY_MS)
    log.data(8, 0, 0, 2)
    idle = log.data(7, 1, 5)["base_offset"]
    quick = log.data(8, 1, 5)["base_offset"]
    verified = log.data(9, 1, 5, transactional=True)["base_offset"]
    log.marker(9, 2)
    return Case(log.rows, facts={"idle": idle, "quick": quick, "verified": verified})


UNCHECKED_NEW_EPOCHS = ["kafka-2.4", "kafka-3.4"]
for _name in UNCHECKED_NEW_EPOCHS:
    TOGETHER.add(PROFILE[_name], "new-epochs-at-sequence-5", _new_epochs_at_sequence_5)


@pytest.mark.parametrize("profile_name", UNCHECKED_NEW_EPOCHS)
def test_a_new_epochs_nonzero_start_after_expiry_was_taken_unchecked_from_2_5(
    spark: SparkSession, profile_name: str
) -> None:
    """Producer 7 idles eight days (past producer.id.expiration.ms) and comes back at epoch 1 from
    sequence 5. From 2.5 the broker takes an unknown producer's new epoch at any sequence
    (`ProducerAppendInfo.checkSequence` refuses a nonzero one only against a known epoch): still a
    NEW_EPOCH_NONZERO_SEQUENCE, explained by expiry, its message saying the broker did not check. A 2.4
    broker answers UNKNOWN_PRODUCER_ID (that batch is in the log through another path): no explanation.
    Producer 8's epoch starting at 5 right after its epoch 0 is not explained either way; nor producer 9's
    transaction at sequence 5 after the marker that raised its epoch (transactions V2): the broker
    verifies a V2 transaction's first batch, and refuses a nonzero one without state (4.0+). The
    reference agrees."""
    profile = PROFILE[profile_name]
    case, all_found = TOGETHER.audited(spark, profile, "new-epochs-at-sequence-5")
    idle, quick, verified = case.facts["idle"], case.facts["quick"], case.facts["verified"]
    found = {f["first_offset"]: f for f in of_kind(all_found, "NEW_EPOCH_NONZERO_SEQUENCE")}
    assert set(found) == {idle, quick, verified}, found
    unchecked = profile_name == "kafka-3.4"
    assert found[idle]["explained_by"] == ("expiry" if unchecked else None)
    assert ("took the new epoch's sequence unchecked" in found[idle]["message"]) == unchecked, found[idle]
    for offset in (quick, verified):
        assert found[offset]["explained_by"] is None and "unchecked" not in found[offset]["message"]
    reference = {
        f["first_offset"]: f["explained_by"]
        for f in reference_findings(case.rows, profile=profile, log_start_offset=0)
        if f["kind"] == "NEW_EPOCH_NONZERO_SEQUENCE"
    }
    assert reference == {offset: f["explained_by"] for offset, f in found.items()}


def _wrapped_log(
    before_base: int, before_records: int, *, skipped: int, free: int, restarts: int
) -> Callable[[Place], Case]:
    """Producer 5's sequences 0-1 at offsets 0-1, `skipped` offsets the cleaner emptied, the batch before
    the wrap (`before_records` sequences from `before_base`), `free` offsets emptied, then single-record
    batches of sequences 0 to `restarts` - 1, and a plain batch."""

    def build(at: Place) -> Case:
        log = at.log()
        log.data(5, 0, 0, 1)
        log.data(5, 0, 1, 1)
        log.next_offset += skipped
        log.data(5, 0, before_base, before_records)
        log.next_offset += free
        for sequence in range(restarts):
            log.data(5, 0, sequence, 1)
        log.plain(1)
        return Case(log.rows)

    return build


TOGETHER.add(
    KAFKA_3_4,
    "lap-past-cleaned-batches",
    _wrapped_log(2147483000, 1, skipped=2147482998, free=700, restarts=3),
)
TOGETHER.add(
    KAFKA_3_4, "no-room-for-a-lap", _wrapped_log(2147482001, 1000, skipped=2147482000, free=600, restarts=2)
)


def test_a_lap_whose_wrapping_batch_the_cleaner_removed_is_a_lap_not_a_restart(spark: SparkSession) -> None:
    """Producer 5's sequences 0-1 at offsets 0-1 stay, the cleaner removed 2-2147482999 (as many offsets
    are free), then 2147483000, then the batches up to 2147483647 are gone (the one that wrapped too:
    700 offsets free for 647 sequences), then 0, 1, 2 again. A base of 0 was a lap only straight after
    2147483647: here the producer restarted at 0, and its batches 0 and 1 were DUPLICATE_BATCH errors of
    the first lap's. A lap, whose skipped sequences the cleaner removed: nothing above info. The
    reference agrees."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "lap-past-cleaned-batches")
    kinds = sorted((f["kind"], f["severity"], f["first_offset"]) for f in found)
    # Nothing but the free offsets says the log is compacted: the assumption is an OFFSET_HOLE from 2.
    assert [k for k in kinds if k[1] != "info"] == [("OFFSET_HOLE", "warning", 2)], kinds
    reference = reference_findings(case.rows, profile=KAFKA_3_4, log_start_offset=0, compacted=True)
    assert sorted((f["kind"], f["first_offset"]) for f in reference) == [
        (k, o) for k, _, o in kinds if k != "OFFSET_HOLE"
    ]


def test_the_room_for_a_lap_counts_the_offsets_after_the_batch_before(spark: SparkSession) -> None:
    """As above, but the batch before holds sequences 2147482001-2147483000 at 1000 offsets, and 600
    offsets are free after it for the 647 sequences up to 2147483647: no room, so the 0 is the producer
    starting again (its batches 0 and 1 copies of the first lap's), not a lap. Counted from the batch
    before's base offset, 1599 offsets made room. The reference agrees."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "no-room-for-a-lap")
    kinds = sorted((f["kind"], f["first_offset"]) for f in above_info(found))
    restarted = [case.rows[3]["base_offset"], case.rows[4]["base_offset"]]
    assert kinds == [*[("DUPLICATE_BATCH", offset) for offset in restarted], ("OFFSET_HOLE", 2)], kinds
    reference = reference_findings(case.rows, profile=KAFKA_3_4, log_start_offset=0, compacted=True)
    assert (
        sorted((f["kind"], f["first_offset"]) for f in reference if f["kind"] == "DUPLICATE_BATCH")
        == kinds[:-1]
    )


def _epoch_raised_by_its_commit(at: Place) -> Case:
    log = at.log()
    log.data(5, 0, 0, 1, transactional=True)
    log.marker(5, 1, "COMMIT")
    log.data(5, 1, 3, 1, transactional=True)
    log.marker(5, 2, "COMMIT")
    log.plain(1)
    return Case(log.rows)


TOGETHER.add(KAFKA_3_4, "epoch-raised-by-its-commit", _epoch_raised_by_its_commit)


def test_a_new_epochs_nonzero_start_after_the_marker_that_raised_it_names_that_marker(
    spark: SparkSession,
) -> None:
    """Transactions V2: epoch 0's transaction, its COMMIT one epoch up (offset 1), then epoch 1's data
    at sequence 3. The row before it is the marker at its own epoch, not a previous epoch's."""
    _, found = TOGETHER.audited(spark, KAFKA_3_4, "epoch-raised-by-its-commit")
    (wrong,) = of_kind(found, "NEW_EPOCH_NONZERO_SEQUENCE")
    assert (wrong["first_offset"], wrong["related_offset"]) == (2, 1)
    assert "instead of 0 (after the marker at offset 1 that raised the epoch)" in wrong["message"], wrong


def _transaction_markers_v2_and_v1(at: Place) -> Case:
    """Producers 1 and 4 end their transactions the V2 way (each marker one epoch above its data), and
    each takes a marker of its previous transaction written again while the next one was open: a
    COMMIT, and an ABORT. Producer 2 (V2) takes its marker again with no transaction open (the retry
    KAFKA-19999 accepts). Producer 3 ends its transactions the V1 way, and the coordinator fenced it
    with an ABORT one epoch up (a timed-out transaction), after which it went on at that epoch.
    Producer 5's stale COMMIT takes its next transaction's only batch, so that transaction's own end
    closes nothing; producer 6's stale COMMIT is written once more before that end."""
    log = at.log()
    stale: dict[int, tuple[int, int]] = {}
    log.data(1, 0, 0, transactional=True)
    first_end = log.marker(1, 1)["base_offset"]
    log.data(1, 1, 0, transactional=True)
    stale[1] = (log.marker(1, 1)["base_offset"], first_end)
    log.data(1, 1, 1, transactional=True)
    log.marker(1, 2)
    log.data(2, 0, 0, transactional=True)
    log.marker(2, 1)
    log.marker(2, 1)
    log.data(2, 1, 0, transactional=True)
    log.marker(2, 2)
    log.data(3, 0, 0, transactional=True)
    log.marker(3, 0)
    log.data(3, 0, 1, transactional=True)
    log.marker(3, 1, "ABORT")
    log.data(3, 1, 0, transactional=True)
    log.marker(3, 1)
    log.data(4, 0, 0, transactional=True)
    log.marker(4, 1)
    log.data(4, 1, 0, transactional=True)
    aborted = log.marker(4, 2, "ABORT")["base_offset"]
    log.data(4, 2, 0, transactional=True)
    stale[4] = (log.marker(4, 2, "ABORT")["base_offset"], aborted)
    log.data(5, 0, 0, transactional=True)
    ended = log.marker(5, 1)["base_offset"]
    taken = log.data(5, 1, 0, transactional=True)["base_offset"]
    stale[5] = (log.marker(5, 1)["base_offset"], ended)
    own_end = log.marker(5, 2)["base_offset"]
    log.data(6, 0, 0, transactional=True)
    ended_6 = log.marker(6, 1)["base_offset"]
    taken_6 = log.data(6, 1, 0, transactional=True)["base_offset"]
    stale[6] = (log.marker(6, 1)["base_offset"], ended_6)
    again = log.marker(6, 1)["base_offset"]
    own_end_6 = log.marker(6, 2)["base_offset"]
    facts = {"stale": stale, "own_end": own_end, "taken": taken, "again": again, "own_end_6": own_end_6}
    return Case(log.rows, facts={**facts, "taken_6": taken_6})


TOGETHER.add(KAFKA_3_4, "transaction-markers-v2-and-v1", _transaction_markers_v2_and_v1)


def test_a_v2_producers_marker_at_its_own_transactions_epoch_is_a_stale_marker(spark: SparkSession) -> None:
    """KAFKA-19446: the marker written again after the next transaction's data (producers 1 and 4) is a
    STALE_TXN_MARKER related to the marker it repeats; the one written again with nothing open
    (producer 2) only an EMPTY_TXN_MARKER; the V1 producer fenced and going on at the fence's epoch
    (producer 3) neither. The own end of the transaction a stale marker ended (producer 5) is an
    EMPTY_TXN_MARKER that names the stale marker and the data it took; the stale marker written once
    more (producer 6) is an EMPTY_TXN_MARKER repeating it, and the own end after that copy names the
    stale marker too. Every finding of the log is the reference's."""
    case, found = TOGETHER.audited(spark, KAFKA_3_4, "transaction-markers-v2-and-v1")
    stale = {
        f["producer_id"]: (f["first_offset"], f["related_offset"]) for f in of_kind(found, "STALE_TXN_MARKER")
    }
    assert stale == case.facts["stale"]
    errors = {(p, "error") for p in (1, 4, 5, 6)}
    assert {(f["producer_id"], f["severity"]) for f in above_info(found)} == errors
    empty = {f["producer_id"]: f for f in of_kind(found, "EMPTY_TXN_MARKER") if f["producer_id"] != 6}
    assert set(empty) == {2, 5}
    stale_6, _ = case.facts["stale"][6]
    copy = [f for f in of_kind(found, "EMPTY_TXN_MARKER") if f["first_offset"] == case.facts["again"]]
    assert [(f["producer_id"], f["related_offset"]) for f in copy] == [(6, stale_6)], copy
    assert f"repeats the one at offset {stale_6}" in copy[0]["message"], copy[0]["message"]
    assert "KAFKA-19446" in messages(found, "STALE_TXN_MARKER")[1]
    stale_at, _ = case.facts["stale"][5]
    after_stale = empty[5]
    assert (after_stale["first_offset"], after_stale["related_offset"]) == (case.facts["own_end"], stale_at)
    taken = case.facts["taken"]
    named = (
        f"the COMMIT marker at offset {stale_at} before it, a marker of the transaction before written "
        f"again (STALE_TXN_MARKER), had already ended the transaction whose data begins at offset {taken}"
    )
    assert named in after_stale["message"], after_stale["message"]
    (after_copy,) = [
        f for f in of_kind(found, "EMPTY_TXN_MARKER") if f["first_offset"] == case.facts["own_end_6"]
    ]
    assert (after_copy["producer_id"], after_copy["related_offset"]) == (6, case.facts["again"]), after_copy
    named_6 = (
        f"the COMMIT marker at offset {stale_6} before it, a marker of the transaction before written "
        f"again (STALE_TXN_MARKER), had already ended the transaction whose data begins at offset "
        f"{case.facts['taken_6']}"
    )
    assert named_6 in after_copy["message"], after_copy["message"]
    assert "STALE_TXN_MARKER" not in empty[2]["message"], empty[2]["message"]
    reference = reference_findings(case.rows, profile=KAFKA_3_4, log_start_offset=0, compacted=False)
    key = itemgetter("kind", "producer_id", "first_offset", "related_offset")
    assert sorted(map(key, found)) == sorted(map(key, reference))
