"""The report writers without Spark: `findings.json` text and the HTML page rendered from a ReportModel."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from jobs.report import (
    ReportModel,
    counts_by_kind,
    findings_json_chunks,
    kind_sections,
    render_html,
)
from schemas.tables import FINDINGS
from tests.table_rows import finding, partition_summary

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_TOPIC = "<script>alert('topic')</script>"


def findings_json(findings: list[dict[str, Any]], *, valid: bool = False) -> str:
    counts = counts_by_kind({(f["severity"], f["kind"]): 1 for f in findings})
    return "".join(findings_json_chunks("run-1", valid, counts, findings))


def model(
    findings: Iterable[Mapping[str, Any]] = (),
    *,
    counts: Mapping[tuple[str, str], int] | None = None,
    valid: bool = False,
    partitions: tuple[dict[str, Any], ...] = (),
    partitions_total: int | None = None,
    cap: int = 50,
) -> ReportModel:
    rows = list(findings)
    if counts is None:
        totals: dict[tuple[str, str], int] = {}
        for f in rows:
            totals[(f["severity"], f["kind"])] = totals.get((f["severity"], f["kind"]), 0) + 1
        counts = totals
    verdicts: dict[str, int] = {}
    for p in partitions:
        verdicts[p["verdict"]] = verdicts.get(p["verdict"], 0) + 1
    return ReportModel(
        run_id="run-1",
        valid=valid,
        profile_name="kafka-3.4",
        counts=counts,
        partitions=partitions,
        partitions_total=len(partitions) if partitions_total is None else partitions_total,
        partitions_by_verdict=verdicts,
        sections=kind_sections(counts, rows),
        max_rows_per_kind=cap,
    )


def articles(html: str) -> list[str]:
    return re.findall(r"<article .*?</article>", html, flags=re.S)


# ---------------------------------------------------------------------------------------------
# findings.json


def test_findings_json_has_the_contract_keys_and_exactly_the_section3_fields_in_order() -> None:
    doc = json.loads(findings_json([finding("SEQUENCE_GAP"), finding("EPOCH_BUMP", first_offset=20)]))
    assert list(doc) == ["run_id", "valid", "counts", "findings"]
    assert doc["run_id"] == "run-1" and doc["valid"] is False
    assert [list(f) for f in doc["findings"]] == [FINDINGS.columns, FINDINGS.columns]
    assert doc["findings"][1]["kind"] == "EPOCH_BUMP" and doc["findings"][1]["first_offset"] == 20


def test_findings_json_says_which_fail_on_severity_valid_was_judged_at() -> None:
    """`valid` means "no finding reached --fail-on": the threshold is written beside it (an extra key)."""
    counts = counts_by_kind({("error", "SEQUENCE_GAP"): 1})
    text = "".join(findings_json_chunks("run-1", True, counts, [finding()], fail_on="critical"))
    doc = json.loads(text)
    assert list(doc) == ["run_id", "valid", "fail_on", "counts", "findings"] and doc["fail_on"] == "critical"


def test_the_banner_names_the_fail_on_severity_and_findings_outside_the_partition_table() -> None:
    """A checkpoint's UNREADABLE_FILE names no partition: the verdict counts it, the partition table
    cannot, and the report says so instead of a table of clean rows under a NOT VALID banner."""
    rows = [finding("UNREADABLE_FILE", severity="warning", topic=None, partition=None)]
    base = replace(
        model(rows, partitions=(partition_summary(),)), fail_on="warning", findings_in_partitions=0
    )
    page = render_html(base)
    assert "not valid at <code>--fail-on warning</code>" in page
    assert "1 finding names no partition log" in page
    assert "names no partition log" not in render_html(replace(base, findings_in_partitions=1))
    assert "valid at <code>--fail-on error</code>" in render_html(replace(base, valid=True, fail_on="error"))


def test_findings_json_puts_one_finding_per_line() -> None:
    text = findings_json([finding(first_offset=n) for n in range(3)])
    lines = [line for line in text.splitlines() if line.lstrip().startswith('{"finding_id"')]
    assert len(lines) == 3
    assert all(json.loads(line.strip().rstrip(","))["kind"] == "SEQUENCE_GAP" for line in lines)


def test_findings_json_without_findings_is_an_empty_list() -> None:
    doc = json.loads(findings_json([], valid=True))
    assert doc == {"run_id": "run-1", "valid": True, "counts": {}, "findings": []}


def test_findings_json_keeps_user_text_exact() -> None:
    topic = 'zahlungen-ü "quoted" \\ <b>'
    doc = json.loads(findings_json([finding(topic=topic, message="line1\nline2")]))
    assert doc["findings"][0]["topic"] == topic
    assert doc["findings"][0]["message"] == "line1\nline2"


def test_counts_by_kind_adds_up_severities_and_sorts_by_kind() -> None:
    counts = counts_by_kind(
        {("error", "SEQUENCE_GAP"): 2, ("critical", "SEQUENCE_GAP"): 3, ("info", "EPOCH_BUMP"): 1}
    )
    assert list(counts.items()) == [("EPOCH_BUMP", 1), ("SEQUENCE_GAP", 5)]


# ---------------------------------------------------------------------------------------------
# kind sections


def test_sections_put_critical_first_and_kinds_in_contract_order() -> None:
    rows = [
        finding("EPOCH_BUMP"),
        finding("DUPLICATE_BATCH"),
        finding("REPLICA_DIVERGENCE"),
        finding("SEQUENCE_GAP"),
    ]
    sections = kind_sections({(r["severity"], r["kind"]): 1 for r in rows}, rows)
    assert [s.kind for s in sections] == [
        "SEQUENCE_GAP",
        "REPLICA_DIVERGENCE",
        "DUPLICATE_BATCH",
        "EPOCH_BUMP",
    ]


def test_a_kind_with_more_findings_than_shown_counts_the_omitted() -> None:
    (section,) = kind_sections({("critical", "SEQUENCE_GAP"): 9}, [finding(first_offset=n) for n in range(3)])
    assert (section.total, len(section.rows), section.omitted) == (9, 3, 6)


# ---------------------------------------------------------------------------------------------
# index.html


def test_report_loads_nothing_from_the_network() -> None:
    html = render_html(model([finding()], partitions=(partition_summary(),)))
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, flags=re.I)
    assert not re.search(r"<(script|link|iframe|img|object|embed)\b", html, flags=re.I)
    assert "@import" not in html and "url(" not in html
    assert "<style>" in html  # the CSS is inline


def test_topic_names_and_messages_are_html_escaped() -> None:
    hostile = finding(topic=HOSTILE_TOPIC, message="lost <b>records</b> & more", dump_id='"><img src=x>')
    html = render_html(
        model([hostile], partitions=(partition_summary(topic=HOSTILE_TOPIC, verdict="critical"),))
    )
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#39;topic&#39;)&lt;/script&gt;" in html
    assert "lost &lt;b&gt;records&lt;/b&gt; &amp; more" in html
    assert "<img" not in html


def test_verdict_and_worst_severity_come_first() -> None:
    html = render_html(model([finding("EPOCH_BUMP"), finding("SEQUENCE_GAP")]))
    header = html[: html.index("</header>")]
    assert "NOT VALID" in header
    assert "Worst severity: <strong>critical</strong>" in header


def test_a_valid_run_without_findings_says_so() -> None:
    html = render_html(model([], valid=True, partitions=(partition_summary(),)))
    header = html[: html.index("</header>")]
    assert ">VALID<" in header and "NOT VALID" not in html
    assert "No findings." in header
    assert articles(html) == []


def test_findings_are_grouped_by_severity_critical_first() -> None:
    html = render_html(model([finding("EPOCH_BUMP"), finding("DUPLICATE_BATCH"), finding("SEQUENCE_GAP")]))
    positions = [html.index(f'id="sev-{s}"') for s in ("critical", "error", "info")]
    assert positions == sorted(positions)
    assert html.index('id="kind-critical-SEQUENCE_GAP"') < html.index('id="kind-info-EPOCH_BUMP"')


def test_every_section3_field_of_a_finding_is_shown_with_message_and_rule_prominent() -> None:
    row = finding("DUPLICATE_BATCH", related_offset=4, base_sequence=5, last_sequence=7, expected_sequence=8)
    (article,) = articles(render_html(model([row])))
    shown = set(re.findall(r"<dt>(\w+)</dt>", article))
    assert shown | {"message", "rule"} == set(FINDINGS.columns)
    assert re.search(r'<p class="message">DUPLICATE_BATCH at offset 10</p>', article)
    assert f'<p class="rule">Rule: {row["rule"]}</p>' in article
    assert "<dt>related_offset</dt><dd>4</dd>" in article
    assert "<dt>explained_by</dt><dd>—</dd>" in article  # null shown as a dash


def test_counts_by_severity_and_kind_are_tabulated() -> None:
    html = render_html(model([], counts={("critical", "SEQUENCE_GAP"): 4, ("info", "EPOCH_BUMP"): 2}))
    counts = html[html.index('id="counts"') : html.index('id="partitions"')]
    assert re.search(r"critical</span></td><td class=\"num\">4<", counts)
    assert re.search(r"warning</span></td><td class=\"num\">0<", counts)
    assert re.search(r"SEQUENCE_GAP</code></a></td>\s*<td>loss</td>\s*<td class=\"num\">4<", counts)


def test_a_capped_kind_says_how_many_are_omitted_and_where_they_are() -> None:
    shown = [finding(first_offset=n) for n in range(2)]
    html = render_html(model(shown, counts={("critical", "SEQUENCE_GAP"): 7}, cap=2))
    assert len(articles(html)) == 2
    note = re.search(r'<p class="omitted">(.*?)</p>', html, flags=re.S)
    assert note is not None
    assert "5 more <code>SEQUENCE_GAP</code> findings not shown" in note.group(1)
    assert "at most 2 per kind" in note.group(1)
    assert 'href="findings.json"' in note.group(1) and "<code>findings</code>" in note.group(1)


def test_partition_table_shows_log_bounds_producers_and_verdict() -> None:
    row = partition_summary(
        3, log_start_offset=1200, log_end_offset=98765, high_watermark=98760, batches=321, producers=17,
        verdict="critical", critical=2,
    )  # fmt: skip
    html = render_html(model([], partitions=(row,), partitions_total=5))
    table = html[html.index('id="partitions"') : html.index('id="findings"')]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table, flags=re.S)
    assert cells[:5] == ['<span class="sev sev-critical">critical</span>', "d1", "1", "orders", "3"]
    assert cells[5].startswith("1200") and "(checkpoint)" in cells[5]
    assert cells[6:11] == ["98765", "98760", "321", "100", "17"]
    assert "4 more partition logs are not shown" in table


def test_same_model_renders_the_same_bytes() -> None:
    rows = [finding("SEQUENCE_GAP"), finding("EPOCH_BUMP")]
    assert render_html(model(rows)) == render_html(model(rows))


def test_kind_section_for_unknown_severity_is_still_shown() -> None:
    html = render_html(model([finding("SEQUENCE_GAP", severity="fatal")]))
    assert len(articles(html)) == 1
    assert 'class="finding finding-other"' in html


def test_the_template_and_every_data_file_ship_in_the_wheel(tmp_path: Path) -> None:
    """The wheel a cluster installs (`make wheel`) holds the page's template, the profiles, the
    harness's Maven and Java files and the rules' document; setuptools says nothing of data folders
    it may drop (a folder it finds importable but not listed in `packages`). Built from a copy of the
    repository's tracked files: a `build/` left in the checkout would ship its stale files too."""
    import shutil
    import subprocess
    import sys
    import zipfile

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    source = tmp_path / "src"
    for name in tracked.stdout.splitlines():
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    dist = tmp_path / "dist"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            ".",
        ],
        cwd=source,
        capture_output=True,
        text=True,
    )
    output = build.stdout + build.stderr
    assert build.returncode == 0, output[-4000:]
    assert "absent from the `packages` configuration" not in output, output[-4000:]
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    profiles = {f"conf/profiles/{p.name}" for p in (ROOT / "conf" / "profiles").glob("*.yaml")}
    assert len(profiles) >= 6 and profiles <= names
    assert {
        "jobs/templates/report.html.j2",
        "kafka_harness/java/TransactionalProducer.java",
        "kafka_harness/pom.xml",
        "conf/spark-submit.sh",
        "audit_rules/RULES.md",
    } <= names


