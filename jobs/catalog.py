"""`--catalog-schema`: the output's Delta tables, named in a catalog schema as well as found by path.

Contract §2: the outputs are written under `--output DIR` or to a catalog/schema on Databricks. Every
stage writes its tables under `--output` (a local path, a Volume or a cloud URI). With
`--catalog-schema [CATALOG.]SCHEMA`, each table is also registered there as an external Delta table
at its location: `SCHEMA.findings`, `SCHEMA.batches`, ... In Unity Catalog that location must be
inside an external location the job may write to (an `s3://`, `abfss://` or `gs://` output). The
reports (`report/`) stay files under `--output`. Nothing here copies data, and registering again is
a no-op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jobs.ingest import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


def schema_parts(text: str) -> tuple[str, ...]:
    """`SCHEMA` or `CATALOG.SCHEMA`, each part letters, digits, `_` or `-`; else a UsageError."""
    parts = tuple(text.split("."))
    if not 1 <= len(parts) <= 2 or not all(_PART.fullmatch(p) for p in parts):
        raise UsageError(f"--catalog-schema {text}: expected SCHEMA or CATALOG.SCHEMA")
    return parts


def check_schema(spark: SparkSession, text: str, output: str) -> None:
    """Before any work: a usage error unless the schema exists (this tool never creates one: on Unity
    Catalog that is a decision with its own privileges and storage), or when one of its tables of this
    tool's names is registered at another output's location."""
    from jobs.ingest import table_location
    from schemas.tables import AUDIT_TABLES, TABLES

    # Quoted: Unity Catalog's names may hold `-`, which Spark's parser takes only between backticks.
    if not spark.catalog.databaseExists(_quoted(*schema_parts(text))):
        raise UsageError(f"--catalog-schema {text}: no such schema; create it first (CREATE SCHEMA {text})")
    for name in (*TABLES, *AUDIT_TABLES):
        _registered_at(spark, text, name, table_location(output, name))


def register_tables(spark: SparkSession, text: str, tables: Mapping[str, str]) -> dict[str, str]:
    """Register each `name -> Delta path` as the external table `<schema>.<name>` at that path; returns
    `name -> qualified name`. A table already registered at that path is left as it is; one registered
    at another location is a usage error (it would be another output's)."""
    parts = schema_parts(text)
    registered = {}
    for name, path in tables.items():
        if not _registered_at(spark, text, name, path):
            escaped = path.replace("\\", "\\\\").replace("'", "\\'")
            spark.sql(f"CREATE TABLE {_quoted(*parts, name)} USING DELTA LOCATION '{escaped}'")
        registered[name] = ".".join((*parts, name))
    return registered


def _registered_at(spark: SparkSession, text: str, name: str, path: str) -> bool:
    """Whether `<schema>.<name>` is registered (at `path`: else a usage error)."""
    parts = schema_parts(text)
    if not spark.catalog.tableExists(_quoted(*parts, name)):
        return False
    kind = spark.catalog.getTable(_quoted(*parts, name)).tableType
    if kind is not None and kind.upper() in ("VIEW", "TEMPORARY", "MATERIALIZED_VIEW"):
        # DESCRIBE DETAIL refuses a view (an AnalysisException, not a usage error).
        raise UsageError(f"--catalog-schema {text}: {name} is a view there, not this output's table {name}")
    detail = spark.sql(f"DESCRIBE DETAIL {_quoted(*parts, name)}").first()
    at = None if detail is None else detail["location"]
    if at is None or _normal(at) != _normal(path):
        raise UsageError(f"--catalog-schema {text}: table {name} is registered at {at}, not at {path}")
    return True


def _quoted(*parts: str) -> str:
    return ".".join(f"`{part}`" for part in parts)


def _normal(location: str) -> str:
    """`file:/x`, `file:///x` and `/x` are one local path; a trailing slash changes nothing."""
    if location.startswith("file:"):
        location = "/" + location.removeprefix("file:").lstrip("/")
    return location.rstrip("/")
