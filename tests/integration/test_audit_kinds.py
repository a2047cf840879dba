"""Finding kinds the fault corpus does not reach, on logs written by an independent encoder
(kafka-python's batch builder) or on real broker files moved where they disagree.

Each scenario is a topic of its own. They are written side by side and audited together, one ingest
and audit per mode (record-level and batch-level; the split test has its own ingest, since its split
size applies to every file); each test reads its topic's findings, and no finding may fall outside the
scenarios' topics.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.faults import apply_fault
from kafka_harness.scenarios import SEGMENTED_TOPIC, TRANSACTIONAL_TOPIC
from schemas.tables import WALK_FIRST
from tests.builders import V2Batch, build_v2, producer_snapshot, segment
from tests.indexes import broker_like_index
from tests.paths import REAL_FIXTURES
from tests.table_rows import above_info, kinds_above_info

Findings = list[dict[str, Any]]


def write_partition(root: Path, batches: list[V2Batch], name: str = "orders-0") -> Path:
    """`root/dump/<name>/` with one segment of `batches`; returns the dump, `root/dump`."""
    part = root / "dump" / name
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(segment(*[build_v2(b) for b in batches]))
    return root / "dump"


def audited(spark: Any, inputs: dict[str, Path], out: Path, *, records: bool = False) -> Findings:
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath(label, str(path)) for label, path in inputs.items()],
            output=str(out),
            records=records,
        ),
    )
    return [r.asDict() for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()]


def of_topic(found: Findings, topic: str) -> Findings:
    return [f for f in found if f["topic"] == topic]


def kinds(found: Findings) -> list[tuple[str, int | None]]:
    return sorted((f["kind"], f["first_offset"]) for f in above_info(found))


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


def a_day_later(path: Path) -> None:
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 86_400))


# --- record-level mode -----------------------------------------------------------------------------

RECORD_TOPICS = ("resent-epoch", "resent-pid")


@pytest.fixture(scope="module")
def record_level(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Findings:
    root = tmp_path_factory.mktemp("kinds-records")
    # librdkafka #4953 / KAFKA-14034: in-flight v4, v5 re-sent after the bump, sequences restarted at 0.
    write_partition(
        root,
        batches_of(7, 0, [b"v1", b"v2", b"v3", b"v4", b"v5"], start_offset=0, start_seq=0)
        + batches_of(7, 1, [b"v4", b"v5", b"v6"], start_offset=5, start_seq=0),
        "resent-epoch-0",
    )
    # Pre-KIP-360 clients reset their idempotent session under a new producer id and re-send the
    # in-flight batches. Only the hand-over shape counts: the old pid stopped before the new one
    # began, and the new pid's first batch is a copy.
    # resent-pid-0: pid 7 wrote v1..v5; pid 8 opens with v4, v5 again, then v6.
    write_partition(
        root,
        batches_of(7, 0, [b"v1", b"v2", b"v3", b"v4", b"v5"], start_offset=0, start_seq=0)
        + batches_of(8, 0, [b"v4", b"v5", b"v6"], start_offset=5, start_seq=0),
        "resent-pid-0",
    )
    # resent-pid-1: the same payload from two producers writing at the same time is no re-send.
    write_partition(
        root,
        batches_of(7, 0, [b"v1", b"v2"], start_offset=0, start_seq=0)
        + batches_of(8, 0, [b"v1"], start_offset=2, start_seq=0)
        + batches_of(7, 0, [b"v3"], start_offset=3, start_seq=2),
        "resent-pid-1",
    )
    # resent-pid-2: pid 8 opens with a record of its own: no re-send either.
    write_partition(
        root,
        batches_of(7, 0, [b"v1", b"v2", b"v3"], start_offset=0, start_seq=0)
        + batches_of(8, 0, [b"w1", b"v3"], start_offset=3, start_seq=0),
        "resent-pid-2",
    )
    return audited(spark, {"d": root / "dump"}, root / "out", records=True)


def test_record_level_findings_are_all_in_the_scenarios_topics(record_level: Findings) -> None:
    assert record_level and {f["topic"] for f in record_level} <= set(RECORD_TOPICS)


def test_records_resent_under_a_new_epoch_are_duplicates_by_content(record_level: Findings) -> None:
    found = of_topic(record_level, "resent-epoch")
    dups = [f for f in found if f["kind"] == "DUPLICATE_RECORDS_NEW_EPOCH"]
    assert sorted((f["first_offset"], f["related_offset"], f["producer_epoch"]) for f in dups) == [
        (5, 3, 1),
        (6, 4, 1),
    ]
    assert kinds(found) == [("DUPLICATE_RECORDS_NEW_EPOCH", 5), ("DUPLICATE_RECORDS_NEW_EPOCH", 6)]
    assert any(f["kind"] == "EPOCH_BUMP" and f["first_offset"] == 5 for f in found)


def test_records_resent_under_a_new_producer_id_are_duplicates_by_content(record_level: Findings) -> None:
    found = of_topic(record_level, "resent-pid")
    dups = [f for f in found if f["kind"] == "DUPLICATE_RECORDS_NEW_EPOCH"]
    assert sorted(
        (f["partition"], f["producer_id"], f["first_offset"], f["related_offset"]) for f in dups
    ) == [(0, 8, 5, 3), (0, 8, 6, 4)]
    assert all("producer 7" in f["message"] for f in dups), dups
    assert kinds(found) == [("DUPLICATE_RECORDS_NEW_EPOCH", 5), ("DUPLICATE_RECORDS_NEW_EPOCH", 6)]


# --- batch-level mode ------------------------------------------------------------------------------

T0 = 1_700_000_000_000
HOUR_MS = 3_600_000
ABORTED_TXN = struct.Struct(">hqqqq")  # TransactionIndex entry: version, pid, first, last, LSO (formats §3.5)
MISMATCHED = SEGMENTED_TOPIC.name  # a real broker partition whose newest snapshot is replaced
TXN_INDEXED = TRANSACTIONAL_TOPIC.name  # a real broker partition whose .txnindex is edited
BATCH_TOPICS = ("mid-sequence", "new-epoch", MISMATCHED, "gone", "retained", "hanging", TXN_INDEXED)


def snapshot_partition(root: Path, name: str, log: list[V2Batch], entries: list[tuple[int, ...]]) -> None:
    """A partition whose first live segment starts at 20 (retention took 0-19), with a snapshot there."""
    part = root / "dump" / name
    part.mkdir(parents=True)
    (part / "00000000000000000020.log").write_bytes(segment(*[build_v2(b) for b in log]))
    (part / "00000000000000000020.snapshot").write_bytes(producer_snapshot(entries))


class BatchLevel(NamedTuple):
    """The batch-level audit's findings, and what the scenarios that edit real broker files changed."""

    found: Findings
    newest_snapshot: int
    dropped: tuple[int, ...]
    stray: tuple[int, ...]


