"""The publishing stage: the gold tables -> `report/findings.json` and `report/index.html` (contract §2).

Spark does the sorting, counting and per-kind capping; the driver only streams the sorted findings
into the JSON file and renders a bounded `ReportModel` into HTML. Neither output holds a timestamp,
so the same findings give byte-identical files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jinja2

from audit_rules.kinds import KINDS, Severity
from schemas.tables import FINDINGS, PARTITION_SUMMARY

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from jobs.gx_checks import GxSummary

# Contract §2: findings are sorted by topic, partition, first_offset, kind; finding_id breaks ties.
FINDING_ORDER = ("topic", "partition", "first_offset", "kind", "finding_id")
SEVERITIES = tuple(sorted(Severity, reverse=True))  # critical first
VERDICTS = (*(s.label for s in SEVERITIES), "clean")
PARTITION_ORDER = ("dump_id", "replica", "topic", "partition")
DEFAULT_MAX_ROWS_PER_KIND = 200
DEFAULT_MAX_PARTITION_ROWS = 2000
TEMPLATE = "report.html.j2"


@dataclass(frozen=True)
class KindSection:
    """The findings of one kind shown in the HTML report: at most the cap, and how many there are."""

    kind: str
    severity: str
    category: str
    total: int
    rows: tuple[Mapping[str, Any], ...]

    @property
    def omitted(self) -> int:
        return self.total - len(self.rows)


@dataclass(frozen=True)
class ReportModel:
    """Everything `index.html` shows, already bounded in size: the input of `render_html`."""

    run_id: str
    valid: bool
    profile_name: str
    # (severity, kind) -> number of findings
    counts: Mapping[tuple[str, str], int]
    partitions: tuple[Mapping[str, Any], ...]
    partitions_total: int
    partitions_by_verdict: Mapping[str, int]
    sections: tuple[KindSection, ...]
    max_rows_per_kind: int
    # The severity `valid` was judged at (`--fail-on`).
    fail_on: str = "error"
    # The findings the partition summary counts (its severity columns summed): the others name no
    # partition log (a log directory's checkpoint or meta.properties, a directory with no live segment).
    findings_in_partitions: int | None = None
    # The Great Expectations validations of the tables (`report/gx/`); None when skipped (`--no-gx`).
    gx: GxSummary | None = None

    @property
    def gx_docs_href(self) -> str | None:
        """GX's Data Docs page relative to `index.html`, when they were built."""
        from jobs.gx_checks import DATA_DOCS_DIR, GX_DIR

        if self.gx is None or self.gx.data_docs_index is None:
            return None
        return f"{GX_DIR}/{DATA_DOCS_DIR}/index.html"

    @property
    def findings_outside_partitions(self) -> int:
        if self.findings_in_partitions is None:
            return 0
        return max(self.total_findings - self.findings_in_partitions, 0)

    @property
    def worst_severity(self) -> str | None:
        """The most severe label with at least one finding, or None for no findings."""
        present = {sev for (sev, _), n in self.counts.items() if n > 0}
        return next((s.label for s in SEVERITIES if s.label in present), None)

    @property
    def counts_by_severity(self) -> dict[str, int]:
        totals = {s.label: 0 for s in SEVERITIES}
        for (sev, _), n in self.counts.items():
            totals[sev] = totals.get(sev, 0) + n
        return totals

    @property
    def total_findings(self) -> int:
        return sum(self.counts.values())

    @property
    def partition_verdicts(self) -> list[tuple[str, int]]:
        """(verdict, partitions) worst first; a verdict outside the contract's set goes last."""
        order = {v: i for i, v in enumerate(VERDICTS)}
        return sorted(
            self.partitions_by_verdict.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])
        )

    @property
    def sections_by_severity(self) -> list[tuple[str, list[KindSection]]]:
        """The kind sections grouped under their severity, in the order of `sections` (critical first)."""
        groups: dict[str, list[KindSection]] = {}
        for section in self.sections:
            groups.setdefault(section.severity, []).append(section)
        return list(groups.items())


# ---------------------------------------------------------------------------------------------
# findings.json


