"""The compaction excuse needs room: the cleaner removes whole batches and keeps the offsets of every
batch it keeps, so sequences it removed left at least as many free offsets. Sequences skipped where no
offset is free were never in the log, compacted or not.

The cases are audited together, one audit per profile (tests/integration/together.py); topics named
`c-*` are compacted by COMPACTED, the others by nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES
from tests.integration.together import Case, Found, Place, Together
from tests.reference_replay import reference_findings
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from audit_rules.profile import Profile

pytestmark = pytest.mark.integration

COMPACTED = replace(load_profile("kafka-3.4"), compacted_topics=("c-*",))
ORDERS_COMPACTED = replace(load_profile("kafka-3.4"), compacted_topics=("orders",))
TOGETHER = Together()


def _log(topic: str, first_offset: int) -> LogBuilder:
    return LogBuilder(topic=topic, file=f"/d/{topic}-0/0.log", start_offset=first_offset)


def _logs(*build: Callable[[Place], list[LogBuilder]], **case: Any) -> Callable[[Place], Case]:
    """A case of the logs `build` writes in the case's place, with `case`'s settings (`rolled`, ...)."""

    def make(at: Place) -> Case:
        logs = [log for b in build for log in b(at)]
        return Case([row for log in logs for row in log.rows], **case)

    return make


def _topic_kinds(found: Found) -> list[tuple[str, str, Any]]:
    return sorted((f["topic"], f["kind"], f["explained_by"]) for f in found)


def _skipped(at: Place) -> list[LogBuilder]:
    # Producer 7 writes sequences 0-4 at offsets 0-4, then 10-11: right after them (no offset free for
    # 5-9), or at offset 10 (offsets 5-9 free).
    gap = at.log(topic="c-gap")
    gap.data(7, 0, 0, 5)
    gap.data(7, 0, 10, 2)
    holed = at.log(topic="c-gap-hole")
    holed.data(7, 0, 0, 5)
    holed.next_offset = 10
    holed.data(7, 0, 10, 2)
    # Producer 8's first retained batch starts at sequence 7: at offset 3, or at offset 7.
    start = at.log(topic="c-start", start_offset=3)
    start.data(8, 0, 7, 1)
    start_holed = at.log(topic="c-start-hole", start_offset=7)
    start_holed.data(8, 0, 7, 1)
    # After a regression (sequences 2-3 at offsets 10-11), sequences 5-9 may lie at offsets 5-9, before
    # it: the offsets are not counted from the late batch.
    copied = at.log(topic="c-after-late")
    copied.data(7, 0, 0, 5)
    copied.next_offset = 10
    copied.data(7, 0, 2, 2)
    copied.data(7, 0, 10, 1)
    return [gap, holed, start, start_holed, copied]


# (Each log's batches in a rolled segment: the cleaner never touches the active one.)
TOGETHER.add(COMPACTED, "skipped", _logs(_skipped, rolled=True))


def test_skipped_sequences_with_no_free_offsets_are_not_explained_by_compaction(spark: SparkSession) -> None:
    _, found = TOGETHER.audited(spark, COMPACTED, "skipped")
    assert _topic_kinds(found) == [
        ("c-after-late", "SEQUENCE_REGRESSION", None),
        ("c-gap", "SEQUENCE_GAP", None),
        ("c-start", "HISTORY_START_MISSING", None),
        ("c-start-hole", "HISTORY_TRUNCATED_BY_RETENTION", "compaction"),
    ], [f["message"] for f in found]


def _held_by_others(at: Place) -> list[LogBuilder]:
    shared = at.log(topic="c-shared")
    shared.data(7, 0, 0, 5)
    shared.data(9, 0, 0, 5)
    shared.data(7, 0, 10, 2)
    room = at.log(topic="c-shared-room")
    room.data(7, 0, 0, 5)
    room.data(9, 0, 0, 2)
    room.next_offset = 10
    room.data(7, 0, 10, 2)
    fits = at.log(topic="c-shared-fits")
    fits.data(7, 0, 0, 5)
    fits.data(9, 0, 0, 2)
    fits.next_offset = 10
    fits.data(7, 0, 8, 2)
    copy = at.log(topic="c-shared-copy")
    copy.data(7, 0, 0, 5)
    copy.next_offset = 0
    copy.data(7, 0, 0, 5)
    copy.next_offset = 8
    copy.data(7, 0, 8, 2)
    return [shared, room, fits, copy]


TOGETHER.add(COMPACTED, "held-by-others", _logs(_held_by_others, rolled=True))


def test_offsets_other_producers_batches_hold_are_no_room(spark: SparkSession) -> None:
    """Producer 7 writes sequences 0-4 at offsets 0-4 and 10-11 at offset 10; producer 9's retained
    batches hold offsets 5-9 (`c-shared`): no offset was free for 7's sequences 5-9, which were never in
    the log. With 9's batch holding 5-6 only (`c-shared-room`), 7-9 are free: room for a removed batch of
    three records, not for five. Where 7 skipped three (sequences 5-7, then 8-9 at offset 10:
    `c-shared-fits`), they fit in 7-9: the cleaner may have removed them; so too where two copies of
    7's batch at 0-4 (an overlap) hold those offsets once (`c-shared-copy`)."""
    _, found = TOGETHER.audited(spark, COMPACTED, "held-by-others")
    gaps = [f for f in found if f["kind"].startswith("SEQUENCE_GAP")]
    assert sorted((f["topic"], f["kind"], f["first_offset"]) for f in gaps) == [
        ("c-shared", "SEQUENCE_GAP", 10),
        ("c-shared-room", "SEQUENCE_GAP", 10),
    ], [f["message"] for f in found]