@pytest.fixture(scope="module")
def batch_level(spark: Any, broker_dump: Any, tmp_path_factory: pytest.TempPathFactory) -> BatchLevel:
    root = tmp_path_factory.mktemp("kinds")
    # mid-sequence: producer 9 starts at sequence 4 in a log that starts at offset 0.
    write_partition(
        root,
        batches_of(3, 0, [b"a", b"b"], start_offset=0, start_seq=0)
        + batches_of(9, 0, [b"x", b"y"], start_offset=2, start_seq=4),
        "mid-sequence-0",
    )
    # new-epoch: producer 4's epoch 1 starts at sequence 7; producer 5 writes a negative sequence.
    epochs = batches_of(4, 0, [b"a", b"b"], start_offset=0, start_seq=0)
    epochs += batches_of(4, 1, [b"c"], start_offset=2, start_seq=7)
    epochs.append(
        V2Batch(
            base_offset=3,
            records=((None, b"d"), (None, b"e")),
            producer_id=5,
            producer_epoch=0,
            base_sequence=-3,
        )
    )
    write_partition(root, epochs, "new-epoch-0")
    # A real broker snapshot renamed to a later offset: the state it holds is no longer the log's there.
    part = root / "dump" / f"{MISMATCHED}-0"
    shutil.copytree(broker_dump.log_dir / f"{MISMATCHED}-0", part)
    snapshots = sorted(part.glob("*.snapshot"))
    assert len(snapshots) >= 2, [p.name for p in snapshots]
    oldest, newest = snapshots[0], snapshots[-1]
    newest.unlink()
    shutil.copy(oldest, newest)
    # hanging: the newest snapshot says producer 11 opened a transaction at offset 15; retention deleted
    # 0-19 and no marker follows. Only the snapshot still knows the transaction (KIP-664's hanging
    # transaction, invisible in the data).
    live = [
        V2Batch(base_offset=20 + i, producer_id=3, producer_epoch=0, base_sequence=i, base_timestamp=T0 + i)
        for i in range(3)
    ]
    # (pid, epoch, lastSeq, lastOffset, offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset)
    hanging = (11, 2, 4, 17, 0, T0 - 2 * HOUR_MS, 0, 15)
    snapshot_partition(root, "hanging-0", live, [hanging])
    # Idle for a minute only: the coordinator may still close it.
    snapshot_partition(root, "hanging-1", live, [(11, 2, 4, 17, 0, T0 - 60_000, 0, 15)])
    # Its transaction goes on in the retained log: the data rule judges it (recent: nothing).
    resumed = V2Batch(
        base_offset=23,
        producer_id=11,
        producer_epoch=2,
        base_sequence=5,
        transactional=True,
        base_timestamp=T0 + 3,
    )
    snapshot_partition(root, "hanging-2", [*live, resumed], [hanging])
    # A real broker partition with aborted transactions: one entry dropped from its `.txnindex` and one
    # added that no ABORT marker closes, at the offset before the dropped one's marker (inside the log:
    # one past the log's end, in the active segment's index, is a live copy's, no finding).
    part = root / "dump" / f"{TXN_INDEXED}-0"
    shutil.copytree(broker_dump.log_dir / f"{TXN_INDEXED}-0", part)
    index = next(p for p in sorted(part.glob("*.txnindex")) if p.stat().st_size >= ABORTED_TXN.size)
    raw = index.read_bytes()
    entries = [ABORTED_TXN.unpack_from(raw, at) for at in range(0, len(raw), ABORTED_TXN.size)]
    dropped, kept = entries[0], entries[1:]
    stray = (0, dropped[1], dropped[3] - 1, dropped[3] - 1, dropped[3])
    index.write_bytes(b"".join(ABORTED_TXN.pack(*e) for e in [*kept, stray]))

    # Two dumps a day apart.
    monday, tuesday = root / "monday", root / "tuesday"
    # gone: producer 2 is in Monday's dump and not in Tuesday's, whose log still starts at 0 and whose
    # offsets 2-3 hold producer 1's batches (a log rewritten there: no offset is left free, which would
    # show the log cleaner).
    keep = batches_of(1, 0, [b"a", b"b"], start_offset=0, start_seq=0)
    gone = batches_of(2, 0, [b"x", b"y"], start_offset=2, start_seq=0)
    tail = batches_of(1, 0, [b"c"], start_offset=4, start_seq=2)
    over = batches_of(1, 0, [b"c"], start_offset=2, start_seq=2)
    write_partition(monday, keep + gone + tail, "gone-0")
    a_day_later(write_partition(tuesday, keep + over, "gone-0") / "gone-0" / "00000000000000000000.log")
    # retained: Monday's dump has two segments; by Tuesday retention deleted the first (the fault
    # tool's delete_head_segment: log start offset advanced, checkpoint rewritten) and producer 2 with it.
    part = monday / "dump" / "retained-0"
    part.mkdir(parents=True)
    old = batches_of(2, 0, [b"x", b"y"], start_offset=0, start_seq=0)
    new = batches_of(1, 0, [b"a", b"b"], start_offset=2, start_seq=0)
    (part / "00000000000000000000.log").write_bytes(segment(*[build_v2(b) for b in old]))
    (part / "00000000000000000002.log").write_bytes(segment(*[build_v2(b) for b in new]))
    expected = apply_fault("delete_head_segment", part, tuesday / "dump" / "retained-0", segments=1)
    assert expected.params["log_start_offset"] == 2
    for path in (tuesday / "dump" / "retained-0").iterdir():
        a_day_later(path)

    found = audited(
        spark,
        {"d": root / "dump", "monday": monday / "dump", "tuesday": tuesday / "dump"},
        root / "out",
    )
    return BatchLevel(found, int(newest.stem), dropped, stray)


