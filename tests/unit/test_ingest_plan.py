"""`jobs.ingest.plan_ingest` (the driver's discovery, no Spark) on inputs that are not plain files."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from jobs.ingest import IngestOptions, LabeledPath, plan_ingest
from tests.paths import REAL_FIXTURES

FOO_0 = REAL_FIXTURES / "codecrafters-kraft-3x" / "foo-0"


def test_a_fifo_in_a_partition_directory_is_listed_as_left_out_and_never_opened(tmp_path: Path) -> None:
    copy = tmp_path / "foo-0"
    shutil.copytree(FOO_0, copy)
    fifo = copy / "00000000000000000900.log"
    os.mkfifo(fifo)
    planned: list[Any] = []
    # On a thread with a deadline: opening the FIFO would block forever and fail this test, not hang it.
    worker = threading.Thread(
        target=lambda: planned.append(plan_ingest(IngestOptions([LabeledPath("d", str(copy))], "unused"))),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert planned, "plan_ingest blocked on the FIFO"
    (row,) = [r for r in planned[0].inventory if r["file"] == str(fifo)]
    assert (row["is_live"], row["fingerprint"]) == (False, None)
    assert "not a regular file" in row["excluded_reason"]
    assert str(fifo) not in {unit.file for unit in planned[0].units}
    assert any(r["file"].endswith("00000000000000000000.log") and r["is_live"] for r in planned[0].inventory)


def test_two_directories_of_one_log_are_a_usage_error_until_labelled(tmp_path: Path) -> None:
    """Two inputs of one name (the default dump id is the directory's name) would be read as one log:
    every batch a duplicate of the other's, and the rules across dumps never run."""
    import pytest

    from jobs.ingest import UsageError

    first, second = tmp_path / "t1" / "foo-0", tmp_path / "t2" / "foo-0"
    shutil.copytree(FOO_0, first)
    shutil.copytree(FOO_0, second)
    with pytest.raises(UsageError, match=r"both hold foo-0 of dump 'foo-0'.*label the inputs"):
        plan_ingest(IngestOptions([LabeledPath(None, str(first)), LabeledPath(None, str(second))], "unused"))
    with pytest.raises(UsageError, match=r"both hold foo-0 of dump 'd'"):
        plan_ingest(IngestOptions([LabeledPath("d", str(first)), LabeledPath("d", str(second))], "unused"))
    labelled = plan_ingest(
        IngestOptions([LabeledPath("t1", str(first)), LabeledPath("t2", str(second))], "unused")
    )
    assert {r["dump_id"] for r in labelled.inventory} == {"t1", "t2"}
    # The same directory twice is one log, read once.
    again = plan_ingest(
        IngestOptions([LabeledPath(None, str(first)), LabeledPath(None, str(first))], "unused")
    )
    assert len(again.inventory) == len(labelled.inventory) // 2


def test_two_texts_of_one_dumped_file_are_a_usage_error_until_labelled(tmp_path: Path) -> None:
    """Two brokers' `kafka-dump-log.sh` texts of the same segment, both saved as dump.txt (the default
    dump id is the text's name): one log, every batch twice, whatever directory each broker's log.dirs
    names. Texts of different segments, or of the same segment name in two partitions the texts name,
    are not."""
    import pytest

    from jobs.ingest import UsageError

    line = "Dumping /var/lib/kafka/orders-0/00000000000000000000.log\nLog starting offset: 0\n"
    first, second = tmp_path / "b1" / "dump.txt", tmp_path / "b2" / "dump.txt"
    for text in (first, second):
        text.parent.mkdir()
        text.write_text(line)
    with pytest.raises(UsageError, match=r"both give segment orders-0/0+\.log of dump 'dump'.*label"):
        plan_ingest(IngestOptions([LabeledPath(None, str(first)), LabeledPath(None, str(second))], "unused"))
    other_dirs = tmp_path / "b3" / "dump.txt"
    other_dirs.parent.mkdir()
    other_dirs.write_text(
        line.replace("/var/lib/kafka/", "D:\\kafka-log1\\").replace("orders-0/", "orders-0\\")
    )
    with pytest.raises(UsageError, match=r"both give segment orders-0/0+\.log"):
        plan_ingest(
            IngestOptions([LabeledPath("d", str(first)), LabeledPath("d", str(other_dirs))], "unused")
        )
    labelled = plan_ingest(
        IngestOptions([LabeledPath("b1", str(first)), LabeledPath("b2", str(second))], "unused")
    )
    assert {u.dump_id for u in labelled.units} == {"b1", "b2"}
    # One dump's texts of two segments, and two partitions' texts of a relative name, are separate logs.
    later = tmp_path / "b1" / "later.txt"
    later.write_text(line.replace("00000000000000000000.log", "00000000000000001000.log"))
    inside = [tmp_path / "orders-1.txt", tmp_path / "orders-2.txt"]
    for text in inside:
        text.write_text("Dumping 00000000000000000000.log\n")
    plan = plan_ingest(IngestOptions([LabeledPath("d", str(p)) for p in (first, later, *inside)], "unused"))
    assert len(plan.units) == 4


def test_a_text_beside_the_partition_directory_of_its_segment_is_a_usage_error_until_labelled(
    tmp_path: Path,
) -> None:
    """A partition directory and a `kafka-dump-log.sh` text of one of its segments, the text named
    after the partition as the README advises: one dump id, one log, every batch twice. A text of a
    segment the directory does not hold, and labelled inputs, are not."""
    import pytest

    from jobs.ingest import UsageError

    folder = tmp_path / "b1" / "foo-0"
    shutil.copytree(FOO_0, folder)
    segment = sorted(p.name for p in folder.glob("*.log"))[0]
    text = tmp_path / "b2" / "foo-0.txt"
    text.parent.mkdir()
    text.write_text(f"Dumping {segment}\nLog starting offset: 0\n")
    for inputs in ((folder, text), (text, folder)):
        with pytest.raises(UsageError, match=rf"both give segment foo-0/{segment} of dump 'foo-0'.*label"):
            plan_ingest(IngestOptions([LabeledPath(None, str(p)) for p in inputs], "unused"))
    other = tmp_path / "b3" / "foo-0.txt"
    other.parent.mkdir()
    other.write_text("Dumping 00000000000099999999.log\nLog starting offset: 0\n")
    assert (
        len(plan_ingest(IngestOptions([LabeledPath(None, str(p)) for p in (folder, other)], "unused")).units)
        > 1
    )
    labelled = plan_ingest(
        IngestOptions([LabeledPath("b1", str(folder)), LabeledPath("b2", str(text))], "unused")
    )
    assert {u.dump_id for u in labelled.units} == {"b1", "b2"}


def test_a_segment_this_user_may_not_read_is_a_usage_error_naming_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Contract §2: unreadable input exits 2. A segment of an input directory that cannot be opened for
    lack of permission (EACCES; tests may run as root, so the open fails on purpose) would otherwise be
    a warning in quarantine, and a run that read none of it could say VALID. A file gone since it was
    listed stays quarantine's (a live log directory's retention may delete it)."""
    import builtins
    import errno

    import pytest

    import jobs.ingest
    from jobs.ingest import UsageError

    copy = tmp_path / "foo-0"
    shutil.copytree(FOO_0, copy)
    segment = copy / "00000000000000000000.log"
    failure = PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(segment))

    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path) == segment:
            raise failure
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(jobs.ingest, "open", guarded, raising=False)
    with pytest.raises(UsageError) as raised:
        plan_ingest(IngestOptions([LabeledPath("d", str(copy))], "unused"))
    assert str(raised.value) == f"{segment}: cannot be read (Permission denied)"
    failure = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(segment))
    plan = plan_ingest(IngestOptions([LabeledPath("d", str(copy))], "unused"))
    assert str(segment) in {unit.file for unit in plan.units}


def test_a_parquet_ledger_written_as_a_directory_is_read_part_by_part(tmp_path: Path) -> None:
    """Spark writes a Parquet table as a directory of part files beside `_SUCCESS` and `.crc` files: it
    was refused ("is a directory, expected a file"). Each part is a unit of the ledger's label; a
    directory without a Parquet file is a usage error."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from jobs import decode_tasks as dt
    from jobs.ingest import UsageError

    shutil.copytree(FOO_0, tmp_path / "dump" / "foo-0")
    table = tmp_path / "acks.parquet"
    table.mkdir()
    for n in range(2):
        rows = pa.table({"topic": ["foo"], "partition": [0], "offset": [n]})
        pq.write_table(rows, table / f"part-0000{n}-x.snappy.parquet")
    (table / "_SUCCESS").write_bytes(b"")
    (table / ".part-00000-x.snappy.parquet.crc").write_bytes(b"\x00")
    plan = plan_ingest(
        IngestOptions(
            [LabeledPath("d", str(tmp_path / "dump"))], "unused", acks=[LabeledPath(None, str(table))]
        )
    )
    units = [(u.dump_id, Path(u.file).name) for u in plan.units if u.kind == dt.ACKS_LEDGER]
    assert units == [
        ("acks.parquet", "part-00000-x.snappy.parquet"),
        ("acks.parquet", "part-00001-x.snappy.parquet"),
    ]
    assert plan.ledgers == {"acks.parquet"}
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=r"empty: a directory holding no \.parquet file"):
        plan_ingest(
            IngestOptions(
                [LabeledPath("d", str(tmp_path / "dump"))], "unused", acks=[LabeledPath(None, str(empty))]
            )
        )


