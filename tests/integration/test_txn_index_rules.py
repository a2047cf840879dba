"""`.txnindex` entries against the ABORT markers (`transactions.txn_index_consistency`): what a broker
writes (`ProducerStateManager.lastStableOffset`, `ProducerStateEntry.update`) and what read_committed
consumers do with it (`TransactionIndex.collectAbortedTxns`, the fetcher's aborted-producer set)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES, FILES, TXN_INDEX
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def _transactions(topic: str, dump_id: str, start: int = 0) -> LogBuilder:
    """From `start` (retention deleted the offsets below): producer 7 commits a transaction (start,
    marker +1), then aborts one (+2, marker +3); producer 8 aborts one (+4, marker +5); a plain batch."""
    log = LogBuilder(
        topic=topic, dump_id=dump_id, start_offset=start, file=f"/{dump_id}/{topic}-0/{start:020d}.log"
    )
    log.data(7, 0, 0, transactional=True)
    log.marker(7, 0, "COMMIT")
    log.data(7, 0, 1, transactional=True)
    log.marker(7, 0, "ABORT")
    log.data(8, 0, 0, transactional=True)
    log.marker(8, 0, "ABORT")
    log.plain()
    return log


def _file(log: LogBuilder, kind: str, base_offset: int) -> dict[str, Any]:
    first = log.rows[0]
    directory = first["file"].rsplit("/", 1)[0]
    suffix = {"log": "log", "index": "index", "txnindex": "txnindex"}[kind]
    return {
        "dump_id": first["dump_id"],
        "replica": first["replica"],
        "topic": first["topic"],
        "partition": first["partition"],
        "file": f"{directory}/{base_offset:020d}.{suffix}",
        "kind": kind,
        "log_dir": None,
        "base_offset": base_offset,
        "size_bytes": 1,
        "mtime_ms": 1,
        "fingerprint": None,
        "is_live": True,
        "excluded_reason": None,
        "captured_at_ms": None,
    }


def _entry(log: LogBuilder, producer_id: int, first: int, last: int, lso: int, at: int) -> dict[str, Any]:
    row = log.rows[0]
    return {
        "dump_id": row["dump_id"],
        "replica": row["replica"],
        "topic": row["topic"],
        "partition": row["partition"],
        "file": row["file"].replace(".log", ".txnindex"),
        "position": at * 34,
        "version": 0,
        "producer_id": producer_id,
        "first_offset": first,
        "last_offset": last,
        "last_stable_offset": lso,
    }


def _index_mismatches(
    spark: SparkSession, logs: list[LogBuilder], files: list[dict[str, Any]], entries: list[dict[str, Any]]
) -> list[tuple[Any, ...]]:
    empty = Bronze.from_batches(spark.createDataFrame([], BATCHES.schema))
    bronze = replace(
        empty,
        batches=spark.createDataFrame([r for log in logs for r in log.rows], BATCHES.schema),
        files=spark.createDataFrame(files, FILES.schema),
        txn_index=spark.createDataFrame(entries, TXN_INDEX.schema),
    )
    found = audit(bronze, load_profile()).findings.collect()
    assert {f["kind"] for f in found} <= {"INDEX_MISMATCH"}, [f["message"] for f in found]
    return sorted((f["topic"], f["producer_id"], f["related_offset"], f["rule"], f["message"]) for f in found)


def test_an_entry_from_a_previous_marker_is_a_mismatch(spark: SparkSession) -> None:
    """The logs start at 10 (retention deleted 0-9). `wide`: producer 7's entry starts at 5, below the
    log start, where what was gone could excuse it; but its COMMIT at 11 lies between, and every marker
    ends the producer's transaction: read_committed consumers would drop the committed record at 10.
    `good`: the entries the broker writes."""
    files, entries, logs = [], [], []
    for topic, wide in (("good", False), ("wide", True)):
        log = _transactions(topic, "d", start=10)
        logs.append(log)
        files += [_file(log, "log", 10), _file(log, "index", 10), _file(log, "txnindex", 10)]
        entries += [_entry(log, 7, 5 if wide else 12, 13, 14, 0), _entry(log, 8, 14, 15, 16, 1)]
    found = _index_mismatches(spark, logs, files, entries)
    # `related_offset`: the entry's first offset, the other side of the evidence.
    assert [(t, p, o) for t, p, o, _, _ in found] == [("wide", 7, 5)]
    assert "previous marker, at offset 11" in found[0][4], found[0][4]


def test_a_last_stable_offset_past_the_marker_is_a_mismatch_only_past_a_later_aborted_transaction(
    spark: SparkSession,
) -> None:
    """After the logs of `_transactions`, producer 9 aborts a transaction (offset 7, marker at 8).
    Producer 8's ABORT at 5 gets an entry whose last stable offset passes its marker's next offset (6):
    - `follower`: 7, the first offset of producer 9's transaction. A follower writes that when one fetch
      brings it both (`UnifiedLog.append` updates every producer of the chunk before it computes each
      completed transaction's last stable offset): healthy, no finding.
    - `hides`: 9, past producer 9's aborted transaction from 7: a read_committed fetch ending at 8 stops
      collecting aborted transactions at this entry (`TransactionIndex.collectAbortedTxns`) and shows
      producer 9's aborted record as committed.
    - `last`: 19 with no aborted transaction after it to miss: nothing a fetch could get wrong."""
    files, entries, logs = [], [], []
    for topic, lso in (("follower", 7), ("hides", 9), ("last", 19)):
        log = _transactions(topic, "d")
        if topic != "last":
            log.data(9, 0, 0, transactional=True)
            log.marker(9, 0, "ABORT")
            entries.append(_entry(log, 9, 7, 8, 9, 2))
        logs.append(log)
        files += [_file(log, "log", 0), _file(log, "index", 0), _file(log, "txnindex", 0)]
        entries += [_entry(log, 7, 2, 3, 4, 0), _entry(log, 8, 4, 5, lso, 1)]
    found = _index_mismatches(spark, logs, files, entries)
    # (related: the first offset of the aborted transaction a fetch misses)
    assert [(t, p, o) for t, p, o, _, _ in found] == [("hides", 8, 7)], [f[4] for f in found]
    (hides,) = found
    assert hides[3].startswith("TransactionIndex: lastStableOffset"), hides[3]
    assert "last stable offset 9" in hides[4] and "aborted transaction from offset 7" in hides[4], hides[4]


def test_a_dump_copied_without_any_txnindex_is_not_judged_by_the_missing_files(spark: SparkSession) -> None:
    """`cp *.log *.index` leaves every `.txnindex` out: the ABORT markers of the older segment have no
    entry to find, which says nothing of what the broker wrote. A dump holding some `.txnindex` is
    judged: there the older segment's missing file is a mismatch per ABORT."""
    logs, files = [], []
    for dump_id, with_some in (("copied", False), ("whole", True)):
        log = _transactions("orders", dump_id)
        active = LogBuilder(
            topic="orders",
            dump_id=dump_id,
            start_offset=7,
            file=f"/{dump_id}/orders-0/00000000000000000007.log",
        )
        active.plain()
        logs += [log, active]
        files += [
            _file(log, "log", 0),
            _file(log, "index", 0),
            _file(active, "log", 7),
            _file(active, "index", 7),
        ]
        if with_some:
            files.append(_file(active, "txnindex", 7))
    found = _index_mismatches(spark, logs, files, [])
    assert {(f[1], f[2]) for f in found} == {(7, 3), (8, 5)}
    assert len(found) == 2


def test_an_aborted_transaction_opened_by_an_invalid_batch_is_listed_from_it(spark: SparkSession) -> None:
    """Producer 7's aborted transaction opens with a batch whose sequences do not fit its offsets
    (INVALID_SEQUENCE): the broker appended it, opened the transaction there (`appendDataBatch`) and
    lists the transaction from it. The entry matches (a review found an INDEX_MISMATCH saying the
    transaction began at the next batch)."""
    log = LogBuilder(topic="invalid", dump_id="d", file="/d/invalid-0/00000000000000000000.log")
    log.data(7, 0, 0, 3, last_sequence=5, transactional=True)  # offsets 0-2, sequences 0-5
    log.data(7, 0, 3, transactional=True)
    log.marker(7, 0, "ABORT")
    log.plain()
    files = [_file(log, "log", 0), _file(log, "index", 0), _file(log, "txnindex", 0)]
    empty = Bronze.from_batches(spark.createDataFrame([], BATCHES.schema))
    bronze = replace(
        empty,
        batches=spark.createDataFrame(log.rows, BATCHES.schema),
        files=spark.createDataFrame(files, FILES.schema),
        txn_index=spark.createDataFrame([_entry(log, 7, 0, 4, 5, 0)], TXN_INDEX.schema),
    )
    kinds = {f["kind"] for f in audit(bronze, load_profile()).findings.collect()}
    assert "INVALID_SEQUENCE" in kinds
    assert "INDEX_MISMATCH" not in kinds
