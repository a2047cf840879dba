"""Great Expectations 1.x validations of the bronze and gold tables (contract §2 `report/gx/`).

One ephemeral GX context per run: a Spark data source over the DataFrames the audit already holds
(GX reuses the active session; it is given no `spark_config`, which could make it restart the
session and drop Delta's settings, ecosystem.md §2.2), one expectation suite per table, the
results as JSON and GX's Data Docs site as an extra. A failing validation is reported, never raised:
the audit's verdict comes from its findings; these checks guard the tables the verdict is built on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from audit_rules.kinds import EXPLAINED_BY, KINDS, Kind, Severity
from schemas.tables import BATCHES, LOG_KEY

if TYPE_CHECKING:
    import great_expectations.expectations as gxe
    from great_expectations.data_context import EphemeralDataContext
    from great_expectations.datasource.fluent import SparkDatasource
    from pyspark.sql import DataFrame

# GX 1.24.1 bundles no telemetry client; the switch is still honoured, so keep it off explicitly.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

log = logging.getLogger(__name__)

CATEGORIES = (
    "loss",
    "duplicate",
    "ordering",
    "fencing",
    "transaction",
    "corruption",
    "consistency",
    "retention",
)
SEVERITY_LABELS = tuple(s.label for s in Severity)
VERDICTS = (*SEVERITY_LABELS, "clean")
# KIP-98: the producer epoch is an int16; -1 (NO_PRODUCER_EPOCH) only without a producer id.
MAX_PRODUCER_EPOCH = 32767
# A CRC mismatch is a finding (CRC_MISMATCH), not a table defect: the check is of the decoder, whose
# wrong CRC would fail every batch; a small dump with one damaged batch passes it, as a tie or an empty
# table does.
CRC_VALID_MOSTLY = 0.5
DATASOURCE = "replay_audit"
DOCS_SITE = "replay_audit"
GX_DIR = "gx"  # under `report/`
DATA_DOCS_DIR = "data_docs"
SUMMARY_FILE = "summary.json"
# How many unexpected values of a failed expectation GxSummary keeps (GX's own JSON keeps 20).
SAMPLE_SIZE = 5


@dataclass(frozen=True)
class ExpectationFailure:
    """One failed expectation: its name (`type(columns)`), what it checks, and a few offending values."""

    name: str
    description: str
    unexpected_count: int | None
    unexpected_sample: tuple[str, ...]
    exception: str | None


@dataclass(frozen=True)
class SuiteOutcome:
    """The result of one table's suite; `error` is set when GX could not run it at all."""

    suite: str
    success: bool
    evaluated: int
    successful: int
    unsuccessful: int
    failures: tuple[ExpectationFailure, ...]
    result_file: str | None
    error: str | None = None

    @property
    def failed_expectations(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.failures)


@dataclass(frozen=True)
class GxSummary:
    """Every suite's outcome, and where GX's Data Docs were written (or why they were not)."""

    suites: tuple[SuiteOutcome, ...]
    data_docs_index: str | None
    data_docs_error: str | None = None

    @property
    def success(self) -> bool:
        return all(s.success for s in self.suites)

    @property
    def failed_suites(self) -> tuple[str, ...]:
        return tuple(s.suite for s in self.suites if not s.success)

    def suite(self, name: str) -> SuiteOutcome:
        return next(s for s in self.suites if s.suite == name)

    def to_json_dict(self) -> dict[str, Any]:
        return {"success": self.success, "failed_suites": list(self.failed_suites), **asdict(self)}


# ---------------------------------------------------------------------------------------------
# The suites: one per table, each expectation with a description an operator can read in Data Docs.


def _not_below(
    column_a: str, column_b: str, description: str, *, skip_nulls: bool = False, row_condition: Any = None
) -> gxe.Expectation:
    """`column_a >= column_b` on every row (of `row_condition`); with `skip_nulls`, rows where either is
    null are not checked (otherwise only rows where both are)."""
    import great_expectations.expectations as gxe

    return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A=column_a,
        column_B=column_b,
        or_equal=True,
        ignore_row_if="either_value_is_missing" if skip_nulls else "both_values_are_missing",
        row_condition=row_condition,
        description=description,
    )


