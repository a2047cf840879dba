"""`jobs.catalog`: the names `--catalog-schema` takes, and which locations are one."""

from __future__ import annotations

import pytest

from jobs.catalog import _normal, schema_parts
from jobs.ingest import UsageError


def test_a_schema_or_a_catalog_and_schema() -> None:
    assert schema_parts("kafka_audit") == ("kafka_audit",)
    assert schema_parts("main.kafka-audit") == ("main", "kafka-audit")


@pytest.mark.parametrize("text", ["", "a.b.c", "main.", "a`b", "x; DROP TABLE y", ".x"])
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match=r"expected SCHEMA or CATALOG\.SCHEMA"):
        schema_parts(text)


def test_a_local_path_in_its_three_spellings_is_one_location_and_a_uri_stays_itself() -> None:
    assert _normal("file:/tmp/out/findings") == _normal("file:///tmp/out/findings/") == "/tmp/out/findings"
    assert _normal("/tmp/out/findings") == "/tmp/out/findings"
    assert _normal("s3://bucket/out/findings/") == "s3://bucket/out/findings"
    assert _normal("/tmp/out/findings") != _normal("/tmp/other/findings")
