"""`replay-audit run` and `replay-audit audit` end to end on the bundled real-broker sample: tables,
reports, validations, exit statuses and re-runs (contract §2)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from jobs.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "broker-4.3.1"
ACKS = REPO / "samples" / "broker-4.3.1.acks.jsonl"


def rows(out: Path, table: str) -> list[dict[str, Any]]:
    return sorted(DeltaTable(str(out / table)).to_pyarrow_table().to_pylist(), key=repr)


@pytest.fixture(scope="module")
def sample_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("cli") / "out"
    status = main(
        ["run", "--input", f"sample={SAMPLE}", "--acks", str(ACKS), "--records", "--output", str(out)]
    )
    return out, status


def test_the_clean_sample_exits_0_with_only_epoch_bumps(sample_run: tuple[Path, int]) -> None:
    out, status = sample_run
    assert status == 0
    report = json.loads((out / "report" / "findings.json").read_text())
    assert report["valid"] is True
    assert report["counts"] == {"EPOCH_BUMP": 2}
    assert [f["kind"] for f in report["findings"]] == ["EPOCH_BUMP", "EPOCH_BUMP"]
    assert set(report["findings"][0]) >= {"finding_id", "explained_by", "rule", "message", "related_offset"}


def test_every_output_of_the_contract_is_written(sample_run: tuple[Path, int]) -> None:
    out, _ = sample_run
    for table in (
        "files",
        "batches",
        "records",
        "acks",
        "sequence_history",
        "findings",
        "partition_summary",
        "runs",
    ):
        assert (out / table / "_delta_log").is_dir(), table
    html = (out / "report" / "index.html").read_text()
    assert "EPOCH_BUMP" in html and "https://" not in html
    gx = json.loads((out / "report" / "gx" / "summary.json").read_text())
    assert gx["success"] is True, gx
    assert "validations: all 3 suites met" in html and 'href="gx/data_docs/index.html"' in html
    history = rows(out, "sequence_history")
    assert {r["transition"] for r in history} >= {"FIRST", "IN_SEQUENCE", "EPOCH_START", "MARKER"}
    summary = rows(out, "partition_summary")
    assert {r["verdict"] for r in summary} <= {"clean", "info"}
    assert len(rows(out, "runs")) == 1
    # Each table's Delta history says which job wrote it: the audit wrote `runs`, not an ingest.
    for table, job in (("batches", "ingest"), ("findings", "audit"), ("runs", "audit")):
        commits = [
            json.loads(line) for f in sorted((out / table / "_delta_log").glob("*.json")) for line in f.open()
        ]
        said = {
            c["commitInfo"].get("userMetadata", "").rsplit(" ", 1)[0] for c in commits if "commitInfo" in c
        }
        assert said == {f"replay-audit {job} run"}, (table, said)


def test_an_audit_that_fails_leaves_no_report_and_the_next_gives_the_same_rows_and_report(
    sample_run: tuple[Path, int], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """An audit that fails (a `run` whose ingest changed the tables, then whose audit failed) leaves no
    `report/` of the earlier tables to be read as this run's verdict: the earlier reports wait in
    `report.previous/`, and the next audit that ends writes `report/` and removes them. That audit of
    the same tables gives the same rows, findings.json and run id as the first (contract §3), and no
    earlier run's validations beside its verdict (`--no-gx`)."""
    from jobs import audit as audit_job
    from jobs import report

    out = tmp_path / "out"
    shutil.copytree(sample_run[0], out)  # before the tests below audit the fixture's output again
    earlier = (out / "report" / "findings.json").read_bytes()
    before = {t: rows(out, t) for t in ("sequence_history", "findings", "partition_summary")}
    run_ids = [r["run_id"] for r in rows(out, "runs")]

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("failed on purpose")

    # The rules fail at once (any failure after the audit began; an early one costs no whole audit).
    monkeypatch.setattr(audit_job, "audit", fails)
    assert main(["audit", "--output", str(out), "--no-gx"]) == 3
    assert "audit failed: RuntimeError: failed on purpose" in capsys.readouterr().err
    assert not (out / "report").exists()
    assert (out / "report.previous" / "findings.json").read_bytes() == earlier
    # A failure while the reports are written leaves no half of them under report/ either.
    monkeypatch.undo()
    monkeypatch.setattr(report, "write_html_report", fails)
    assert main(["audit", "--output", str(out), "--no-gx"]) == 3
    assert not (out / "report").exists() and not (out / "report.partial").exists()
    assert (out / "report.previous" / "findings.json").read_bytes() == earlier
    monkeypatch.undo()
    assert main(["audit", "--output", str(out), "--no-gx"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("report")) == ["report"]
    assert (out / "report" / "findings.json").read_bytes() == earlier
    assert {t: rows(out, t) for t in before} == before
    assert [r["run_id"] for r in rows(out, "runs")] == run_ids
    assert not (out / "report" / "gx").exists()
    assert "validations: skipped" in (out / "report" / "index.html").read_text()


def test_the_same_files_ingested_without_records_are_another_run_id(
    sample_run: tuple[Path, int], tmp_path: Path
) -> None:
    # Contract §3 (same input, same ids): records feed rules of their own, so headers-only is another input.
    out, _ = sample_run
    headers = tmp_path / "out"
    given = ["--input", f"sample={SAMPLE}", "--acks", str(ACKS), "--no-gx"]
    assert main(["run", *given, "--output", str(headers)]) == 0
    assert rows(headers, "records") == []
    assert [r["run_id"] for r in rows(headers, "runs")] != [r["run_id"] for r in rows(out, "runs")]


def test_fail_on_info_turns_the_epoch_bumps_into_exit_1_and_a_failed_validation_leaves_it(
    sample_run: tuple[Path, int], monkeypatch: Any, capsys: Any
) -> None:
    """`--fail-on info` makes the sample's two EPOCH_BUMPs exit 1 (without it the same tables exit 0:
    the fixture's run). The validations guard the tables the verdict is built on: a suite that fails
    (here one the audit's real validations are asked to run on a findings table without its `kind`
    column) is named on stderr and at the top of index.html, and the exit status stays the findings'
    (contract §2)."""
    from jobs import gx_checks

    out, _ = sample_run
    real = gx_checks.run_gx_validations

    def without_kind(tables: Any, out_dir: str) -> Any:
        return real({**tables, "findings": tables["findings"].drop("kind")}, out_dir)

    monkeypatch.setattr(gx_checks, "run_gx_validations", without_kind)
    assert main(["audit", "--output", str(out), "--fail-on", "info"]) == 1
    assert json.loads((out / "report" / "findings.json").read_text())["valid"] is False
    err = capsys.readouterr().err
    assert "Great Expectations suite(s) failed or did not run: findings (" in err
    assert err.rstrip().endswith("/report/gx/summary.json)")
    html = (out / "report" / "index.html").read_text()
    assert "validations failed</strong> for findings:" in html
    assert json.loads((out / "report" / "gx" / "summary.json").read_text())["failed_suites"] == ["findings"]


def test_corrupt_bytes_are_findings_and_exit_1(spark: Any, tmp_path: Path) -> None:
    part = tmp_path / "dump" / "codec-gzip-0"
    shutil.copytree(SAMPLE / "codec-gzip-0", part)
    segment = part / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-10] ^= 0xFF  # inside the last batch's records: its CRC no longer matches
    segment.write_bytes(bytes(data))
    out = tmp_path / "out"
    assert main(["run", "--input", f"bad={tmp_path / 'dump'}", "--output", str(out)]) == 1
    kinds = json.loads((out / "report" / "findings.json").read_text())["counts"]
    assert kinds.get("CRC_MISMATCH") == 1, kinds
    # The damaged batch is a finding, not a defect of the tables: one in nine batches failing its CRC
    # passes the validations (a share of 99% did not).
    assert json.loads((out / "report" / "gx" / "summary.json").read_text())["failed_suites"] == []


