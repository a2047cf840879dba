"""The finding kinds of audit-contract §4: name, severity, category and the rule each applies.

One registry entry per kind; every rule module emits findings through `audit_rules.findings`, which
takes severity and category from here, so a kind's severity is defined once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Severity(IntEnum):
    """Contract §3 severities, ordered so that `max()` gives the worst."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    CRITICAL = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (info, warning, error, critical)") from None


@dataclass(frozen=True)
class Kind:
    name: str
    severity: Severity
    category: str
    rule: str


def _k(name: str, severity: Severity, category: str, rule: str) -> Kind:
    return Kind(name, severity, category, rule)


S = Severity
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        # Loss
        _k("SEQUENCE_GAP", S.CRITICAL, "loss", "KIP-98 next-sequence"),
        _k("SEQUENCE_GAP_UNVERIFIED", S.WARNING, "loss", "KIP-854 producer.id.expiration.ms"),
        _k("HISTORY_START_MISSING", S.CRITICAL, "loss", "KIP-360 logStartOffset"),
        _k("ACKED_RECORD_MISSING", S.CRITICAL, "loss", "acks ledger coverage"),
        _k("UNKNOWN_PRODUCER_LOSS", S.CRITICAL, "loss", "KIP-360 logStartOffset (seed 000 rule 4)"),
        _k(
            "REPLICA_DIVERGENCE",
            S.CRITICAL,
            "loss",
            "replication: same offset, same batch below the high watermark",
        ),
        # Retention and expiry
        _k("HISTORY_TRUNCATED_BY_RETENTION", S.INFO, "retention", "KIP-360 logStartOffset"),
        _k("UNKNOWN_PRODUCER_RETENTION", S.INFO, "retention", "KIP-360 logStartOffset (seed 000 rule 4)"),
        _k("PRODUCER_STATE_RETAINED", S.INFO, "retention", "KAFKA-7190 producer state kept after retention"),
        _k("ACKED_RECORD_RETENTION", S.INFO, "retention", "KIP-360 logStartOffset"),
        # Duplicates
        _k("DUPLICATE_BATCH", S.ERROR, "duplicate", "KIP-98 duplicate window (KAFKA-5494)"),
        _k(
            "DUPLICATE_RECORDS_NEW_EPOCH",
            S.ERROR,
            "duplicate",
            "KAFKA-14034 / librdkafka #4953 resend under new epoch",
        ),
        _k("DUPLICATE_APP_SEQUENCE", S.ERROR, "duplicate", "app sequence uniqueness"),
        # Ordering
        _k("SEQUENCE_REGRESSION", S.ERROR, "ordering", "KIP-98 next-sequence"),
        _k("APP_SEQUENCE_REGRESSION", S.ERROR, "ordering", "app sequence order (Sarama #2619)"),
        _k("APP_SEQUENCE_GAP", S.WARNING, "ordering", "app sequence contiguity"),
        # Fencing and epochs
        _k("EPOCH_REGRESSION", S.ERROR, "fencing", "KIP-98 producer epoch fencing (KIP-588)"),
        _k("NEW_EPOCH_NONZERO_SEQUENCE", S.ERROR, "fencing", "KIP-360 new epoch starts at sequence 0"),
        _k("EPOCH_BUMP", S.INFO, "fencing", "KIP-360 epoch bump"),
        _k("INVALID_SEQUENCE", S.ERROR, "fencing", "KIP-98 sequence range matches offset range"),
        # Transactions
        _k(
            "HANGING_TRANSACTION",
            S.ERROR,
            "transaction",
            "KIP-664 hanging transaction (transaction.max.timeout.ms)",
        ),
        _k("COORDINATOR_EPOCH_REGRESSION", S.WARNING, "transaction", "KAFKA-9144 coordinator epoch"),
        # Addition beside the contract (prior-art §1.7 EMPTY_TXN_MARKER, klog's `empty_txn`): a COMMIT or
        # ABORT marker with no data of its producer since its previous marker.
        _k("EMPTY_TXN_MARKER", S.INFO, "transaction", "KIP-98 transaction markers on every added partition"),
        # Addition beside the contract (prior-art §5, KIP-890 row): under transactions V2 a marker carrying
        # its own transaction's epoch is the earlier transaction's, written again, that closed this one.
        _k(
            "STALE_TXN_MARKER",
            S.ERROR,
            "transaction",
            "KIP-890 transactions V2: a marker is one epoch above its data (KAFKA-19446)",
        ),
        # Corruption and consistency
        _k("CRC_MISMATCH", S.ERROR, "corruption", "KIP-98 batch CRC-32C"),
        _k("TRUNCATED_TAIL", S.WARNING, "corruption", "LogSegment.recover truncated tail"),
        _k("UNREADABLE_BATCH", S.ERROR, "corruption", "record batch framing"),
        _k("OFFSET_OVERLAP", S.ERROR, "consistency", "offsets increase within a partition"),
        _k("INDEX_MISMATCH", S.WARNING, "consistency", "OffsetIndex / TransactionIndex entry"),
        _k("SNAPSHOT_CORRUPT", S.ERROR, "corruption", "ProducerStateManager snapshot CRC-32C"),
        _k(
            "SNAPSHOT_MISMATCH", S.ERROR, "consistency", "ProducerStateManager snapshot equals replayed state"
        ),
        # Addition beside the contract (added, never renamed): a checkpoint or metadata text file that
        # cannot be parsed, so the partition state it holds is unknown.
        _k("UNREADABLE_FILE", S.WARNING, "corruption", "checkpoint file format"),
        # Addition beside the contract: offsets of a tiered log (KIP-405) below its local start that no
        # copied remote segment holds, between copied segments: the remote tier lost them.
        _k("REMOTE_SEGMENT_MISSING", S.CRITICAL, "loss", "KIP-405 remote log metadata"),
        # Addition beside the contract: acknowledged offsets of a partition no dump holds, so that the
        # ledger's acks there were not checked (a partition not dumped, or a topic misnamed), or timed
        # after every dump of it and held by none (the ledger runs past the dumps).
        _k("ACKS_NOT_CHECKED", S.WARNING, "consistency", "ack ledger partition in no dump"),
        # Addition beside the contract (prior-art §1.7 OFFSET_HOLE): offsets free between batches of a
        # segment, taken for the log cleaner's work although nothing else says the topic is compacted.
        _k("OFFSET_HOLE", S.WARNING, "loss", "offsets consecutive unless the log cleaner removed batches"),
    )
}

EXPLAINED_BY = ("retention", "expiry", "compaction", "epoch_bump", "client_timeout")