def _kind_attribute(
    column: str, values: Sequence[str], of_kind: Callable[[Kind], str]
) -> list[gxe.Expectation]:
    """`column` takes one of `values` (contract §3), and the one the registry gives each finding's kind."""
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectColumnValuesToBeInSet(
            column=column, value_set=list(values), description=f"{column} is one of contract §3"
        ),
        gxe.ExpectColumnPairValuesToBeInSet(
            column_A="kind",
            column_B=column,
            value_pairs_set=[(k.name, of_kind(k)) for k in KINDS.values()],
            description=f"{column} is the one the registry gives the kind",
        ),
    ]


def batches_suite() -> list[gxe.Expectation]:
    """Bronze `batches`: header fields within the protocol's ranges, one row per batch position.

    A batch that fails its CRC is a finding (CRC_MISMATCH), and its header fields past the CRC (epoch,
    last offset delta) are whatever the damaged bytes hold: the ranges are checked on the batches whose
    CRC holds. The decoder's CRC is checked by at least half the batches passing it (one that computed
    it wrongly would fail them all), not by a share that a small dump with one damaged batch falls
    below."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    crc_holds = Column("crc_valid") == True  # noqa: E712 (a GX row condition, not a Python comparison)
    return [
        gxe.ExpectColumnValuesToBeBetween(
            column="producer_epoch",
            min_value=0,
            max_value=MAX_PRODUCER_EPOCH,
            row_condition=(Column("producer_id") >= 0) & crc_holds,
            description="a batch with a producer id whose CRC holds has an epoch in 0..32767 (KIP-98)",
        ),
        gxe.ExpectColumnValuesToBeInSet(
            column="crc_valid",
            value_set=[True],
            mostly=CRC_VALID_MOSTLY,
            description="at least half the batches pass their CRC (a mismatch is a finding, CRC_MISMATCH)",
        ),
        _not_below(
            "last_offset",
            "base_offset",
            "a batch whose CRC holds has a last offset not below its base offset",
            row_condition=crc_holds,
        ),
        # The base offset is not under the CRC (`DefaultRecordBatch`: it covers attributes onwards).
        gxe.ExpectColumnValuesToBeBetween(
            column="base_offset", min_value=0, description="offsets are not negative"
        ),
        gxe.ExpectCompoundColumnsToBeUnique(
            column_list=list(BATCHES.natural_key),
            description="one row per (dump_id, replica, file, position): the table's natural key",
        ),
    ]


def findings_suite() -> list[gxe.Expectation]:
    """Gold `findings`: every row a contract §3 finding whose kind, severity and category agree with §4,
    an explained one not counted as loss, its evidence within range."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    required = ("finding_id", "kind", "severity", "category", "rule", "message")
    return [
        *[
            gxe.ExpectColumnValuesToNotBeNull(column=c, description=f"every finding has a {c}")
            for c in required
        ],
        gxe.ExpectColumnValuesToBeUnique(
            column="finding_id", description="finding ids are unique (a hash of kind and evidence)"
        ),
        gxe.ExpectColumnValuesToBeInSet(
            column="kind",
            value_set=sorted(KINDS),
            description="kind is one of contract §4 (audit_rules.kinds)",
        ),
        *_kind_attribute("severity", SEVERITY_LABELS, lambda k: k.severity.label),
        *_kind_attribute("category", CATEGORIES, lambda k: k.category),
        gxe.ExpectColumnValuesToBeInSet(
            column="explained_by", value_set=list(EXPLAINED_BY), description="explained_by is null or of §3"
        ),
        # Contract §3-§4: what a finding is explained by is "never counted as loss" (critical: data lost).
        gxe.ExpectColumnValuesToBeInSet(
            column="severity",
            value_set=[s.label for s in Severity if s is not Severity.CRITICAL],
            row_condition=Column("explained_by").is_not_null(),
            description="an explained finding is not critical (explained is never counted as loss)",
        ),
        _not_below(
            "last_offset", "first_offset", "a finding's offset range is not reversed", skip_nulls=True
        ),
        # (Not its offsets: a finding reports what a corrupt file holds, a garbage index entry's too.)
        gxe.ExpectColumnValuesToBeBetween(
            column="partition", min_value=0, description="a finding's partition is not negative"
        ),
        gxe.ExpectColumnValuesToBeBetween(
            column="missing_records",
            min_value=1,
            description="a finding that counts missing records counts at least one",
        ),
    ]


