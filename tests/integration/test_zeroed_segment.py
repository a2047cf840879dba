"""Zeros ending a segment that is not the log's active one are no preallocation.

The decoder reads zeros to a file's end as `file.preallocate`'s and quarantines nothing; only the
active segment is preallocated (the broker trims a segment when it rolls, and a crashed log's tail
when it recovers), so zeros ending an older one were batches: a TRUNCATED_TAIL naming the file, the
byte where they start and the offsets that were there.
"""

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


def batch(offset: int, sequence: int, records: int = 5) -> bytes:
    return build_v2(
        V2Batch(
            base_offset=offset,
            producer_id=7,
            producer_epoch=0,
            base_sequence=sequence,
            records=[(b"k", b"v")] * records,
        )
    )


def test_zeros_ending_an_older_segment_are_a_truncated_tail_and_the_active_ones_are_not(
    spark: Any, tmp_path: Path
) -> None:
    dump = tmp_path / "dump"
    # "torn": batches 0-4, then 4 KiB of zeros where 5-9 were, then the next segment at 10.
    torn = dump / "torn-0"
    torn.mkdir(parents=True)
    head = segment(batch(0, 0))
    (torn / f"{0:020d}.log").write_bytes(head + bytes(4096))
    (torn / f"{10:020d}.log").write_bytes(segment(batch(10, 10)) + bytes(4096))  # active: preallocated
    # "blank": an older segment all zeros, before a segment at 500.
    blank = dump / "blank-0"
    blank.mkdir()
    (blank / f"{0:020d}.log").write_bytes(bytes(4096))
    (blank / f"{500:020d}.log").write_bytes(segment(batch(500, 0)))
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions([LabeledPath("d", str(dump))], str(out)))
    found = audit(read_bronze(spark, str(out)), load_profile()).findings.collect()
    tails = sorted(
        (f["topic"], f["severity"], f["first_offset"], f["last_offset"], f["message"])
        for f in found
        if f["kind"] == "TRUNCATED_TAIL"
    )
    assert [t[:4] for t in tails] == [("blank", "warning", 0, 499), ("torn", "warning", 5, 9)], tails
    assert tails[0][4].startswith(f"{blank / f'{0:020d}.log'} at byte 0 (4096 bytes): zeros to the end"), (
        tails
    )
    assert tails[1][4].startswith(f"{torn / f'{0:020d}.log'} at byte {len(head)} (4096 bytes)"), tails
    assert "Offsets 5-9, up to the next segment's base, were there" in tails[1][4], tails
    # Nothing else reads the torn log's gap as anything but loss: the zeros hold no batch.
    assert ("SEQUENCE_GAP", "torn") in {(f["kind"], f["topic"]) for f in found}
