"""Finding kinds the fault corpus does not reach, on logs written by an independent encoder
(kafka-python's batch builder) or on real broker files moved where they disagree.

Each test writes one partition directory, ingests it with Spark into Delta and audits it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from audit_rules.kinds import Severity
from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.faults import apply_fault
from tests.builders import V2Batch, build_v2, segment


def write_partition(root: Path, batches: list[V2Batch], name: str = "orders-0") -> Path:
    part = root / "dump" / name
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(segment(*[build_v2(b) for b in batches]))
    return root / "dump"


def audit_dir(spark: Any, log_dir: Path, out: Path, *, records: bool = False) -> list[dict[str, Any]]:
    run_ingest(
        spark, IngestOptions(inputs=[LabeledPath("d", str(log_dir))], output=str(out), records=records)
    )
    return [r.asDict() for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()]


def kinds(found: list[dict[str, Any]]) -> list[tuple[str, int | None]]:
    return sorted(
        (f["kind"], f["first_offset"]) for f in found if Severity.parse(f["severity"]) > Severity.INFO
    )


def batches_of(
    pid: int, epoch: int, values: list[bytes], *, start_offset: int, start_seq: int
) -> list[V2Batch]:
    return [
        V2Batch(
            base_offset=start_offset + i,
            records=((b"k" + v, v),),
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=start_seq + i,
            base_timestamp=1_700_000_000_000 + start_offset + i,
        )
        for i, v in enumerate(values)
    ]


def test_records_resent_under_a_new_epoch_are_duplicates_by_content(spark: Any, tmp_path: Path) -> None:
    # librdkafka #4953 / KAFKA-14034: in-flight v4, v5 re-sent after the bump, sequences restarted at 0.
    first = batches_of(7, 0, [b"v1", b"v2", b"v3", b"v4", b"v5"], start_offset=0, start_seq=0)
    resent = batches_of(7, 1, [b"v4", b"v5", b"v6"], start_offset=5, start_seq=0)
    found = audit_dir(spark, write_partition(tmp_path, first + resent), tmp_path / "out", records=True)
    dups = [f for f in found if f["kind"] == "DUPLICATE_RECORDS_NEW_EPOCH"]
    assert sorted((f["first_offset"], f["related_offset"], f["producer_epoch"]) for f in dups) == [
        (5, 3, 1),
        (6, 4, 1),
    ]
    assert kinds(found) == [("DUPLICATE_RECORDS_NEW_EPOCH", 5), ("DUPLICATE_RECORDS_NEW_EPOCH", 6)]
    assert any(f["kind"] == "EPOCH_BUMP" and f["first_offset"] == 5 for f in found)


def test_a_producer_starting_mid_sequence_in_a_complete_log_is_missing_history(
    spark: Any, tmp_path: Path
) -> None:
    log = batches_of(3, 0, [b"a", b"b"], start_offset=0, start_seq=0) + batches_of(
        9, 0, [b"x", b"y"], start_offset=2, start_seq=4
    )
    found = audit_dir(spark, write_partition(tmp_path, log), tmp_path / "out")
    (missing,) = [f for f in found if f["kind"] == "HISTORY_START_MISSING"]
    assert (missing["producer_id"], missing["first_offset"], missing["missing_records"]) == (9, 2, 4)
    assert kinds(found) == [("HISTORY_START_MISSING", 2)]


def test_new_epoch_not_starting_at_zero_and_invalid_sequence_ranges(spark: Any, tmp_path: Path) -> None:
    log = batches_of(4, 0, [b"a", b"b"], start_offset=0, start_seq=0)
    log += batches_of(4, 1, [b"c"], start_offset=2, start_seq=7)  # new epoch at 7
    log.append(
        V2Batch(
            base_offset=3,
            records=((None, b"d"), (None, b"e")),
            producer_id=5,
            producer_epoch=0,
            base_sequence=-3,
        )
    )
    found = audit_dir(spark, write_partition(tmp_path, log), tmp_path / "out")
    assert kinds(found) == [("INVALID_SEQUENCE", 3), ("NEW_EPOCH_NONZERO_SEQUENCE", 2)]


def test_snapshot_that_disagrees_with_the_log_is_a_mismatch(
    spark: Any, broker_dump: Any, tmp_path: Path
) -> None:
    """A real broker snapshot renamed to a later offset: the state it holds is no longer the log's there."""
    source = broker_dump.log_dir / "idempotent-segments-0"
    part = tmp_path / "dump" / "idempotent-segments-0"
    shutil.copytree(source, part)
    snapshots = sorted(part.glob("*.snapshot"))
    assert len(snapshots) >= 2, [p.name for p in snapshots]
    oldest, newest = snapshots[0], snapshots[-1]
    newest.unlink()
    shutil.copy(oldest, newest)
    found = audit_dir(spark, tmp_path / "dump", tmp_path / "out")
    mismatch = [f for f in found if f["kind"] == "SNAPSHOT_MISMATCH"]
    assert mismatch and all(f["related_offset"] == int(newest.stem) for f in mismatch), found
    assert {f["kind"] for f in found if Severity.parse(f["severity"]) > Severity.INFO} == {
        "SNAPSHOT_MISMATCH"
    }


