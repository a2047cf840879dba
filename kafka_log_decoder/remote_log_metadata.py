"""The values of `__remote_log_metadata` records: tiered storage's (KIP-405) remote segment events.

The topic-based remote log metadata manager writes one record per event. Its value is framed by
`AbstractApiMessageSerde` (storage module): three unsigned varints (frame version 1, the message's
apiKey, its version), then the message, in the flexible encoding of Kafka's generated messages
(compact strings and arrays, a tagged-field section after every struct). The messages, from
storage/src/main/resources/message/:

- apiKey 0, `RemoteLogSegmentMetadataRecord`: a segment copied to remote storage, with its offsets,
  leader epochs, size and state (COPY_SEGMENT_STARTED when the copy begins);
- apiKey 1, `RemoteLogSegmentMetadataUpdateRecord`: the segment's next state (COPY_SEGMENT_FINISHED,
  DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED);
- apiKey 2, `RemotePartitionDeleteMetadataRecord`: a deleted topic's partition, its deletion state.

`kafka-dump-log.sh --remote-log-metadata-decoder` prints the same events; the integration test
compares the two on a real tiered-storage broker's `__remote_log_metadata` segment.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

__all__ = ["RemoteLogMetadataError", "decode_remote_log_metadata", "kafka_uuid"]

FRAME_VERSION = 1
SEGMENT, SEGMENT_UPDATE, PARTITION_DELETE = 0, 1, 2
# RemoteLogSegmentState.id() and RemotePartitionDeleteState.id().
SEGMENT_STATES = {
    0: "COPY_SEGMENT_STARTED",
    1: "COPY_SEGMENT_FINISHED",
    2: "DELETE_SEGMENT_STARTED",
    3: "DELETE_SEGMENT_FINISHED",
}
PARTITION_DELETE_STATES = {
    0: "DELETE_PARTITION_MARKED",
    1: "DELETE_PARTITION_STARTED",
    2: "DELETE_PARTITION_FINISHED",
}


class RemoteLogMetadataError(ValueError):
    """A value that is not a remote log metadata event; `position` is the byte of the value where
    reading failed."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"byte {position} of the value: {message}")
        self.position = position


def kafka_uuid(raw: bytes) -> str:
    """Kafka's `Uuid.toString()`: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            left = len(self.data) - self.pos
            raise RemoteLogMetadataError(self.pos, f"{what} needs {n} bytes, {left} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def uvarint(self, what: str) -> int:
        start, value, shift = self.pos, 0, 0
        while True:
            (byte,) = self.take(1, what)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RemoteLogMetadataError(start, f"{what}: unsigned varint longer than 5 bytes")

    def compact_string(self, what: str) -> str:
        n = self.uvarint(what) - 1
        if n < 0:
            raise RemoteLogMetadataError(self.pos, f"{what}: null where a string is required")
        start = self.pos
        try:
            return self.take(n, what).decode()
        except UnicodeDecodeError:
            raise RemoteLogMetadataError(start, f"{what}: not UTF-8") from None

    def compact_nullable_bytes(self, what: str) -> bytes | None:
        n = self.uvarint(what) - 1
        return None if n < 0 else self.take(n, what)

    def tagged_fields(self, what: str) -> dict[int, tuple[int, bytes]]:
        """Each tag's (position of its value in the message, value bytes)."""
        fields: dict[int, tuple[int, bytes]] = {}
        for _ in range(self.uvarint(f"{what} tagged field count")):
            tag = self.uvarint(f"{what} tag")
            size = self.uvarint(f"{what} tag {tag} size")
            fields[tag] = (self.pos, self.take(size, f"{what} tag {tag}"))
        return fields


def _tagged_int(fields: dict[int, tuple[int, bytes]], tag: int, fmt: str) -> int | None:
    if tag not in fields:
        return None
    position, raw = fields[tag]
    if len(raw) != struct.calcsize(fmt):
        raise RemoteLogMetadataError(position, f"tagged field {tag} has {len(raw)} bytes")
    return int(struct.unpack(fmt, raw)[0])


def _topic_id_partition(r: _Reader) -> dict[str, Any]:
    topic = r.compact_string("topic name")
    topic_id = kafka_uuid(r.take(16, "topic id"))
    partition = r.unpack(">i", "partition")
    r.tagged_fields("TopicIdPartition")
    return {"topic": topic, "topic_id": topic_id, "partition": partition}


def _segment_id(r: _Reader) -> dict[str, Any]:
    out = _topic_id_partition(r)
    out["segment_id"] = kafka_uuid(r.take(16, "segment id"))
    r.tagged_fields("RemoteLogSegmentId")
    return out


