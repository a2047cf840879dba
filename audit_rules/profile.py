"""The rule profile: which broker's rules the replay applies (kafka-formats-and-rules §5.5, §5.7).

Profiles are YAML in `conf/profiles/` (loaded by `jobs.profiles`); this module holds only the typed
values the rules read, so rules never touch files.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

DAY_MS = 86_400_000
# How often the broker removes expired producers (`LogManager.ProducerIdExpirationCheckIntervalMs`,
# fixed at 10 minutes before 2.8's producer.id.expiration.check.interval.ms).
EXPIRY_CHECK_INTERVAL_MS = 600_000
# `ProducerStateManager.LATE_TRANSACTION_BUFFER_MS`: the broker counts a transaction as late (KIP-664's
# PartitionsWithLateTransactionsCount) once it is open this much longer than transaction.max.timeout.ms,
# leaving the coordinator's periodic abort and its markers time to land.
LATE_TRANSACTION_BUFFER_MS = 300_000
# Broker lines whose unknown-producer handling differs (§5.5): before 1.0, 1.0 to 2.4, 2.5 to 3.3,
# 3.4 and later.
BROKER_LINES = ("0.11", "1.0", "2.5", "3.4")
# KRaft's metadata log: the controller's records, compacted by snapshots, of no application's producer.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
DEFAULT_COMPACTED = ("__consumer_offsets", "__transaction_state", CLUSTER_METADATA_TOPIC)
APP_SEQUENCE_SCOPES = ("auto", "partition", "topic")


@dataclass(frozen=True)
class AppSequenceSpec:
    """Where a non-idempotent producer's name and sequence live in a record: `header:NAME` or `json:FIELD`."""

    producer: str
    sequence: str
    # What one app producer's counter numbers: each partition's records (`partition`), or all of its
    # records in a topic, whichever partition they went to (`topic`); `auto` tells from the values
    # (`ordering.app_sequence_scopes`).
    scope: str = "auto"

    def __post_init__(self) -> None:
        if self.scope not in APP_SEQUENCE_SCOPES:
            raise ValueError(
                f"app-sequence scope {self.scope!r}: expected one of {', '.join(APP_SEQUENCE_SCOPES)}"
            )

    @staticmethod
    def check(spec: str) -> str:
        source, sep, name = spec.partition(":")
        if not sep or source not in ("header", "json") or not name:
            raise ValueError(f"app-sequence spec {spec!r}: expected header:NAME or json:FIELD")
        return spec


