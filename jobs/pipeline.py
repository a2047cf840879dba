"""`replay-audit audit` and `replay-audit run` (ingest, then audit): the stages chained, with the exit status
of contract §2."""

from __future__ import annotations

import sys
from typing import Any

from audit_rules.kinds import Severity


def run_cli(args: Any) -> int:
    """Parse the audit options, run the stages, print where the results are; exit 0, 1 or 2."""
    from jobs.audit import check_bronze, run_audit
    from jobs.catalog import check_schema, register_tables, schema_parts
    from jobs.ingest import (
        DEFAULT_SPLIT_BYTES,
        IngestOptions,
        LabeledPath,
        _check_output,
        _check_output_outside,
        is_uri,
        parse_captured_at,
        plan_ingest,
        run_ingest,
    )
    from jobs.profiles import load_profile
    from jobs.spark_session import get_spark, job_local_conf

    profile = load_profile(
        args.profile,
        args.config,
        app_producer=args.app_producer,
        app_sequence=args.app_sequence,
        app_sequence_scope=args.app_sequence_scope,
    )
    fail_on = Severity.parse(args.fail_on)
    if args.command == "run":
        options = IngestOptions(
            inputs=[LabeledPath.parse(p) for p in args.input],
            output=args.output,
            # App sequences live in records (contract §1: the extractor implies --records).
            records=args.records or profile.app_sequence is not None,
            acks=[LabeledPath.parse(p) for p in args.acks or ()],
            split_bytes=args.split_bytes or DEFAULT_SPLIT_BYTES,
            captured_at=parse_captured_at(args.captured_at or ()),
        )
        plan = plan_ingest(options)
        _check_output_outside(args.output, [p.path for p in options.inputs])
    if args.catalog_schema:
        schema_parts(args.catalog_schema)  # its form, before the JVM starts (its existence after)
    _check_output(args.output, make=args.command == "run")  # before Spark starts, for `audit` too
    if args.command == "audit" and not is_uri(args.output):
        # A local output never ingested: one line now, not after a JVM's start-up and its log on stderr.
        check_bronze(args.output)
    spark = get_spark(f"replay-audit {args.command}", job_local_conf(args.command), quiet_jvm=True)
    if args.catalog_schema:
        check_schema(spark, args.catalog_schema, args.output)  # before the work, not after it
    tables = run_ingest(spark, options, plan=plan).tables if args.command == "run" else {}
    result = run_audit(spark, args.output, profile, fail_on=fail_on, command=args.command, gx=not args.no_gx)
    for name, path in result.tables.items():
        print(f"{name}\t{path}")
    if args.catalog_schema:
        for name in register_tables(spark, args.catalog_schema, {**tables, **result.tables}).values():
            print(f"registered\t{name}")
    print(f"report\t{result.report_dir}")
    counts = ", ".join(f"{k}={v}" for k, v in sorted(result.counts.items())) or "none"
    verdict = "valid" if result.valid else f"INVALID (a finding reached --fail-on {fail_on.label})"
    print(f"replay-audit: {verdict}; findings: {counts}", file=sys.stderr)
    if result.gx_failed:
        from jobs.gx_checks import GX_DIR, SUMMARY_FILE

        where = f"{result.report_dir.rstrip('/')}/{GX_DIR}/{SUMMARY_FILE}"
        failed = ", ".join(result.gx_failed)
        print(
            f"replay-audit: Great Expectations suite(s) failed or did not run: {failed} ({where})",
            file=sys.stderr,
        )
    return result.exit_status