def _epochs_and_starts(at: Place) -> list[LogBuilder]:
    epoch_shared = at.log(topic="c-epoch-shared")
    epoch_shared.data(7, 0, 0, 5)
    epoch_shared.data(9, 0, 0, 5)
    epoch_shared.data(7, 1, 5, 1)
    epoch_room = at.log(topic="c-epoch-room")
    epoch_room.data(7, 0, 0, 5)
    epoch_room.next_offset = 10
    epoch_room.data(7, 1, 5, 1)
    marker = at.log(topic="c-marker-shared")
    marker.data(7, 0, 0, 1, transactional=True)
    marker.data(9, 0, 0, 5)
    marker.marker(7, 1)
    marker.data(7, 1, 3, 1)
    start_shared = at.log(topic="c-start-shared")
    start_shared.data(9, 0, 0, 5)
    start_shared.data(8, 0, 3, 1)
    start_room = at.log(topic="c-start-room")
    start_room.data(9, 0, 0, 2)
    start_room.next_offset = 5
    start_room.data(8, 0, 3, 1)
    return [epoch_shared, epoch_room, marker, start_shared, start_room]


TOGETHER.add(COMPACTED, "epochs-and-starts", _logs(_epochs_and_starts, rolled=True))


def test_a_new_epochs_and_a_first_batchs_room_is_the_offsets_no_batch_holds(spark: SparkSession) -> None:
    """The first batches a new epoch skipped, and those before a producer's first retained batch, each
    took an offset the cleaner would have left free: offsets other producers' batches hold are no room.
    Producer 7's epoch 1 starts at sequence 5 at offset 10: after its epoch 0 at 0-4, with producer 9's
    batch at 5-9 (`c-epoch-shared`: no room) or offsets 5-9 free (`c-epoch-room`). After the marker that
    raised its epoch (transactions V2) its sequences 0-2 may lie anywhere below: at 1-5 held by 9
    (`c-marker-shared`) they cannot. Producer 8's first batch at sequence 3 at offset 5: offsets 0-4 held
    by 9 (`c-start-shared`), or 2-4 free (`c-start-room`)."""
    case, found = TOGETHER.audited(spark, COMPACTED, "epochs-and-starts")
    assert sorted((f["topic"], f["kind"], f["first_offset"], f["missing_records"]) for f in found) == [
        ("c-epoch-shared", "NEW_EPOCH_NONZERO_SEQUENCE", 10, None),
        ("c-marker-shared", "NEW_EPOCH_NONZERO_SEQUENCE", 7, None),
        ("c-start-room", "HISTORY_TRUNCATED_BY_RETENTION", 5, None),
        ("c-start-shared", "HISTORY_START_MISSING", 5, 3),
    ], [f["message"] for f in found]
    # The reference replay reads the logs alike.
    for topic in sorted({r["topic"] for r in case.rows}):
        rows = [r for r in case.rows if r["topic"] == topic]
        expected = [
            (f["kind"], f["first_offset"])
            for f in reference_findings(rows, profile=COMPACTED, log_start_offset=0, compacted=True)
        ]
        assert expected == [(f["kind"], f["first_offset"]) for f in found if f["topic"] == topic]


