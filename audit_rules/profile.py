"""The rule profile: which broker's rules the replay applies (kafka-formats-and-rules §5.5, §5.7).

Profiles are YAML in `conf/profiles/` (loaded by `jobs.profiles`); this module holds only the typed
values the rules read, so rules never touch files.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

DAY_MS = 86_400_000
# Broker lines whose unknown-producer handling differs (§5.5): before 1.0, 1.0 to 2.4, 2.5 to 3.3,
# 3.4 and later.
BROKER_LINES = ("0.11", "1.0", "2.5", "3.4")
DEFAULT_COMPACTED = ("__consumer_offsets", "__transaction_state", "__cluster_metadata")
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
    compacted_topics: tuple[str, ...] = DEFAULT_COMPACTED
    app_sequence: AppSequenceSpec | None = field(default=None)

    def __post_init__(self) -> None:
        if self.broker_line not in BROKER_LINES:
            raise ValueError(
                f"profile {self.name}: broker_line {self.broker_line!r} not one of {BROKER_LINES}"
            )
        if self.duplicate_window_batches < 1:
            raise ValueError(f"profile {self.name}: duplicate_window_batches must be >= 1")
        if self.producer_id_expiration_ms <= 0 or self.transaction_max_timeout_ms <= 0:
            raise ValueError(f"profile {self.name}: timeouts must be positive")

    @property
    def accepts_unknown_producer(self) -> bool:
        """2.5+ accepts any sequence from a producer it has no state for (KAFKA-8710, KIP-360)."""
        return BROKER_LINES.index(self.broker_line) >= BROKER_LINES.index("2.5")

    @property
    def markers_refresh_expiry(self) -> bool:
        """Whether a transaction marker restarts the producer's expiry time (`lastTimestamp`): in 0.11,
        whose state kept the last append's time, and since 2.5 (KAFKA-9144); 1.0 to 2.4 time it from
        the last data batch (`ProducerStateEntry.lastTimestamp`, KAFKA-5494). (KAFKA-9144 reached later
        2.3 and 2.4 patch releases too; the line does not tell them apart.)"""
        return self.broker_line != "1.0"

    def is_compacted(self, topic: str) -> bool:
        return any(fnmatch.fnmatchcase(topic, pattern) for pattern in self.compacted_topics)

    def describe_window(self) -> str:
        if self.duplicate_window_sequences is not None:
            return f"a {self.duplicate_window_sequences}-sequence duplicate window"
        n = self.duplicate_window_batches
        return f"the last {n} batch{'es' if n != 1 else ''} per producer"
