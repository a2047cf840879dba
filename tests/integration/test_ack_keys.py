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


def test_acks_whose_keys_match_no_record_of_their_log_are_not_checked_and_say_so(
    spark: Any, tmp_path: Path
) -> None:
    """A ledger that writes keys as hex matches no record's key: the keys prove nothing (no
    ACKED_RECORD_MISSING), and could as well be every record overwritten, so the log gets one
    ACKS_NOT_CHECKED warning naming the acks' offsets instead of a silent pass."""
    batches = [
        build_v2(
            V2Batch(base_offset=o, producer_id=-1, producer_epoch=-1, base_sequence=-1, records=((k, b"v"),))
        )
        for o, k in enumerate([b"k0", b"k1", b"k2"])
    ]
    acks = [{"topic": "app", "partition": 0, "offset": o, "key": f"6b{o + 0x30:x}"} for o in range(1, 3)]
    found = app_findings(spark, tmp_path, {0: batches}, acks=acks)
    acked = [
        (f["kind"], f["severity"], f["first_offset"], f["last_offset"]) for f in found if "ACK" in f["kind"]
    ]
    assert acked == [("ACKS_NOT_CHECKED", "warning", 1, 2)], [f["message"] for f in found]
    (message,) = [f["message"] for f in found if f["kind"] == "ACKS_NOT_CHECKED"]
    assert message.startswith("2 acknowledged offset(s) from 1 to 2 of app-0 name a key, and not one"), (
        message
    )
