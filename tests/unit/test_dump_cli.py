"""`replay-audit dump`: contract §5 JSON lines, summaries and exit statuses."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobs.cli import main
from kafka_log_decoder.dump import run_dump
from tests.indexes import metadata_segment_with_index
from tests.paths import REAL_FIXTURES

REAL = REAL_FIXTURES
REPO = Path(__file__).resolve().parents[2]
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


def test_an_unreadable_file_inside_a_directory_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a segment of a partition directory given whole: exit 2 and one line naming the
    segment, not a failed run (exit 3)."""
    partition = tmp_path / "foo-0"
    shutil.copytree(FOO_0, partition)
    segment = partition / "00000000000000000000.log"
    real_open = os.open

    def denied(path: Any, flags: int, *args: Any) -> int:
        if Path(path) == segment:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", denied)
    assert main(["dump", str(partition)]) == 2
    assert capsys.readouterr().err == f"replay-audit: {segment}: cannot read: Permission denied\n"


def test_a_failed_write_of_the_output_is_no_fault_of_the_input(capsys: pytest.CaptureFixture[str]) -> None:
    """A full disk under `dump > out.jsonl` is the job failing (exit 3), not an unreadable input (2)."""
    from kafka_log_decoder.dump import run_dump

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OSError, match="No space left"):
        run_dump([str(FOO_0)], records=False, summary=False, out=Full())


def _dump_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`replay-audit dump` as a process with a deadline: a reader blocked on a FIFO fails the test, not
    the suite."""
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli", "dump", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    """Given directly, a FIFO is a usage error; inside a partition directory it is left out (as the
    broker never writes one) and the partition's files are dumped."""
    fifo = tmp_path / "00000000000000000000.log"
    os.mkfifo(fifo)
    done = _dump_process(str(fifo))
    assert (done.returncode, done.stderr) == (2, f"replay-audit: {fifo}: not a regular file or directory\n")
    copy = tmp_path / "foo-0"
    shutil.copytree(FOO_0, copy)
    os.mkfifo(copy / "00000000000000000900.log")
    done = _dump_process("--summary", str(copy))
    assert (done.returncode, done.stderr) == (0, "")
    files = [json.loads(line)["file"] for line in done.stdout.splitlines()]
    assert str(copy / "00000000000000000000.log") in files
    assert str(copy / "00000000000000000900.log") not in files


def test_a_symlink_loop_is_a_usage_error_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = tmp_path / "loop.log"
    loop.symlink_to(loop)
    assert main(["dump", str(loop)]) == 2
    assert (
        capsys.readouterr().err == f"replay-audit: {loop}: cannot read: Too many levels of symbolic links\n"
    )
    copy = tmp_path / "foo-0"
    shutil.copytree(FOO_0, copy)
    (copy / "0loop").symlink_to(copy / "0loop")
    assert main(["dump", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err == f"replay-audit: {copy / '0loop'}: cannot read: Too many levels of symbolic links\n"


def test_dump_log_text_after_a_utf8_bom_is_read_as_without_it(tmp_path: Path) -> None:
    text = (REPO / "tests" / "golden" / "dump_log_text" / "kafka-4.3.1-java-deep-iteration.txt").read_bytes()
    plain, bom = tmp_path / "plain.txt", tmp_path / "bom.txt"
    plain.write_bytes(text)
    bom.write_bytes(b"\xef\xbb\xbf" + text)
    status, rows = dump(plain, records=True)
    assert len([r for r in rows if r["type"] == "batch"]) == 9
    assert dump(bom, records=True) == (status, rows)


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("leader-epoch-checkpoint", b"0\n1\n0 " + b"9" * 4301 + b"\n", "UNREADABLE_FILE"),
        ("replication-offset-checkpoint", b"0\n1\nt 0 " + b"9" * 5000 + b"\n", "UNREADABLE_FILE"),
        (
            "dump.txt",
            b"Dumping 00.log\nFound " + b"9" * 5000 + b" invalid bytes at the end of 00.log\n",
            "UNREADABLE_BATCH",
        ),
    ],
    ids=["epoch-checkpoint", "offset-checkpoint", "dump-log-text"],
)
def test_a_number_of_thousands_of_digits_is_an_error_line_not_a_traceback(
    tmp_path: Path, name: str, content: bytes, kind: str
) -> None:
    """Python's int() refuses strings of more than 4,300 digits: such a field is a malformed line."""
    path = tmp_path / name
    path.write_bytes(content)
    _, objs = dump(path)
    errors = [o for o in objs if o["type"] == "error"]
    assert [e["kind"] for e in errors] == [kind]
    assert len(errors[0]["message"]) < 400  # the line is quoted cut short