def _active(free: bool) -> Callable[[Place], list[LogBuilder]]:
    def build(at: Place) -> list[LogBuilder]:
        log = at.log(topic="c-active")
        log.data(7, 0, 0, 5)
        if free:
            log.next_offset = 10
        log.data(7, 0, 10, 2)
        return [log]

    return build


ACTIVE = [(rolled, free) for free in (True, False) for rolled in (True, False)]
for _rolled, _free in ACTIVE:
    TOGETHER.add(COMPACTED, f"active-{_rolled}-{_free}", _logs(_active(_free), rolled=_rolled))


def test_free_offsets_in_the_active_segment_are_a_leaders_cleaner_in_what_a_follower_fetched(
    spark: SparkSession,
) -> None:
    """This broker's cleaner never touches its active segment (formats §5.9), but a follower appends
    the batches it fetches with their offsets and rolls by its own segment size: a replica added to a
    small compacted topic holds its leader's cleaned log in one segment. Producer 7 skips sequences 5-9
    with offsets 5-9 free: excused in a rolled segment and in the active one alike (it was a critical
    SEQUENCE_GAP on every such follower). Skipped with no offset free, they are lost in either."""

    def verdicts(rolled: bool, free: bool) -> list[tuple[str, str, int | None]]:
        _, found = TOGETHER.audited(spark, COMPACTED, f"active-{rolled}-{free}")
        return sorted((f["kind"], f["severity"], f["missing_records"]) for f in found)

    assert verdicts(rolled=True, free=True) == []
    assert verdicts(rolled=False, free=True) == []
    gap = [("SEQUENCE_GAP", "critical", 5)]
    assert verdicts(rolled=True, free=False) == gap
    assert verdicts(rolled=False, free=False) == gap


def _trimmed_or_whole(at: Place) -> list[LogBuilder]:
    def log(topic: str, trimmed: bool, free: bool = True) -> LogBuilder:
        built = at.log(topic=topic)
        for sequence in range(5):
            built.data(7, 0, sequence)
        if free:
            built.next_offset = 7
        built.data(7, 0, 7, 3)
        if trimmed:
            built.rows[-1]["count"] = 1
        return built

    return [log("trimmed", True), log("whole", False), log("contiguous", False, free=False)]


TOGETHER.add(COMPACTED, "trimmed-or-whole", _logs(_trimmed_or_whole, rolled=True))


def test_a_batch_holding_fewer_records_than_its_offsets_shows_the_log_is_compacted(
    spark: SparkSession,
) -> None:
    """A partition directory of a compacted topic copied without its log directory (no cleaner
    checkpoint) and named by no profile: the cleaner kept the batch at offsets 7-9 with one record of
    three, which only it writes (the broker refuses a producer's batch whose count differs from its
    offsets). The log is compacted below its active segment: sequences 5-6, at the free offsets 5-6,
    are the cleaner's, not lost. The same log with every batch whole shows the cleaner too, by the
    offsets free between its batches (a broker gives every record the next offset), which are then all
    that says so: an OFFSET_HOLE warning. Sequences skipped with no offset free are a SEQUENCE_GAP."""
    _, found = TOGETHER.audited(spark, COMPACTED, "trimmed-or-whole")
    assert _topic_kinds(found) == [
        ("contiguous", "SEQUENCE_GAP", None),
        ("whole", "OFFSET_HOLE", "compaction"),
    ], [f["message"] for f in found]


def _keyed(at: Place) -> list[LogBuilder]:
    log = at.log(topic="keyed", start_offset=1)
    log.data(7, 0, 1)
    log.data(7, 0, 2)
    log.next_offset = 4
    log.data(7, 0, 4)
    log.data(7, 0, 5)
    return [log]


def _keyed_beside_unreadable(rolled: bool) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        (log,) = _keyed(at)
        region = {
            **{k: log.rows[0][k] for k in ("dump_id", "replica", "topic", "partition", "file")},
            "position": log.position,
            "length": 100,
            "kind": "TRUNCATED_TAIL",
            "message": "100 bytes at the end do not form a whole batch",
        }
        return Case(log.rows, rolled=rolled, quarantine=[region])

    return build


for _rolled in (True, False):
    TOGETHER.add(COMPACTED, f"keyed-{_rolled}", _logs(_keyed, rolled=_rolled))
    TOGETHER.add(COMPACTED, f"keyed-beside-unreadable-{_rolled}", _keyed_beside_unreadable(_rolled))


