"""A producer whose batches a later dump holds only with failed CRCs is not gone from it: its batches
are there, unreadable, and CRC_MISMATCH is the finding (as the ack check counts such a batch holding
its offsets), not UNKNOWN_PRODUCER_LOSS besides."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES, QUARANTINE
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

T1 = 1_700_000_000_000
T2 = T1 + 3_600_000


def _dump(dump_id: str, rotten: set[int], headers_hold: bool = True) -> LogBuilder:
    """Producers 5 and 6, five one-record batches each from offset 0; those of `rotten` fail their CRC
    (with `headers_hold` false, their header's sequences no longer fit their offsets)."""
    log = LogBuilder(dump_id=dump_id, replica="1", file=f"/{dump_id}/orders-0/0.log", clock=T1)
    for producer_id in (5, 6):
        for sequence in range(5):
            bad = producer_id in rotten
            log.data(
                producer_id,
                0,
                sequence,
                last_sequence=sequence if headers_hold or not bad else sequence + 7,
                crc_valid=not bad,
            )
    return log


def _kinds(spark: SparkSession, later: LogBuilder) -> list[tuple[str, int | None]]:
    from pyspark.sql import functions as F

    rows = [*_dump("d1", set()).rows, *later.rows]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema))
    keep = ("dump_id", "replica", "topic", "partition", "file", "position")
    quarantine = [
        {**{k: b[k] for k in keep}, "length": b["size_bytes"], "kind": "CRC_MISMATCH", "message": "CRC-32C"}
        for b in later.rows
        if not b["crc_valid"]
    ]
    bronze = replace(
        bronze,
        quarantine=spark.createDataFrame(quarantine, QUARANTINE.schema),
        files=bronze.files.withColumn("mtime_ms", F.when(F.col("dump_id") == "d1", T1).otherwise(T2)),
    )
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    return sorted({(f["kind"], f["producer_id"]) for f in found if f["severity"] != "info"})


def test_a_producer_held_only_in_corrupt_batches_is_not_gone(spark: SparkSession) -> None:
    assert _kinds(spark, _dump("d2", {6})) == [("CRC_MISMATCH", None)]


def test_a_corrupt_header_that_does_not_fit_its_offsets_names_no_producer(spark: SparkSession) -> None:
    assert _kinds(spark, _dump("d2", {6}, headers_hold=False)) == [
        ("CRC_MISMATCH", None),
        ("UNKNOWN_PRODUCER_LOSS", 6),
    ]
