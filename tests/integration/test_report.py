"""The report writers over Spark DataFrames: sorted, streamed, reproducible `findings.json`; a capped page."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from jobs.report import write_findings_json, write_html_report
from schemas.tables import FINDINGS, PARTITION_SUMMARY
from tests.table_rows import finding, partition_summary

pytestmark = pytest.mark.integration


def findings_frame(spark: SparkSession, rows: list[dict[str, Any]], partitions: int = 3) -> DataFrame:
    return spark.createDataFrame(
        [tuple(r[c] for c in FINDINGS.columns) for r in rows], FINDINGS.schema
    ).repartition(partitions)


def summary_frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(
        [tuple(r[c] for c in PARTITION_SUMMARY.columns) for r in rows], PARTITION_SUMMARY.schema
    )


def mixed_findings() -> list[dict[str, Any]]:
    """Findings over two topics and several partitions, with ties on offset and a finding without a topic."""
    rows = [
        finding("SEQUENCE_GAP", topic="payments", partition=1, first_offset=500),
        finding("DUPLICATE_BATCH", topic="orders", partition=2, first_offset=40),
        finding("EPOCH_BUMP", topic="orders", partition=2, first_offset=40),
        finding("SEQUENCE_GAP", topic="orders", partition=10, first_offset=7),
        finding("SEQUENCE_GAP", topic="orders", partition=2, first_offset=3),
        finding("UNREADABLE_FILE", topic=None, partition=None, first_offset=None, finding_id="file-1"),
        finding("SEQUENCE_REGRESSION", topic="orders", partition=2, first_offset=40, finding_id="b"),
        finding("SEQUENCE_REGRESSION", topic="orders", partition=2, first_offset=40, finding_id="a"),
        *[finding("EPOCH_BUMP", topic="payments", partition=0, first_offset=n) for n in range(0, 300, 10)],
    ]
    random.Random(7).shuffle(rows)
    return rows


def contract_order(rows: list[dict[str, Any]]) -> list[str]:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(
            (r[c] is not None, r[c]) for c in ("topic", "partition", "first_offset", "kind", "finding_id")
        )

    return [r["finding_id"] for r in sorted(rows, key=key)]


def test_findings_json_is_sorted_by_topic_partition_first_offset_kind(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = mixed_findings()
    path = tmp_path / "findings.json"
    counts = write_findings_json(findings_frame(spark, rows), run_id="r1", valid=False, path=str(path))
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert [f["finding_id"] for f in doc["findings"]] == contract_order(rows)
    assert doc["findings"][0]["kind"] == "UNREADABLE_FILE"  # no topic: first
    expected = {"DUPLICATE_BATCH": 1, "EPOCH_BUMP": 31, "SEQUENCE_GAP": 3, "SEQUENCE_REGRESSION": 2}
    assert doc["counts"] == counts == {**expected, "UNREADABLE_FILE": 1}
    assert all(list(f) == FINDINGS.columns for f in doc["findings"])


def test_findings_json_streams_the_findings_in_ranges_of_bounded_size(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver holds one sorted partition at a time (`toLocalIterator`): the sort cuts the findings
    into ranges of about FINDINGS_PER_PARTITION each, not the session's few shuffle partitions, and the
    file keeps the contract's order across them."""
    from jobs import report

    rows = mixed_findings()
    whole = tmp_path / "whole.json"
    write_findings_json(findings_frame(spark, rows), run_id="r1", valid=True, path=str(whole))
    monkeypatch.setattr(report, "FINDINGS_PER_PARTITION", 10)
    ranges: list[int] = []
    original = report.sorted_findings

    def sorted_in(findings: DataFrame, partitions: int | None = None) -> DataFrame:
        out = original(findings, partitions)
        ranges.append(out.rdd.getNumPartitions())
        return out

    monkeypatch.setattr(report, "sorted_findings", sorted_in)
    cut = tmp_path / "cut.json"
    write_findings_json(findings_frame(spark, rows), run_id="r1", valid=True, path=str(cut))
    assert ranges == [-(-len(rows) // 10)]
    assert cut.read_bytes() == whole.read_bytes()
    assert [f["finding_id"] for f in json.loads(cut.read_text())["findings"]] == contract_order(rows)


def test_findings_json_is_byte_identical_whatever_the_input_partitioning(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = mixed_findings()
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_findings_json(findings_frame(spark, rows, 4), run_id="r1", valid=True, path=str(first))
    write_findings_json(findings_frame(spark, rows[::-1], 1), run_id="r1", valid=True, path=str(second))
    assert first.read_bytes() == second.read_bytes()


def test_findings_json_never_collects_the_findings(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = findings_frame(spark, [finding("EPOCH_BUMP", first_offset=n) for n in range(400)])
    collected: list[int] = []
    frame_class = type(frame)  # the classic (or Connect) implementation, not the pyspark.sql.DataFrame facade
    original = frame_class.collect

    def counting_collect(self: DataFrame) -> list[Any]:
        result = original(self)
        collected.append(len(result))
        return result

    monkeypatch.setattr(frame_class, "collect", counting_collect)
    path = tmp_path / "findings.json"
    write_findings_json(frame, run_id="r1", valid=True, path=str(path))
    assert len(json.loads(path.read_text())["findings"]) == 400
    assert collected and max(collected) == 1  # only the (severity, kind) counts reached the driver whole


def test_html_report_caps_each_kind_and_shows_the_worst_partitions_first(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = [
        *[finding("SEQUENCE_GAP", first_offset=n, topic="<script>x</script>") for n in range(7)],
        finding("EPOCH_BUMP"),
    ]
    summary = [
        partition_summary(0),
        partition_summary(1, verdict="info", info=1),
        partition_summary(0, topic="<script>x</script>", verdict="critical", critical=7),
    ]
    path = tmp_path / "index.html"
    model = write_html_report(
        findings_frame(spark, rows),
        summary_frame(spark, summary),
        run_id="r1",
        valid=False,
        profile_name="kafka-3.4",
        path=str(path),
        max_rows_per_kind=3,
    )
    html = path.read_text(encoding="utf-8")
    gap = next(s for s in model.sections if s.kind == "SEQUENCE_GAP")
    assert [r["first_offset"] for r in gap.rows] == [0, 1, 2]  # the first three in contract order
    assert "4 more <code>SEQUENCE_GAP</code> findings not shown" in html
    assert len(re.findall(r"<article ", html)) == 4
    assert [p["verdict"] for p in model.partitions] == ["critical", "info", "clean"]
    assert model.partitions_total == 3 and model.worst_severity == "critical"
    assert "<script" not in html and "&lt;script&gt;x&lt;/script&gt;" in html


def test_html_report_of_the_same_tables_is_byte_identical(spark: SparkSession, tmp_path: Path) -> None:
    rows = mixed_findings()
    summary = summary_frame(spark, [partition_summary(p) for p in range(3)])
    pages = []
    for name, frame in (
        ("a.html", findings_frame(spark, rows, 4)),
        ("b.html", findings_frame(spark, rows[::-1], 1)),
    ):
        write_html_report(
            frame, summary, run_id="r1", valid=False, profile_name="p", path=str(tmp_path / name)
        )
        pages.append((tmp_path / name).read_bytes())
    assert pages[0] == pages[1]
