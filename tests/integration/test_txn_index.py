"""`.txnindex` entries against ABORT markers where retention took a transaction's first batches: the
broker wrote each entry into its marker's segment with the transaction's first offset, which may now
lie below the log start; a marker and its entry are paired by producer and marker offset."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES, TXN_INDEX
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

SEGMENT = "/x/t-0/00000000000000000010.log"


def test_entries_pair_with_markers_by_marker_offset_and_excuse_what_lies_below_the_log_start(
    spark: SparkSession,
) -> None:
    from pyspark.sql import functions as F

    log = LogBuilder(start_offset=10, file=SEGMENT)
    entries: list[tuple[int, int, int]] = []  # producer id, first offset, marker offset
    # Producer 5's transaction began at 8, below the log start: its entry says 8.
    log.data(5, 0, 3, transactional=True)
    log.data(5, 0, 4, transactional=True)
    log.marker(5, 0, "ABORT")  # 12
    entries.append((5, 8, 12))
    # Producer 6's transaction lies wholly below the log start; its marker remains.
    log.marker(6, 0, "ABORT")  # 13
    entries.append((6, 5, 13))
    # Producer 7 aborted a transaction that wrote nothing here: its entry starts at the marker.
    log.marker(7, 0, "ABORT")  # 14
    entries.append((7, 14, 14))
    # Producer 9's entry names a first offset inside the retained log that is not its transaction's.
    log.data(9, 0, 0, transactional=True)  # 15
    log.marker(9, 0, "ABORT")  # 16
    entries.append((9, 12, 16))
    # Producer 10's ABORT has no entry; an entry of producer 11 has no marker.
    log.data(10, 0, 0, transactional=True)  # 17
    log.marker(10, 0, "ABORT")  # 18
    entries.append((11, 3, 19))
    log.data(12, 0, 0)  # 19
    # An entry past the log's end: the .txnindex was copied after the .log while the broker went on
    # appending (a marker at 21 reached the copy of the index, not the copy of the log).
    entries.append((13, 20, 21))

    def entry(position: int, producer_id: int, first: int, last: int) -> dict[str, Any]:
        return {
            "dump_id": "dump-1",
            "replica": "1",
            "topic": "orders",
            "partition": 0,
            "file": SEGMENT.replace(".log", ".txnindex"),
            "position": position * 34,
            "version": 0,
            "producer_id": producer_id,
            "first_offset": first,
            "last_offset": last,
            "last_stable_offset": first,
        }

    bronze = Bronze.from_batches(spark.createDataFrame(log.rows, BATCHES.schema), log_start_offset=10)
    index_file = bronze.files.withColumn("file", F.lit(SEGMENT.replace(".log", ".txnindex"))).withColumn(
        "kind", F.lit("txnindex")
    )
    bronze = replace(
        bronze,
        files=bronze.files.unionByName(index_file),
        txn_index=spark.createDataFrame([entry(i, *e) for i, e in enumerate(entries)], TXN_INDEX.schema),
    )
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    mismatches = sorted(
        (f["producer_id"], f["first_offset"], f["last_offset"])
        for f in found
        if f["kind"] == "INDEX_MISMATCH"
    )
    assert mismatches == [(9, 15, 16), (10, 17, 18), (11, 3, 19)], [f["message"] for f in found]
    (wrong,) = [f for f in found if f["kind"] == "INDEX_MISMATCH" and f["producer_id"] == 9]
    assert "lists it from offset 12" in wrong["message"]


def test_a_segments_index_files_pair_by_name_in_one_dump_and_a_missing_txnindex_holds_no_entry(
    spark: SparkSession,
) -> None:
    """The `.txnindex` of a segment is the file of its name, suffixes aside, in the same dump and
    replica (a bare partition directory's, none): a cleaned segment's files may still end in `.swap`;
    two dumps of one directory share their paths. A segment dumped with its `.index` and without a
    `.txnindex` has no entries (the broker creates the file with its first), so its ABORT markers lack
    theirs; not the active segment, whose first entry a live copy may have missed."""
    from pyspark.sql import functions as F

    logs: list[LogBuilder] = []
    extra_files: list[tuple[str, str, str, str, int]] = []  # dump, topic, file, kind, base offset
    entries: list[dict[str, Any]] = []

    def entry(dump_id: str, replica: str | None, file: str, producer_id: int, first: int, last: int) -> None:
        entries.append(
            {
                "dump_id": dump_id,
                "replica": replica,
                "topic": file.split("/")[2].rsplit("-", 1)[0],
                "partition": 0,
                "file": file,
                "position": len(entries) * 34,
                "version": 0,
                "producer_id": producer_id,
                "first_offset": first,
                "last_offset": last,
                "last_stable_offset": first,
            }
        )

    # swapped: a cleaned segment whose files kept `.swap`, in a bare partition directory (no replica),
    # followed by the active segment; producer 20's ABORT has its entry, 21's not.
    swapped = LogBuilder(topic="swapped", replica=None, file="/s/swapped-0/00000000000000000000.log.swap")
    swapped.data(20, 0, 0, transactional=True)
    swapped.marker(20, 0, "ABORT")  # 1
    swapped.data(21, 0, 0, transactional=True)  # 2
    swapped.marker(21, 0, "ABORT")  # 3
    swap_index = "/s/swapped-0/00000000000000000000.txnindex.swap"
    extra_files.append(("dump-1", "swapped", swap_index, "txnindex", 0))
    extra_files.append(("dump-1", "swapped", "/s/swapped-0/00000000000000000010.log", "log", 10))
    entry("dump-1", None, swap_index, 20, 0, 1)
    # unindexed: the segment's .index was dumped, no .txnindex, and a later segment follows: producer
    # 30's ABORT has no entry.
    unindexed = LogBuilder(topic="unindexed", file="/n/unindexed-0/00000000000000000000.log")
    unindexed.data(30, 0, 0, transactional=True)
    unindexed.marker(30, 0, "ABORT")  # 1
    extra_files.append(("dump-1", "unindexed", "/n/unindexed-0/00000000000000000000.index", "index", 0))
    extra_files.append(("dump-1", "unindexed", "/n/unindexed-0/00000000000000000010.log", "log", 10))
    # active: the same in the log's last segment: a live copy may list it before its first entry.
    active = LogBuilder(topic="active", file="/a/active-0/00000000000000000000.log")
    active.data(31, 0, 0, transactional=True)
    active.marker(31, 0, "ABORT")
    extra_files.append(("dump-1", "active", "/a/active-0/00000000000000000000.index", "index", 0))
    # bare: only the .log was dumped: nothing to check.
    bare = LogBuilder(topic="bare", file="/b/bare-0/00000000000000000000.log")
    bare.data(40, 0, 0, transactional=True)
    bare.marker(40, 0, "ABORT")
    # twice: one directory dumped on two days; Monday's index has producer 50's entry, Tuesday's lost it.
    twice_index = "/m/twice-0/00000000000000000000.txnindex"
    for day in ("mon", "tue"):
        log = LogBuilder(topic="twice", dump_id=day, file="/m/twice-0/00000000000000000000.log")
        log.data(50, 0, 0, transactional=True)
        log.marker(50, 0, "ABORT")  # 1
        logs.append(log)
        extra_files.append((day, "twice", twice_index, "txnindex", 0))
        extra_files.append((day, "twice", "/m/twice-0/00000000000000000010.log", "log", 10))
    entry("mon", "1", twice_index, 50, 0, 1)
    logs += [swapped, unindexed, active, bare]

    rows = [row for log in logs for row in log.rows]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema))
    files = bronze.files
    for dump, topic, file, kind, base in extra_files:
        files = files.unionByName(
            bronze.files.where((F.col("dump_id") == dump) & (F.col("topic") == topic)).withColumns(
                {"file": F.lit(file), "kind": F.lit(kind), "base_offset": F.lit(base).cast("long")}
            )
        )
    bronze = replace(bronze, files=files, txn_index=spark.createDataFrame(entries, TXN_INDEX.schema))
    found = [
        f
        for f in audit(bronze, load_profile("kafka-3.4")).findings.collect()
        if f["kind"] == "INDEX_MISMATCH"
    ]
    got = sorted(
        (f["dump_id"], f["topic"], f["producer_id"], f["first_offset"], f["last_offset"]) for f in found
    )
    assert got == [
        ("dump-1", "swapped", 21, 2, 3),
        ("dump-1", "unindexed", 30, 0, 1),
        ("tue", "twice", 50, 0, 1),
    ], [f["message"] for f in found]
    messages = {f["topic"]: f["message"] for f in found}
    assert swap_index in messages["swapped"]
    assert "no such file, though the segment's .index is there" in messages["unindexed"]


@pytest.mark.parametrize("rolled", [False, True])
def test_an_entry_past_the_log_end_is_excused_only_in_the_active_segments_index(
    spark: SparkSession, rolled: bool
) -> None:
    """Producer 5's ABORT at 11 is in the log; the .txnindex also lists producer 6's, closed at 13, past
    the log's end (12). In the active segment's index that is a live copy taking the index after the log
    (no finding); in a rolled segment's, whose entries never pass its log's end, it is stray."""
    from pyspark.sql import functions as F

    log = LogBuilder(start_offset=10, file=SEGMENT)
    log.data(5, 0, 0, transactional=True)  # 10
    log.marker(5, 0, "ABORT")  # 11
    index = SEGMENT.replace(".log", ".txnindex")
    entries = [
        {
            "dump_id": "dump-1", "replica": "1", "topic": "orders", "partition": 0, "file": index,
            "position": i * 34, "version": 0, "producer_id": pid, "first_offset": first,
            "last_offset": last, "last_stable_offset": first,
        }
        for i, (pid, first, last) in enumerate([(5, 10, 11), (6, 12, 13)])
    ]  # fmt: skip
    bronze = Bronze.from_batches(
        spark.createDataFrame(log.rows, BATCHES.schema), log_start_offset=10, rolled=rolled
    )
    segment = bronze.files.where(F.col("base_offset") == 10)
    index_file = segment.withColumn("file", F.lit(index)).withColumn("kind", F.lit("txnindex"))
    bronze = replace(
        bronze,
        files=bronze.files.unionByName(index_file),
        txn_index=spark.createDataFrame(entries, TXN_INDEX.schema),
    )
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    mismatches = [(f["producer_id"], f["last_offset"]) for f in found if f["kind"] == "INDEX_MISMATCH"]
    assert mismatches == ([(6, 13)] if rolled else []), [f["message"] for f in found]
