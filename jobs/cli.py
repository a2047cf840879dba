"""`replay-audit`: the command-line entry point (also the Databricks python_wheel_task entry).

Subcommands import what they need lazily, so `dump` starts in a fraction of a second without Spark.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from audit_rules.profile import APP_SEQUENCE_SCOPES  # plain Python, no Spark: `dump` stays quick

# The job itself failed (a Spark, Delta or storage error; a bug): neither a verdict on the data (0, 1)
# nor a usage error (2), so a scheduler can tell the three apart.
FAILED_STATUS = 3

CATALOG_SCHEMA_ARGS = ("--catalog-schema",)
CATALOG_SCHEMA_OPTIONS: dict[str, Any] = {
    "metavar": "[CATALOG.]SCHEMA",
    "help": "also register the Delta tables written under --output as external tables of this existing "
    "schema (on Databricks: Unity Catalog, with --output in one of its external locations)",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr (contract §2), naming the subcommand's `--help`; exit 2."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="replay-audit",
        description="Audit dumped Kafka partitions: producer sequences, loss, duplicates, ordering.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    dump = sub.add_parser(
        "dump",
        help="decode files or directories to JSON lines without Spark (a machine-readable kafka-dump-log.sh)",
    )
    dump.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="Kafka files (.log, .index, .snapshot, checkpoints, dump-log text) or directories",
    )
    dump.add_argument("--records", action="store_true", help="decode every record (all codecs)")
    dump.add_argument(
        "--summary", action="store_true", help="one summary object per file instead of one object per item"
    )
    ingest = sub.add_parser(
        "ingest",
        help="decode the inputs with Spark into the bronze Delta tables (files, batches, quarantine, ...)",
    )
    ingest.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="[LABEL=]PATH",
        help="a partition directory, log directory, directory of log directories or kafka-dump-log.sh text "
        "(repeatable; LABEL names the dump)",
    )
    ingest.add_argument("--output", required=True, metavar="DIR", help="where the Delta tables are written")
    ingest.add_argument("--records", action="store_true", help="record-level mode: decode every record")
    ingest.add_argument(
        "--acks",
        action="append",
        metavar="[LABEL=]PATH",
        help="producer acknowledgement ledger (JSON lines, CSV or Parquet with topic, partition, offset)",
    )
    ingest.add_argument(*CATALOG_SCHEMA_ARGS, **CATALOG_SCHEMA_OPTIONS)
    ingest.add_argument(
        "--captured-at",
        action="append",
        metavar="[LABEL=]TIME",
        help="when the dump LABEL was taken (ISO 8601, UTC unless given, or epoch ms; repeatable): it orders "
        "the dumps of a partition; default the dump's newest file mtime, which a copy may have reset",
    )
    ingest.add_argument(
        "--split-bytes",
        type=_size,
        default=None,
        metavar="N",
        help="cut segments larger than N bytes (K/M/G suffixes) into tasks at .index boundaries "
        "(default 128M)",
    )
    audit = sub.add_parser(
        "audit",
        help="replay producer histories from the ingested tables and write findings, reports and validations",
    )
    audit.add_argument("--output", required=True, metavar="DIR", help="the directory `ingest` wrote")
    audit.add_argument(*CATALOG_SCHEMA_ARGS, **CATALOG_SCHEMA_OPTIONS)
    _audit_options(audit)
    run = sub.add_parser("run", help="ingest then audit, end to end")
    for action in ingest._actions:
        if action.dest != "help":
            run._add_action(action)
    _audit_options(run)
    return parser


def _audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", metavar="NAME", help="rule profile of conf/profiles (default kafka-3.4)")
    parser.add_argument("--config", metavar="PATH", help="YAML rule profile and app-sequence extractor")
    parser.add_argument(
        "--fail-on",
        default="error",
        choices=["info", "warning", "error", "critical"],
        help="exit 1 when a finding reaches this severity (default error)",
    )
    parser.add_argument(
        "--app-producer", metavar="SPEC", help="header:NAME or json:FIELD naming the app producer"
    )
    parser.add_argument(
        "--app-sequence", metavar="SPEC", help="header:NAME or json:FIELD holding the app sequence"
    )
    parser.add_argument(
        "--app-sequence-scope",
        choices=APP_SEQUENCE_SCOPES,
        help="what one app producer's sequence numbers: each partition's records, or its records across "
        "a topic's partitions (default auto: told from the values)",
    )
    parser.add_argument("--no-gx", action="store_true", help="skip the Great Expectations validations")


def _size(text: str) -> int:
    from jobs.ingest import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except Exception as exc:  # the job failed: its traceback, then one line and a status of its own
        traceback.print_exc()
        first = next((line for line in _cause(exc).splitlines() if line.strip()), "")[:300]
        from jobs import spark_session

        log = "" if spark_session.JVM_LOG is None else f", Spark's log in {spark_session.JVM_LOG}"
        print(
            f"replay-audit: {args.command} failed: {type(exc).__name__}: {first} (exit {FAILED_STATUS}: "
            f"the job failed, not the audit; the traceback is above{log})",
            file=sys.stderr,
        )
        return FAILED_STATUS


def _cause(exc: BaseException) -> str:
    """What failed: a Java exception's own text (a Py4JJavaError's first line only names the call,
    "An error occurred while calling o55.save."), else the exception's."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString())
        except Exception:  # the JVM may be gone
            pass
    return str(exc)


def _run(args: argparse.Namespace) -> int:
    if args.command in ("ingest", "audit", "run"):
        from jobs.ingest import UsageError, spark_output

        try:
            args.output = spark_output(args.output)
        except UsageError as exc:
            print(f"replay-audit: {exc}", file=sys.stderr)
            return 2
    if args.command == "dump":
        from kafka_log_decoder.dump import run_dump
        from kafka_log_decoder.errors import NotAKafkaArtifact

        try:
            return run_dump(args.paths, records=args.records, summary=args.summary, out=sys.stdout)
        except NotAKafkaArtifact as exc:
            print(f"replay-audit: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            return 0
    if args.command == "ingest":
        from jobs.ingest import DEFAULT_SPLIT_BYTES, UsageError, run_cli

        if args.split_bytes is None:
            args.split_bytes = DEFAULT_SPLIT_BYTES
        try:
            return run_cli(args)
        except UsageError as exc:
            print(f"replay-audit: {exc}", file=sys.stderr)
            return 2
    if args.command in ("audit", "run"):
        from jobs.ingest import UsageError
        from jobs.pipeline import run_cli as run_pipeline
        from jobs.profiles import ProfileError

        try:
            return run_pipeline(args)
        except (UsageError, ProfileError) as exc:
            print(f"replay-audit: {exc}", file=sys.stderr)
            return 2
    raise AssertionError(f"unhandled command {args.command}")


def console_main() -> None:
    """The `replay-audit` command (console script, and the Databricks wheel tasks' entry point): `main`,
    whose non-zero status ends the process. A Databricks `python_wheel_task` calls its entry point as a
    function and is not known to read a returned status: an invalid audit, or a usage error, returning
    1 or 2 could leave the task green. Success returns, as a function should."""
    status = main()
    if status:
        sys.exit(status)


if __name__ == "__main__":
    console_main()
