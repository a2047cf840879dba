"""The records of a batch whose CRC failed take no part in the app-sequence rules, as such a batch
takes none in the replay: a rotted header that reads as an earlier app sequence is the corruption's
(CRC_MISMATCH), not a DUPLICATE_APP_SEQUENCE; its true value is then absent (a hole, a warning)."""

from __future__ import annotations

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


def test_a_rotted_app_sequence_is_corruption_not_a_duplicate(spark: Any, tmp_path: Path) -> None:
    batches = [stamped(seq - 1, str(seq).encode()) for seq in (1, 2, 3, 4)]
    # The third batch's header value "3" rots into "1": the records still decode, the CRC fails.
    third = bytearray(batches[2])
    at = third.rindex(b"3")
    third[at : at + 1] = b"1"
    batches[2] = bytes(third)
    part = tmp_path / "dump" / "app-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(segment(*batches))
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions([LabeledPath("d", str(tmp_path / "dump"))], str(out), records=True))
    profile = load_profile(app_producer="header:app-producer", app_sequence="header:app-seq")
    found = audit(read_bronze(spark, str(out)), profile).findings.collect()
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
    part = tmp_path / "dump" / "app-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(segment(*batches))
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions([LabeledPath("d", str(tmp_path / "dump"))], str(out), records=True))
    profile = load_profile(app_producer="header:app-producer", app_sequence="header:app-seq")
    found = audit(read_bronze(spark, str(out)), profile).findings.collect()
    assert not [f["kind"] for f in found if f["kind"].startswith(("APP_", "DUPLICATE_APP"))], [
        (f["kind"], f["first_offset"]) for f in found
    ]
