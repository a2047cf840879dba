"""Every labelled fault of `kafka_harness.faults`, applied to real broker-written partitions, gives
exactly its expected findings: no fault missed, nothing extra above info.

The corpus is ingested and audited once: each case's partition gets a topic of its own, because the
cases are variants of the same partitions and would otherwise rightly diverge from each other. One test
then audits a case together with the original on purpose: a replica that diverges.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from audit_rules.pipeline import Bronze, audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.faults import CORPUS_CASES, CorpusCase, FaultNotApplicable, apply_fault, build_corpus
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from tests.table_rows import above_info


def ingest(spark: Any, output: Path, *inputs: str) -> None:
    run_ingest(spark, IngestOptions(inputs=[LabeledPath.parse(p) for p in inputs], output=str(output)))


def audit_dumps(spark: Any, output: Path, *dump_ids: str) -> list[dict[str, Any]]:
    """Audit only the given dumps of `output` (the bronze tables filtered to them)."""
    bronze = read_bronze(spark, str(output))
    keep = F.col("dump_id").isin(list(dump_ids))
    if not dump_ids:
        keep = F.lit(True)
    scoped = Bronze(
        **{
            name: getattr(bronze, name).where(keep)
            for name in (
                "batches",
                "files",
                "partition_state",
                "producer_snapshots",
                "txn_index",
                "quarantine",
            )
        },
        acks=bronze.acks.limit(0),
    )
    return [r.asDict() for r in audit(scoped, load_profile()).findings.collect()]


def describe(findings: list[dict[str, Any]]) -> list[str]:
    return sorted(
        f"{f['kind']} @{f['first_offset']} pid={f['producer_id']}: {f['message']}" for f in findings
    )


def _own_topic(case: CorpusCase) -> str:
    """Give the case's partition a topic of its own (`<case>.<topic>`), checkpoints included, so that
    all cases are audited in one run without being compared with each other as replicas."""
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", case.name)
    topic = case.expected.topic
    part = Path(case.expected.partition_dir)
    part.rename(part.with_name(f"{prefix}.{part.name}"))
    for checkpoint in case.log_dir.glob("*-checkpoint"):
        lines = checkpoint.read_text().splitlines(keepends=True)
        checkpoint.write_text(
            "".join(re.sub(rf"^{re.escape(topic)} ", f"{prefix}.{topic} ", ln) for ln in lines)
        )
    return f"{prefix}.{topic}"


def audited_cases(
    spark: Any, cases: list[CorpusCase], output: Path
) -> dict[str, tuple[CorpusCase, list[dict[str, Any]]]]:
    """Each case with the findings of its partition and those of its dump that name no topic (a log
    directory's files, e.g. the checkpoints the fault rewrites), from one ingest and one audit of all."""
    topics = {case.name: _own_topic(case) for case in cases}
    ingest(spark, output, *[f"{case.name}={case.log_dir}" for case in cases])
    found = audit_dumps(spark, output)
    return {
        case.name: (
            case,
            [f for f in found if f["dump_id"] == case.name and f["topic"] in (topics[case.name], None)],
        )
        for case in cases
    }


@pytest.fixture(scope="module")
def corpus(
    spark: Any, broker_dump: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[CorpusCase, list[dict[str, Any]]]]:
    """Every case of the corpus of `broker_dump`'s logs with its findings (`audited_cases`)."""
    root = tmp_path_factory.mktemp("fault-corpus")
    cases = build_corpus(broker_dump.log_dir, root / "cases")
    return audited_cases(spark, cases, root / "out")


# The clean broker's logs the faults also run on: a transactional topic whose producers were
# re-initialised and fenced (several epochs, aborts, the coordinator's markers), and one whose log start
# DeleteRecords moved inside a batch (a log-start-offset-checkpoint entry, a leader epoch truncated to it).
CLEAN_SOURCES = ("clean-transactions-0", "clean-delete-records-0")


@pytest.fixture(scope="module")
def clean_corpus(
    spark: Any, clean_broker_dump: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[CorpusCase, list[dict[str, Any]]]]:
    """Every corpus case that applies to each of `CLEAN_SOURCES`, ingested and audited once, as `corpus`."""
    root = tmp_path_factory.mktemp("clean-fault-corpus")
    cases: list[CorpusCase] = []
    for source in CLEAN_SOURCES:
        for spec in CORPUS_CASES:
            name = f"{spec.name}.{source}"
            log_dir = root / "cases" / name
            try:
                expected = apply_fault(
                    spec.fault, clean_broker_dump.log_dir / source, log_dir / source, **spec.params
                )
            except FaultNotApplicable:
                shutil.rmtree(log_dir, ignore_errors=True)
                continue
            cases.append(CorpusCase(name, log_dir, expected))
    return audited_cases(spark, cases, root / "out")


def test_the_corpus_covers_every_fault_of_the_issue(corpus: dict[str, Any]) -> None:
    faults = {case.expected.fault for case, _ in corpus.values()}
    assert faults >= {
        "drop_batch",
        "duplicate_batch",
        "reorder_batches",
        "lower_epoch",
        "restart_sequence",
        "delete_head_segment",
        "truncate_tail",
        "flip_byte",
        "drop_marker",
        "space_batches",
    }


def test_every_fault_gives_exactly_its_expected_findings(corpus: dict[str, Any]) -> None:
    _assert_expected_findings(corpus)


def test_faults_on_multi_epoch_transactional_and_delete_records_logs_give_exactly_their_findings(
    clean_corpus: dict[str, Any],
) -> None:
    """The same on the clean broker's fenced transactional producers and on a log whose start lies
    inside a batch (a review found the rewrite moved that start, which the corpus of the first broker's
    logs, none with such a start, could not show)."""
    built = {case.expected.fault for case, _ in clean_corpus.values()}
    assert built >= {"drop_batch", "lower_epoch", "flip_byte", "drop_marker", "truncate_tail"}, built
    assert {name.rsplit(".", 1)[1] for name in clean_corpus} == set(CLEAN_SOURCES)
    _assert_expected_findings(clean_corpus)


def _assert_expected_findings(corpus: dict[str, Any]) -> None:
    mismatches = []
    for case, found in corpus.values():
        got = Counter(
            (f["kind"], f["partition"], f["producer_id"], f["first_offset"]) for f in above_info(found)
        )
        want = Counter(
            (e.kind, e.partition, e.producer_id, e.first_offset) for e in case.expected.above_info()
        )
        info_got = {(f["kind"], f["producer_id"], f["first_offset"]) for f in found}
        info_missing = [
            e
            for e in case.expected.findings
            if e.severity == "info" and (e.kind, e.producer_id, e.first_offset) not in info_got
        ]
        if got != want or info_missing:
            mismatches.append(
                f"{case.name}: missing {sorted((want - got).elements())}, "
                f"extra {sorted((got - want).elements())}, "
                f"missing info {info_missing}\n  found: " + "\n  found: ".join(describe(found))
            )
    assert not mismatches, "\n".join(mismatches)


def test_related_offsets_and_missing_counts_follow_the_contract(corpus: dict[str, Any]) -> None:
    for case, found in corpus.values():
        by_key = {(f["kind"], f["first_offset"]): f for f in found}
        for e in case.expected.above_info():
            f = by_key[(e.kind, e.first_offset)]
            if e.related_offset is not None:
                assert f["related_offset"] == e.related_offset, (case.name, f["message"])
            if e.missing_records is not None:
                assert f["missing_records"] == e.missing_records, (case.name, f["message"])


def test_duplicate_messages_say_whether_the_five_batch_window_should_have_caught_them(
    corpus: dict[str, Any],
) -> None:
    verdicts = {}
    for case, found in corpus.values():
        if case.expected.fault != "duplicate_batch":
            continue
        (dup,) = [f for f in found if f["kind"] == "DUPLICATE_BATCH"]
        verdicts[case.expected.params.get("distance", "end")] = "should have caught it" in dup["message"]
    assert verdicts.get(2) is True and verdicts.get(6) is False, verdicts


@pytest.mark.parametrize("name", ["flip_byte_in_sequence", "flip_byte_first_of_epoch"])
def test_a_corrupt_batch_inside_a_sequence_is_corruption_not_loss(corpus: dict[str, Any], name: str) -> None:
    case, found = corpus[name]
    offset = case.expected.params["batch_offset"]
    assert [f["kind"] for f in above_info(found)] == ["CRC_MISMATCH"], describe(found)
    (crc,) = [f for f in found if f["kind"] == "CRC_MISMATCH"]
    assert crc["first_offset"] == offset and crc["producer_id"] is None
    # Its header, not vouched for, names the sequences its producer skipped between its neighbours.
    headers = [
        h
        for log in sorted(case.log_dir.rglob("*.log"))  # its one partition, renamed (`_own_topic`)
        for h in read_log_segment(log)
        if isinstance(h, BatchHeader)
    ]
    flipped = next(h for h in headers if h.base_offset == offset)
    key = (flipped.producer_id, flipped.producer_epoch)
    stream = [h for h in headers if (h.producer_id, h.producer_epoch) == key and not h.is_control]
    after = stream[stream.index(flipped) + 1]
    names = (
        f"names producer {flipped.producer_id} epoch {flipped.producer_epoch}, sequences "
        f"{flipped.base_sequence}-{flipped.last_sequence}, "
    )
    if name == "flip_byte_in_sequence":
        before = stream[stream.index(flipped) - 1]
        skipped = f"sequences it skipped between its batches at offsets {before.base_offset} and "
    else:
        assert flipped is stream[0] and flipped.base_sequence == 0
        skipped = "sequences its epoch skipped before its batch at offset "
    unread = f"{after.base_offset}: those records are in the log, unreadable, not lost"
    assert names + skipped + unread in crc["message"], crc["message"]
    # The other flip, on a batch no producer's sequence needs, fills no gap.
    _, plain = corpus["flip_byte"]
    (other,) = [f for f in plain if f["kind"] == "CRC_MISMATCH"]
    assert "not lost" not in other["message"], other["message"]


def test_a_replica_that_lost_a_batch_diverges_from_the_original(
    spark: Any, broker_dump: Any, tmp_path: Path
) -> None:
    source = broker_dump.log_dir / "idempotent-segments-0"
    other = tmp_path / "replica-2" / "idempotent-segments-0"
    apply_fault("drop_batch", source, other)
    ingest(spark, tmp_path / "out", f"original={broker_dump.log_dir}", f"lossy={other.parent}")
    found = audit_dumps(spark, tmp_path / "out", "original", "lossy")
    divergence = [f for f in found if f["kind"] == "REPLICA_DIVERGENCE"]
    # One finding for the pair; every other partition of the original has no counterpart to differ from.
    assert [(f["topic"], f["partition"]) for f in divergence] == [("idempotent-segments", 0)], describe(found)
    assert divergence[0]["severity"] == "critical"


@pytest.mark.parametrize(
    ("which", "kind", "where"),
    [
        ("middle", "SEQUENCE_GAP", "between the two batches"),
        ("first", "HISTORY_START_MISSING", "before it"),
    ],
)
def test_a_gap_across_unreadable_bytes_names_them(
    spark: Any, broker_dump: Any, tmp_path: Path, which: str, kind: str, where: str
) -> None:
    """A batch of a producer's sequence whose length field is corrupt: no header can be read there, so the
    gap around it (or the missing start of the producer's history) stays critical, and its message names
    the unreadable region the records may be in."""
    part = tmp_path / "dump" / "idempotent-segments-0"
    shutil.copytree(broker_dump.log_dir / "idempotent-segments-0", part)
    segment = min(part.glob("*.log"))
    headers = [h for h in read_log_segment(segment) if isinstance(h, BatchHeader)]
    producer = [h for h in headers if h.producer_id >= 0 and not h.is_control]
    victim = producer[len(producer) // 2] if which == "middle" else producer[0]
    assert which == "middle" or victim.base_sequence == 0
    data = bytearray(segment.read_bytes())
    data[victim.position + 8 : victim.position + 12] = (victim.size_bytes + 7).to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    ingest(spark, tmp_path / "out", f"torn={part.parent}")
    found = audit_dumps(spark, tmp_path / "out", "torn")
    (region,) = [f for f in found if f["kind"] == "UNREADABLE_BATCH"]
    (loss,) = [f for f in found if f["kind"] == kind]
    assert loss["severity"] == "critical" and loss["producer_id"] == victim.producer_id
    named = f"Unreadable bytes lie {where} ({segment} at byte {victim.position}, UNREADABLE_BATCH)"
    assert named in loss["message"], (loss["message"], region["message"])


def test_a_snapshots_batch_that_fails_its_crc_is_the_corruption_not_a_snapshot_mismatch(
    spark: Any, tmp_path: Path
) -> None:
    """The bundled sample's snapshots name producer 1's last batch (offsets 1150-1199); a byte flipped in
    its records fails its CRC, so the replay (which skips it) ends at the batch before. The snapshots
    then disagree with the replay only because of the corruption: one CRC_MISMATCH, no
    SNAPSHOT_MISMATCH. (Before, each snapshot naming the batch was a SNAPSHOT_MISMATCH error too.)"""
    source = Path(__file__).resolve().parents[2] / "samples" / "broker-4.3.1" / "idempotent-segments-0"
    faulted = tmp_path / "dump" / "idempotent-segments-0"
    expected = apply_fault("flip_byte", source, faulted, batch_offset=1150)
    assert [f.kind for f in expected.findings] == ["CRC_MISMATCH"]
    # The fault tool keeps only the snapshots below the batch it changed; the broker wrote the others
    # while the batch was intact (the bytes rotted on disk since): they are put back.
    for later in (1500, 1800):
        shutil.copyfile(source / f"{later:020d}.snapshot", faulted / f"{later:020d}.snapshot")
    ingest(spark, tmp_path / "out", f"flipped={faulted}")
    found = audit_dumps(spark, tmp_path / "out")
    assert [f["kind"] for f in above_info(found)] == ["CRC_MISMATCH"], describe(found)
    (crc,) = above_info(found)
    assert crc["first_offset"] == 1150 and "names producer 1 epoch 0, sequences 150-199" in crc["message"]
