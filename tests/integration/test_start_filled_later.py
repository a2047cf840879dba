"""A producer's first batch mid-sequence whose earlier sequences later batches hold: those are in the
log, out of order (a SEQUENCE_REGRESSION), not missing. HISTORY_START_MISSING counts only the others,
and where there are none it is not reported; a batch the broker took from a producer it had forgotten
(a client restarting its sequence) fills none. Spark and the reference replay agree."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from audit_rules.pipeline import Bronze, audit
from audit_rules.profile import DAY_MS
from jobs.profiles import load_profile
from schemas.tables import BATCHES
from tests.reference_replay import reference_findings
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def test_sequences_before_the_first_batch_held_later_are_not_missing(spark: SparkSession) -> None:
    profile = load_profile("kafka-3.4")
    # all: 5-9, then 0-4: every earlier sequence is later in the log.
    full = LogBuilder(topic="all", file="/d/all-0/0.log")
    full.data(7, 0, 5, 5)
    full.data(7, 0, 0, 5)
    # part: 5-9, then 2-4: 0 and 1 are in no batch.
    part = LogBuilder(topic="part", file="/d/part-0/0.log")
    part.data(8, 0, 5, 5)
    part.data(8, 0, 2, 3)
    # none: 5-9 alone: 0-4 are missing (the log is complete from 0).
    none = LogBuilder(topic="none", file="/d/none-0/0.log")
    none.data(9, 0, 5, 5)
    # restart: 5-9, eight days idle, 0-4: the broker had forgotten producer 10 and a client restarting
    # its sequence wrote 0-4, other records: the first batch's 0-4 are still missing.
    restart = LogBuilder(topic="restart", file="/d/restart-0/0.log")
    restart.data(10, 0, 5, 5)
    restart.wait(8 * DAY_MS)
    restart.data(10, 0, 0, 5)
    logs = (full, part, none, restart)
    bronze = Bronze.from_batches(spark.createDataFrame([r for log in logs for r in log.rows], BATCHES.schema))
    found = sorted(
        (f["topic"], f["kind"], f["first_offset"], f["missing_records"])
        for f in audit(bronze, profile).findings.collect()
    )
    assert found == [
        ("all", "SEQUENCE_REGRESSION", 5, None),
        ("none", "HISTORY_START_MISSING", 0, 5),
        ("part", "HISTORY_START_MISSING", 0, 2),
        ("part", "SEQUENCE_REGRESSION", 5, None),
        ("restart", "HISTORY_START_MISSING", 0, 5),
        ("restart", "SEQUENCE_REGRESSION", 5, None),
    ]
    expected = sorted(
        (log.rows[0]["topic"], f["kind"], f["first_offset"], f["missing_records"])
        for log in logs
        for f in reference_findings(log.rows, profile=profile, log_start_offset=0)
    )
    assert found == expected