def test_offsets_free_between_whole_batches_show_the_cleaner_unless_beside_unreadable_bytes(
    spark: SparkSession,
) -> None:
    """An idempotent producer's one-record batches of a compacted topic, its partition directory copied
    alone: the cleaner removed the batches at offsets 0 and 3 whole (keys written again later), leaving
    sequences 1, 2, 4, 5. No batch is trimmed and nothing names the topic compacted; the free offsets
    show the cleaner, so neither the history's start nor the skipped sequence is loss (they read as
    HISTORY_START_MISSING and SEQUENCE_GAP, both critical, though offset 0 is not in the log). In the
    active segment too (a follower's holds its leader's cleaned batches). Beside bytes no header could
    be read from, they show nothing (batches may be there): that log keeps its findings."""

    def verdicts(case: str) -> list[tuple[str, str, str | None, str]]:
        _, found = TOGETHER.audited(spark, COMPACTED, case)
        return sorted(
            (f["kind"], f["severity"], f["explained_by"], f["message"])
            for f in found
            if f["kind"] != "TRUNCATED_TAIL"
        )

    for rolled in (True, False):
        (kind, severity, because, message), hole = verdicts(f"keyed-{rolled}")
        assert (kind, severity, because) == ("HISTORY_TRUNCATED_BY_RETENTION", "info", "compaction"), message
        assert "offsets are free between the batches of a segment" in message, message
        # The assumption is a finding of its own: on a topic whose policy is delete, offset 3 was lost.
        assert hole[:3] == ("OFFSET_HOLE", "warning", "compaction"), hole
        assert hole[3].startswith("Offsets 3-3 hold no batch"), hole
    lost = [("HISTORY_START_MISSING", "critical", None), ("SEQUENCE_GAP", "critical", None)]
    assert [v[:3] for v in verdicts("keyed-beside-unreadable-True")] == lost
    assert [v[:3] for v in verdicts("keyed-beside-unreadable-False")] == lost


def _two_holes(trimmed: bool) -> Callable[[Place], Case]:
    def build(at: Place) -> Case:
        log = at.log(topic="orders")
        log.data(7, 0, 0, 5)
        log.next_offset = 10
        log.data(7, 0, 10, 5)
        log.data(8, 0, 0, 5)
        log.next_offset = 22
        log.data(8, 0, 7, 2)
        log.data(7, 0, 15, 1)
        rows = [dict(r) for r in log.rows]
        if trimmed:
            rows[-1] = {**rows[-1], "last_offset": rows[-1]["last_offset"] + 1, "last_sequence": 16}
        return Case(rows)

    return build


TOGETHER.add(COMPACTED, "two-holes", _two_holes(trimmed=False))
TOGETHER.add(COMPACTED, "two-holes-trimmed", _two_holes(trimmed=True))
TOGETHER.add(ORDERS_COMPACTED, "two-holes", _two_holes(trimmed=False))


def test_free_offsets_alone_are_an_offset_hole_warning_unless_the_topic_is_named_compacted(
    spark: SparkSession,
) -> None:
    """Producer 7's batch at offsets 5-9 (sequences 5-9) and producer 8's at 20-21 are gone from one
    segment of a topic nothing names compacted: the free offsets are all that says the cleaner ran, and
    on a topic whose policy is delete they are lost batches. The gap is not counted as loss (a compacted
    topic's partition directory copied alone looks the same), but the assumption is one OFFSET_HOLE
    warning for the log, naming the first run and counting both: not a clean verdict. Named in
    compacted_topics, or beside a batch the cleaner trimmed, the log is compacted and no hole is
    reported."""

    def above_info(profile: Profile, case: str) -> list[tuple[str, str, int | None, str]]:
        _, found = TOGETHER.audited(spark, profile, case)
        return sorted(
            (f["kind"], f["severity"], f["missing_records"], f["message"])
            for f in found
            if f["severity"] != "info"
        )

    ((kind, severity, free, message),) = above_info(COMPACTED, "two-holes")
    assert (kind, severity, free) == ("OFFSET_HOLE", "warning", 7), message
    assert message.startswith("Offsets 5-9 hold no batch"), message
    assert "(2 run(s) of free offsets, 7 offsets in all, up to offset 21)" in message, message
    assert above_info(ORDERS_COMPACTED, "two-holes") == []
    # A batch holding fewer records than its offsets (only the cleaner writes one) shows compaction too.
    assert above_info(COMPACTED, "two-holes-trimmed") == []