def test_batch_level_findings_are_all_in_the_scenarios_topics(batch_level: BatchLevel) -> None:
    assert batch_level.found and {f["topic"] for f in batch_level.found} <= set(BATCH_TOPICS)


def test_a_producer_starting_mid_sequence_in_a_complete_log_is_missing_history(
    batch_level: BatchLevel,
) -> None:
    found = of_topic(batch_level.found, "mid-sequence")
    (missing,) = [f for f in found if f["kind"] == "HISTORY_START_MISSING"]
    assert (missing["producer_id"], missing["first_offset"], missing["missing_records"]) == (9, 2, 4)
    assert kinds(found) == [("HISTORY_START_MISSING", 2)]


def test_new_epoch_not_starting_at_zero_and_invalid_sequence_ranges(batch_level: BatchLevel) -> None:
    found = of_topic(batch_level.found, "new-epoch")
    assert kinds(found) == [("INVALID_SEQUENCE", 3), ("NEW_EPOCH_NONZERO_SEQUENCE", 2)]


def test_snapshot_that_disagrees_with_the_log_is_a_mismatch(batch_level: BatchLevel) -> None:
    found = of_topic(batch_level.found, MISMATCHED)
    mismatch = [f for f in found if f["kind"] == "SNAPSHOT_MISMATCH"]
    assert mismatch and all(f["related_offset"] == batch_level.newest_snapshot for f in mismatch), found
    assert set(kinds_above_info(found)) == {"SNAPSHOT_MISMATCH"}