def test_a_parquet_ledger_directory_with_a_subdirectory_it_cannot_list_is_a_usage_error(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """`os.walk` skips a directory it cannot list: a partitioned table's `topic=orders/` without
    permission lost its parts without a word, and the run could say valid (tests may run as root, so
    the listing fails on purpose)."""
    import errno

    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from jobs.ingest import UsageError

    table = tmp_path / "acks"
    for name in ("a", "b"):
        (table / name).mkdir(parents=True)
        pq.write_table(
            pa.table({"topic": ["t"], "partition": [0], "offset": [1]}), table / name / "part-0.parquet"
        )
    hidden = table / "b"
    listing = os.scandir

    def guarded(path: Any = ".") -> Any:
        if Path(path) == hidden:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return listing(path)

    assert len(plan_ingest(IngestOptions([], "unused", acks=[LabeledPath("l", str(table))])).units) == 2
    monkeypatch.setattr(os, "scandir", guarded)
    with pytest.raises(UsageError) as raised:
        plan_ingest(IngestOptions([], "unused", acks=[LabeledPath("l", str(table))]))
    assert str(raised.value) == f"{hidden}: cannot be read (Permission denied)"


def test_a_partitioned_parquet_ledger_takes_its_columns_from_its_directory_names(tmp_path: Path) -> None:
    """`partitionBy("topic", "partition")` leaves those columns out of the files, in their directories'
    names: the ledger was refused for lacking them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs import decode_tasks as dt

    table = tmp_path / "acks"
    for topic, partition, offsets in (("orders", 0, [1, 2]), ("a b", 3, [7])):
        part = table / f"topic={topic.replace(' ', '%20')}" / f"partition={partition}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({"offset": offsets}), part / "part-0.parquet")
    plan = plan_ingest(IngestOptions([], "unused", acks=[LabeledPath("l", str(table))]))
    rows = [
        (r["topic"], r["partition"], r["offset"]) for unit in plan.units for r in dt._acks_rows(unit, "acks")
    ]
    assert sorted(rows) == [("a b", 3, 7), ("orders", 0, 1), ("orders", 0, 2)]


def test_a_delta_table_given_as_a_ledger_is_a_usage_error(tmp_path: Path) -> None:
    """A Delta table's directory holds the Parquet files of every version: read part by part, the rows an
    overwrite replaced were acks again, and could read as lost."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from jobs.ingest import UsageError

    table = tmp_path / "acks"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "offset": [1]}), table / "part-0.parquet")
    with pytest.raises(UsageError, match=r"acks: a Delta table, whose Parquet files hold its replaced rows"):
        plan_ingest(IngestOptions([], "unused", acks=[LabeledPath("l", str(table))]))


