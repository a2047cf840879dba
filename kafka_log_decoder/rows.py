"""Typed rows produced by the decoders; field names follow audit-contract §5 and Kafka's own names."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class BatchHeader:
    """One v2 record batch, or one legacy (magic 0/1) log entry, as stored in a `.log` file.

    For a legacy entry `base_offset` is the first inner offset and the producer fields are -1.
    `base_timestamp` is None only where the source does not carry it: dump-log text, and a compressed
    legacy v1 wrapper whose CRC fails and whose inner set does not open (its first timestamp is unknown,
    and its `base_offset` and `count` are the wrapper's own offset and 1).
    """

    file: str
    position: int
    base_offset: int
    last_offset: int
    count: int
    magic: int
    crc: int
    crc_valid: bool
    attributes: int
    compression: str
    timestamp_type: str
    is_transactional: bool
    is_control: bool
    partition_leader_epoch: int
    base_timestamp: int | None
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    size_bytes: int
    delete_horizon_ms: int | None = None
    control_type: str | None = None
    coordinator_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Record:
    """One record of a batch (record-level mode).

    Sizes are -1 for a null key or value. The bytes themselves are present when decoded from a
    binary segment and absent (None) when parsed from `kafka-dump-log.sh` text.
    """

    file: str
    batch_position: int
    offset: int
    timestamp: int
    sequence: int
    key_size: int
    value_size: int
    header_keys: list[str] = field(default_factory=list)
    key: bytes | None = None
    value: bytes | None = None
    header_values: list[bytes | None] | None = None


@dataclass(slots=True)
class SnapshotEntry:
    """One producer of a `<offset>.snapshot` file (ProducerSnapshot.json, version 1)."""

    file: str
    snapshot_offset: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


@dataclass(slots=True)
class IndexEntry:
    """`.index`: absolute offset and byte position in the `.log`."""

    file: str
    offset: int
    position: int


@dataclass(slots=True)
class TimeIndexEntry:
    file: str
    timestamp: int
    offset: int


@dataclass(slots=True)
class TxnIndexEntry:
    """`.txnindex`: one aborted transaction (AbortedTxn.java)."""

    file: str
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(slots=True)
class CheckpointEntry:
    """One line of an offset checkpoint (log start, recovery point, high watermark, cleaner offset)."""

    file: str
    checkpoint: str
    topic: str
    partition: int
    offset: int


@dataclass(slots=True)
class LeaderEpochEntry:
    file: str
    epoch: int
    start_offset: int


@dataclass(slots=True)
class PartitionMetadata:
    file: str
    version: int
    topic_id: str
    # The byte position of the `topic_id` line (lines end at \n, \r or \r\n, as BufferedReader's).
    topic_id_position: int = 0


@dataclass(slots=True)
class MetaProperties:
    """A log directory's `meta.properties`: `node.id` (KRaft) or `broker.id` (ZooKeeper) names the replica."""

    file: str
    properties: dict[str, str]

    @property
    def replica_id(self) -> str | None:
        """The id the broker reads (`MetaProperties.Builder`): `node.id` in version 1, `broker.id` in
        version 0 (also a file without a version); else whichever is there."""
        version = (self.properties.get("version") or "0").strip().lstrip("+")
        first, second = ("node.id", "broker.id") if version.lstrip("0") == "1" else ("broker.id", "node.id")
        return self.properties.get(first) or self.properties.get(second)