def unknown_producers(found: Findings) -> list[tuple[Any, ...]]:
    """(kind, dump, producer, related offset) of the UNKNOWN_PRODUCER_* findings."""
    return [
        (f["kind"], f["dump_id"], f["producer_id"], f["related_offset"])
        for f in found
        if "UNKNOWN" in f["kind"]
    ]


def test_a_producer_gone_from_a_later_dump_above_the_log_start_is_lost(batch_level: BatchLevel) -> None:
    found = of_topic(batch_level.found, "gone")
    lost = unknown_producers(found)
    assert lost == [("UNKNOWN_PRODUCER_LOSS", "tuesday", 2, 3)]
    # The same offsets now hold other batches: the dumps diverge.
    assert [f["kind"] for f in found if f["kind"] == "REPLICA_DIVERGENCE"] == ["REPLICA_DIVERGENCE"]


def test_a_producer_deleted_by_retention_between_dumps_is_retention_not_loss(batch_level: BatchLevel) -> None:
    found = of_topic(batch_level.found, "retained")
    unknown = unknown_producers(found)
    assert unknown == [("UNKNOWN_PRODUCER_RETENTION", "tuesday", 2, 1)]
    (finding,) = [f for f in found if f["kind"] == "UNKNOWN_PRODUCER_RETENTION"]
    assert "a kafka-3.4 broker keeps a producer's state after retention" in finding["message"], finding
    assert kinds(found) == []


def test_a_transaction_left_open_in_the_snapshot_whose_data_is_gone_is_hanging(
    batch_level: BatchLevel,
) -> None:
    found = of_topic(batch_level.found, "hanging")
    (finding,) = [f for f in found if f["kind"] == "HANGING_TRANSACTION"]
    assert (finding["partition"], finding["producer_id"], finding["producer_epoch"]) == (0, 11, 2)
    assert (finding["first_offset"], finding["related_offset"]) == (15, 20)
    assert "below the log start offset" in finding["message"], finding["message"]
    assert kinds(found) == [("HANGING_TRANSACTION", 15)]


def test_txnindex_entries_must_match_the_abort_markers_one_to_one(batch_level: BatchLevel) -> None:
    """Each edit of the real `.txnindex` (an entry dropped, one added that no ABORT marker closes) is
    an INDEX_MISMATCH."""
    found = of_topic(batch_level.found, TXN_INDEXED)
    mismatches = sorted(
        (f["producer_id"], f["first_offset"], f["last_offset"])
        for f in found
        if f["kind"] == "INDEX_MISMATCH"
    )
    assert mismatches == sorted([batch_level.dropped[1:4], batch_level.stray[1:4]])
    assert set(kinds_above_info(found)) == {"INDEX_MISMATCH"}


# --- a split segment (its own ingest) ----------------------------------------------------------------