def test_a_ledger_labelled_as_an_input_or_another_ledger_is_a_usage_error(tmp_path: Path) -> None:
    """A ledger's rows replace its label's rows in every table, as a dump's do: labelled `d` beside an
    input `d`, a later ingest of one would wipe the other's batches or acks."""
    import pytest

    from jobs.ingest import UsageError

    first, second = tmp_path / "a" / "acks.jsonl", tmp_path / "b" / "acks.jsonl"
    for ledger in (first, second):
        ledger.parent.mkdir()
        ledger.write_text('{"topic": "foo", "partition": 0, "offset": 1}\n')
    inputs = [LabeledPath("d", str(FOO_0))]
    with pytest.raises(UsageError, match=r"acks\.jsonl: the ledger's label 'd' is also an input's dump id"):
        plan_ingest(IngestOptions(inputs, "unused", acks=[LabeledPath("d", str(first))]))
    with pytest.raises(UsageError, match=r"label 'acks\.jsonl' is also the label of .*a/acks\.jsonl"):
        plan_ingest(
            IngestOptions(inputs, "unused", acks=[LabeledPath(None, str(p)) for p in (first, second)])
        )
    plan = plan_ingest(IngestOptions(inputs, "unused", acks=[LabeledPath("day1", str(first))]))
    assert ("day1", None) in plan.pairs