def write_findings_json(
    findings: DataFrame,
    *,
    run_id: str,
    valid: bool,
    path: str,
    per_kind: Mapping[tuple[str, str], int] | None = None,
    fail_on: str | None = None,
) -> dict[str, int]:
    """Write contract §2's `findings.json` at `path`, streaming the sorted findings; return counts by kind.

    One finding per line, fields in contract §3 order; written to a temporary file and renamed.
    `per_kind`: the findings' `finding_counts`, when the caller has them already. `fail_on`: the severity
    `valid` was judged at, written beside it (a key beyond the contract's) when given.
    """
    counts = counts_by_kind(finding_counts(findings) if per_kind is None else per_kind)
    # The driver holds one sorted partition at a time: as many as keep each under FINDINGS_PER_PARTITION.
    parts = max(1, -(-sum(counts.values()) // FINDINGS_PER_PARTITION))
    rows = sorted_findings(findings, parts).toLocalIterator(prefetchPartitions=False)
    chunks = findings_json_chunks(run_id, valid, counts, (r.asDict() for r in rows), fail_on=fail_on)
    _write_atomically(path, chunks)
    return counts


def findings_json_chunks(
    run_id: str,
    valid: bool,
    counts: Mapping[str, int],
    findings: Iterable[Mapping[str, Any]],
    *,
    fail_on: str | None = None,
) -> Iterator[str]:
    """The text of `findings.json` in pieces, one finding at a time, so no list of findings is ever built."""
    yield "{\n"
    yield f'  "run_id": {_json(run_id)},\n'
    yield f'  "valid": {_json(valid)},\n'
    if fail_on is not None:
        yield f'  "fail_on": {_json(fail_on)},\n'
    yield f'  "counts": {_json(dict(sorted(counts.items())))},\n'
    yield '  "findings": ['
    empty = True
    for finding in findings:
        yield ("\n    " if empty else ",\n    ") + _json(
            {name: finding.get(name) for name in FINDINGS.columns}
        )
        empty = False
    yield "]\n}\n" if empty else "\n  ]\n}\n"


def _json(value: Any) -> str:
    # Non-ASCII stays readable (topic names, messages); NaN cannot occur in FINDINGS and is refused.
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


# Findings per sorted partition `findings.json` streams to the driver (`toLocalIterator` collects a
# whole partition at a time): a few tens of MB of rows, however many findings a run has.
FINDINGS_PER_PARTITION = 100_000


def sorted_findings(findings: DataFrame, partitions: int | None = None) -> DataFrame:
    """The findings in contract §3 columns and contract §2 order (nulls first, ids breaking ties), in
    `partitions` ranges of that order (else the session's shuffle partitions)."""
    from pyspark.sql import functions as F

    order = [F.col(c).asc_nulls_first() for c in FINDING_ORDER]
    rows = findings.select(*FINDINGS.columns)
    if partitions is None:
        return rows.orderBy(*order)
    return rows.repartitionByRange(partitions, *order).sortWithinPartitions(*order)


def finding_counts(findings: DataFrame) -> dict[tuple[str, str], int]:
    """(severity, kind) -> number of findings, in one Spark aggregation."""
    from pyspark.sql import functions as F

    rows = findings.groupBy("severity", "kind").agg(F.count(F.lit(1)).alias("n")).collect()
    return {(r["severity"], r["kind"]): int(r["n"]) for r in rows}


def counts_by_kind(counts: Mapping[tuple[str, str], int]) -> dict[str, int]:
    """Contract §2's `counts`: kind -> number of findings, sorted by kind."""
    totals: dict[str, int] = {}
    for (_, kind), n in counts.items():
        totals[kind] = totals.get(kind, 0) + n
    return dict(sorted(totals.items()))


def _write_atomically(path: str, chunks: Iterable[str]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as out:
            out.writelines(chunks)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ---------------------------------------------------------------------------------------------
# index.html


def write_html_report(
    findings: DataFrame,
    summary: DataFrame,
    *,
    run_id: str,
    valid: bool,
    profile_name: str,
    path: str,
    max_rows_per_kind: int = DEFAULT_MAX_ROWS_PER_KIND,
    max_partition_rows: int = DEFAULT_MAX_PARTITION_ROWS,
    per_kind: Mapping[tuple[str, str], int] | None = None,
    fail_on: str = "error",
    gx: GxSummary | None = None,
) -> ReportModel:
    """Write the self-contained `index.html` at `path` and return the model it was rendered from.

    At most `max_rows_per_kind` findings per kind and `max_partition_rows` partitions (worst first) are
    shown. `per_kind`: the findings' `finding_counts`, when the caller has them already. `gx`: the
    validations' outcome, shown beside the verdict (None: they were skipped).
    """
    counts = finding_counts(findings) if per_kind is None else dict(per_kind)
    by_verdict, in_partitions = _partitions_by_verdict(summary)
    model = ReportModel(
        run_id=run_id,
        valid=valid,
        profile_name=profile_name,
        counts=counts,
        partitions=tuple(_partition_rows(summary, max_partition_rows)),
        partitions_total=sum(by_verdict.values()),
        partitions_by_verdict=by_verdict,
        sections=kind_sections(counts, _capped_findings(findings, max_rows_per_kind)),
        max_rows_per_kind=max_rows_per_kind,
        fail_on=fail_on,
        findings_in_partitions=in_partitions,
        gx=gx,
    )
    _write_atomically(path, [render_html(model)])
    return model


def kind_sections(
    counts: Mapping[tuple[str, str], int], shown: Iterable[Mapping[str, Any]]
) -> tuple[KindSection, ...]:
    """Group the shown findings by (severity, kind): critical first, kinds in contract §4 order."""
    rows: dict[tuple[str, str], list[Mapping[str, Any]]] = {key: [] for key in counts}
    for row in shown:
        rows.setdefault((row["severity"], row["kind"]), []).append(row)
    sections = [
        KindSection(
            kind=kind,
            severity=severity,
            category=_category_of(kind, group),
            total=max(counts.get((severity, kind), 0), len(group)),
            rows=tuple(group),
        )
        for (severity, kind), group in rows.items()
    ]
    return tuple(sorted(sections, key=lambda s: (_severity_rank(s.severity), _kind_rank(s.kind), s.kind)))


def _category_of(kind: str, rows: list[Mapping[str, Any]]) -> str:
    if rows:
        return str(rows[0]["category"])
    return KINDS[kind].category if kind in KINDS else ""


def _severity_rank(label: str) -> int:
    """0 for critical ... 3 for info; anything else (not a contract severity) after them."""
    labels = [s.label for s in SEVERITIES]
    return labels.index(label) if label in labels else len(labels)


def _kind_rank(kind: str) -> int:
    names = list(KINDS)
    return names.index(kind) if kind in names else len(names)


def _capped_findings(findings: DataFrame, cap: int) -> list[dict[str, Any]]:
    """The first `cap` findings of each (severity, kind) in contract order; only these reach the driver."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.col(c).asc_nulls_first() for c in FINDING_ORDER]
    ranked = findings.select(
        *FINDINGS.columns,
        F.row_number().over(Window.partitionBy("severity", "kind").orderBy(*order)).alias("_n"),
    )
    capped = ranked.where(F.col("_n") <= cap).drop("_n").orderBy(*order)
    return [r.asDict() for r in capped.collect()]


def _partitions_by_verdict(summary: DataFrame) -> tuple[dict[str, int], int]:
    """Partition logs per verdict, and the findings they count in all."""
    from pyspark.sql import functions as F

    counted = F.col(SEVERITIES[0].label)
    for severity in SEVERITIES[1:]:
        counted = counted + F.col(severity.label)
    rows = summary.groupBy("verdict").agg(F.count(F.lit(1)).alias("n"), F.sum(counted).alias("f")).collect()
    return {r["verdict"]: int(r["n"]) for r in rows}, sum(int(r["f"] or 0) for r in rows)


def _partition_rows(summary: DataFrame, limit: int) -> list[dict[str, Any]]:
    """The partition summary rows, worst verdict first, at most `limit` of them."""
    from pyspark.sql import functions as F

    rank: Column = F.lit(len(VERDICTS))
    for i, verdict in reversed(list(enumerate(VERDICTS))):
        rank = F.when(F.col("verdict") == verdict, F.lit(i)).otherwise(rank)
    ordered = summary.select(*PARTITION_SUMMARY.columns).orderBy(
        rank, *[F.col(c).asc_nulls_first() for c in PARTITION_ORDER]
    )
    return [r.asDict() for r in ordered.limit(limit).collect()]


def render_html(model: ReportModel) -> str:
    """The report page for `model`: one HTML file, inline CSS, no scripts, every value escaped."""
    return _environment().get_template(TEMPLATE).render(m=model, finding_fields=FINDINGS.columns)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("jobs", "templates"),
        # Topic names, messages and dump labels are user data: every value is escaped.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["value"] = _display_value
    # A CSS class from a severity or verdict: never user text inside a class attribute.
    env.filters["sev_class"] = lambda label: label if label in VERDICTS else "other"
    return env


def _display_value(value: Any) -> str:
    """A value as shown in the report: a dash for null, numbers without separators (offsets stay copyable)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
