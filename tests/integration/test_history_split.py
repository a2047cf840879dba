"""A hot producer's history scanned in offset ranges, each in a task of its own (`history.split_plan`),
gives the history and the findings one scan of the producer gives.

The log: one producer holding most batches (one epoch, no marker: a producer the plan can cut), with
gaps, exact copies (some a few batches after their original, some further back than the scan's
lookback), late batches that copy nothing and batches whose sequence span does not fit their offsets,
among the batches of a few other producers; a second log with no hot producer. Arrow batches of 5
rows, so that ranges begin inside Arrow batches and carry on across them.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql import functions as F

from audit_rules import history, pipeline, replay
from audit_rules.logs import file_producers
from audit_rules.pipeline import Bronze, audit
from jobs.ingest import session_conf
from jobs.profiles import load_profile
from schemas.tables import BATCHES
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.integration

HOT = 7
OTHERS = (21, 22, 23)
ARROW_ROWS = "5"


def _hot_log(seed: int, *, marker_at: int | None = None) -> list[dict[str, Any]]:
    """Partition 0: producer HOT's batches with faults of every kind the scan tracks, 1 in 4 batches
    another producer's; partition 1: the other producers alone. `marker_at`: HOT commits a
    transaction there (a producer the plan leaves whole)."""
    rng = random.Random(seed)
    log = LogBuilder(partition=0)
    sent: list[tuple[int, int]] = []  # HOT's batches as (base sequence, records)
    next_seq = 0
    others = dict.fromkeys(OTHERS, 0)
    for i in range(900):
        if i % 4 == 3:
            pid = OTHERS[i % len(OTHERS)]
            log.data(pid, 0, others[pid])
            others[pid] += 1
            continue
        roll = rng.random()
        if marker_at is not None and i == marker_at:
            log.data(HOT, 0, next_seq, transactional=True)
            next_seq += 1
            log.marker(HOT, 0)
        elif roll < 0.05 and sent:  # an exact copy of a batch up to 40 batches back
            base, records = sent[-rng.randint(1, min(40, len(sent)))]
            log.data(HOT, 0, base, records)
        elif roll < 0.08 and next_seq > 3:  # a late batch that copies nothing
            log.data(HOT, 0, next_seq - 2, 3)
        elif roll < 0.10:  # its sequences do not fit its offsets
            log.data(HOT, 0, next_seq, 2, last_sequence=next_seq + 4)
        else:
            if roll < 0.13:
                next_seq += rng.randint(1, 3)  # a gap
            records = rng.choice((1, 1, 2, 3))
            log.data(HOT, 0, next_seq, records)
            sent.append((next_seq, records))
            next_seq += records
    other = LogBuilder(partition=1)
    for i in range(60):
        other.data(OTHERS[i % len(OTHERS)], 1, i // len(OTHERS))
    return log.rows + other.rows


def _batches(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(rows, BATCHES.schema)


def _plan(batches: DataFrame) -> history.Split | None:
    """The plan with no floor on the history's rows (the test's logs are small)."""
    return history.split_plan(batches, history.hot_producers(file_producers(batches), min_rows=0))


def _scan_rows(df: DataFrame) -> dict[tuple[Any, ...], dict[str, Any]]:
    keys = ("log_id", "producer_id", "base_offset", "position", "file_id")
    return {tuple(r[k] for k in keys): r.asDict() for r in df.collect()}


@pytest.mark.parametrize(("seed", "through_pandas"), [(1, False), (2, False), (3, True)])
def test_a_hot_producer_scanned_in_ranges_gives_the_scan_of_the_whole(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, seed: int, through_pandas: bool
) -> None:
    """Every scan column of every row is the one scan's, but for a late batch within the lookback of a
    range's start whose original lies before it: UNDECIDED there (the audit's pass over the stored
    history then finds its copies), where the one scan may have decided. Four ranges per shuffle
    partition, so that a task scans several ranges of the producer one after the other.
    `through_pandas`: the ranges scanned by the scalar pandas UDF of pyspark 4.0 (no
    `functions.arrow_udf`), the whole by the Arrow UDF."""
    monkeypatch.setattr(history, "RANGES_PER_PARTITION", 4)
    batches = _batches(spark, _hot_log(seed))
    plan = _plan(batches)
    assert plan is not None
    [(log, producer)] = plan.cuts
    assert producer == HOT
    assert len(plan.cuts[log, producer]) == max(2, history.RANGES_PER_PARTITION * len(plan.slots)) - 1
    with session_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": ARROW_ROWS}):
        whole = _scan_rows(history.replayed(batches))
        pandas_scans: list[Any] = []
        with pytest.MonkeyPatch.context() as patch:
            if through_pandas:
                patch.delattr(F, "arrow_udf")
                scan = history._pandas_scan
                patch.setattr(history, "_pandas_scan", lambda *a: pandas_scans.append(a) or scan(*a))
            parts = _scan_rows(history.replayed(batches, split=plan))
    assert hasattr(F, "arrow_udf")
    # The range column among the pandas scan's inputs.
    assert len(pandas_scans) == int(through_pandas) and all(
        len(a[2]) == len(replay.INPUTS) + 1 for a in pandas_scans
    )
    assert whole.keys() == parts.keys()
    undecided = 0
    names = [name for name, _ in replay.OUTPUTS]
    for key, row in whole.items():
        part = parts[key]
        if part["copy_of_index"] == replay.UNDECIDED and row["copy_of_index"] != replay.UNDECIDED:
            undecided += 1
            assert (
                row["max_last_before"] is not None
                and row["base_sequence_unwrapped"] <= row["max_last_before"]
            )
            part = {**part, "copy_of_index": row["copy_of_index"], "copy_of_offset": row["copy_of_offset"]}
        assert {n: part[n] for n in names} == {n: row[n] for n in names}, key
    # The hot producer's rows lie in every range, and some of its late batches are copies.
    hot_rows = [r for r in whole.values() if r["producer_id"] == HOT]
    cuts = plan.cuts[log, producer]
    assert all(any(r["base_offset"] >= c for r in hot_rows) for c in cuts)
    assert sum(r["copy_of_offset"] is not None for r in hot_rows) > 5
    assert undecided <= 2 * len(cuts)


def test_a_producer_with_a_marker_is_scanned_whole(spark: SparkSession) -> None:
    """A marker among the hot producer's batches: its running values are more than the plan's
    aggregates, so the plan leaves it whole (no plan when it is the only hot producer)."""
    batches = _batches(spark, _hot_log(3, marker_at=450))
    assert history.hot_producers(file_producers(batches), min_rows=0)
    assert _plan(batches) is None


def test_the_audit_of_a_split_history_finds_what_the_audit_of_the_whole_finds(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole audit, with the hot producer cut (the plan's row floor at 0) and not: the same findings,
    field for field."""
    rows = _hot_log(4)
    bronze = Bronze.from_batches(_batches(spark, rows))
    profile = load_profile("kafka-3.4")
    plans: list[Any] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        plans.append(history.split_plan(*args, **kwargs))
        return plans[-1]

    monkeypatch.setattr(pipeline, "split_plan", recorded)
    monkeypatch.setattr(history, "RANGES_PER_PARTITION", 3)
    results = []
    silver_plans: list[str] = []
    for floor in (history.SPREAD_MIN_ROWS, 0):
        monkeypatch.setattr(history, "SPREAD_MIN_ROWS", floor)
        with session_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": ARROW_ROWS}):
            out = audit(bronze, profile)
            results.append(sorted((r.asDict() for r in out.findings.collect()), key=repr))
            silver_plans.append(out.history._jdf.queryExecution().executedPlan().toString())
    assert plans[0] is None and plans[1] is not None
    # The only hot producer cut: the silver write reads the stored rows as they are, already shared out
    # (no spread shuffle by producer and offset, `history.spread`).
    assert not any("hashpartitioning(producer_id" in p for p in silver_plans)
    assert [f["kind"] for f in results[1]], "the log's faults give findings"
    assert results[1] == results[0]