def test_a_dbfs_fuse_output_is_the_dbfs_uri_on_databricks_only(monkeypatch: Any) -> None:
    """On Databricks, Spark reads `/dbfs/x` on DBFS itself (`dbfs:/dbfs/x`) while Python's `/dbfs/x` is
    the FUSE view of `dbfs:/x`: the output is taken as `dbfs:/x`. `/Volumes` means one place to both;
    elsewhere `/dbfs` is a local directory like any other."""
    import pytest

    from jobs.ingest import UsageError, spark_output

    for name in ("DATABRICKS_RUNTIME_VERSION", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        monkeypatch.delenv(name, raising=False)
    assert spark_output("/dbfs/audit/out") == "/dbfs/audit/out"
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    assert spark_output("/dbfs/audit/out") == "dbfs:/audit/out"
    assert spark_output("/dbfs") == "dbfs:/"
    for unchanged in ("/Volumes/main/k/out", "/dbfsx/out", "dbfs:/audit", "out"):
        assert spark_output(unchanged) == unchanged
    # Under Spark Connect a /dbfs path is two places, and reports cannot reach a dbfs:/ URI.
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    with pytest.raises(UsageError, match=r"^/dbfs/audit/out: under Spark Connect .* give a /Volumes path$"):
        spark_output("/dbfs/audit/out")
    assert spark_output("/Volumes/main/k/out") == "/Volumes/main/k/out"


def test_an_input_given_as_a_uri_is_a_usage_error_that_says_paths_are_read_as_files() -> None:
    """`--input s3://bucket/dump` was `<cwd>/s3:/bucket/dump: no such file or directory`."""
    import pytest

    from jobs.ingest import UsageError

    for uri in ("s3://bucket/dump", "dbfs:/dumps/broker-1"):
        with pytest.raises(UsageError, match=rf"^{uri}: an input is read as files .* not a URI$"):
            plan_ingest(IngestOptions([LabeledPath("d", uri)], "unused"))


def test_an_input_that_is_a_symlink_loop_or_dangling_link_says_so(tmp_path: Path) -> None:
    """A symlink loop was `no such file or directory` (os.path.exists says False for both)."""
    import errno
    import os

    import pytest

    from jobs.ingest import UsageError

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    loop = str(tmp_path / "a")
    with pytest.raises(UsageError, match=rf"^{loop}: {os.strerror(errno.ELOOP)}$"):
        plan_ingest(IngestOptions([LabeledPath("d", loop)], "unused"))
    gone = str(tmp_path / "gone")
    with pytest.raises(
        UsageError, match=rf"^{gone}: a symbolic link to {tmp_path}/nowhere, which does not exist$"
    ):
        plan_ingest(IngestOptions([LabeledPath("d", gone)], "unused"))
    with pytest.raises(UsageError, match=r": no such file or directory$"):
        plan_ingest(IngestOptions([LabeledPath("d", str(tmp_path / "absent"))], "unused"))


def test_an_empty_input_or_output_is_a_usage_error_not_the_working_directory(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """`--input "d=$UNSET"` read the working directory (abspath of ""), `--output ""` wrote under it."""
    import pytest

    from jobs.ingest import UsageError, _check_output

    monkeypatch.chdir(tmp_path)
    shutil.copytree(FOO_0, tmp_path / "foo-0")
    for given in ("d=", "", " "):
        with pytest.raises(
            UsageError, match=r"^an empty path \('\s*'\): give the file or directory to read$"
        ):
            plan_ingest(IngestOptions([LabeledPath.parse(given)], "unused"))
    with pytest.raises(UsageError, match=r"^--output is empty"):
        _check_output("")


def test_a_meta_properties_with_problems_becomes_quarantine_rows_naming_them(tmp_path: Path) -> None:
    """Discovery reads meta.properties for the broker id; a file it cannot use left the replica unnamed
    and said nothing. It is now a unit of the quarantine pass, whose rows name each problem's line."""
    from jobs import decode_tasks as dt

    logs = tmp_path / "logs"
    shutil.copytree(FOO_0, logs / "foo-0")
    (logs / "meta.properties").write_text("#comment\nbroker.id=three\n")
    plan = plan_ingest(IngestOptions([LabeledPath("d", str(logs))], "unused"))
    (unit,) = [u for u in plan.units if u.kind == dt.META_PROPERTIES]
    assert unit.file == str(logs / "meta.properties") and not dt.feeds(unit, "batches")
    rows = list(dt._small_file_rows(unit, "quarantine"))
    assert {(r["kind"], r["file"]) for r in rows} == {("UNREADABLE_FILE", unit.file)}
    assert any("broker.id" in r["message"] and r["position"] == len("#comment\n") for r in rows), rows
    assert list(dt._small_file_rows(unit, "partition_state")) == []
    # A good one has no problem to report.
    (logs / "meta.properties").write_text("version=0\nbroker.id=3\n")
    plan = plan_ingest(IngestOptions([LabeledPath("d", str(logs))], "unused"))
    (unit,) = [u for u in plan.units if u.kind == dt.META_PROPERTIES]
    assert list(dt._small_file_rows(unit, "quarantine")) == []


def test_a_corrupt_time_index_quorum_state_or_clean_shutdown_file_becomes_quarantine_rows(
    tmp_path: Path,
) -> None:
    """A `.timeindex`, a KRaft `quorum-state` and a `.kafka_cleanshutdown` carry no rows of the audit's
    tables; their decoders' problems were dropped, so a corrupt one said nothing. Each is now a unit of
    the quarantine pass alone (never a usage error: nothing of the audit reads them)."""
    from jobs import decode_tasks as dt

    logs = tmp_path / "logs"
    shutil.copytree(FOO_0, logs / "foo-0")
    (logs / "meta.properties").write_text("version=0\nbroker.id=3\n")
    timeindex = logs / "foo-0" / "00000000000000000000.timeindex"
    good = timeindex.read_bytes()
    assert good and len(good) % 12 == 0
    (logs / ".kafka_cleanshutdown").write_text('{"version": 0, "brokerEpoch": ')
    (logs / "foo-0" / "quorum-state").write_text("[1, 2]")
    timeindex.write_bytes(good + b"\x01\x02\x03")
    plan = plan_ingest(IngestOptions([LabeledPath("d", str(logs))], "unused"))
    units = {u.kind: u for u in plan.units if u.kind in dt.PROBLEMS_ONLY}
    assert set(units) == dt.PROBLEMS_ONLY
    found = {
        kind: [(r["kind"], r["position"], r["message"]) for r in dt._small_file_rows(unit, "quarantine")]
        for kind, unit in units.items()
    }
    assert found[dt.TIMEINDEX] == [
        (
            "INDEX_MISMATCH",
            len(good),
            ".timeindex file ends with 3 bytes that do not form a whole 12-byte entry",
        )
    ]
    ((kind, position, message),) = found[dt.CLEAN_SHUTDOWN]
    assert (kind, position) == ("UNREADABLE_FILE", len('{"version": 0, "brokerEpoch": '))
    assert message.startswith("malformed JSON")
    assert found[dt.QUORUM_STATE] == [("UNREADABLE_FILE", 0, "expected a JSON object, found list")]
    assert not any(
        dt.feeds(unit, table) for unit in units.values() for table in ("batches", "partition_state")
    )
    # The good ones have no problem to report.
    timeindex.write_bytes(good)
    (logs / ".kafka_cleanshutdown").write_text("")
    (logs / "foo-0" / "quorum-state").write_text('{"leaderId": 1, "leaderEpoch": 2}')
    plan = plan_ingest(IngestOptions([LabeledPath("d", str(logs))], "unused"))
    assert [
        r for u in plan.units if u.kind in dt.PROBLEMS_ONLY for r in dt._small_file_rows(u, "quarantine")
    ] == []


def test_names_not_utf8_reach_the_tables_escaped_and_their_files_are_still_read(tmp_path: Path) -> None:
    r"""A dump copied under a Latin-1 name (`dump\xe9/`), holding a stray `notes\xff.txt` beside a
    segment: the inventory and the decoded rows could not become Arrow (lone surrogates), and the
    ingest failed at its very end, after the data tables were written. The names are written as
    `\xNN`; the files are opened by their real names."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from jobs import decode_tasks as dt
    from jobs.ingest import _arrow_table
    from schemas.tables import BATCHES, FILES

    root = os.fsdecode(bytes(tmp_path) + b"/dump\xe9")
    shutil.copytree(FOO_0, os.path.join(root, "foo-0"))
    Path(root, "foo-0", os.fsdecode(b"notes\xff.txt")).write_text("x")
    plan = plan_ingest(IngestOptions([LabeledPath("d", root)], "unused"))
    files = _arrow_table(plan.inventory, FILES).to_pylist()
    escaped = str(tmp_path) + "/dump\\xe9/foo-0/"
    assert any(r["file"] == escaped + "notes\\xff.txt" and not r["is_live"] for r in files)
    logs = [u for u in plan.units if u.kind == dt.LOG]
    assert logs and all(os.path.isfile(u.file) for u in logs)
    rows = [
        r
        for unit in logs
        for batch in dt.decode_unit_safely(unit, BATCHES.name, to_arrow_schema(BATCHES.schema), records=False)
        for r in batch.to_pylist()
    ]
    assert rows and all(r["file"].startswith(escaped) for r in rows)
    assert {r["file"] for r in rows} <= {r["file"] for r in files if r["is_live"]}


def test_a_fifo_given_as_a_ledger_is_a_usage_error_not_a_hang(tmp_path: Path) -> None:
    """`--acks <(cat acks.jsonl)` or a named pipe: the planner's format sniff blocked on it forever
    (with no writer) or ate its first rows."""
    from jobs.ingest import UsageError

    fifo = tmp_path / "acks.jsonl"
    os.mkfifo(fifo)
    options = IngestOptions([LabeledPath("d", str(FOO_0))], "unused", acks=[LabeledPath("a", str(fifo))])
    with pytest.raises(UsageError, match=r"acks.jsonl: not a regular file \(a FIFO"):
        plan_ingest(options)


def test_a_file_that_is_no_ledger_given_as_one_is_a_usage_error_not_a_crash(tmp_path: Path) -> None:
    """A preallocated index's zeros (no line end), a CSV field past the csv module's limit and JSON
    nested past the recursion limit: one line and exit status 2, where csv.Error and RecursionError
    escaped as a traceback (exit 3)."""
    import pytest

    from jobs.ingest import UsageError

    zeros, wide, deep = tmp_path / "a.index", tmp_path / "wide.csv", tmp_path / "deep.jsonl"
    zeros.write_bytes(bytes(1 << 20))
    wide.write_text("topic" + "x" * 200_000 + ",partition,offset\n")
    deep.write_text("{" + '"a":[' * 100_000 + "\n")
    for ledger in (zeros, wide, deep):
        with pytest.raises(UsageError, match="not a readable acks ledger"):
            plan_ingest(IngestOptions([], "unused", acks=[LabeledPath("l", str(ledger))]))


def test_an_output_inside_an_input_is_a_usage_error(tmp_path: Path) -> None:
    """The tables written inside an input directory would be listed as the dump's files, another
    inventory on every run."""
    import pytest

    from jobs.ingest import UsageError, _check_output_outside

    logs = tmp_path / "logs"
    logs.mkdir()
    with pytest.raises(UsageError, match="the output lies inside the input"):
        _check_output_outside(str(logs / "out"), [str(logs)])
    _check_output_outside(str(tmp_path / "out"), [str(logs)])
    _check_output_outside(str(tmp_path / "logs-out"), [str(logs)])


def test_an_output_whose_tables_cannot_be_made_is_a_usage_error_before_spark(tmp_path: Path) -> None:
    """A file where a table's folder goes, or a path no directory can be made at, failed the job after
    Spark started (exit status 3 and a traceback, a review). Both are one line now, before the JVM; a
    writable output is made, and `audit` (make=False) makes none."""
    import pytest

    from jobs.ingest import UsageError, _check_output

    out = tmp_path / "o"
    out.mkdir()
    (out / "batches").write_text("hi\n")
    with pytest.raises(
        UsageError,
        match=r"/o/batches: exists and is no directory, where the output's batches Delta table goes",
    ):
        _check_output(str(out))
    (out / "batches").unlink()
    (out / "report.partial").write_text("hi\n")
    with pytest.raises(UsageError, match=r"/o/report\.partial: exists and is no directory, .* reports go"):
        _check_output(str(out))
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError, match=r"output directory is not writable"):
        _check_output(str(tmp_path / "a-file" / "out"))
    _check_output(str(tmp_path / "new" / "out"))
    assert (tmp_path / "new" / "out").is_dir()
    _check_output(str(tmp_path / "never"), make=False)
    assert not (tmp_path / "never").exists()
    if os.geteuid() == 0 and os.path.isdir("/proc/self"):
        # Root passes the access check under /proc, where no directory can be made.
        with pytest.raises(UsageError, match=r"^/proc/kra-out: cannot make the output directory"):
            _check_output("/proc/kra-out")


@pytest.mark.parametrize("command", ["ingest", "run"])
def test_an_output_inside_the_input_is_refused_before_it_is_made(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output is made before the JVM starts, but only once it is known to lie outside the inputs (a
    review: `ingest` made it inside the input, then refused it)."""
    from jobs.cli import main

    logs = tmp_path / "kafka-logs"
    shutil.copytree(REAL_FIXTURES / "codecrafters-kraft-3x", logs)
    assert main([command, "--input", str(logs), "--output", str(logs / "out")]) == 2
    assert "lies inside the input" in capsys.readouterr().err
    assert not (logs / "out").exists()