def partition_summary_suite() -> list[gxe.Expectation]:
    """Gold `partition_summary`: one row per log, bounds in order, a known verdict that is the worst
    severity its counts hold (clean: none)."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    ranks = [s.label for s in sorted(Severity, key=lambda s: s.value, reverse=True)]
    agrees: list[gxe.Expectation] = []
    for i, verdict in enumerate((*ranks, "clean")):
        of_verdict = Column("verdict") == verdict
        agrees += [
            gxe.ExpectColumnValuesToBeInSet(
                column=worse,
                value_set=[0],
                row_condition=of_verdict,
                description=f"the verdict {verdict} counts no {worse} finding",
            )
            for worse in ranks[:i]
        ]
        if verdict != "clean":
            agrees.append(
                gxe.ExpectColumnValuesToBeBetween(
                    column=verdict,
                    min_value=1,
                    row_condition=of_verdict,
                    description=f"the verdict {verdict} counts a {verdict} finding",
                )
            )
    return [
        gxe.ExpectColumnValuesToBeInSet(
            column="verdict", value_set=list(VERDICTS), description="verdict is a severity or clean"
        ),
        *agrees,
        _not_below(
            "log_end_offset",
            "log_start_offset",
            "the log start offset is not above the log end offset",
            skip_nulls=True,
        ),
        _not_below(
            "log_start_offset",
            "remote_log_start",
            "a tiered-storage log's remote start is not above its local start",
            skip_nulls=True,
        ),
        gxe.ExpectCompoundColumnsToBeUnique(
            column_list=list(LOG_KEY), description="one row per (dump_id, replica, topic, partition)"
        ),
    ]


SUITES: dict[str, Callable[[], list[gxe.Expectation]]] = {
    "batches": batches_suite,
    "findings": findings_suite,
    "partition_summary": partition_summary_suite,
}


def expectation_name(expectation_type: str, kwargs: Mapping[str, Any]) -> str:
    """`type(columns)`, e.g. `expect_column_values_to_be_in_set(kind)`: how GxSummary names a check."""
    columns: list[str] = []
    for key in ("column", "column_A", "column_B"):
        if kwargs.get(key) is not None:
            columns.append(str(kwargs[key]))
    columns.extend(str(c) for c in kwargs.get("column_list") or ())
    return f"{expectation_type}({', '.join(columns)})"


# ---------------------------------------------------------------------------------------------
# Running them


def run_gx_validations(tables: Mapping[str, DataFrame], out_dir: str) -> GxSummary:
    """Validate each table against its suite; write `<table>.json` results, `summary.json` and Data Docs.

    Tables are named as in `SUITES`. GX failing, or a table failing its suite, is reported, never raised.
    """
    unknown = sorted(set(tables) - set(SUITES))
    if unknown:
        raise ValueError(f"no Great Expectations suite for table(s) {unknown}; known: {sorted(SUITES)}")
    os.makedirs(out_dir, exist_ok=True)
    docs_dir = os.path.join(out_dir, DATA_DOCS_DIR)
    # A re-run replaces the site rather than adding its pages to the previous run's, and an earlier
    # run's results must not stand beside a suite this run could not run (its `result_file` is null).
    shutil.rmtree(docs_dir, ignore_errors=True)
    for name in (*SUITES, SUMMARY_FILE.removesuffix(".json")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out_dir, f"{name}.json"))

    outcomes: list[SuiteOutcome] = []
    try:
        context = _context(docs_dir)
        datasource = context.data_sources.add_spark(name=DATASOURCE)
    except Exception as exc:  # GX is an optional layer: its failure must not end the audit
        log.warning("Great Expectations could not start: %s", exc)
        error = _one_line(exc)
        outcomes = [_not_run(name, error) for name in SUITES if name in tables]
        return _finish(out_dir, outcomes, None, f"not built: {error}")

    for name in (n for n in SUITES if n in tables):
        try:
            outcomes.append(_validate(context, datasource, name, tables[name], out_dir))
        except Exception as exc:  # one suite's crash (a missing column, a Spark error) is its result
            log.warning("Great Expectations suite %s could not run: %s", name, exc)
            outcomes.append(_not_run(name, _one_line(exc)))

    index: str | None = None
    docs_error: str | None = None
    try:
        context.build_data_docs(site_names=[DOCS_SITE])
        index = os.path.join(docs_dir, "index.html")
    except Exception as exc:  # Data Docs are an extra beside the JSON results
        log.warning("Great Expectations Data Docs not built: %s", exc)
        docs_error = _one_line(exc)
    return _finish(out_dir, outcomes, index, docs_error)


def _context(docs_dir: str) -> EphemeralDataContext:
    """An in-memory context with one local Data Docs site, analytics and progress bars off."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    config = DataContextConfig(
        # No default temporary `local_site`: the only site is ours.
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        data_docs_sites={
            DOCS_SITE: {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs_dir},
            }
        },
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)


