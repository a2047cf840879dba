"""Rows of the gold and bronze tables for report and validation tests, as dicts with every schema column,
and the filters the audit tests apply to the findings they read back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from audit_rules.kinds import KINDS, Severity
from schemas.tables import BATCHES, FINDINGS, PARTITION_SUMMARY


def finding(kind: str = "SEQUENCE_GAP", **fields: Any) -> dict[str, Any]:
    """A FINDINGS row of `kind` (severity, category and rule from the registry); `fields` override columns."""
    spec = KINDS.get(kind)
    row: dict[str, Any] = dict.fromkeys(FINDINGS.columns)
    row.update(
        kind=kind,
        severity=spec.severity.label if spec else "error",
        category=spec.category if spec else "loss",
        rule=spec.rule if spec else "no rule",
        topic="orders",
        partition=0,
        dump_id="d1",
        replica="1",
        producer_id=7,
        producer_epoch=0,
        first_offset=10,
        message=f"{kind} at offset 10",
    )
    row.update(fields)
    if "last_offset" not in fields:
        row["last_offset"] = None if row["first_offset"] is None else row["first_offset"] + 2
    if row["finding_id"] is None:
        row["finding_id"] = f"{row['kind']}:{row['topic']}:{row['partition']}:{row['first_offset']}"
    return row


def crc_quarantine(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ingest writes beside each BATCHES row failing its CRC: a CRC_MISMATCH row of its bytes."""
    keep = ("dump_id", "replica", "topic", "partition", "file", "position")
    return [
        {
            **{k: b[k] for k in keep},
            "length": b["size_bytes"],
            "kind": "CRC_MISMATCH",
            "message": "CRC-32C differs",
        }
        for b in rows
        if not b["crc_valid"]
    ]


def unreadable_region(log_row: dict[str, Any], position: int, length: int = 500) -> dict[str, Any]:
    """A QUARANTINE row of bytes no batch header could be read from (a corrupt length), at `position`
    of the segment of `log_row` (a BATCHES row)."""
    return {
        **{k: log_row[k] for k in ("dump_id", "replica", "topic", "partition", "file")},
        "position": position,
        "length": length,
        "kind": "UNREADABLE_BATCH",
        "message": "batch length 1234567 runs past a valid batch",
    }


def batch(position: int = 0, **fields: Any) -> dict[str, Any]:
    """A BATCHES row of an idempotent v2 batch of 3 records at `position` (base offset = position)."""
    row: dict[str, Any] = dict.fromkeys(BATCHES.columns)
    row.update(
        dump_id="d1",
        replica="1",
        topic="orders",
        partition=0,
        file="orders-0/00000000000000000000.log",
        position=position,
        base_offset=position,
        last_offset=position + 2,
        count=3,
        magic=2,
        crc=1,
        crc_valid=True,
        attributes=0,
        compression="none",
        timestamp_type="CREATE_TIME",
        is_transactional=False,
        is_control=False,
        partition_leader_epoch=0,
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_002,
        producer_id=7,
        producer_epoch=0,
        base_sequence=position,
        last_sequence=position + 2,
        size_bytes=100,
    )
    row.update(fields)
    return row


def partition_summary(partition: int = 0, **fields: Any) -> dict[str, Any]:
    """A PARTITION_SUMMARY row of a clean partition `partition` of topic orders."""
    row: dict[str, Any] = dict.fromkeys(PARTITION_SUMMARY.columns)
    row.update(
        dump_id="d1",
        replica="1",
        topic="orders",
        partition=partition,
        capture_time_ms=1_700_000_100_000,
        log_start_offset=0,
        log_start_source="checkpoint",
        log_end_offset=100,
        high_watermark=100,
        batches=10,
        records=100,
        bytes=4096,
        producers=1,
        quarantined_regions=0,
        critical=0,
        error=0,
        warning=0,
        info=0,
        verdict="clean",
    )
    row.update(fields)
    return row


def above_info(findings: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings more severe than info (by the severity each row reports), in their order."""
    return [f for f in findings if Severity.parse(f["severity"]) > Severity.INFO]


def kinds_above_info(findings: Iterable[dict[str, Any]]) -> Counter[str]:
    """How many findings of each kind are more severe than info."""
    return Counter(f["kind"] for f in above_info(findings))
