"""An app-sequence extractor that reads nothing is a usage error, not an audit that checks nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobs.cli import main
from tests.builders import V2Batch, build_v2, segment
from tests.integration.test_app_sequence_rot import stamped

pytestmark = pytest.mark.integration


def test_an_extractor_that_reads_no_record_is_a_usage_error(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelled header name read no app sequence anywhere, so the app-sequence rules checked nothing
    and the run said valid over a hole. So too where the application's producer is idempotent (its
    holes are read: `client_timeout_holes`); a coordinator's records, and an application's without the
    headers beside the stamped ones, neither refuse the right extractor nor satisfy a wrong one."""
    part = tmp_path / "dump" / "app-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(
        segment(*[stamped(o, str(s).encode()) for o, s in enumerate((1, 2, 4))])
    )
    idempotent = tmp_path / "idem" / "app-0"
    idempotent.mkdir(parents=True)
    (idempotent / f"{0:020d}.log").write_bytes(segment(stamped(0, b"1", producer_id=9)))
    # A coordinator's records (producer id -1 too) are no application's: nothing for the extractor.
    offsets = idempotent.parent / "__consumer_offsets-0"
    offsets.mkdir()
    plain = V2Batch(
        base_offset=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, records=((b"g", b"o"),)
    )
    (offsets / f"{0:020d}.log").write_bytes(segment(build_v2(plain)))
    # An application's records without the headers (producer id -1), beside the stamped idempotent ones.
    unstamped = idempotent.parent / "plain-0"
    unstamped.mkdir()
    (unstamped / f"{0:020d}.log").write_bytes(segment(build_v2(plain)))
    out, clean = tmp_path / "out", tmp_path / "clean"
    for dump, output in ((part.parent, out), (idempotent.parent, clean)):
        assert main(["ingest", "--input", f"d={dump}", "--records", "--output", str(output)]) == 0
    capsys.readouterr()
    misspelled = ["--app-producer", "header:app-producer", "--app-sequence", "header:app_seq", "--no-gx"]
    assert main(["audit", "--output", str(out), *misspelled]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(header:app-producer, header:app_seq) reads" in err and str(out) in err
    assert not (out / "findings").exists()
    assert main(["audit", "--output", str(clean), *misspelled]) == 2
    right = ["--app-producer", "header:app-producer", "--app-sequence", "header:app-seq", "--no-gx"]
    assert main(["audit", "--output", str(clean), *right]) == 0
    capsys.readouterr()
    assert main(["audit", "--output", str(out), *right]) == 0  # the hole at 3 is a warning
    assert "APP_SEQUENCE_GAP" in (out / "report" / "findings.json").read_text()