def test_a_dumping_line_with_superscript_digits_names_no_offset(tmp_path: Path) -> None:
    path = tmp_path / "dump.txt"
    path.write_text("Dumping \u00b2\u00b3.log\n")  # str.isdigit() accepts them, int() does not
    assert dump(path) == (0, [])


def test_a_kraft_bootstrap_checkpoint_is_dumped_alone_and_with_its_log_directory() -> None:
    """`bootstrap.checkpoint` (KRaft, written by the storage tool) is a snapshot: its batches framed by
    the SNAPSHOT_HEADER and SNAPSHOT_FOOTER control records."""
    bootstrap = REPO / "samples" / "broker-4.3.1" / "bootstrap.checkpoint"
    status, objs = dump(bootstrap)
    assert status == 0
    assert [(o["is_control"], o.get("control_type"), o["crc_valid"]) for o in objs] == [
        (True, "SNAPSHOT_HEADER", True),
        (False, None, True),
        (True, "SNAPSHOT_FOOTER", True),
    ]
    _, summaries = dump(bootstrap.parent, summary=True)
    assert [s["batches"] for s in summaries if s["file"] == str(bootstrap)] == [3]


def test_an_index_is_checked_against_the_log_beside_it(tmp_path: Path) -> None:
    """As `DumpLogSegments` prints `Mismatches in`: the entries of a real broker segment's index (placed
    as the broker places them) all check out; one edited to point 5 bytes into its batch is an
    INDEX_MISMATCH line at its byte position (a warning: exit status 0); without the `.log`, nothing
    can be checked."""
    log, index, entries = metadata_segment_with_index(tmp_path)
    status, objs = dump(index)
    assert status == 0
    assert [o["type"] for o in objs] == ["index_entry"] * len(entries)
    entries[100] = (entries[100][0], entries[100][1] + 5)
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    status, objs = dump(index)
    errors = [(o["position"], o["kind"], o["length"]) for o in objs if o["type"] == "error"]
    assert (status, errors) == (0, [(800, "INDEX_MISMATCH", 8)])
    # Retention's `.deleted` pair, named directly: checked against each other as well.
    deleted = index.with_name(index.name + ".deleted")
    shutil.copy(index, deleted)
    shutil.copy(log, log.with_name(log.name + ".deleted"))
    errors = [(o["position"], o["kind"], o["length"]) for o in dump(deleted)[1] if o["type"] == "error"]
    assert errors == [(800, "INDEX_MISMATCH", 8)]
    log.unlink()
    assert [o for o in dump(index)[1] if o["type"] == "error"] == []


def test_a_zeroed_index_entry_is_reported_once_and_the_wrong_entries_after_it_too(tmp_path: Path) -> None:
    """Entry 50 zeroed and entry 100 moved inside its batch, before a preallocated zero tail: the dump
    lists the entries up to 50, where DumpLogSegments stops, and reports 50 once (the reader's stop, not
    also the check's) and 100, which the broker reads on to."""
    _, index, entries = metadata_segment_with_index(tmp_path)
    entries[50] = (0, 0)
    entries[100] = (entries[100][0], entries[100][1] + 5)
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries) + bytes(8 * 500))
    status, objs = dump(index)
    assert status == 0
    assert [o["type"] for o in objs].count("index_entry") == 50
    errors = sorted((o["position"], o["kind"]) for o in objs if o["type"] == "error")
    assert errors == [(400, "INDEX_MISMATCH"), (800, "INDEX_MISMATCH")]
    stop = next(o for o in objs if o["type"] == "error" and o["position"] == 400)
    assert "where DumpLogSegments stops" in stop["message"]