def test_usage_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--output", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ingest" in err
    assert main(["audit", "--output", str(tmp_path), "--profile", "kafka-9"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown profile" in err and "kafka-3.4" in err
    assert main(["audit", "--output", str(tmp_path), "--app-producer", "header:x"]) == 2
    assert "go together" in capsys.readouterr().err


def test_an_app_sequence_audit_of_an_output_ingested_without_records_is_a_usage_error(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The extractor implies --records (contract §1): `run` turns it on; after a headers-only ingest the
    audit says so instead of running without the app-sequence rules."""
    out = tmp_path / "out"
    assert main(["ingest", "--input", str(SAMPLE / "codec-gzip-0"), "--output", str(out)]) == 0
    capsys.readouterr()
    app = ["--app-producer", "header:producer", "--app-sequence", "header:seq"]
    assert main(["audit", "--output", str(out), *app, "--no-gx"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--records" in err and str(out) in err
    assert not (out / "findings").exists()
    # A dump ingested with --records beside it does not hide it: its app sequences would go unchecked.
    given = ["--input", f"full={SAMPLE / 'codec-gzip-0'}", "--records", "--output", str(out)]
    assert main(["ingest", *given]) == 0
    capsys.readouterr()
    assert main(["audit", "--output", str(out), *app, "--no-gx"]) == 2
    err = capsys.readouterr().err
    assert "dump(s) codec-gzip-0 were ingested without --records" in err, err
    assert not (out / "findings").exists()


def test_captured_at_orders_dumps_whose_copies_reset_their_mtimes(spark: Any, tmp_path: Path) -> None:
    """Two dumps of codec-gzip-0: `earlier` taken after its first 20 records were written, `later` after
    all 60, with the ledger of all 60. Copied off the broker in the wrong order, `earlier`'s files are
    the newer: dated by mtimes it is the newest dump, and the acks it cannot hold look lost. Given
    their capture times, the acks are judged against `later`, which holds them all."""
    for dump in ("earlier", "later"):
        shutil.copytree(SAMPLE / "codec-gzip-0", tmp_path / dump / "codec-gzip-0")
    earlier = tmp_path / "earlier" / "codec-gzip-0"
    for stale in (*earlier.glob("*.index"), *earlier.glob("*.timeindex"), *earlier.glob("*.snapshot")):
        stale.unlink()  # what the broker had at offset 20: no snapshot at 60, indexes rebuilt on load
    with open(earlier / "00000000000000000000.log", "r+b") as segment:
        segment.truncate(648)  # the first three batches: offsets 0-19
    ledger = tmp_path / "acks.jsonl"
    gzip_acks = [line for line in ACKS.read_text().splitlines() if '"codec-gzip"' in line]
    ledger.write_text("".join(line + "\n" for line in gzip_acks))
    copied_at = time.time()
    for dump, age_s in (("later", 3600), ("earlier", 0)):
        for file in (tmp_path / dump).rglob("*"):
            os.utime(file, (copied_at - age_s, copied_at - age_s))
    inputs = ["--input", f"earlier={earlier}", "--input", f"later={tmp_path / 'later' / 'codec-gzip-0'}"]
    common = [*inputs, "--acks", str(ledger), "--no-gx"]

    by_mtime = tmp_path / "by-mtime"
    assert main(["run", *common, "--output", str(by_mtime)]) == 1
    findings = json.loads((by_mtime / "report" / "findings.json").read_text())["findings"]
    missing = [(f["kind"], f["dump_id"], f["first_offset"], f["last_offset"]) for f in findings]
    assert missing == [("ACKED_RECORD_MISSING", "earlier", 20, 59)], findings  # the 40 acks past its end

    given = tmp_path / "given"
    taken = {"earlier": 1795426200000, "later": 1795429800000}  # 2026-11-23 09:30 and 10:30 UTC
    dated = [a for dump, ms in taken.items() for a in ("--captured-at", f"{dump}={ms}")]
    assert main(["run", *common, *dated, "--output", str(given)]) == 0
    report = json.loads((given / "report" / "findings.json").read_text())
    assert not {k for k in report["counts"] if k.startswith("ACKED_RECORD")}, report["counts"]
    summary = {r["dump_id"]: r["capture_time_ms"] for r in rows(given, "partition_summary")}
    assert summary == taken


def tables_in(spark: Any, schema: str) -> set[str]:
    return {r["tableName"] for r in spark.sql(f"SHOW TABLES IN {schema}").collect()}


def test_catalog_schema_registers_every_table_where_it_was_written(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--catalog-schema` (contract §2, a catalog/schema on Databricks): every Delta table of the output is
    also an external table of the schema, at its path; registering again changes nothing; a schema that
    does not exist, or a table registered elsewhere, is a usage error."""
    schema = "kra_catalog_test"
    spark.sql(f"CREATE DATABASE {schema} LOCATION '{tmp_path / 'warehouse'}'")
    try:
        out = tmp_path / "out"
        run = ["run", "--input", str(SAMPLE / "codec-gzip-0"), "--output", str(out), "--no-gx"]
        assert main([*run, "--catalog-schema", schema]) == 0
        written = {d.name for d in out.iterdir() if (d / "_delta_log").is_dir()}
        assert {"batches", "files", "sequence_history", "findings", "runs"} <= written
        assert tables_in(spark, schema) == written
        for name in ("batches", "runs"):
            assert spark.table(f"{schema}.{name}").count() == len(rows(out, name)) > 0, name
        capsys.readouterr()
        assert main(["audit", "--output", str(out), "--no-gx", "--catalog-schema", schema]) == 0
        assert f"registered\t{schema}.findings" in capsys.readouterr().out
        assert tables_in(spark, schema) == written

        assert main(["audit", "--output", str(out), "--no-gx", "--catalog-schema", "kra_no_such_schema"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "kra_no_such_schema: no such schema" in err
        # A name with `-` (Unity Catalog takes it; Spark's parser only quoted) was a ParseException, exit 3.
        assert main(["audit", "--output", str(out), "--no-gx", "--catalog-schema", "kra-no-such"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "kra-no-such: no such schema" in err
        other = tmp_path / "other"
        assert main(["run", *run[1:3], "--output", str(other), "--no-gx", "--catalog-schema", schema]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"registered at file:{out}/" in err and str(other) in err
        # A view of one of the names: DESCRIBE DETAIL refuses it, which was a traceback and exit 3.
        views = "kra_catalog_views"
        spark.sql(f"CREATE DATABASE {views} LOCATION '{tmp_path / 'views'}'")
        try:
            spark.sql(f"CREATE VIEW {views}.runs AS SELECT 1 AS x")
            assert main(["audit", "--output", str(out), "--no-gx", "--catalog-schema", views]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "runs is a view" in err, err
        finally:
            spark.sql(f"DROP DATABASE {views} CASCADE")
    finally:
        spark.sql(f"DROP DATABASE {schema} CASCADE")