def test_offsets_that_go_back_are_overlaps_inside_a_walk_at_a_split_and_across_files(
    spark: Any, tmp_path: Path
) -> None:
    """OFFSET_OVERLAP wherever the walk that decodes a batch saw its predecessor or not: batch 4 starts
    at batch 3's offset (one walk), batch 8 starts a byte range of its own (the segment is split there)
    at offset 6, and the next segment file starts at the last offset of the first."""
    bases = [0, 1, 2, 3, 3, 5, 6, 7, 6, 9, 10, 11]
    first = [build_v2(V2Batch(base_offset=b, records=((None, b"v%02d" % i),))) for i, b in enumerate(bases)]
    size = len(first[0])
    assert {len(b) for b in first} == {size}
    part = tmp_path / "dump" / "orders-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(segment(*first))
    # An index entry per batch (relative last offset, position), so the split can fall at batch 8.
    (part / "00000000000000000000.index").write_bytes(
        b"".join(struct.pack(">ii", b, i * size) for i, b in enumerate(bases))
    )
    (part / "00000000000000000012.log").write_bytes(
        segment(*[build_v2(V2Batch(base_offset=b, records=((None, b"w"),))) for b in (11, 12)])
    )
    out = tmp_path / "out"
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath("d", str(tmp_path / "dump"))], output=str(out), split_bytes=8 * size
        ),
    )
    bronze = read_bronze(spark, str(out))
    firsts = sorted(
        (r["file"][-9:], r["position"])
        for r in bronze.batches.where(f"walk_mark & {WALK_FIRST} != 0").select("file", "position").collect()
    )
    # The walks: batches 0-7 and 8-11 of the first file (the split), and the second file.
    assert firsts == [("00000.log", 0), ("00000.log", 8 * size), ("00012.log", 0)]
    found = [r.asDict() for r in audit(bronze, load_profile()).findings.collect()]
    assert kinds(found) == [("OFFSET_OVERLAP", 3), ("OFFSET_OVERLAP", 6), ("OFFSET_OVERLAP", 11)]
    related = sorted((f["first_offset"], f["related_offset"]) for f in found if f["kind"] == "OFFSET_OVERLAP")
    assert related == [(3, 3), (6, 7), (11, 11)]


def test_wrong_index_entries_are_one_finding_per_run_of_entries(spark: Any, tmp_path: Path) -> None:
    """A real broker's segment whose `.index` (as the broker writes it) has one entry pointing 5 bytes
    into its batch and three consecutive entries naming offsets below their batches': one INDEX_MISMATCH
    for the entry and one for the three, at their byte positions in the index; nothing else."""
    source = REAL_FIXTURES / "induswargods-kraft" / "__cluster_metadata-0" / "00000000000000000000.log"
    part = tmp_path / "dump" / "meta-0"
    part.mkdir(parents=True)
    log = part / source.name
    shutil.copyfile(source, log)
    entries = broker_like_index(log)
    edited = list(entries)
    edited[100] = (entries[100][0], entries[100][1] + 5)
    for i in (400, 401, 402):
        edited[i] = (entries[i][0] - 1, entries[i][1])
    index = log.with_suffix(".index")
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in edited))
    found = audited(spark, {"d": tmp_path / "dump"}, tmp_path / "out")
    assert set(kinds_above_info(found)) == {"INDEX_MISMATCH"}
    mismatches = sorted(f["message"] for f in found if f["kind"] == "INDEX_MISMATCH")
    assert len(mismatches) == 2, mismatches
    one, three = sorted(mismatches, key=lambda m: "consecutive" in m)
    assert one.startswith(f"{index} at byte 800 (8 bytes): index entry (offset {entries[100][0]}, "), one
    assert three.startswith(
        f"{index} at byte 3200 (24 bytes): 3 consecutive index entries do not lead to batches holding "
        f"their offsets; the first: index entry (offset {entries[400][0] - 1}, position {entries[400][1]})"
    ), three