GOLDEN_TEXT = REPO / "tests" / "golden" / "dump_log_text" / "kafka-3.0-deep-iteration.txt"


def test_dump_log_text_saved_as_a_log_file_is_read_as_text(tmp_path: Path) -> None:
    saved = tmp_path / "dump.log"
    shutil.copy(GOLDEN_TEXT, saved)
    as_txt = tmp_path / "dump.txt"
    shutil.copy(GOLDEN_TEXT, as_txt)
    status, (summary,) = dump(saved, summary=True)
    assert (status, summary["batches"]) == (0, 9)
    assert {k: v for k, v in summary.items() if k != "file"} == {
        k: v for k, v in dump(as_txt, summary=True)[1][0].items() if k != "file"
    }


def test_a_broker_server_log_given_directly_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server_log = tmp_path / "server.log"
    server_log.write_text(
        "[2026-11-30 06:52:00,000] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)\n"
    )
    assert main(["dump", str(server_log)]) == 2
    assert "begins with text: not a segment" in capsys.readouterr().err


def test_a_segment_of_any_name_is_still_read_as_a_segment(tmp_path: Path) -> None:
    renamed = tmp_path / "server.log"
    shutil.copy(FOO_0 / "00000000000000000000.log", renamed)
    status, objs = dump(renamed)
    assert status == 0 and [o["type"] for o in objs] == ["batch", "batch"]


def test_a_deleted_or_cleaned_segment_named_directly_is_dumped(tmp_path: Path) -> None:
    """A `.log.deleted` (retention's, before the file is removed) or `.log.cleaned` file is not live, and
    discovery leaves it out of a directory; named by the user it is still a segment's bytes, evidence of
    what was removed (formats §3.7). It was refused as not a Kafka artifact."""
    for suffix in (".deleted", ".cleaned"):
        kept = tmp_path / f"00000000000000000000.log{suffix}"
        shutil.copy(FOO_0 / "00000000000000000000.log", kept)
        status, objs = dump(kept)
        assert status == 0 and [o["type"] for o in objs] == ["batch", "batch"], (suffix, objs)


def test_quorum_state_is_dumped_alone_and_with_its_partition() -> None:
    metadata = REAL / "codecrafters-kraft-3x" / "__cluster_metadata-0"
    status, (state,) = dump(metadata / "quorum-state")
    assert status == 0
    assert state["type"] == "quorum_state" and state["file"].endswith("quorum-state")
    assert state["state"] == json.loads((metadata / "quorum-state").read_text())
    assert state in dump(metadata)[1]