def _first_transaction_removed(free: bool) -> Callable[[Place], list[LogBuilder]]:
    def build(at: Place) -> list[LogBuilder]:
        log = at.log(topic="c-v1")
        log.data(7, 0, 0, transactional=True)
        log.marker(7, 0, "COMMIT")
        if free:
            log.next_offset = 4  # 2-3: epoch 1's sequences 0-1, aborted, removed by the cleaner
        log.marker(7, 1, "ABORT")
        log.data(7, 1, 2, transactional=True)
        log.marker(7, 1, "COMMIT")
        return [log]

    return build


FIRST_TRANSACTIONS = [(True, True), (False, True), (False, False)]
for _rolled, _free in FIRST_TRANSACTIONS:
    TOGETHER.add(COMPACTED, f"v1-{_rolled}-{_free}", _logs(_first_transaction_removed(_free), rolled=_rolled))


def test_a_new_epochs_first_transaction_the_cleaner_removed_before_its_kept_marker_is_no_finding(
    spark: SparkSession,
) -> None:
    """Transactions V1 on a compacted topic: producer 7's epoch 1 begins with a transaction (sequences
    0-1, offsets 2-3) that was aborted; the cleaner removed its data and keeps its ABORT (offset 4)
    until the delete horizon. The next transaction goes on at sequence 2 right after that marker: no
    offset is free between the two, but the removed batches lie before the marker, in the room after
    epoch 0's COMMIT. The same in the active segment, where the free offsets show a leader's cleaner
    in what this replica fetched; with no offset free for the removed transaction it is a
    NEW_EPOCH_NONZERO_SEQUENCE."""

    def above_info(rolled: bool, free: bool = True) -> list[tuple[str, int]]:
        _, found = TOGETHER.audited(spark, COMPACTED, f"v1-{rolled}-{free}")
        return [(f["kind"], f["first_offset"]) for f in found if f["severity"] != "info"]

    assert above_info(rolled=True) == []
    assert above_info(rolled=False) == []
    assert above_info(rolled=False, free=False) == [("NEW_EPOCH_NONZERO_SEQUENCE", 3)]


def test_the_room_counts_only_offsets_below_what_the_cleaner_may_have_reached(spark: SparkSession) -> None:
    """A compacted topic of two segments: offsets 0-9 rolled, 10 onwards active (the cleaner never
    touches it, formats §5.9), every offset held. Producer 7 starts at sequence 40 at offset 60 with
    only offsets 0-9 cleanable; or, after its sequence 0 at offset 9, skips sequences 1-29 to offset
    60, in its epoch or at the start of a new one: producer 8's batches fill offsets 10-59, which no
    cleaner removed anything from. Counting those as room excused all three (a
    HISTORY_TRUNCATED_BY_RETENTION by compaction, and no finding at all): each is lost. (And 8's batches
    hold offsets 0-9 too: none of producer 7's 40 first sequences can have been there.)"""
    from pyspark.sql import functions as F

    def log(topic: str) -> list[dict[str, object]]:
        start = topic == "c-start"
        built = _log(topic, 0)
        built._log["file"] = f"/d/{topic}-0/{0:020d}.log"
        for sequence in range(10 if start else 9):
            built.data(8, 0, sequence)
        if not start:
            built.data(7, 0, 0)  # offset 9
        built._log["file"] = f"/d/{topic}-0/{10:020d}.log"
        built.position = 0
        for sequence in range(10 if start else 9, 60 if start else 59):
            built.data(8, 0, sequence)
        built.data(7, 1 if topic == "c-epoch" else 0, 40 if start else 30)  # offset 60
        return built.rows

    rows = [row for topic in ("c-start", "c-gap", "c-epoch") for row in log(topic)]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema))
    # The second segment of each log (from_batches lists one at offset 0).
    second = bronze.files.withColumn("base_offset", F.lit(10).cast("long")).withColumn(
        "file", F.concat(F.lit("/d/"), F.col("topic"), F.lit("-0/"), F.lit(f"{10:020d}.log"))
    )
    first = bronze.files.withColumn(
        "file", F.concat(F.lit("/d/"), F.col("topic"), F.lit("-0/"), F.lit(f"{0:020d}.log"))
    )
    bronze = replace(bronze, files=first.unionByName(second))
    profile = COMPACTED
    found = audit(bronze, profile).findings.collect()
    assert sorted((f["topic"], f["kind"], f["missing_records"]) for f in found) == [
        ("c-epoch", "NEW_EPOCH_NONZERO_SEQUENCE", None),
        ("c-gap", "SEQUENCE_GAP", 29),
        ("c-start", "HISTORY_START_MISSING", 40),
    ], [f["message"] for f in found]
    (start,) = [f for f in found if f["topic"] == "c-start"]
    assert "only 0 offset(s) there can have been removed" in start["message"], start["message"]


