"""`replay-audit ingest`: inputs of audit-contract §1 -> bronze Delta tables, read back jar-free (deltalake)
and compared with the decoders' direct output."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable, Iterable
from operator import itemgetter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from jobs import decode_tasks as dt
from jobs.cli import main as cli_main
from jobs.ingest import (
    IngestOptions,
    LabeledPath,
    decode_table,
    plan_ingest,
    run_ingest,
    split_segment,
    units_for,
)
from kafka_log_decoder.errors import DecodeError
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import read_log_segment
from schemas.tables import BATCHES, RECORDS, TABLES, WALK_BEFORE_OVERLAP, WALK_FIRST, WALK_LAST, WALK_OVERLAP
from tests.paths import REAL_FIXTURES

REAL = REAL_FIXTURES
PROVENANCE = ("dump_id", "replica", "topic", "partition")

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------------------------------------
# helpers


def ingest(spark: Any, output: Path, *inputs: str | Path, **options: Any) -> None:
    after_write = options.pop("after_write", None)
    opts = IngestOptions(
        inputs=[LabeledPath.parse(str(p)) for p in inputs],
        output=str(output),
        acks=[LabeledPath.parse(str(p)) for p in options.pop("acks", ())],
        **options,
    )
    run_ingest(spark, opts, after_write=after_write)


def read(output: Path, table: str) -> list[dict[str, Any]]:
    rows = DeltaTable(str(output / table)).to_pyarrow_table().to_pylist()
    columns = TABLES[table].columns
    return sorted(({c: r[c] for c in columns} for r in rows), key=repr)


def contents(output: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: read(output, name) for name in TABLES}


def without(rows: Iterable[dict[str, Any]], *columns: str) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in r.items() if k not in columns} for r in rows), key=repr)


def decoded(path: Path, kind: type, *, records: bool = False) -> list[Any]:
    return [item for item in read_log_segment(path, records=records) if isinstance(item, kind)]


def batch_dicts(path: Path) -> list[dict[str, Any]]:
    return [h.to_dict() for h in decoded(path, BatchHeader)]


def error_dicts(path: Path, *, records: bool = False) -> list[dict[str, Any]]:
    return [
        {
            "file": e.file,
            "position": e.position,
            "length": e.length,
            "kind": e.kind.value,
            "message": e.message,
        }
        for e in decoded(path, DecodeError, records=records)
    ]


def rows_of(rows: Iterable[dict[str, Any]], file: Path, *drop: str) -> list[dict[str, Any]]:
    return without((r for r in rows if r["file"] == str(file)), *PROVENANCE, *drop)


def write_index(segment: Path, every: int = 4096) -> Path:
    """An `.index` as the broker writes it: (last offset - base, position) about every `every` bytes."""
    base = int(segment.name.split(".")[0])
    entries = bytearray()
    last = -every
    for h in decoded(segment, BatchHeader):
        if h.position >= last + every:
            entries += struct.pack(">ii", h.last_offset - base, h.position)
            last = h.position
    index = segment.with_suffix(".index")
    index.write_bytes(bytes(entries))
    return index


# ---------------------------------------------------------------------------------------------
# fixtures/real: three broker trees (KRaft 3.x, ZooKeeper 2.7.1, KRaft 3.x/4.x)


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("ledgers")
    acks = [{"topic": "foo", "partition": 0, "offset": o, "producer_id": 0, "sequence": o} for o in range(3)]
    jsonl = root / "acks.jsonl"
    bad_rows = [
        '{"topic": "foo", "partition": 0, "offset": "x"}',
        # Past a long: this row is quarantined, not the whole ledger.
        '{"topic": "foo", "partition": 0, "offset": 99999999999999999999}',
    ]
    # A key in Latin-1: quarantined, not compared as mangled text.
    latin1 = b'{"topic": "foo", "partition": 0, "offset": 5, "key": "caf\xe9"}\n'
    jsonl.write_bytes(("\n".join([*map(json.dumps, acks), *bad_rows]) + "\n").encode() + latin1)
    csv = root / "acks.csv"
    # Saved with a BOM; lines ended as Windows ends them, one row over two lines, one bad row.
    csv.write_bytes(
        '\ufefftopic,partition,offset,key\r\nfoo,0,0,k0\r\nfoo,0,2,\r\nfoo,0,x,"a\r\nb"\r\n'.encode()
    )
    parquet = root / "acks.parquet"
    pq.write_table(pa.Table.from_pylist(acks), parquet)
    return [jsonl, csv, parquet]


@pytest.fixture(scope="module")
def real_out(spark: Any, tmp_path_factory: pytest.TempPathFactory, ledgers: list[Path]) -> Path:
    out = tmp_path_factory.mktemp("real-out")
    ingest(spark, out, f"real={REAL}", records=True, acks=ledgers)
    return out


def live_segments() -> list[Path]:
    return sorted(REAL.glob("*/*-[0-9]*/*.log"))


def test_batch_rows_equal_the_decoders_output_for_every_real_segment(real_out: Path) -> None:
    batches = read(real_out, "batches")
    assert len(batches) == sum(len(batch_dicts(s)) for s in live_segments()) > 51_000
    for segment in live_segments():
        assert rows_of(batches, segment, "walk_mark") == without(batch_dicts(segment)), segment


def test_each_walk_marks_its_edges_and_nothing_else_on_real_segments(real_out: Path) -> None:
    """`walk_mark` on broker-written segments (offsets always rise): each unit's first and last valid
    batch, the first unit's first being the segment's first valid batch and each later unit's first
    the batch right after the previous unit's last; no overlap."""
    batches = read(real_out, "batches")
    units = 0
    for segment in live_segments():
        valid = sorted(
            (r for r in batches if r["file"] == str(segment) and r["crc_valid"]), key=itemgetter("position")
        )
        marks = [r["walk_mark"] for r in valid]
        assert None not in marks and not any(m & (WALK_OVERLAP | WALK_BEFORE_OVERLAP) for m in marks), segment
        if not valid:
            continue
        edges = [m for m in marks if m]
        assert marks[0] & WALK_FIRST and marks[-1] & WALK_LAST, segment
        # Units tile the segment: LAST and FIRST alternate in file order, FIRST first.
        flat = [bit for m in edges for bit in (WALK_FIRST, WALK_LAST) if m & bit]
        assert flat == [WALK_FIRST, WALK_LAST] * (len(flat) // 2), segment
        units += len(flat) // 2
    assert units == sum(
        1 for s in live_segments() if any(r["file"] == str(s) and r["crc_valid"] for r in batches)
    )


def test_record_rows_equal_the_decoders_output(real_out: Path) -> None:
    records = read(real_out, "records")
    for segment in live_segments():
        expected = [
            {
                "file": str(segment),
                "batch_position": r.batch_position,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "sequence": r.sequence,
                "key_size": r.key_size,
                "value_size": r.value_size,
                "key": r.key,
                "value": r.value,
                "header_keys": r.header_keys,
                "header_values": r.header_values or [],
            }
            for r in decoded(segment, Record, records=True)
        ]
        assert rows_of(records, segment) == without(expected), segment


def test_every_row_says_where_it_came_from(real_out: Path) -> None:
    batches = read(real_out, "batches")
    replicas = {(r["dump_id"], r["replica"], r["topic"], r["partition"]) for r in batches}
    # Two trees share node.id 1, so each log directory keeps a dump_id of its own.
    assert ("real/codecrafters-kraft-3x", "1", "foo", 0) in replicas
    assert ("real/induswargods-kraft", "1", "test-topic", 0) in replicas
    assert ("real/donaldy-zk-2.7.1", "0", "__consumer_offsets", 39) in replicas
    for name in ("batches", "producer_snapshots", "partition_state", "quarantine", "acks"):
        for row in read(real_out, name):
            assert row["dump_id"] and row["file"] and row["position"] >= 0, (name, row)


def test_snapshots_and_partition_state_of_the_real_trees(real_out: Path) -> None:
    snapshots = read(real_out, "producer_snapshots")
    my_topic = sorted((r["producer_id"], r["last_offset"]) for r in snapshots if r["topic"] == "myTopic")
    assert my_topic == [(4001, 11), (4002, 23), (4003, 37)]
    state = {
        (r["dump_id"], r["topic"], r["partition"], r["state"]): r for r in read(real_out, "partition_state")
    }
    foo = ("real/codecrafters-kraft-3x", "foo", 0)
    assert state[(*foo, "high_watermark")]["offset"] == 3
    assert state[(*foo, "recovery_point")]["offset"] == 3
    assert state[(*foo, "topic_id")]["topic_id"] == "fZi4qEpCTsik-rzkyV0Ypg"
    assert state[("real/donaldy-zk-2.7.1", "myTopic", 0, "leader_epoch")]["offset"] == 38


def test_inventory_lists_every_file_with_a_fingerprint(real_out: Path) -> None:
    files = {r["file"]: r for r in read(real_out, "files")}
    for path in REAL.rglob("*"):
        if path.is_file() and path.name not in (".lock", "PROVENANCE.md"):
            assert str(path) in files, path
    segment = files[str(REAL / "codecrafters-kraft-3x" / "foo-0" / "00000000000000000000.log")]
    assert segment["kind"] == "log" and segment["is_live"] and segment["size_bytes"] == 150
    assert len(segment["fingerprint"]) == 32


def test_only_the_filter_keys_carry_statistics(real_out: Path) -> None:
    """Delta and Parquet keep min/max statistics of each large table's `stats_columns` and of no other
    column (each costs a comparison or two per value while writing)."""
    for spec in (BATCHES, RECORDS):
        table = DeltaTable(str(real_out / spec.name))
        assert table.metadata().configuration["delta.dataSkippingStatsColumns"] == ",".join(
            spec.stats_columns
        )
        files = [Path(uri.removeprefix("file://")) for uri in table.file_uris()]
        assert files, spec.name
        for path in files:
            meta = pq.ParquetFile(path).metadata
            for g in range(meta.num_row_groups):
                columns = {
                    meta.schema.column(i).name: meta.row_group(g).column(i) for i in range(meta.num_columns)
                }
                with_stats = {
                    name for name, c in columns.items() if c.is_stats_set and c.statistics.has_min_max
                }
                assert with_stats == set(spec.stats_columns) - set(spec.partition_by), (path, with_stats)


def test_acks_ledgers_in_three_formats(real_out: Path, ledgers: list[Path]) -> None:
    acks = read(real_out, "acks")
    by_ledger = {
        name: [r for r in acks if r["dump_id"] == name] for name in ("acks.jsonl", "acks.csv", "acks.parquet")
    }
    assert [r["offset"] for r in sorted(by_ledger["acks.jsonl"], key=lambda r: r["offset"])] == [0, 1, 2]
    assert sorted((r["offset"], r["key"]) for r in by_ledger["acks.csv"]) == [(0, "k0"), (2, None)]
    assert sorted(r["sequence"] for r in by_ledger["acks.parquet"]) == [0, 1, 2]
    quarantine = read(real_out, "quarantine")

    def bad(ledger: Path) -> list[tuple[int, int, str]]:
        rows = [r for r in quarantine if r["file"] == str(ledger)]
        assert {r["kind"] for r in rows} == {"UNREADABLE_FILE"}
        return sorted((r["position"], r["length"], r["message"]) for r in rows)

    # Each bad row is quarantined at its bytes (its line, terminator included) and named by its number.
    data = ledgers[0].read_bytes()
    lines = data.splitlines(keepends=True)
    starts = [sum(map(len, lines[:i])) for i in range(len(lines))]
    latin1 = data.index(b"\xe9")
    assert bad(ledgers[0]) == [
        (at, len(lines[i]), f"acks row {i}: {why}")
        for i, at, why in (
            (3, starts[3], "offset 'x' is not an integer"),
            (4, starts[4], "offset 99999999999999999999 is out of range "
             "(-9223372036854775808 to 9223372036854775807)"),
            (5, starts[5], f"not UTF-8 (byte {latin1})"),
        )
    ]  # fmt: skip
    data = ledgers[1].read_bytes()
    row = data.index(b"foo,0,x")
    assert bad(ledgers[1]) == [(row, len(data) - row, "acks row 2: offset 'x' is not an integer")]


# ---------------------------------------------------------------------------------------------
# Idempotence: the same input twice, a new dump, a run killed halfway


SMALL = REAL / "codecrafters-kraft-3x"


def test_same_input_twice_leaves_the_same_table_contents(spark: Any, tmp_path: Path) -> None:
    ingest(spark, tmp_path, f"a={SMALL}", records=True)
    first = contents(tmp_path)
    ingest(spark, tmp_path, f"a={SMALL}", records=True)
    assert contents(tmp_path) == first
    assert first["batches"] and first["files"]


def test_a_new_dump_adds_its_rows_and_keeps_the_others(spark: Any, tmp_path: Path) -> None:
    ingest(spark, tmp_path, f"a={SMALL}")
    first = contents(tmp_path)
    ingest(spark, tmp_path, f"b={SMALL}")
    after = contents(tmp_path)
    for name, rows in first.items():
        assert [r for r in after[name] if r["dump_id"] == "a"] == rows
        assert without((r for r in after[name] if r["dump_id"] == "b"), "dump_id") == without(rows, "dump_id")


def test_a_table_written_before_a_column_existed_gains_it_null_in_its_old_rows(
    spark: Any, tmp_path: Path
) -> None:
    ingest(spark, tmp_path, f"a={SMALL}")
    # `batches` as a version before walk_mark wrote it.
    path = str(tmp_path / "batches")
    old = spark.read.format("delta").load(path).drop("walk_mark")
    writer = old.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    writer.partitionBy(*BATCHES.partition_by).save(path)
    ingest(spark, tmp_path, f"b={SMALL}")
    rows = read(tmp_path, "batches")
    marks = {dump: {r["walk_mark"] for r in rows if r["dump_id"] == dump} for dump in ("a", "b")}
    assert marks["a"] == {None}
    assert None not in marks["b"] and any(m & WALK_FIRST for m in marks["b"])


def test_ingest_leaves_the_session_confs_as_it_found_them(spark: Any, tmp_path: Path) -> None:
    from jobs.ingest import WRITE_SESSION_CONF

    before = {key: spark.conf.get(key, None) for key in WRITE_SESSION_CONF}
    ingest(spark, tmp_path, f"a={SMALL}")
    assert {key: spark.conf.get(key, None) for key in WRITE_SESSION_CONF} == before


class Killed(Exception):
    pass


def killed_after_batches(spark: Any, output: Path) -> None:
    """Dump `a` ingested from one input, then from another by a run killed after its first table write."""
    ingest(spark, output, f"a={REAL / 'induswargods-kraft'}")

    def kill(table: str) -> None:
        if table == "batches":
            raise Killed(table)

    with pytest.raises(Killed):
        ingest(spark, output, f"a={SMALL}", after_write=kill)


def test_a_run_killed_halfway_then_rerun_ends_as_an_uninterrupted_run(spark: Any, tmp_path: Path) -> None:
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    ingest(spark, uninterrupted, f"a={SMALL}")
    # An older state of the dump first (another input under the same label), then a run killed
    # after its first table write: batches are new, every other table is stale or missing.
    killed_after_batches(spark, interrupted)
    ingest(spark, interrupted, f"a={SMALL}")
    assert contents(interrupted) == contents(uninterrupted)


def test_a_second_dump_of_one_broker_added_to_an_input_replaces_its_rows_under_the_old_id(
    spark: Any, tmp_path: Path
) -> None:
    """One log directory under input `d` is dump `d`; with a second of the same broker beside it, the two
    are `d/a` and `d/b` (one broker at two times). The rows of `d` were kept beside them: the same
    batches twice, as two dumps. And back: one directory again replaces `d/a` and `d/b`."""
    d = tmp_path / "in" / "d"
    shutil.copytree(REAL / "induswargods-kraft", d / "a")
    out = tmp_path / "out"
    ingest(spark, out, d)
    assert {r["dump_id"] for r in read(out, "batches")} == {"d"}
    shutil.copytree(REAL / "induswargods-kraft", d / "b")
    ingest(spark, out, d)
    for table in ("files", "batches"):
        assert {r["dump_id"] for r in read(out, table)} == {"d/a", "d/b"}, table
    shutil.rmtree(d / "b")
    ingest(spark, out, d)
    assert {r["dump_id"] for r in read(out, "batches")} == {"d"}


def test_a_broker_gone_from_a_re_dumped_input_leaves_no_row_killed_halfway_or_not(
    spark: Any, tmp_path: Path
) -> None:
    """A directory of two brokers' log directories, dumped again without one: its rows were kept in every
    table, the inventory too, while a removed partition directory's went (a review). A re-run now ends as
    an ingest of the input as it is, also after a re-run killed halfway (which took the broker out of the
    inventory first, leaving its rows in the tables it had not written yet)."""
    d = tmp_path / "in"
    for name in ("codecrafters-kraft-3x", "donaldy-zk-2.7.1"):
        shutil.copytree(REAL / name, d / name)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    ingest(spark, out, f"x={d}")
    assert len({r["replica"] for r in read(out, "files")}) == 2
    shutil.rmtree(d / "donaldy-zk-2.7.1")
    ingest(spark, fresh, f"x={d}")
    ingest(spark, out, f"x={d}")
    assert contents(out) == contents(fresh)
    # Again, with the re-run killed after its first table.
    shutil.copytree(REAL / "donaldy-zk-2.7.1", d / "donaldy-zk-2.7.1")
    ingest(spark, out, f"x={d}")
    shutil.rmtree(d / "donaldy-zk-2.7.1")

    def kill(table: str) -> None:
        if table == "batches":
            raise Killed(table)

    with pytest.raises(Killed):
        ingest(spark, out, f"x={d}", after_write=kill)
    ingest(spark, out, f"x={d}")
    assert contents(out) == contents(fresh)


def test_an_audit_of_an_ingest_killed_halfway_is_refused_until_it_is_rerun(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The dump's batches are new and its quarantine, snapshots and inventory are the earlier run's: an
    # audit would judge the new batches without the new quarantine's corruption.
    killed_after_batches(spark, tmp_path)
    capsys.readouterr()
    assert cli_main(["audit", "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not finish" in err[0] and "dump 'a'" in err[0] and "batches" in err[0]
    assert not (tmp_path / "findings").exists()
    ingest(spark, tmp_path, f"a={SMALL}")
    # The validations are not what this test is about (test_audit_cli's are): ~13 s of a warm session.
    assert cli_main(["audit", "--output", str(tmp_path), "--no-gx"]) in (0, 1)


def test_the_audits_completeness_check_reads_no_data_file_of_a_dump_the_inventory_lists(
    spark: Any, tmp_path: Path
) -> None:
    """The check asks each table only for rows of the (dump, replica) pairs `files` does not list, a
    condition on the tables' partition columns that Delta answers from its log. With the data files of
    dump `a`'s batches and records gone it passes, where a scan of the tables fails on the first of
    them; and dump `b`, taken out of the inventory, is still named, from its own rows."""
    from jobs.audit import _check_complete, read_bronze
    from jobs.ingest import UsageError

    ingest(spark, tmp_path, f"a={SMALL}", f"b={SMALL}", records=True)
    gone = [
        p for table in ("batches", "records") for p in (tmp_path / table / "dump_id=a").rglob("*.parquet")
    ]
    assert gone
    for data in gone:
        data.unlink()
    _check_complete(read_bronze(spark, str(tmp_path)), str(tmp_path))
    spark.sql(f"DELETE FROM delta.`{tmp_path / 'files'}` WHERE dump_id = 'b'")
    named = r"did not finish .*: dump 'b' replica 1 \(batches, [a-z_, ]*records\)"
    with pytest.raises(UsageError, match=named) as raised:
        _check_complete(read_bronze(spark, str(tmp_path)), str(tmp_path))
    assert "dump 'a'" not in str(raised.value)


def reading_the_inventory_commits_to_it(
    monkeypatch: pytest.MonkeyPatch, output: Path, commit: Callable[[str], None], times: int
) -> list[int]:
    """Each of the audit's first `times` pins of `files` is followed by `commit(path)` to that table, as
    an ingest starting meanwhile commits; the sizes of the frames pinned are returned."""
    from jobs import audit as audit_job

    pin = audit_job.read_table_version
    inventory = str(output / "files")
    sizes: list[int] = []

    def read_then_commit(spark: Any, path: str) -> Any:
        frame = pin(spark, path)
        if path == inventory:
            sizes.append(frame.count())
            if len(sizes) <= times:
                commit(path)
        return frame

    monkeypatch.setattr(audit_job, "read_table_version", read_then_commit)
    return sizes


def test_an_ingest_starting_while_the_audit_reads_the_tables_is_read_again(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pinned before an ingest's first commit (its pairs taken out of `files`), the inventory would list
    the dump beside batches the ingest may already have replaced: the audit reads the tables again,
    and then refuses the dump the inventory no longer lists."""
    from jobs.audit import read_bronze

    ingest(spark, tmp_path, f"a={SMALL}")
    sizes = reading_the_inventory_commits_to_it(
        monkeypatch, tmp_path, lambda path: spark.sql(f"DELETE FROM delta.`{path}` WHERE dump_id = 'a'"), 1
    )
    bronze = read_bronze(spark, str(tmp_path))
    assert sizes[0] > 0 and sizes[1:] == [0]
    assert bronze.files.count() == 0 and bronze.batches.count() > 0
    assert cli_main(["audit", "--output", str(tmp_path)]) == 2


def test_an_audit_whose_reads_an_ingest_keeps_overtaking_gives_up_in_one_line(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobs.audit import PIN_ATTEMPTS

    ingest(spark, tmp_path, f"a={SMALL}")
    commits = iter(range(PIN_ATTEMPTS))
    sizes = reading_the_inventory_commits_to_it(
        monkeypatch,
        tmp_path,
        lambda path: spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('probe' = '{next(commits)}')"),
        PIN_ATTEMPTS,
    )
    capsys.readouterr()
    assert cli_main(["audit", "--output", str(tmp_path)]) == 2
    assert len(sizes) == PIN_ATTEMPTS
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "an ingest committed to the inventory" in err[0], err
    assert not (tmp_path / "findings").exists()


# ---------------------------------------------------------------------------------------------
# Corrupt inputs become quarantine rows; the job succeeds


def build_corrupt_log_dir(root: Path) -> dict[str, Path]:
    clean = (SMALL / "foo-0" / "00000000000000000000.log").read_bytes()  # batches at 0 (80 B) and 80 (70 B)
    flipped = bytearray(clean)
    flipped[80 + 65] ^= 0xFF
    cases = {
        "flipped-0": bytes(flipped),
        "truncated-0": clean + clean[:40],
        "garbage-0": clean[:80] + b"\xee" * 300 + clean[80:],
    }
    segments = {}
    for name, data in cases.items():
        (root / name).mkdir(parents=True)
        segments[name] = root / name / "00000000000000000000.log"
        segments[name].write_bytes(data)
    return segments


def test_corrupt_regions_become_quarantine_rows_and_the_job_succeeds(spark: Any, tmp_path: Path) -> None:
    segments = build_corrupt_log_dir(tmp_path / "corrupt")
    ingest(spark, tmp_path / "out", f"bad={tmp_path / 'corrupt'}", records=True)
    quarantine, batches = read(tmp_path / "out", "quarantine"), read(tmp_path / "out", "batches")
    kinds = {
        name: {r["kind"] for r in quarantine if r["file"] == str(path)} for name, path in segments.items()
    }
    # The flipped byte also breaks the record framing it lands in (record mode).
    assert kinds["flipped-0"] >= {"CRC_MISMATCH"}
    assert kinds["truncated-0"] == {"TRUNCATED_TAIL"}
    assert kinds["garbage-0"] == {"UNREADABLE_BATCH"}
    for path in segments.values():
        assert rows_of(quarantine, path) == without(error_dicts(path, records=True))
        assert rows_of(batches, path, "walk_mark") == without(batch_dicts(path))


def test_corrupt_regions_become_quarantine_rows_without_records(spark: Any, tmp_path: Path) -> None:
    segments = build_corrupt_log_dir(tmp_path / "corrupt")
    ingest(spark, tmp_path / "out", f"bad={tmp_path / 'corrupt'}")
    quarantine = read(tmp_path / "out", "quarantine")
    for path in segments.values():
        assert rows_of(quarantine, path) == without(error_dicts(path)), path


@pytest.mark.parametrize("records", [False, True], ids=["headers", "records"])
def test_the_decode_pass_names_exactly_the_segments_the_quarantine_pass_must_read(
    spark: Any, tmp_path: Path, records: bool
) -> None:
    corrupt = build_corrupt_log_dir(tmp_path / "logs")
    shutil.copytree(SMALL / "foo-0", tmp_path / "logs" / "clean-0")
    plan = plan_ingest(IngestOptions(inputs=[LabeledPath(None, str(tmp_path / "logs"))], output="unused"))
    spec = RECORDS if records else BATCHES
    units = units_for(spec.name, plan.units, records=records)
    decoded = decode_table(spark, spec, units, records=records, split_bytes=1 << 20, report=True)
    assert decoded.corrupt_logs is None  # known only once the rows were written
    decoded.df.write.format("noop").mode("overwrite").save()
    assert decoded.corrupt_logs is not None
    assert {plan.units[i].file for i in decoded.corrupt_logs} == {str(p) for p in corrupt.values()}


# ---------------------------------------------------------------------------------------------
# A segment split into byte ranges at (checked) index boundaries


def test_split_segment_gives_the_rows_of_the_whole_file_even_with_a_stale_index(
    spark: Any, tmp_path: Path
) -> None:
    source = REAL / "induswargods-kraft" / "__cluster_metadata-0" / "00000000000000000000.log"
    logs = tmp_path / "logs"
    clean = logs / "meta-0" / source.name
    tampered = logs / "tampered-0" / source.name
    for segment in (clean, tampered):
        segment.parent.mkdir(parents=True)
        shutil.copyfile(source, segment)
        write_index(segment)
    split_bytes = 256 << 10
    ranges = split_segment(
        dt.WorkUnit(
            dt.LOG,
            "d",
            None,
            "t",
            0,
            str(tampered),
            source.stat().st_size,
            index_file=str(tampered.with_suffix(".index")),
        ),
        split_bytes,
    )
    assert len(ranges) >= 10
    # A stale index entry (points 7 bytes into a batch), and a corrupt region over another boundary.
    stale, overwritten = ranges[3].boundary, ranges[6].boundary
    assert stale is not None and overwritten is not None
    index = tampered.with_suffix(".index")
    entries = bytearray(index.read_bytes())
    struct.pack_into(">i", entries, stale.entry_position + 4, stale.position + 7)
    index.write_bytes(bytes(entries))
    data = bytearray(tampered.read_bytes())
    data[overwritten.position - 1000 : overwritten.position + 1000] = b"\xee" * 2000
    tampered.write_bytes(bytes(data))

    ingest(spark, tmp_path / "out", f"split={logs}", split_bytes=split_bytes)
    batches, quarantine = read(tmp_path / "out", "batches"), read(tmp_path / "out", "quarantine")
    for segment in (clean, tampered):
        assert rows_of(batches, segment, "walk_mark") == without(batch_dicts(segment))
        # Each range is a walk of its own: its first and last batch are marked, in file order.
        marks = [
            r["walk_mark"] for r in sorted(batches, key=itemgetter("position")) if r["file"] == str(segment)
        ]
        edges = [bit for m in marks for bit in (WALK_FIRST, WALK_LAST) if m & bit]
        assert edges == [WALK_FIRST, WALK_LAST] * len(ranges), segment
    assert rows_of(quarantine, tampered) == without(error_dicts(tampered))
    mismatches = [r for r in quarantine if r["kind"] == "INDEX_MISMATCH"]
    assert {(r["file"], r["position"]) for r in mismatches} == {
        (str(index), stale.entry_position),
        (str(index), overwritten.entry_position),
    }


# ---------------------------------------------------------------------------------------------
# Usage errors: one line, exit status 2, before Spark starts


def test_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["ingest", "--input", str(tmp_path / "nope"), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file or directory" in err


def test_a_file_that_is_not_a_kafka_artifact_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    assert cli_main(["ingest", "--input", str(other), "--output", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.startswith("replay-audit: ")


def test_an_acks_ledger_without_offsets_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "acks.csv"
    ledger.write_text("topic,partition\nfoo,0\n")
    argv = ["ingest", "--input", str(SMALL), "--acks", str(ledger), "--output", str(tmp_path / "o")]
    assert cli_main(argv) == 2
    assert "lacks column(s) offset" in capsys.readouterr().err


def test_planning_lists_files_without_decoding_segments() -> None:
    plan = plan_ingest(IngestOptions(inputs=[LabeledPath(None, str(SMALL))], output="unused"))
    kinds = {u.kind for u in plan.units}
    assert dt.LOG in kinds and dt.SNAPSHOT in kinds and dt.OFFSET_CHECKPOINT in kinds
    assert plan.pairs == {("codecrafters-kraft-3x", "1")}


# ---------------------------------------------------------------------------------------------
# Real broker data: two log directories standing for two replicas, and DumpLogSegments text


def two_replicas(log_dir: Path, root: Path) -> tuple[Path, Path]:
    """Copies of the broker's log dir as replicas 1 and 2 (a second `node.id` in meta.properties)."""
    a, b = root / "broker-a", root / "broker-b"
    shutil.copytree(log_dir, a)
    shutil.copytree(log_dir, b)
    meta = b / "meta.properties"
    lines = [
        line for line in meta.read_text().splitlines() if not line.startswith(("node.id=", "broker.id="))
    ]
    meta.write_text("\n".join([*lines, "node.id=2"]) + "\n")
    a_meta = a / "meta.properties"
    lines = [
        line for line in a_meta.read_text().splitlines() if not line.startswith(("node.id=", "broker.id="))
    ]
    a_meta.write_text("\n".join([*lines, "node.id=1"]) + "\n")
    return a, b


def test_real_broker_replicas_and_dump_log_text_give_the_decoders_rows(
    spark: Any, broker_dump: Any, tmp_path: Path
) -> None:
    from kafka_harness.dump_log_segments import run_dump_log_segments

    replicas = tmp_path / "replicas"
    a, b = two_replicas(broker_dump.log_dir, replicas)
    segments = sorted(p for p in a.glob("*-[0-9]*/*.log") if not p.parent.name.startswith("__"))
    assert segments
    text = tmp_path / "dump.txt"
    text.write_text(run_dump_log_segments(segments, deep_iteration=True))
    # The tool run inside one partition directory (`--files 00000000000000000000.log`): its `Dumping`
    # lines name no partition; the text, saved as `<topic>-<partition>.txt`, names it.
    one = sorted(p for p in segments if p.parent == segments[0].parent)
    inside = tmp_path / f"{one[0].parent.name}.txt"
    inside_text = run_dump_log_segments(one, deep_iteration=True)
    for segment in one:
        inside_text = inside_text.replace(f"Dumping {segment}\n", f"Dumping {segment.name}\n")
    assert f"Dumping {one[0].name}\n" in inside_text
    inside.write_text(inside_text)
    # A text whose first file names its partition and whose second does not: that one is left out, and
    # quarantine says so.
    full = run_dump_log_segments(one[:1], deep_iteration=True)
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(full + full.replace(f"Dumping {one[0]}\n", f"Dumping {one[0].name}\n"))
    out = tmp_path / "out"
    ingest(
        spark, out, f"broker={replicas}", f"text={text}", f"inside={inside}", f"mixed={mixed}", records=True
    )
    batches, records = read(out, "batches"), read(out, "records")
    assert {r["file"] for r in batches if r["dump_id"] == "mixed"} == {str(one[0])}
    (left_out,) = [r for r in read(out, "quarantine") if r["dump_id"] == "mixed"]
    assert (left_out["kind"], left_out["file"]) == ("UNREADABLE_FILE", one[0].name)
    assert "lies in no <topic>-<partition> directory" in left_out["message"]
    topic, partition = one[0].parent.name.rsplit("-", 1)
    for segment in one:
        binary = rows_of((r for r in batches if r["dump_id"] == "broker"), segment, "base_timestamp", "file")
        beside = [r for r in batches if r["dump_id"] == "inside" and r["file"] == segment.name]
        assert beside and {(r["topic"], r["partition"]) for r in beside} == {(topic, int(partition))}
        assert without(beside, *PROVENANCE, "base_timestamp", "file") == binary, segment

    for segment in segments:
        binary = rows_of((r for r in batches if r["dump_id"] == "broker"), segment)
        assert without(binary, "walk_mark") == without(batch_dicts(segment)), segment
        twin = Path(str(segment).replace(str(a), str(b)))
        assert without(rows_of(batches, twin), "file") == without(binary, "file")
        # The text carries every batch field but the base timestamp; its walk of each file marks the
        # batches as the binary walk does.
        from_text = rows_of((r for r in batches if r["dump_id"] == "text"), segment)
        assert without(from_text, "base_timestamp") == without(binary, "base_timestamp"), segment
        record_fields = ("key", "value", "header_values")
        text_records = rows_of((r for r in records if r["dump_id"] == "text"), segment, *record_fields)
        binary_records = rows_of((r for r in records if r["dump_id"] == "broker"), segment, *record_fields)
        assert text_records == binary_records, segment
    assert {r["replica"] for r in batches if r["dump_id"] == "broker"} == {"1", "2"}
    assert not [r for r in read(out, "quarantine") if r["kind"] != "UNREADABLE_FILE"]


def test_kraft_snapshots_dumped_as_text_give_no_batch_rows_as_their_files_give_none(
    spark: Any, tmp_path: Path
) -> None:
    """`kafka-dump-log.sh --files` over a `__cluster_metadata-0` directory's segment and its KRaft
    snapshots (`<end offset>-<epoch>.checkpoint`, which the tool reads as snapshots): the snapshots'
    batches restart at offset 0 and are no part of the log. The text gives the rows the directory gives:
    its segment's batches, and none of the snapshots'."""
    from kafka_harness.dump_log_segments import run_dump_log_segments

    partition = REAL_FIXTURES / "induswargods-kraft" / "__cluster_metadata-0"
    snapshots = sorted(partition.glob("*.checkpoint"))
    segments = sorted(partition.glob("*.log"))
    assert len(snapshots) >= 2 and segments
    text = tmp_path / "dump.txt"
    text.write_text(run_dump_log_segments([*segments, *snapshots], deep_iteration=True))
    assert text.read_text().count("Snapshot end offset:") == len(snapshots)
    out = tmp_path / "out"
    ingest(spark, out, f"text={text}", f"dir={partition}")
    batches = read(out, "batches")
    assert {r["file"] for r in batches if r["dump_id"] == "text"} == {str(s) for s in segments}
    for segment in segments:
        from_dir = rows_of((r for r in batches if r["dump_id"] == "dir"), segment)
        from_text = rows_of((r for r in batches if r["dump_id"] == "text"), segment)
        assert from_dir and without(from_text, "base_timestamp") == without(from_dir, "base_timestamp")
    assert not [r for r in read(out, "quarantine") if r["dump_id"] == "text"]


def test_a_ledger_labelled_as_a_dump_an_earlier_run_wrote_is_a_usage_error(
    spark: Any, tmp_path: Path
) -> None:
    """Day 1 ingests a partition directory as dump `d`; day 2 a ledger labelled `d`. A ledger's rows
    replace its label's rows in every table, so day 2 would wipe dump d's batches: a usage error, the
    output untouched. Labelled apart, the ledger is added beside the dump."""
    import pytest

    from jobs.ingest import UsageError

    out = tmp_path / "out"
    ingest(spark, out, f"d={SMALL / 'foo-0'}")
    before = contents(out)
    assert [r for r in before["batches"] if r["dump_id"] == "d"]
    ledger = tmp_path / "acks.jsonl"
    ledger.write_text('{"topic": "foo", "partition": 0, "offset": 1}\n')
    with pytest.raises(UsageError, match=r"--acks label\(s\) 'd' are dump ids this output already holds"):
        ingest(spark, out, acks=[f"d={ledger}"])
    assert contents(out) == before
    ingest(spark, out, acks=[f"day2={ledger}"])
    after = contents(out)
    assert after["batches"] == before["batches"] and [r["dump_id"] for r in after["acks"]] == ["day2"]
    # The other way: an input labelled as the earlier ledger would wipe its acks. The ledger itself may
    # come again under its label.
    with pytest.raises(UsageError, match=r"input label\(s\) 'day2' are an earlier --acks ledger's label"):
        ingest(spark, out, f"day2={SMALL / 'foo-0'}")
    ingest(spark, out, acks=[f"day2={ledger}"])
    assert contents(out) == after


def test_an_unlabelled_input_does_not_replace_a_dump_of_its_name_read_from_elsewhere(
    spark: Any, tmp_path: Path
) -> None:
    """`/b1/foo-0`, then `/b2/foo-0` (two brokers' copies of one partition, no label): both are dump
    `foo-0`, and the second ingest wiped the first's rows without a word. It is a usage error until the
    input is labelled; the same directory again, or a label, is not."""
    from jobs.ingest import UsageError

    for broker in ("b1", "b2"):
        shutil.copytree(SMALL / "foo-0", tmp_path / broker / "foo-0")
    out = tmp_path / "out"
    ingest(spark, out, tmp_path / "b1" / "foo-0")
    ingest(spark, out, tmp_path / "b1" / "foo-0")
    with pytest.raises(UsageError, match=r"earlier ingest read dump 'foo-0' from elsewhere .*/b1/foo-0/"):
        ingest(spark, out, tmp_path / "b2" / "foo-0")
    assert {r["file"].split("/")[-3] for r in read(out, "files")} == {"b1"}
    ingest(spark, out, f"b2={tmp_path / 'b2' / 'foo-0'}")
    ingest(spark, out, f"foo-0={tmp_path / 'b2' / 'foo-0'}")
    assert {(r["dump_id"], r["file"].split("/")[-3]) for r in read(out, "files")} == {
        ("b2", "b2"),
        ("foo-0", "b2"),
    }


def test_an_unlabelled_ledger_does_not_replace_the_acks_of_its_name_read_from_elsewhere(
    spark: Any, tmp_path: Path
) -> None:
    """`--acks /mon/acks.jsonl`, then `--acks /tue/acks.jsonl` (no label): both are dump `acks.jsonl`,
    and the second ingest wiped Monday's acks without a word, where two such inputs are refused."""
    from jobs.ingest import UsageError

    ledgers = {}
    for day, offset in (("mon", 1), ("tue", 2)):
        (tmp_path / day).mkdir()
        ledgers[day] = tmp_path / day / "acks.jsonl"
        ledgers[day].write_text(f'{{"topic": "foo", "partition": 0, "offset": {offset}}}\n')
    out = tmp_path / "out"
    ingest(spark, out, acks=[str(ledgers["mon"])])
    ingest(spark, out, acks=[str(ledgers["mon"])])
    with pytest.raises(
        UsageError, match=r"read dump 'acks\.jsonl' from elsewhere .*/mon/acks\.jsonl\).*--acks NAME"
    ):
        ingest(spark, out, acks=[str(ledgers["tue"])])
    assert [(r["dump_id"], r["offset"]) for r in read(out, "acks")] == [("acks.jsonl", 1)]
    ingest(spark, out, acks=[f"tue={ledgers['tue']}"])
    assert sorted((r["dump_id"], r["offset"]) for r in read(out, "acks")) == [("acks.jsonl", 1), ("tue", 2)]