def test_the_console_entry_point_exits_with_a_failing_status_and_returns_on_success(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Databricks' wheel tasks call the entry point as a function: a failing status must end the process
    (an ignored return value would leave an invalid audit's task green)."""
    import tomllib

    from jobs.cli import console_main

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["replay-audit"] == "jobs.cli:console_main"
    monkeypatch.setattr(sys, "argv", ["replay-audit", "dump", str(REPO / "no-such-dump")])
    with pytest.raises(SystemExit) as exited:
        console_main()
    assert exited.value.code == 2
    assert "no-such-dump" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["replay-audit", "dump", "--summary", str(FOO_0)])
    assert console_main() is None
    assert '"type":"summary"' in capsys.readouterr().out


def test_summary_counts_markers_as_records_in_both_modes() -> None:
    """Control records are never `record` items: with --records the summary still counts them, so one
    clean file has one record count whichever way it is read."""
    partition = REPO / "samples" / "broker-4.3.1" / "transactional-0"
    _, headers = dump(partition, summary=True)
    _, decoded = dump(partition, records=True, summary=True)
    counts = [s["records"] for s in headers if s["file"].endswith(".log")]
    assert counts and max(counts) > 0
    assert [s["records"] for s in decoded if s["file"].endswith(".log")] == counts
    _, items = dump(partition, records=True)
    markers = sum(i["count"] for i in items if i["type"] == "batch" and i["is_control"])
    assert markers > 0
    assert sum(1 for i in items if i["type"] == "record") + markers == sum(counts)


def test_a_bad_argument_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Contract §2: a usage error has a one-line reason on stderr (argparse's usage block is left out)."""
    with pytest.raises(SystemExit) as exited:
        main(["audit", "--output", "out", "--fail-on", "fatal"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--fail-on" in err and "invalid choice" in err
    assert err.startswith("replay-audit audit: error:") and "replay-audit audit --help" in err


def test_a_job_that_fails_exits_3_not_1_with_one_closing_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark, Delta or storage failure is neither an invalid audit (1) nor a usage error (2): a
    scheduler must tell a crash from findings. The traceback is kept, then one line says what failed."""
    import jobs.pipeline

    def crash(args: Any) -> int:
        raise RuntimeError("Py4JJavaError: An error occurred while calling o42.save.\n: java.io.IOException")

    monkeypatch.setattr(jobs.pipeline, "run_cli", crash)
    assert main(["audit", "--output", str(tmp_path), "--no-gx"]) == 3
    last = capsys.readouterr().err.rstrip("\n").splitlines()
    assert "Traceback" in last[0]
    assert last[-1] == (
        "replay-audit: audit failed: RuntimeError: Py4JJavaError: An error occurred while calling o42.save. "
        "(exit 3: the job failed, not the audit; the traceback is above)"
    )


def test_a_java_failure_closes_with_its_java_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Py4JJavaError's own first line only names the call ("An error occurred while calling
    o55.save."): the closing line gives the Java exception's text instead, where the cause is."""
    import jobs.pipeline

    class JavaException:
        def toString(self) -> str:  # py4j JavaObject method name
            return "org.apache.spark.sql.AnalysisException: [DATA_SOURCE_NOT_FOUND] delta\n\tat x"

    class Py4JJavaError(Exception):
        java_exception = JavaException()

    def crash(args: Any) -> int:
        raise Py4JJavaError("An error occurred while calling o55.save.\n")

    monkeypatch.setattr(jobs.pipeline, "run_cli", crash)
    assert main(["audit", "--output", str(tmp_path), "--no-gx"]) == 3
    last = capsys.readouterr().err.rstrip("\n").splitlines()[-1]
    assert last.startswith(
        "replay-audit: audit failed: Py4JJavaError: org.apache.spark.sql.AnalysisException: "
        "[DATA_SOURCE_NOT_FOUND] delta (exit 3"
    ), last


@pytest.mark.parametrize(
    "text",
    ["kafka-2.1-shallow.txt", "kafka-3.0-deep-iteration.txt", "kafka-2.1-deep-iteration-print-data-log.txt"],
)
def test_a_texts_summary_counts_its_records_with_or_without_records(text: str) -> None:
    """A text dumped without --deep-iteration prints no record lines: `dump --records --summary` counted
    only its control batches' records. Its batches' counts stand for them; a deep text's record lines
    are counted as before (the same total). A batch a text before 2.2 prints without its size (-1) adds
    no bytes."""
    path = REPO / "tests" / "golden" / "dump_log_text" / text
    _, (headers,) = dump(path, summary=True)
    _, (records,) = dump(path, records=True, summary=True)
    assert records == headers
    _, items = dump(path, records=True)
    batches = [o for o in items if o["type"] == "batch"]
    assert headers["records"] == sum(b["count"] for b in batches) > 0
    assert headers["bytes"] == sum(max(b["size_bytes"], 0) for b in batches)