def test_the_page_shows_the_great_expectations_outcome_beside_the_verdict() -> None:
    """A failed suite guards the tables the verdict is built on: the page says so at the top and lists
    its failed expectations (values escaped); skipped validations are named as skipped."""
    from jobs.gx_checks import ExpectationFailure, GxSummary, SuiteOutcome

    met = SuiteOutcome("batches", True, 12, 12, 0, (), "/r/gx/batches.json")
    failure = ExpectationFailure(
        "expect_column_values_to_not_be_null(kind)", "every finding has a kind", 2, (HOSTILE_TOPIC,), None
    )
    failed = SuiteOutcome("findings", False, 9, 8, 1, (failure,), "/r/gx/findings.json")
    broken = SuiteOutcome("partition_summary", False, 0, 0, 0, (), None, "AnalysisException: no column")
    base = model([finding()])
    assert "validations: skipped (<code>--no-gx</code>)" in render_html(base)
    assert 'href="#validations"' not in render_html(base)
    good = render_html(replace(base, gx=GxSummary((met,), "/r/gx/data_docs/index.html")))
    assert "validations: all 1 suites met" in good and 'href="gx/data_docs/index.html"' in good
    page = render_html(replace(base, gx=GxSummary((met, failed, broken), None, "not built: OSError")))
    assert "validations failed</strong> for findings, partition_summary" in page
    section = page[page.index('<section id="validations">') :]
    assert "expect_column_values_to_not_be_null(kind)</code>: every finding has a kind" in section
    assert "2 unexpected, e.g. &lt;script&gt;" in section and HOSTILE_TOPIC not in page
    assert "not run: AnalysisException: no column" in section and "Data Docs: not built: OSError" in section
    assert "data_docs/index.html" not in page
