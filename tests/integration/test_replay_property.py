"""The Spark audit agrees with the plain-Python reference replay (tests/reference_replay.py) on random logs.

One audit costs tens of seconds of Spark planning whatever the data size, so each example audits
many generated logs at once (one partition each; one profile and log start offset for all), in Arrow
batches of 4 rows (the replay scan's state crosses batches; the other tests see one batch), and
shrinking is off: a failure instead prints, for each log where the two disagree, both sides next to
each other and the log's batches. Findings are compared as multisets of their evidence. The
hand-written corner cases are in test_replay_cases.py.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from audit_rules.pipeline import Bronze, audit
from audit_rules.profile import Profile
from audit_rules.replay import COPY_LOOKBACK
from jobs.decode_tasks import WalkMarks
from jobs.ingest import session_conf
from jobs.profiles import available_profiles, load_profile
from schemas.tables import BATCHES, QUARANTINE
from tests.reference_replay import COORDINATOR_TOPICS, reference_findings
from tests.strategies import COMPACTED_TOPIC, LogBuilder, LogHistory, log_histories
from tests.table_rows import crc_quarantine

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.integration

IN_SCOPE = (
    "INVALID_SEQUENCE",
    "EPOCH_REGRESSION",
    "HISTORY_TRUNCATED_BY_RETENTION",
    "HISTORY_START_MISSING",
    "EPOCH_BUMP",
    "NEW_EPOCH_NONZERO_SEQUENCE",
    "DUPLICATE_BATCH",
    "SEQUENCE_REGRESSION",
    "SEQUENCE_GAP",
    "SEQUENCE_GAP_UNVERIFIED",
    "COORDINATOR_EPOCH_REGRESSION",
    "EMPTY_TXN_MARKER",
    "STALE_TXN_MARKER",
    "HANGING_TRANSACTION",
    "OFFSET_OVERLAP",
    "CRC_MISMATCH",
)
KEY = (
    "partition",
    "kind",
    "producer_id",
    "first_offset",
    "related_offset",
    "expected_sequence",
    "missing_records",
    "explained_by",
    "caught",
)
PROFILES = [
    replace(profile, compacted_topics=(*profile.compacted_topics, COMPACTED_TOPIC))
    for profile in map(load_profile, available_profiles())
]


@st.composite
def audited_logs(draw: st.DrawFn) -> tuple[int, list[LogHistory]]:
    """One log start offset and 12-24 logs (partitions 0..n-1) that share it, some keeping batches
    below it (DeleteRecords): where it passed a producer's last batch, a broker before 2.4 evicted it."""
    start = draw(st.sampled_from([0, 1000]))
    count = draw(st.integers(12, 24))
    return start, [
        draw(log_histories(log_start_offset=start, partition=i, deleted_head=True)) for i in range(count)
    ]


def _profile(name: str) -> Profile:
    return next(p for p in PROFILES if p.name == name)


def _evicting_logs() -> tuple[int, list[LogHistory]]:
    """Logs whose producers the log start (1000) passed, kept below it in the segment: a broker before
    2.4 evicted them, so each restart at sequence 0 is taken as a new producer's (explicit examples:
    the random ones reach this in only some runs)."""
    logs = []
    for partition, transactional in enumerate((False, True)):
        log = LogBuilder(start_offset=990, partition=partition, file=f"/x/orders-{partition}/990.log")
        for seq in range(3):
            log.data(7, 0, seq, 2, transactional=transactional)
        if transactional:
            log.marker(7, 0)
        log.data(8, 0, 0, 5)
        log.data(7, 0, 0, 2, transactional=transactional)  # a restart after eviction
        log.data(7, 0, 2, 2, transactional=transactional)
        log.data(7, 0, 0, 2, transactional=transactional)  # a copy of the restart, in the window
        log.data(7, 0, 4, 2, transactional=transactional)  # a copy from before the eviction
        log.data(7, 0, 0, 3, transactional=transactional)  # a regression to 0
        logs.append(LogHistory(log.rows, 1000, "orders"))
    return 1000, logs


# Generated examples per run of the comparison below: each audits 12-24 random logs twice. The suite
# runs 3, new ones each run (hypothesis draws them at random: a run on 2026-12-03 drew the first log
# where the audit took a failed fill for a late batch's skip); a longer hunt sets more:
# KRA_PROPERTY_EXAMPLES=40 .venv/bin/python -m pytest tests/integration/test_replay_property.py -k reference
PROPERTY_EXAMPLES = int(os.environ.get("KRA_PROPERTY_EXAMPLES", "3"))


