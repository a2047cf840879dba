"""A batch one replica holds where the other's bytes cannot be read (no header: a corrupt length or
magic, quarantined as UNREADABLE_BATCH) is that replica's corruption, not a rewrite: no
REPLICA_DIVERGENCE there. A batch the other replica holds with other contents still is one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, plan_ingest, run_ingest
from jobs.profiles import load_profile
from tests.integration.test_audit_kinds import batches_of
from tests.integration.test_replica_divergence import broker_dir, encoded, values

pytestmark = pytest.mark.integration


def test_unreadable_bytes_on_one_replica_are_corruption_not_a_rewrite(spark: Any, tmp_path: Path) -> None:
    sent = encoded(batches_of(7, 0, values(10, b"v"), start_offset=0, start_seq=0))
    broken = list(sent)
    broken[5] = broken[5][:16] + b"\x09" + broken[5][17:]  # an unknown magic: no header is read
    other = encoded(batches_of(8, 0, values(1, b"w"), start_offset=8, start_seq=0))
    rewritten = [*sent[:8], *other, sent[9]]
    dump = tmp_path / "dump"
    broker_dir(dump, 1, {"unreadable-0": (broken, 10), "rewritten-0": (sent, 10)})
    broker_dir(dump, 2, {"unreadable-0": (sent, 10), "rewritten-0": (rewritten, 10)})
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions([LabeledPath("d", str(dump))], str(out)))
    found = audit(read_bronze(spark, str(out)), load_profile()).findings.collect()
    verdicts = sorted({(f["topic"], f["kind"]) for f in found if f["severity"] != "info"})
    assert ("unreadable", "UNREADABLE_BATCH") in verdicts, verdicts
    assert ("unreadable", "REPLICA_DIVERGENCE") not in verdicts, verdicts
    assert ("rewritten", "REPLICA_DIVERGENCE") in verdicts, verdicts


def test_unreadable_bytes_at_a_segments_end_do_not_hide_a_later_segments_hole(
    spark: Any, tmp_path: Path
) -> None:
    """Replica 1's first segment ends in bytes no header reads from (offsets 5 on, until its next
    segment at 6); its log then lacks offset 8 that replica 2 holds: that hole is a divergence."""
    sent = encoded(batches_of(7, 0, values(10, b"v"), start_offset=0, start_seq=0))
    dump = tmp_path / "dump"
    broker_dir(dump, 1, {"tail-0": ([*sent[:5], b"\xff" * 64], 10)})
    broker_dir(dump, 2, {"tail-0": (sent, 10)})
    part = dump / "broker1" / "tail-0"
    (part / "00000000000000000006.log").write_bytes(b"".join(sent[6:8]))
    (part / "00000000000000000009.log").write_bytes(sent[9])
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions([LabeledPath("d", str(dump))], str(out)))
    found = audit(read_bronze(spark, str(out)), load_profile()).findings.collect()
    divergent = [(f["first_offset"], f["last_offset"]) for f in found if f["kind"] == "REPLICA_DIVERGENCE"]
    assert divergent == [(8, 8)], sorted((f["kind"], f["first_offset"]) for f in found)


def test_a_segment_gone_before_it_was_read_is_an_error_over_its_bytes(spark: Any, tmp_path: Path) -> None:
    """A segment listed by the plan and deleted before the executors read it (retention on a live
    directory, a mount that went away): its batches were never audited, so the run cannot say valid.
    One UNREADABLE_BATCH (error) over the bytes listed, whose message does not claim the rest of the
    file was read; a CRC failure elsewhere keeps that claim (its walk went on)."""
    sent = encoded(batches_of(7, 0, values(10, b"v"), start_offset=0, start_seq=0))
    crc = bytearray(sent[2])
    crc[-1] ^= 0xFF
    dump = tmp_path / "dump"
    broker_dir(dump, 1, {"gone-0": (sent[:5], 10), "crc-0": ([*sent[:2], bytes(crc), *sent[3:]], 10)})
    part = dump / "broker1" / "gone-0"
    later = part / "00000000000000000005.log"
    later.write_bytes(b"".join(sent[5:]))
    options = IngestOptions([LabeledPath("d", str(dump))], str(tmp_path / "out"))
    plan = plan_ingest(options)
    later.unlink()
    run_ingest(spark, options, plan=plan)
    found = audit(read_bronze(spark, options.output), load_profile()).findings.collect()
    (gone,) = [f for f in found if f["topic"] == "gone" and f["severity"] != "info"]
    assert (gone["kind"], gone["severity"]) == ("UNREADABLE_BATCH", "error"), gone
    size = len(b"".join(sent[5:]))
    assert f"{later} at byte 0 ({size} bytes): cannot read since it was listed" in gone["message"], gone
    assert gone["message"].endswith(
        f"bytes 0 to {size} were not (all) decoded [corruption: the bytes are quarantined]"
    )
    (failed,) = [f for f in found if f["topic"] == "crc" and f["kind"] == "CRC_MISMATCH"]
    assert failed["message"].endswith(
        "[corruption: the bytes are quarantined, the rest of the file was read]"
    )