@dataclass(frozen=True)
class Profile:
    name: str = "kafka-3.4"
    broker_line: str = "3.4"
    # ProducerStateEntry.NUM_BATCHES_TO_RETAIN (KAFKA-5494); 0.11 cached only the last batch.
    duplicate_window_batches: int = 5
    # Seed 003 (KIP-758 draft): duplicates recognised within this many sequences of the latest.
    duplicate_window_sequences: int | None = None
    # KIP-854 producer.id.expiration.ms (3.4+); transactional.id.expiration.ms (7 days) before.
    producer_id_expiration_ms: int = DAY_MS
    transaction_max_timeout_ms: int = 900_000
    # The compacted topics' delete.retention.ms: the cleaner keeps a transaction marker at least this
    # long after its segment was last written (`LogCleaner`'s delete horizon).
    delete_retention_ms: int = DAY_MS
    compacted_topics: tuple[str, ...] = DEFAULT_COMPACTED
    app_sequence: AppSequenceSpec | None = field(default=None)
    # Where releases of the 1.0 line (1.0 to 2.4) differ; None: the line's first releases'. 2.4.0 keeps
    # a producer whose batches retention deleted (KAFKA-7190); 2.4.1 restarts its expiry time on a
    # marker (KAFKA-9144). The other lines do one thing each.
    log_start_evicts: bool | None = None
    marker_refreshes_expiry: bool | None = None

    def __post_init__(self) -> None:
        if self.broker_line not in BROKER_LINES:
            raise ValueError(
                f"profile {self.name}: broker_line {self.broker_line!r} not one of {BROKER_LINES}"
            )
        for setting, line_does in (
            ("log_start_evicts", self._line_evicts),
            ("marker_refreshes_expiry", self._line_refreshes),
        ):
            value = getattr(self, setting)
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"profile {self.name}: {setting} must be true or false, not {value!r}")
            if value is not None and value != line_does and self.broker_line != "1.0":
                raise ValueError(
                    f"profile {self.name}: {setting} {str(value).lower()} does not hold for broker_line "
                    f"{self.broker_line} (only releases of the 1.0 line, 1.0 to 2.4, differ in it: drop "
                    "the setting or use broker_line 1.0)"
                )
        if self.duplicate_window_batches < 1:
            raise ValueError(f"profile {self.name}: duplicate_window_batches must be >= 1")
        if self.producer_id_expiration_ms <= 0 or self.transaction_max_timeout_ms <= 0:
            raise ValueError(f"profile {self.name}: timeouts must be positive")
        if self.delete_retention_ms < 0:
            raise ValueError(f"profile {self.name}: delete_retention_ms must be >= 0")

    @property
    def late_transaction_ms(self) -> int:
        """How long a transaction stays open before it is hanging: transaction.max.timeout.ms plus the
        broker's own late-transaction buffer (`ProducerStateManager.hasLateTransaction`)."""
        return self.transaction_max_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    @property
    def expiration_setting(self) -> str:
        """The broker setting `producer_id_expiration_ms` stands for: KIP-854's producer.id.expiration.ms
        from 3.4; before it the broker expired producer ids after transactional.id.expiration.ms
        (`LogManager`'s `maxPidExpirationMs = config.transactionalIdExpirationMs`)."""
        return "producer.id.expiration.ms" if self.broker_line == "3.4" else "transactional.id.expiration.ms"

    @property
    def expiration_rule(self) -> str:
        """SEQUENCE_GAP_UNVERIFIED's rule under this profile (the registry's names 3.4's setting)."""
        if self.broker_line == "3.4":
            return f"KIP-854 {self.expiration_setting}"
        return f"{self.expiration_setting} (KIP-98 producer-id expiration)"

    @property
    def accepts_unknown_producer(self) -> bool:
        """2.5+ accepts any sequence from a producer it has no state for (KAFKA-8710, KIP-360)."""
        return BROKER_LINES.index(self.broker_line) >= BROKER_LINES.index("2.5")

    @property
    def _line_refreshes(self) -> bool:
        return self.broker_line != "1.0"

    @property
    def _line_evicts(self) -> bool:
        return not self.accepts_unknown_producer

    @property
    def markers_refresh_expiry(self) -> bool:
        """Whether a transaction marker restarts the producer's expiry time (`lastTimestamp`): in 0.11,
        whose state kept the last append's time, and since 2.4.1 (KAFKA-9144, `marker_refreshes_expiry`;
        never released for 2.3); 1.0 to 2.4.0 time it from the last data batch
        (`ProducerStateEntry.lastTimestamp`, KAFKA-5494)."""
        if self.marker_refreshes_expiry is not None:
            return self.marker_refreshes_expiry
        return self._line_refreshes

    @property
    def evicts_at_log_start(self) -> bool:
        """Whether the broker forgets a producer once the log start offset passes its last data batch
        (`truncateHead`, `isProducerRetained`; 0.11: its last offset): 0.11 to 2.3. From 2.4 it keeps
        the producer until it expires (KAFKA-7190, `log_start_evicts`)."""
        if self.log_start_evicts is not None:
            return self.log_start_evicts
        return self._line_evicts

    @property
    def markers_move_last_offset(self) -> bool:
        """Whether a transaction marker becomes the producer's last offset: in 0.11, whose
        `ProducerIdEntry.lastOffset` took every append's, markers too; 1.0 and later keep the last data
        batch's (`lastDataOffset`). Retention's eviction (`truncateHead`) and snapshots follow it."""
        return self.broker_line == "0.11"

    @property
    def has_unknown_producer_id(self) -> bool:
        """Whether the broker has the UNKNOWN_PRODUCER_ID error (1.0 and later): 0.11 answers a producer
        it holds no state for OUT_OF_ORDER_SEQUENCE_NUMBER."""
        return self.broker_line != "0.11"

    @property
    def unknown_producer_error(self) -> str:
        """What the broker answers a producer it holds no state for whose sequence is not 0 (before 2.5;
        §5.5)."""
        return "UNKNOWN_PRODUCER_ID" if self.has_unknown_producer_id else "OUT_OF_ORDER_SEQUENCE_NUMBER"

    def is_compacted(self, topic: str) -> bool:
        return any(fnmatch.fnmatchcase(topic, pattern) for pattern in self.compacted_topics)

    def describe_window(self) -> str:
        if self.duplicate_window_sequences is not None:
            return f"a {self.duplicate_window_sequences}-sequence duplicate window"
        n = self.duplicate_window_batches
        return f"the last {n} batch{'es' if n != 1 else ''} per producer"