def test_a_producer_gone_from_a_later_dump_above_the_log_start_is_lost(spark: Any, tmp_path: Path) -> None:
    keep = batches_of(1, 0, [b"a", b"b"], start_offset=0, start_seq=0)
    gone = batches_of(2, 0, [b"x", b"y"], start_offset=2, start_seq=0)
    tail = batches_of(1, 0, [b"c"], start_offset=4, start_seq=2)
    earlier = write_partition(tmp_path / "monday", keep + gone + tail)
    later = write_partition(tmp_path / "tuesday", keep + tail)
    segment_file = later / "orders-0" / "00000000000000000000.log"
    stat = segment_file.stat()
    os.utime(segment_file, (stat.st_atime, stat.st_mtime + 86_400))  # captured a day later
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath("monday", str(earlier)), LabeledPath("tuesday", str(later))],
            output=str(tmp_path / "out"),
        ),
    )
    found = [
        r.asDict()
        for r in audit(read_bronze(spark, str(tmp_path / "out")), load_profile()).findings.collect()
    ]
    lost = [
        (f["kind"], f["dump_id"], f["producer_id"], f["related_offset"])
        for f in found
        if "UNKNOWN" in f["kind"]
    ]
    assert lost == [("UNKNOWN_PRODUCER_LOSS", "tuesday", 2, 3)]
    # The same offsets now hold other batches: the dumps diverge.
    assert [f["kind"] for f in found if f["kind"] == "REPLICA_DIVERGENCE"] == ["REPLICA_DIVERGENCE"]


def test_a_producer_deleted_by_retention_between_dumps_is_retention_not_loss(
    spark: Any, tmp_path: Path
) -> None:
    """Monday's dump has two segments; by Tuesday retention deleted the first (the fault tool's
    delete_head_segment: log start offset advanced, checkpoint rewritten) and producer 2 with it."""
    old = batches_of(2, 0, [b"x", b"y"], start_offset=0, start_seq=0)
    new = batches_of(1, 0, [b"a", b"b"], start_offset=2, start_seq=0)
    monday = tmp_path / "monday" / "dump"
    part = monday / "orders-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(segment(*[build_v2(b) for b in old]))
    (part / "00000000000000000002.log").write_bytes(segment(*[build_v2(b) for b in new]))
    tuesday = tmp_path / "tuesday" / "dump"
    expected = apply_fault("delete_head_segment", part, tuesday / "orders-0", segments=1)
    assert expected.params["log_start_offset"] == 2
    for path in (tuesday / "orders-0").iterdir():
        stat = path.stat()
        os.utime(path, (stat.st_atime, stat.st_mtime + 86_400))  # captured a day later
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath("monday", str(monday)), LabeledPath("tuesday", str(tuesday))],
            output=str(tmp_path / "out"),
        ),
    )
    found = [
        r.asDict()
        for r in audit(read_bronze(spark, str(tmp_path / "out")), load_profile()).findings.collect()
    ]
    unknown = [
        (f["kind"], f["dump_id"], f["producer_id"], f["related_offset"])
        for f in found
        if "UNKNOWN" in f["kind"]
    ]
    assert unknown == [("UNKNOWN_PRODUCER_RETENTION", "tuesday", 2, 1)]
    assert kinds(found) == []
