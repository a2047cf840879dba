"""The finding-kind registry (`audit_rules.kinds`) against audit-contract §4.

Findings, the GX suite of `findings` and the reports all take a kind's severity and category from the
registry, so only a copy of the contract can tell the registry drifted from it. The table below is
§4's (kind, severity, the heading it is listed under), as the contract states them; the contract lives
outside the repository."""

from __future__ import annotations

from audit_rules.kinds import KINDS

CONTRACT_SECTION_4 = {
    "SEQUENCE_GAP": ("critical", "Loss"),
    "SEQUENCE_GAP_UNVERIFIED": ("warning", "Loss"),
    "HISTORY_START_MISSING": ("critical", "Loss"),
    "ACKED_RECORD_MISSING": ("critical", "Loss"),
    "UNKNOWN_PRODUCER_LOSS": ("critical", "Loss"),
    "REPLICA_DIVERGENCE": ("critical", "Loss"),
    "HISTORY_TRUNCATED_BY_RETENTION": ("info", "Retention and expiry (explained, never counted as loss)"),
    "UNKNOWN_PRODUCER_RETENTION": ("info", "Retention and expiry (explained, never counted as loss)"),
    "PRODUCER_STATE_RETAINED": ("info", "Retention and expiry (explained, never counted as loss)"),
    "ACKED_RECORD_RETENTION": ("info", "Retention and expiry (explained, never counted as loss)"),
    "DUPLICATE_BATCH": ("error", "Duplicates"),
    "DUPLICATE_RECORDS_NEW_EPOCH": ("error", "Duplicates"),
    "DUPLICATE_APP_SEQUENCE": ("error", "Duplicates"),
    "SEQUENCE_REGRESSION": ("error", "Ordering"),
    "APP_SEQUENCE_REGRESSION": ("error", "Ordering"),
    "APP_SEQUENCE_GAP": ("warning", "Ordering"),
    "EPOCH_REGRESSION": ("error", "Fencing and epochs"),
    "NEW_EPOCH_NONZERO_SEQUENCE": ("error", "Fencing and epochs"),
    "EPOCH_BUMP": ("info", "Fencing and epochs"),
    "INVALID_SEQUENCE": ("error", "Fencing and epochs"),
    "HANGING_TRANSACTION": ("error", "Transactions"),
    "COORDINATOR_EPOCH_REGRESSION": ("warning", "Transactions"),
    "CRC_MISMATCH": ("error", "Corruption and consistency"),
    "TRUNCATED_TAIL": ("warning", "Corruption and consistency"),
    "UNREADABLE_BATCH": ("error", "Corruption and consistency"),
    "OFFSET_OVERLAP": ("error", "Corruption and consistency"),
    "INDEX_MISMATCH": ("warning", "Corruption and consistency"),
    "SNAPSHOT_CORRUPT": ("error", "Corruption and consistency"),
    "SNAPSHOT_MISMATCH": ("error", "Corruption and consistency"),
}
# The heading a kind is listed under, and the categories of contract §3 it allows.
HEADING_CATEGORIES = {
    "Loss": {"loss"},
    "Retention and expiry (explained, never counted as loss)": {"retention"},
    "Duplicates": {"duplicate"},
    "Ordering": {"ordering"},
    "Fencing and epochs": {"fencing"},
    "Transactions": {"transaction"},
    "Corruption and consistency": {"corruption", "consistency"},
}
# Kinds the README documents beside the contract's.
ADDED_KINDS = {
    "UNREADABLE_FILE",
    "REMOTE_SEGMENT_MISSING",
    "ACKS_NOT_CHECKED",
    "OFFSET_HOLE",
    "EMPTY_TXN_MARKER",
    "STALE_TXN_MARKER",
}


def test_every_contract_kind_has_the_contracts_severity() -> None:
    assert {k: KINDS[k].severity.label for k in CONTRACT_SECTION_4 if k in KINDS} == {
        k: severity for k, (severity, _) in CONTRACT_SECTION_4.items()
    }


def test_every_contract_kind_has_a_category_of_its_heading() -> None:
    wrong = {
        k: (KINDS[k].category, heading)
        for k, (_, heading) in CONTRACT_SECTION_4.items()
        if KINDS[k].category not in HEADING_CATEGORIES[heading]
    }
    assert wrong == {}


def test_the_registry_holds_the_contract_kinds_and_the_documented_additions_only() -> None:
    assert set(KINDS) == set(CONTRACT_SECTION_4) | ADDED_KINDS