@settings(
    max_examples=PROPERTY_EXAMPLES,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@example(logs=_evicting_logs(), profile=_profile("kafka-1.0"), walks=[2] * 24)
@given(
    logs=audited_logs(),
    profile=st.sampled_from(PROFILES),
    walks=st.lists(st.integers(0, 30), min_size=24, max_size=24),
)
def test_spark_audit_matches_reference_replay(
    spark: SparkSession, logs: tuple[int, list[LogHistory]], profile: Profile, walks: list[int]
) -> None:
    start, histories = logs
    # Log i's files are walked in pieces of walks[i] batches as ingest's decoder walks its units (0:
    # not walked, every walk_mark null): the OFFSET_OVERLAP check works from the marks of each walk.
    rows = [b for h, size in zip(histories, walks, strict=False) for b in _walked(h.batches, size)]
    batches = spark.createDataFrame(rows, BATCHES.schema)
    bronze = replace(
        # Each log's batches lie in a rolled segment: on a compacted topic the cleaner may have passed
        # them all, as the reference takes it (`compacted`).
        Bronze.from_batches(batches, log_start_offset=start, rolled=True),
        quarantine=_crc_quarantine(spark, rows),
    )
    expected: Counter[tuple[Any, ...]] = Counter()
    for h in histories:
        compacted = profile.is_compacted(h.topic)
        sequenced = h.topic not in COORDINATOR_TOPICS
        for f in reference_findings(
            h.batches, profile=profile, log_start_offset=start, compacted=compacted, sequenced=sequenced
        ):
            expected[_key({**f, "partition": h.batches[0]["partition"]})] += 1
    # Arrow batches of 4 rows: the replay scan carries most producers' state from batch to batch. The
    # scan's own lookback for exact copies, and one of a batch, which leaves most late batches
    # undecided: the pass over the stored history then finds the copies.
    for lookback in (COPY_LOOKBACK, 1):
        with session_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": "4"}):
            out = audit(bronze, profile, copy_lookback=lookback)
            found = out.findings.where(f"kind IN ({', '.join(repr(k) for k in IN_SCOPE)})")
            actual = Counter(_key(r.asDict()) for r in found.collect())
        if actual != expected:
            side_by_side = _side_by_side(actual, expected, histories, profile)
            pytest.fail(f"copy lookback {lookback}:\n{side_by_side}", pytrace=False)


def _walked(rows: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """The rows of one log with the `walk_mark` that `jobs.decode_tasks.WalkMarks` gives each file's
    batches walked in pieces of `size` batches, in Arrow batches of 3 rows (the rows as they are for 0)."""
    if size == 0:
        return rows
    schema = to_arrow_schema(BATCHES.schema)
    out: list[dict[str, Any]] = []
    for _, in_file in groupby(sorted(rows, key=itemgetter("file", "position")), key=itemgetter("file")):
        batches = list(in_file)
        for i in range(0, len(batches), size):
            marks = WalkMarks()
            table = pa.Table.from_pylist(batches[i : i + size], schema=schema)
            walked = [b for chunk in table.to_batches(max_chunksize=3) for b in marks.add(chunk)]
            out += pa.Table.from_batches([*walked, *marks.finish()], schema=schema).to_pylist()
    return out


def _crc_quarantine(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """What ingest writes beside a batch row with a bad CRC: a CRC_MISMATCH quarantine row for its bytes."""
    return spark.createDataFrame(crc_quarantine(rows), QUARANTINE.schema)


def _key(finding: dict[str, Any]) -> tuple[Any, ...]:
    """The evidence both sides must agree on; `caught` is the duplicate message's verdict."""
    f = dict(finding)
    f["caught"] = "should have caught" in f["message"] if f["kind"] == "DUPLICATE_BATCH" else None
    if f["kind"] == "CRC_MISMATCH":
        # A quarantine finding names a file and byte position, not offsets: compare how many there are.
        f.update(producer_id=None, first_offset=None, related_offset=None)
    return tuple(f.get(k) for k in KEY)


def _side_by_side(
    actual: Counter[tuple[Any, ...]],
    expected: Counter[tuple[Any, ...]],
    histories: list[LogHistory],
    profile: Profile,
) -> str:
    """Both multisets, one finding a line: Spark on the left, the reference on the right (as chispa)."""
    width = 78
    lines = [
        f"Spark audit and reference replay disagree (profile {profile.name}); '≠' marks the differences.",
        f"  {'key: ' + ', '.join(KEY):<{width}}",
        f"  {'spark audit':<{width}} | reference replay",
    ]
    for key in sorted(actual.keys() | expected.keys(), key=repr):
        text = _show(key)
        for i in range(max(actual[key], expected[key])):
            left = text if i < actual[key] else "-"
            right = text if i < expected[key] else "-"
            mark = "=" if left == right else "≠"
            lines.append(f"{mark} {left:<{width}} | {right}")
    partitions = {k[0] for k in (actual - expected) + (expected - actual)}
    for h in histories:
        if h.batches and h.batches[0]["partition"] in partitions:
            lines.append(f"partition {h.batches[0]['partition']}: " + h.describe())
    return "\n".join(lines)


def _show(key: tuple[Any, ...]) -> str:
    return " ".join(f"{name}={value}" for name, value in zip(KEY, key, strict=True) if value is not None)


@settings(
    max_examples=2,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@example(logs=_evicting_logs())
@given(logs=audited_logs())
def test_the_scan_through_pandas_gives_what_the_arrow_udf_gives(
    spark: SparkSession, logs: tuple[int, list[LogHistory]]
) -> None:
    """pyspark before 4.1 (Databricks Runtime 17.3, Spark 4.0) has no `functions.arrow_udf`: the history's
    scan then runs as a scalar pandas UDF (`replay.through_pandas`). Both give the same history and the
    same findings, in Arrow batches of 4 rows (the scan's state crossing batches)."""
    start, histories = logs
    rows = [b for h in histories for b in h.batches]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema), log_start_offset=start)
    profile = _profile("kafka-3.4")
    results = []
    for hidden in (False, True):
        with (
            pytest.MonkeyPatch.context() as patch,
            session_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": "4"}),
        ):
            if hidden:
                patch.delattr(F, "arrow_udf")
            out = audit(bronze, profile)
            history = sorted(map(repr, out.history.collect()))
            findings = sorted(map(repr, out.findings.collect()))
        results.append((history, findings))
    assert hasattr(F, "arrow_udf")
    assert results[0][0] and results[0] == results[1]
