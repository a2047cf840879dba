"""`replay-audit audit` on a local output that holds no ingest: the one-line usage error of contract §2
on the process's own stderr, before any JVM starts (its start-up logs would come first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_an_output_never_ingested_is_one_line_on_stderr_without_spark(tmp_path: Path) -> None:
    (tmp_path / "out" / "files").mkdir(parents=True)  # a directory, but no Delta table in it
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "audit", "--output", str(tmp_path / "out"), "--no-gx"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "no Delta table 'files'" in done.stderr and str(tmp_path / "out") in done.stderr
    assert done.stdout == ""
