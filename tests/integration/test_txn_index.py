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