def _segment_start(topic: str, first_offset: int, segment: int) -> Callable[[Place], list[LogBuilder]]:
    def build(at: Place) -> list[LogBuilder]:
        # `Bronze.from_batches` lists one live segment at 0, named as `files` names it.
        log = at.log(topic=topic, file=f"/{topic}/{segment:020d}.log", start_offset=first_offset)
        log.data(7, 0, 10, 10)
        log.data(7, 0, 20, 10)
        return [log]

    return build


SEGMENT_STARTS = [("c-fetched", 10, 0), ("fetched", 10, 0), ("c-whole", 0, 0), ("c-empty-first", 10, 10)]
for _topic, _first, _segment in SEGMENT_STARTS:
    TOGETHER.add(COMPACTED, f"segment-start-{_topic}", _logs(_segment_start(_topic, _first, _segment)))


def test_offsets_free_before_a_segments_first_batch_show_the_cleaner(spark: SparkSession) -> None:
    """A replica added to a small compacted topic starts an empty log at 0 and appends what it fetches
    from its leader's cleaned log, whose first kept batch is at 10 (the cleaner writes the segments it
    cleaned into one at the first one's base, `LogCleaner.cleanSegments`): one active segment at 0,
    whose batches start at 10 with producer 7's sequence 10. The cleaner removed sequences 0-9: no
    finding above info (it was a critical HISTORY_START_MISSING: "the log is complete from offset 0";
    the profile names the topic compacted, and this broker's cleaner never touches its active segment).
    Where the first batch is at its segment's base, nothing shows the cleaner reached it; nor does a
    first segment that holds no batch (an empty or zero-filled file, lost data) before one that starts
    at 10. A topic nothing shows compacted lost what is missing at a segment's start."""

    def verdicts(topic: str) -> list[tuple[str, str]]:
        _, found = TOGETHER.audited(spark, COMPACTED, f"segment-start-{topic}")
        return sorted((f["kind"], f["severity"]) for f in found if f["severity"] != "info")

    assert verdicts("c-fetched") == []
    missing = [("HISTORY_START_MISSING", "critical")]
    assert verdicts("fetched") == missing
    assert verdicts("c-whole") == missing
    assert verdicts("c-empty-first") == missing


def test_free_offsets_count_each_offset_once_and_stop_at_what_the_cleaner_reached(
    spark: SparkSession,
) -> None:
    """Producer 7's batch at 0-4 (twice: an overlap), producer 9's at 5-9, offsets 10-14 free, 7's next
    at 15-16, a legacy entry at 20-22, 7's at 25; the cleaner may have reached offset 10. The offsets
    free below each batch: none below 15 but 10-14, which lie past what the cleaner reached, so the row
    at 10 (what a gap past it reads) counts none; the legacy entry has no row, and its range is not
    counted as held (a cleaned legacy wrapper holds only the offsets it kept)."""
    from pyspark.sql import functions as F

    from audit_rules.logs import free_offsets, with_log_id

    log = _log("c-free", 0)
    log.data(7, 0, 0, 5)
    log.next_offset = 0
    log.data(7, 0, 0, 5)
    log.data(9, 0, 0, 5)
    log.next_offset = 15
    log.data(7, 0, 10, 2)
    log.next_offset = 20
    log.plain(3)
    log.next_offset = 25
    log.data(7, 0, 12, 1)
    rows = [dict(row) for row in log.rows]
    rows[-2]["magic"] = 1
    batches = spark.createDataFrame(rows, BATCHES.schema)
    logs = (
        with_log_id(batches)
        .select("log_id")
        .distinct()
        .withColumns({"cleaned_to": F.lit(10).cast("long"), "coordinator_written": F.lit(False)})
    )
    free = {r["base_offset"]: r["free_before"] for r in free_offsets(batches, logs).collect()}
    assert free == {0: 0, 5: 0, 10: 0, 15: 5, 25: 13}, free
    # A coordinator's log (its sequences unchecked) or one no cleaner touched: nothing.
    assert free_offsets(batches, logs.withColumn("coordinator_written", F.lit(True))).count() == 0
    assert free_offsets(batches, logs.withColumn("cleaned_to", F.lit(None).cast("long"))).count() == 0