def _validate(
    context: EphemeralDataContext, datasource: SparkDatasource, name: str, df: DataFrame, out_dir: str
) -> SuiteOutcome:
    import great_expectations as gx

    batch = datasource.add_dataframe_asset(name=name).add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add(gx.ExpectationSuite(name=name))
    for expectation in SUITES[name]():
        suite.add_expectation(expectation)
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=name, data=batch, suite=suite)
    )
    # GX caches the batch (SparkDFExecutionEngine persist); release it unless the caller had cached it.
    was_cached = df.is_cached
    try:
        result = definition.run(
            batch_parameters={"dataframe": df}, result_format={"result_format": "SUMMARY"}
        )
    finally:
        if not was_cached:
            df.unpersist()
    document = result.to_json_dict()
    result_file = os.path.join(out_dir, f"{name}.json")
    _write_json(result_file, document)
    return _outcome(name, document, result_file)


def _outcome(name: str, document: Mapping[str, Any], result_file: str) -> SuiteOutcome:
    """A SuiteOutcome from GX's validation result JSON (`ExpectationSuiteValidationResult.to_json_dict`)."""
    failures = []
    for r in document.get("results", []):
        if r.get("success"):
            continue
        config = r.get("expectation_config") or {}
        details = r.get("result") or {}
        sample = details.get("partial_unexpected_list") or []
        failures.append(
            ExpectationFailure(
                name=expectation_name(str(config.get("type")), config.get("kwargs") or {}),
                description=str(config.get("description") or ""),
                unexpected_count=details.get("unexpected_count"),
                unexpected_sample=tuple(
                    json.dumps(v, sort_keys=True, default=str) for v in sample[:SAMPLE_SIZE]
                ),
                exception=_exception_message(r.get("exception_info") or {}),
            )
        )
    stats = document.get("statistics") or {}
    return SuiteOutcome(
        suite=name,
        success=bool(document.get("success")),
        evaluated=int(stats.get("evaluated_expectations") or 0),
        successful=int(stats.get("successful_expectations") or 0),
        unsuccessful=int(stats.get("unsuccessful_expectations") or 0),
        failures=tuple(sorted(failures, key=lambda f: f.name)),
        result_file=result_file,
    )


def _exception_message(info: Mapping[str, Any]) -> str | None:
    """The first exception GX caught while computing an expectation's metrics (a missing column, ...)."""
    # GX gives either one flat record or one record per metric that failed.
    records = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, Mapping)]
    for record in records:
        if record.get("raised_exception"):
            return str(record.get("exception_message"))
    return None


def _not_run(name: str, error: str) -> SuiteOutcome:
    return SuiteOutcome(name, False, 0, 0, 0, (), None, error)


def _finish(
    out_dir: str, outcomes: list[SuiteOutcome], index: str | None, docs_error: str | None
) -> GxSummary:
    summary = GxSummary(tuple(outcomes), index, docs_error)
    # The file names its files relative to its folder: the reports may be copied elsewhere (a URI output).
    written = summary.to_json_dict()
    for suite in written["suites"]:
        if suite.get("result_file"):
            suite["result_file"] = os.path.relpath(suite["result_file"], out_dir)
    if index is not None:
        written["data_docs_index"] = os.path.relpath(index, out_dir)
    _write_json(os.path.join(out_dir, SUMMARY_FILE), written)
    if not summary.success:
        log.warning("Great Expectations suites failed: %s", ", ".join(summary.failed_suites))
    return summary


def _write_json(path: str, document: Any) -> None:
    """Written whole or not at all: to a temporary file beside it, then renamed."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(document, out, indent=2, sort_keys=True, default=str)
        out.write("\n")
    os.replace(tmp, path)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
