"""Acks that name their record's key, in record-level mode: an empty key names none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import V2Batch, build_v2
from tests.integration.test_app_sequence_rot import app_findings

pytestmark = pytest.mark.integration


def test_an_empty_ack_key_is_not_compared_with_a_record_without_one(spark: Any, tmp_path: Path) -> None:
    """A ledger may write a null key as "" (Go's `string(msg.Key)` of nil). Where the log's other acks
    name their records' keys, so keys are compared, "" against the record's null key read as another
    record at the offset: a critical ACKED_RECORD_MISSING, "overwritten". A wrong key is still one."""
    keys = [b"k0", None, b"k2", b"k3"]
    batches = [
        build_v2(
            V2Batch(base_offset=o, producer_id=-1, producer_epoch=-1, base_sequence=-1, records=((k, b"v"),))
        )
        for o, k in enumerate(keys)
    ]
    acks = [
        {"topic": "app", "partition": 0, "offset": o, "key": key}
        for o, key in enumerate(["k0", "", "k2", "wrong"])
    ]
    found = app_findings(spark, tmp_path, {0: batches}, acks=acks)
    assert [(f["kind"], f["first_offset"]) for f in found if f["kind"].startswith("ACKED")] == [
        ("ACKED_RECORD_MISSING", 3)
    ]