def _state(r: _Reader, names: dict[int, str]) -> str:
    start = r.pos
    state = r.unpack(">b", "state")
    if state not in names:
        raise RemoteLogMetadataError(start, f"unknown state id {state}")
    return names[state]


def decode_remote_log_metadata(value: bytes) -> dict[str, Any]:
    """One `__remote_log_metadata` record value as a JSON-ready dict (`event` names the message);
    raises `RemoteLogMetadataError` naming the byte of the value where it is not one."""
    r = _Reader(value)
    frame = r.uvarint("frame version")
    if frame != FRAME_VERSION:
        raise RemoteLogMetadataError(0, f"frame version {frame}, expected {FRAME_VERSION}")
    api_key_at = r.pos
    api_key = r.uvarint("apiKey")
    version = r.uvarint("version")
    if version > 1:
        raise RemoteLogMetadataError(api_key_at, f"message version {version} (known: 0-1)")
    out: dict[str, Any]
    if api_key == SEGMENT:
        out = {"event": "segment", **_segment_id(r)}
        # What the broker's `RemoteLogSegmentMetadata` refuses to hold: a value it cannot read is no
        # remote segment (offsets it would explain as tiered are not).
        start_at = r.pos
        out["start_offset"] = r.unpack(">q", "start offset")
        if out["start_offset"] < 0:
            raise RemoteLogMetadataError(start_at, f"start offset {out['start_offset']} is negative")
        end_at = r.pos
        out["end_offset"] = r.unpack(">q", "end offset")
        if out["end_offset"] < out["start_offset"]:
            raise RemoteLogMetadataError(
                end_at, f"end offset {out['end_offset']} is below the start offset {out['start_offset']}"
            )
        out["broker_id"] = r.unpack(">i", "broker id")
        out["max_timestamp_ms"] = r.unpack(">q", "max timestamp")
        out["event_timestamp_ms"] = r.unpack(">q", "event timestamp")
        epochs = []
        epochs_at = r.pos
        count = r.uvarint("segment leader epochs") - 1
        if count < 1:
            raise RemoteLogMetadataError(
                epochs_at,
                "segment leader epochs " + ("is null (a non-nullable field)" if count < 0 else "is empty"),
            )
        for _ in range(count):
            epoch = r.unpack(">i", "leader epoch")
            offset = r.unpack(">q", "leader epoch start offset")
            r.tagged_fields("SegmentLeaderEpoch")
            epochs.append([epoch, offset])
        out["segment_leader_epochs"] = epochs
        out["segment_size_bytes"] = r.unpack(">i", "segment size")
        custom = r.compact_nullable_bytes("custom metadata")
        out["custom_metadata_size"] = None if custom is None else len(custom)
        out["state"] = _state(r, SEGMENT_STATES)
        tags = r.tagged_fields("RemoteLogSegmentMetadataRecord")
        txn_index_empty = _tagged_int(tags, 0, ">?")
        out["txn_index_empty"] = None if txn_index_empty is None else bool(txn_index_empty)
        out["broker_leader_epoch"] = _tagged_int(tags, 1, ">i")
    elif api_key == SEGMENT_UPDATE:
        out = {"event": "segment_update", **_segment_id(r)}
        out["broker_id"] = r.unpack(">i", "broker id")
        out["event_timestamp_ms"] = r.unpack(">q", "event timestamp")
        custom = r.compact_nullable_bytes("custom metadata")
        out["custom_metadata_size"] = None if custom is None else len(custom)
        out["state"] = _state(r, SEGMENT_STATES)
        tags = r.tagged_fields("RemoteLogSegmentMetadataUpdateRecord")
        out["broker_leader_epoch"] = _tagged_int(tags, 0, ">i")
        out["end_offset"] = _tagged_int(tags, 1, ">q")
    elif api_key == PARTITION_DELETE:
        out = {"event": "partition_delete", **_topic_id_partition(r)}
        out["broker_id"] = r.unpack(">i", "broker id")
        out["event_timestamp_ms"] = r.unpack(">q", "event timestamp")
        out["state"] = _state(r, PARTITION_DELETE_STATES)
        tags = r.tagged_fields("RemotePartitionDeleteMetadataRecord")
        out["broker_leader_epoch"] = _tagged_int(tags, 0, ">i")
        out["end_offset"] = _tagged_int(tags, 1, ">q")
    else:
        raise RemoteLogMetadataError(api_key_at, f"apiKey {api_key} is no remote log metadata event (0-2)")
    if r.pos != len(value):
        raise RemoteLogMetadataError(r.pos, f"{len(value) - r.pos} bytes after the message")
    return {"api_key": api_key, "version": version, **out}
