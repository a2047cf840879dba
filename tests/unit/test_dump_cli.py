"""`replay-audit dump`: contract §5 JSON lines, summaries and exit statuses."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobs.cli import main
from kafka_log_decoder.dump import run_dump
from tests.paths import REAL_FIXTURES

REAL = REAL_FIXTURES
FOO_0 = REAL / "codecrafters-kraft-3x" / "foo-0"
BATCH_KEYS = {
    "position", "base_offset", "last_offset", "count", "magic", "crc", "crc_valid", "compression",
    "timestamp_type", "is_transactional", "is_control", "partition_leader_epoch", "base_timestamp",
    "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "last_sequence", "size_bytes",
}  # fmt: skip


def dump(*paths: Path, records: bool = False, summary: bool = False) -> tuple[int, list[dict]]:
    out = io.StringIO()
    status = run_dump([str(p) for p in paths], records=records, summary=summary, out=out)
    return status, [json.loads(line) for line in out.getvalue().splitlines()]


def test_partition_directory_dump_has_every_contract_type_in_file_order() -> None:
    status, objs = dump(FOO_0, records=True)
    assert status == 0
    types = [o["type"] for o in objs]
    assert {"batch", "record", "snapshot_entry", "leader_epoch_entry"} <= set(types)
    batches = [o for o in objs if o["type"] == "batch"]
    assert all(set(b) >= BATCH_KEYS and b["file"].endswith(".log") for b in batches)
    assert "control_type" not in batches[0]
    records = [o for o in objs if o["type"] == "record"]
    assert [(r["offset"], r["sequence"], r["key_size"], r["value_size"], r["headers"]) for r in records] == [
        (0, 0, -1, 2, []),
        (1, 1, -1, 2, []),
        (2, 2, -1, 2, []),
    ]
    # Each batch's records follow it.
    assert types.index("record") == types.index("batch") + 1
    (entry,) = [o for o in objs if o["type"] == "snapshot_entry"]
    assert (entry["producer_id"], entry["last_sequence"], entry["last_offset"], entry["snapshot_offset"]) == (
        0,
        2,
        2,
        3,
    )


def test_summary_counts_batches_records_and_producers() -> None:
    status, objs = dump(FOO_0 / "00000000000000000000.log", summary=True)
    assert status == 0
    assert objs == [
        {
            "type": "summary",
            "file": str(FOO_0 / "00000000000000000000.log"),
            "batches": 2,
            "records": 3,
            "bytes": 150,
            "crc_failures": 0,
            "errors": 0,
            "producer_ids": [0],
            "first_offset": 0,
            "last_offset": 2,
        }
    ]


def test_crc_failure_is_an_error_line_and_exit_status_1(tmp_path: Path) -> None:
    bad = bytearray((FOO_0 / "00000000000000000000.log").read_bytes())
    bad[100] ^= 0xFF
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(bad))
    status, objs = dump(path)
    assert status == 1
    (error,) = [o for o in objs if o["type"] == "error"]
    assert (error["kind"], error["position"], error["file"]) == ("CRC_MISMATCH", 80, str(path))


def test_truncated_tail_alone_is_a_warning_exit_status_0(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes((FOO_0 / "00000000000000000000.log").read_bytes()[:100])
    status, objs = dump(path)
    assert status == 0 and [o["kind"] for o in objs if o["type"] == "error"] == ["TRUNCATED_TAIL"]


def test_missing_path_is_a_usage_error_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump", "/no/such/dir"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/no/such/dir" in err


def test_a_file_that_is_not_a_kafka_artifact_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    assert main(["dump", str(path)]) == 2


def test_dump_log_text_is_recognised_by_its_first_line(tmp_path: Path) -> None:
    text = tmp_path / "dump.txt"
    shutil.copy(FOO_0 / "00000000000000000000.log", tmp_path / "00000000000000000000.log")
    text.write_text(
        f"Dumping {tmp_path / '00000000000000000000.log'}\nLog starting offset: 0\n"
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 0 producerEpoch: 0 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1725272040952 size: 80 magic: 2 compresscodec: none crc: 1495201167 "
        "isvalid: true\n"
    )
    status, objs = dump(text)
    assert status == 0
    (batch,) = objs
    binary = dump(tmp_path / "00000000000000000000.log")[1][0]
    differing = {k for k in BATCH_KEYS if batch[k] != binary[k]}
    assert differing == {"base_timestamp"}  # the text does not carry it


def test_console_script_runs_as_a_whole_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "dump", "--summary", str(FOO_0 / "00000000000000000000.log")],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["batches"] == 2


def test_a_dangling_segment_in_a_partition_directory_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A partition copied with its symlinks, one pointing nowhere: exit 2 and one line naming the segment."""
    copy = tmp_path / "foo-0"
    shutil.copytree(FOO_0, copy)
    dangling = copy / "00000000000000000900.log"
    dangling.symlink_to(tmp_path / "elsewhere.log")
    assert main(["dump", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err == f"replay-audit: {dangling}: cannot read: No such file or directory\n"


def test_an_unreadable_file_is_a_usage_error_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the user may not read (EACCES; tests may run as root, so the open fails on purpose): the
    reason is that, not "not a Kafka artifact", for a segment and for dump-log text alike."""
    segment = tmp_path / "00000000000000000000.log"
    shutil.copy(FOO_0 / "00000000000000000000.log", segment)
    text = tmp_path / "dump.txt"
    text.write_text(f"Dumping {segment}\n")
    real_open = os.open

    def denied(path: Any, flags: int, *args: Any) -> int:
        if Path(path) in (segment, text):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", denied)
    for path in (segment, text):
        assert main(["dump", str(path)]) == 2
        assert capsys.readouterr().err == f"replay-audit: {path}: cannot read: Permission denied\n"
