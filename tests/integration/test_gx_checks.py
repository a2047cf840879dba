"""GX suites on Spark DataFrames: clean tables pass; each defect fails the expectation named for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from audit_rules.kinds import KINDS
from jobs import gx_checks
from jobs.gx_checks import SUITES, GxSummary, run_gx_validations
from schemas.tables import BATCHES, FINDINGS, PARTITION_SUMMARY, TableSpec
from tests.table_rows import batch, finding, partition_summary

pytestmark = pytest.mark.integration


def frame(spark: SparkSession, spec: TableSpec, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame([tuple(r[c] for c in spec.columns) for r in rows], spec.schema)


def clean_tables(spark: SparkSession) -> dict[str, DataFrame]:
    findings = [finding(kind, first_offset=i) for i, kind in enumerate(KINDS)]  # every registry kind once
    findings.append(
        finding(
            "HISTORY_TRUNCATED_BY_RETENTION", first_offset=None, last_offset=None, explained_by="retention"
        )
    )
    batches = [
        batch(0),
        batch(3),
        # A legacy (magic 1) entry: no producer, epoch -1, outside the epoch range check.
        batch(6, magic=1, producer_id=-1, producer_epoch=-1, base_sequence=-1, last_sequence=-1),
        batch(0, replica="2"),
        # A batch that fails its CRC (a CRC_MISMATCH finding) with its header bytes damaged: outside the
        # range checks, and one such batch in a small dump does not fail the CRC check.
        batch(9, crc_valid=False, producer_epoch=-32768, last_offset=-2147483641),
    ]
    summary = [
        partition_summary(0),
        partition_summary(1, verdict="critical", critical=1),
        partition_summary(0, replica="2"),
    ]
    return {
        "batches": frame(spark, BATCHES, batches),
        "findings": frame(spark, FINDINGS, findings),
        "partition_summary": frame(spark, PARTITION_SUMMARY, summary),
    }


def bad_tables(spark: SparkSession) -> dict[str, DataFrame]:
    findings = [
        finding("SEQUENCE_GAP", finding_id="same"),
        finding("EPOCH_BUMP", finding_id="same", first_offset=20, last_offset=20),
        finding("NOT_A_KIND", severity="critical", category="loss", first_offset=30),
        finding("DUPLICATE_BATCH", severity="warning", first_offset=40),
        # Loss counted as explained (contract: explained is never counted as loss), a negative partition,
        # a count of no missing records.
        finding("ACKED_RECORD_MISSING", first_offset=50, explained_by="retention"),
        finding("SEQUENCE_GAP", first_offset=60, partition=-1, missing_records=0),
    ]
    batches = [
        batch(0),
        batch(0),  # the same (dump_id, replica, file, position) twice
        batch(3, producer_epoch=-1),  # a producer id without an epoch
        batch(6, last_offset=5),  # last offset below base offset
        # Most batches failing their CRC: the decoder's CRC, more likely than the disk.
        *[batch(100 + i, crc_valid=False) for i in range(5)],
    ]
    summary = [
        partition_summary(0, verdict="fine"),
        partition_summary(1, log_start_offset=500, log_end_offset=100),
        # Verdicts their counts contradict: clean with criticals, error with a critical, warning with none.
        partition_summary(2, critical=3),
        partition_summary(3, verdict="error", critical=1, error=1),
        partition_summary(4, verdict="warning"),
    ]
    return {
        "batches": frame(spark, BATCHES, batches),
        "findings": frame(spark, FINDINGS, findings),
        "partition_summary": frame(spark, PARTITION_SUMMARY, summary),
    }


@pytest.fixture(scope="module")
def clean(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[GxSummary, Path]:
    out = tmp_path_factory.mktemp("gx-clean")
    return run_gx_validations(clean_tables(spark), str(out)), out


@pytest.fixture(scope="module")
def bad(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[GxSummary, Path]:
    out = tmp_path_factory.mktemp("gx-bad")
    return run_gx_validations(bad_tables(spark), str(out)), out


def test_clean_tables_pass_every_expectation_of_every_suite(clean: tuple[GxSummary, Path]) -> None:
    summary, _ = clean
    assert summary.success and summary.failed_suites == ()
    assert [s.suite for s in summary.suites] == list(SUITES)
    for outcome in summary.suites:
        assert outcome.error is None
        assert outcome.evaluated == outcome.successful == len(SUITES[outcome.suite]())
        assert outcome.failures == ()


def test_results_are_one_json_file_per_suite_with_fixed_names(clean: tuple[GxSummary, Path]) -> None:
    _, out = clean
    assert sorted(p.name for p in out.glob("*.json")) == [
        "batches.json", "findings.json", "partition_summary.json", "summary.json",
    ]  # fmt: skip
    findings = json.loads((out / "findings.json").read_text())
    assert findings["success"] is True and findings["suite_name"] == "findings"
    assert len(findings["results"]) == len(SUITES["findings"]())
    written = json.loads((out / "summary.json").read_text())
    assert written["success"] is True and written["failed_suites"] == []
    assert [s["suite"] for s in written["suites"]] == list(SUITES)
    assert written["suites"][0]["result_file"] == "batches.json"
    assert written["data_docs_index"] == "data_docs/index.html"


def test_data_docs_are_built_into_the_report_directory(clean: tuple[GxSummary, Path]) -> None:
    summary, out = clean
    assert summary.data_docs_index == str(out / "data_docs" / "index.html")
    assert (out / "data_docs" / "index.html").is_file()
    pages = {p.parent.parent.parent.name for p in (out / "data_docs" / "validations").rglob("*.html")}
    assert pages == set(SUITES)


def test_unknown_kind_wrong_severity_and_duplicate_id_fail_the_named_expectations(
    bad: tuple[GxSummary, Path],
) -> None:
    summary, _ = bad
    findings = summary.suite("findings")
    assert not findings.success and "findings" in summary.failed_suites
    assert set(findings.failed_expectations) == {
        "expect_column_values_to_be_unique(finding_id)",
        "expect_column_values_to_be_in_set(kind)",
        # The unknown kind has no registry severity or category either.
        "expect_column_pair_values_to_be_in_set(kind, severity)",
        "expect_column_pair_values_to_be_in_set(kind, category)",
        "expect_column_values_to_be_in_set(severity)",
        "expect_column_values_to_be_between(partition)",
        "expect_column_values_to_be_between(missing_records)",
    }
    by_name = {f.name: f for f in findings.failures}
    assert by_name["expect_column_values_to_be_unique(finding_id)"].unexpected_sample == ('"same"', '"same"')
    assert by_name["expect_column_values_to_be_in_set(kind)"].unexpected_sample == ('"NOT_A_KIND"',)
    severity = by_name["expect_column_pair_values_to_be_in_set(kind, severity)"]
    assert severity.unexpected_count == 2
    assert set(severity.unexpected_sample) == {'["DUPLICATE_BATCH", "warning"]', '["NOT_A_KIND", "critical"]'}


def test_bad_batches_fail_epoch_range_offset_order_crc_and_natural_key(bad: tuple[GxSummary, Path]) -> None:
    summary, _ = bad
    assert set(summary.suite("batches").failed_expectations) == {
        "expect_column_values_to_be_between(producer_epoch)",
        "expect_column_values_to_be_in_set(crc_valid)",
        "expect_column_pair_values_a_to_be_greater_than_b(last_offset, base_offset)",
        "expect_compound_columns_to_be_unique(dump_id, replica, file, position)",
    }


def test_bad_partition_summary_fails_verdict_and_log_bounds(bad: tuple[GxSummary, Path]) -> None:
    summary, out = bad
    outcome = summary.suite("partition_summary")
    assert set(outcome.failed_expectations) == {
        "expect_column_values_to_be_in_set(verdict)",
        "expect_column_pair_values_a_to_be_greater_than_b(log_end_offset, log_start_offset)",
        "expect_column_values_to_be_in_set(critical)",
        "expect_column_values_to_be_between(warning)",
    }
    # Each contradiction fails the expectation of its own verdict.
    assert sorted(f.description for f in outcome.failures if f.description.startswith("the verdict")) == [
        "the verdict clean counts no critical finding",
        "the verdict error counts no critical finding",
        "the verdict warning counts a warning finding",
    ]
    written = json.loads((out / "summary.json").read_text())
    assert written["success"] is False
    assert written["failed_suites"] == ["batches", "findings", "partition_summary"]


def test_a_suite_that_cannot_run_is_reported_not_raised(spark: SparkSession, tmp_path: Path) -> None:
    rows = [finding()]
    without_message = frame(spark, FINDINGS, rows).drop("message", "severity")
    summary = run_gx_validations({"findings": without_message}, str(tmp_path))
    outcome = summary.suite("findings")
    assert not summary.success and summary.failed_suites == ("findings",)
    missing = {f.name for f in outcome.failures if f.exception}
    assert "expect_column_values_to_not_be_null(message)" in missing
    assert "expect_column_pair_values_to_be_in_set(kind, severity)" in missing
    assert json.loads((tmp_path / "summary.json").read_text())["failed_suites"] == ["findings"]


def test_a_suite_that_crashes_is_reported_and_the_others_still_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_suite() -> list[Any]:
        raise RuntimeError("suite definition failed\nsecond line")

    monkeypatch.setitem(SUITES, "findings", broken_suite)
    tables = clean_tables(spark)
    summary = run_gx_validations(
        {"findings": tables["findings"], "partition_summary": tables["partition_summary"]}, str(tmp_path)
    )
    assert summary.failed_suites == ("findings",)
    assert summary.suite("findings").error == "RuntimeError: suite definition failed"
    assert summary.suite("partition_summary").success
    assert (tmp_path / "partition_summary.json").is_file() and not (tmp_path / "findings.json").exists()


def test_gx_failing_to_start_is_reported_for_every_suite(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_context(docs_dir: str) -> Any:
        raise ImportError("great_expectations is broken")

    # An earlier run's passing results in the same folder: gone, not left beside this run's failure.
    for name in SUITES:
        (tmp_path / f"{name}.json").write_text('{"success": true}\n')
    monkeypatch.setattr(gx_checks, "_context", no_context)
    summary = run_gx_validations(clean_tables(spark), str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".json") == ["summary.json"]
    assert summary.failed_suites == tuple(SUITES)
    assert {s.error for s in summary.suites} == {"ImportError: great_expectations is broken"}
    assert summary.data_docs_index is None and summary.data_docs_error is not None
    assert json.loads((tmp_path / "summary.json").read_text())["success"] is False


def test_validation_keeps_the_session_and_releases_its_cache(
    spark: SparkSession, clean: tuple[GxSummary, Path]
) -> None:
    tables = clean_tables(spark)
    run_gx_validations({"partition_summary": tables["partition_summary"]}, str(clean[1] / "again"))
    assert SparkSession.getActiveSession() is spark
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert not tables["partition_summary"].is_cached


def test_a_table_without_a_suite_is_a_usage_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no Great Expectations suite for table"):
        run_gx_validations({"records": spark.range(1)}, str(tmp_path))
