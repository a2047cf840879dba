"""The records of a batch whose CRC failed take no part in the app-sequence rules, as such a batch
takes none in the replay: a rotted header that reads as an earlier app sequence is the corruption's
(CRC_MISMATCH), not a DUPLICATE_APP_SEQUENCE; its true value is then absent (a hole, a warning)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from tests.builders import V2Batch, build_v2, segment

pytestmark = pytest.mark.integration


def stamped(offset: int, value: bytes, producer_id: int = -1) -> bytes:
    """A one-record batch of app producer orders-1 stamped with app sequence `value` (idempotent where
    `producer_id` >= 0)."""
    return build_v2(
        V2Batch(
            base_offset=offset,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=0 if producer_id >= 0 else -1,
            records=((None, b"order"),),
            headers=(("app-producer", b"orders-1"), ("app-seq", value)),
        )
    )


def app_findings(
    spark: Any,
    root: Path,
    segments: dict[int, list[bytes]],
    config: str | None = None,
    acks: list[dict[str, Any]] | None = None,
) -> list[Any]:
    """The findings of partition app-0 made of `segments` (base offset -> batches), ingested with
    records (and the `acks` ledger's rows) under `root` and audited with orders-1's app-sequence
    headers (and the `config` file)."""
    part = root / "dump" / "app-0"
    part.mkdir(parents=True)
    for base, batches in segments.items():
        (part / f"{base:020d}.log").write_bytes(segment(*batches))
    out = root / "out"
    ledgers = []
    if acks is not None:
        ledger = root / "acks.jsonl"
        ledger.write_text("".join(json.dumps(r) + "\n" for r in acks))
        ledgers.append(LabeledPath("acks", str(ledger)))
    run_ingest(
        spark, IngestOptions([LabeledPath("d", str(root / "dump"))], str(out), records=True, acks=ledgers)
    )
    profile = load_profile(config=config, app_producer="header:app-producer", app_sequence="header:app-seq")
    return audit(read_bronze(spark, str(out)), profile).findings.collect()


def test_a_rotted_app_sequence_is_corruption_not_a_duplicate(spark: Any, tmp_path: Path) -> None:
    batches = [stamped(seq - 1, str(seq).encode()) for seq in (1, 2, 3, 4)]
    # The third batch's header value "3" rots into "1": the records still decode, the CRC fails.
    third = bytearray(batches[2])
    at = third.rindex(b"3")
    third[at : at + 1] = b"1"
    batches[2] = bytes(third)
    found = app_findings(spark, tmp_path, {0: batches})
    verdicts = sorted((f["kind"], f["first_offset"]) for f in found)
    assert ("CRC_MISMATCH", 2) in verdicts, verdicts
    assert not [v for v in verdicts if v[0] in ("DUPLICATE_APP_SEQUENCE", "APP_SEQUENCE_REGRESSION")], (
        verdicts
    )
    assert [v for v in verdicts if v[0] == "APP_SEQUENCE_GAP"], verdicts


def test_unreadable_app_sequences_and_idempotent_producers_records_are_left_out(
    spark: Any, tmp_path: Path
) -> None:
    """A header that is no whole number (or too large for a long) is no app sequence: under Spark 4's
    ANSI default its cast failed the whole audit. An idempotent producer's records are the replay's
    (contract §1: the app-sequence rules are for producer id -1): its batch stamped with an app
    sequence already used, a DUPLICATE_BATCH of the broker's own rules, is no DUPLICATE_APP_SEQUENCE."""

    values = [b"1", b"abc", b"2", b"1.5", b"99999999999999999999", b"3"]
    batches = [stamped(i, v) for i, v in enumerate(values)]
    batches.append(stamped(len(values), b"2", producer_id=9))
    found = app_findings(spark, tmp_path, {0: batches})
    assert not [f["kind"] for f in found if f["kind"].startswith(("APP_", "DUPLICATE_APP"))], [
        (f["kind"], f["first_offset"]) for f in found
    ]


def test_acks_naming_app_sequences_beside_records_whose_header_is_no_whole_number(
    spark: Any, tmp_path: Path
) -> None:
    """Each ack names its record's app producer and sequence; the records whose header is no whole
    number are compared as naming none (its cast failed the audit under Spark 4's ANSI default), and
    every ack is its record's."""
    values = [b"1", b"abc", b"2", b"1.5", b"3"]
    batches = [stamped(i, v) for i, v in enumerate(values)]
    acks = [
        {"topic": "app", "partition": 0, "offset": i, "app_producer": "orders-1", "app_sequence": int(v)}
        for i, v in enumerate(values)
        if v.isdigit()
    ]
    found = app_findings(spark, tmp_path, {0: batches}, acks=acks)
    assert not [f for f in found if f["kind"].startswith("ACKED")], [(f["kind"], f["message"]) for f in found]


def test_a_hole_on_a_compacted_log_is_excused_only_by_offsets_below_the_active_segment(
    spark: Any, tmp_path: Path
) -> None:
    """The profile names the topic as compacted. orders-1 wrote 1 and 2 at offsets 0 and 1 (the first
    segment, which the cleaner may have passed), then 5 at offset 12 of the active segment, after ten
    records of another app producer. The cleaner cannot have removed 3 and 4: no offset below the active
    segment was free for them, and the active segment's offsets are the other producer's. One hole.
    With 3 and 4's offsets free in the first segment (2 and 3, the active segment from 4), none."""
    other = [
        build_v2(
            V2Batch(
                base_offset=0,
                producer_id=-1,
                producer_epoch=-1,
                base_sequence=-1,
                records=((None, b"other"),),
                headers=(("app-producer", b"other-1"), ("app-seq", str(seq).encode())),
            )
        )
        for seq in range(10)
    ]

    def at(batch: bytes, offset: int) -> bytes:
        return offset.to_bytes(8, "big") + batch[8:]  # the base offset lies outside the CRC

    config = tmp_path / "compacted.yaml"
    config.write_text("compacted_topics: ['app']\n")
    holes = {}
    for case, active in (("no room", 2), ("room", 4)):
        tail = [at(b, active + i) for i, b in enumerate(other)] + [stamped(active + 10, b"5")]
        logs = {0: [stamped(0, b"1"), stamped(1, b"2")], active: tail}
        found = app_findings(spark, tmp_path / case, logs, str(config))
        holes[case] = sorted(
            (f["kind"], f["first_offset"], f["missing_records"]) for f in found if f["severity"] != "info"
        )
    assert holes == {"no room": [("APP_SEQUENCE_GAP", 12, 2)], "room": []}, holes