def test_a_bad_ledger_row_is_one_finding_at_its_bytes_or_its_row_number(spark: Any, tmp_path: Path) -> None:
    """An `--acks` row that cannot be used is an UNREADABLE_FILE finding: named by its bytes in a JSON
    lines ledger, by its row number alone in a Parquet one (whose rows have no byte position)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dump = write_partition(tmp_path, [V2Batch(base_offset=0, records=((None, b"v"),))])
    jsonl = tmp_path / "acks.jsonl"
    first = '{"topic": "orders", "partition": 0, "offset": 0}\n'
    jsonl.write_text(first + "{not json\n")
    parquet = tmp_path / "acks.parquet"
    pq.write_table(pa.Table.from_pylist([{"topic": "orders", "partition": 0, "offset": "x"}]), parquet)
    out = tmp_path / "out"
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath("d", str(dump))],
            output=str(out),
            acks=[LabeledPath(None, str(jsonl)), LabeledPath(None, str(parquet))],
        ),
    )
    found = [r.asDict() for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()]
    messages = sorted(f["message"] for f in found if f["kind"] == "UNREADABLE_FILE")
    assert [m.split(" [")[0] for m in messages] == sorted(
        [
            f"{jsonl} at byte {len(first)} (10 bytes): acks row 1: not JSON: Expecting property name "
            "enclosed in double quotes",
            f"{parquet}: acks row 0: offset 'x' is not an integer",
        ]
    )
    # The rule broken is the ledger's (contract §1), not the checkpoint files' the kind's registry names.
    assert {f["rule"] for f in found if f["kind"] == "UNREADABLE_FILE"} == {"ack ledger row (contract §1)"}


def test_a_log_start_inside_the_first_segment_excuses_nothing_below_it_that_is_on_disk(
    spark: Any, tmp_path: Path
) -> None:
    """DeleteRecords (or a follower taking its leader's start) moves the log start offset and deletes no
    record: the broker deletes a segment only once the next starts at or below the log start. Producer 9
    starts at sequence 4 at offset 6, and the log start is 6. In `kept-0` the first segment starts at 2:
    only offsets 0-1 were deleted, so at least two of its four earlier records are missing. In `cut-0`
    retention deleted offsets 0-5 with their segment: nothing is lost."""
    first = batches_of(3, 0, [b"a", b"b", b"c", b"d"], start_offset=2, start_seq=0)
    late = batches_of(9, 0, [b"x", b"y"], start_offset=6, start_seq=4)
    dump = tmp_path / "dump"
    for name, base, batches in (("kept-0", 2, first + late), ("cut-0", 6, late)):
        (dump / name).mkdir(parents=True)
        (dump / name / f"{base:020d}.log").write_bytes(segment(*[build_v2(b) for b in batches]))
    (dump / "log-start-offset-checkpoint").write_text("0\n2\nkept 0 6\ncut 0 6\n")
    found = audited(spark, {"d": dump}, tmp_path / "out")
    starts = sorted((f["topic"], f["kind"], f["producer_id"], f["missing_records"]) for f in found)
    assert starts == [
        ("cut", "HISTORY_TRUNCATED_BY_RETENTION", 9, None),
        ("kept", "HISTORY_START_MISSING", 9, 2),
    ]
    (missing,) = [f for f in found if f["topic"] == "kept"]
    assert "below offset 2, the first segment's base" in missing["message"], missing["message"]


def test_a_snapshot_producers_last_batch_missing_below_its_later_batches_is_lost(
    spark: Any, tmp_path: Path
) -> None:
    """Retention took offsets 0-9. The snapshot at 16 says producer 12 wrote sequences up to 7, its last
    batch at offset 12; the log holds producer 3's batch there, and producer 12's only from 16 (8-9). Its
    history alone starts mid-sequence where retention explains it (info): the snapshot says its batch at
    12, which no one deleted, is gone."""
    dump = tmp_path / "dump"
    part = dump / "lost-0"
    part.mkdir(parents=True)
    log = batches_of(3, 0, [b"a", b"b", b"c", b"d", b"e", b"f"], start_offset=10, start_seq=0)
    log += batches_of(12, 0, [b"x", b"y"], start_offset=16, start_seq=8)
    (part / "00000000000000000010.log").write_bytes(segment(*[build_v2(b) for b in log]))
    entries = [(3, 0, 5, 15, 0, T0, 0, -1), (12, 0, 7, 12, 0, T0, 0, -1)]
    (part / "00000000000000000016.snapshot").write_bytes(producer_snapshot(entries))
    found = audited(spark, {"d": dump}, tmp_path / "out")
    assert kinds(found) == [("UNKNOWN_PRODUCER_LOSS", 12)]
    (lost,) = above_info(found)
    assert (lost["producer_id"], lost["related_offset"]) == (12, 16)
    assert "none of that producer's batches up to it (its first is at offset 16)" in lost["message"]
