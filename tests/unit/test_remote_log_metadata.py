"""`__remote_log_metadata` values (tiered storage, KIP-405). The bytes below were written by a real
Kafka 4.3.1 broker with `LocalTieredStorage` (the first two records of its `__remote_log_metadata-0`);
tests/integration/test_tiered_storage.py compares the decoder with `kafka-dump-log.sh
--remote-log-metadata-decoder` on a fresh broker's segment."""

from __future__ import annotations

import pytest

from kafka_log_decoder.remote_log_metadata import RemoteLogMetadataError, decode_remote_log_metadata

# RemoteLogSegmentMetadataRecord v0: tiered-0's first segment, offsets 0-199, COPY_SEGMENT_STARTED.
SEGMENT = bytes.fromhex(
    "01000007746965726564f2b8cc71cdd948089008d3d8804592cd0000000000d7166d506c9f4ed29570d8a6470cac32"
    "00000000000000000000000000000000c700000001000001a21d996e35000001a21d99766402000000000000000000"
    "0000000000003897000001000101"
)
# RemoteLogSegmentMetadataUpdateRecord v0: the same segment, COPY_SEGMENT_FINISHED.
UPDATE = bytes.fromhex(
    "01010007746965726564f2b8cc71cdd948089008d3d8804592cd0000000000d7166d506c9f4ed29570d8a6470cac32"
    "0000000001000001a21d9976c5000100"
)


def test_a_segment_event_as_the_broker_wrote_it() -> None:
    # The figures kafka-dump-log.sh --remote-log-metadata-decoder printed for the same record.
    assert decode_remote_log_metadata(SEGMENT) == {
        "api_key": 0,
        "version": 0,
        "event": "segment",
        "topic": "tiered",
        "topic_id": "8rjMcc3ZSAiQCNPYgEWSzQ",
        "partition": 0,
        "segment_id": "1xZtUGyfTtKVcNimRwysMg",
        "start_offset": 0,
        "end_offset": 199,
        "broker_id": 1,
        "max_timestamp_ms": 1795792924213,
        "event_timestamp_ms": 1795792926308,
        "segment_leader_epochs": [[0, 0]],
        "segment_size_bytes": 14487,
        "custom_metadata_size": None,
        "state": "COPY_SEGMENT_STARTED",
        "txn_index_empty": True,
        "broker_leader_epoch": None,
    }


def test_a_segment_update_as_the_broker_wrote_it() -> None:
    update = decode_remote_log_metadata(UPDATE)
    assert (update["event"], update["segment_id"], update["state"]) == (
        "segment_update",
        "1xZtUGyfTtKVcNimRwysMg",
        "COPY_SEGMENT_FINISHED",
    )
    assert update["broker_id"] == 1 and update["event_timestamp_ms"] == 1795792926405
    assert update["end_offset"] is None  # a tagged field of version 1


@pytest.mark.parametrize("cut", [1, 3, 20, 60, len(SEGMENT) - 1])
def test_a_truncated_value_names_the_byte_where_it_ends(cut: int) -> None:
    shape = r"^byte \d+ of the value: .* needs \d+ bytes, \d+ left$"
    with pytest.raises(RemoteLogMetadataError, match=shape) as err:
        decode_remote_log_metadata(SEGMENT[:cut])
    assert err.value.position <= cut


def test_other_bytes_are_refused_with_the_reason() -> None:
    with pytest.raises(RemoteLogMetadataError, match=r"^byte 0 of the value: frame version 2, expected 1$"):
        decode_remote_log_metadata(b"\x02" + SEGMENT[1:])
    with pytest.raises(RemoteLogMetadataError, match=r"^byte 1 of the value: apiKey 7 is no remote log"):
        decode_remote_log_metadata(b"\x01\x07" + SEGMENT[2:])
    with pytest.raises(RemoteLogMetadataError, match=rf"^byte {len(SEGMENT)} of the value: 1 bytes after"):
        decode_remote_log_metadata(SEGMENT + b"\x00")
    state_at = len(SEGMENT) - 5  # the state byte, before the tagged fields (count 1, tag 0, size 1, true)
    assert SEGMENT[state_at] == 0
    with pytest.raises(RemoteLogMetadataError, match=rf"^byte {state_at} of the value: unknown state id 9$"):
        decode_remote_log_metadata(SEGMENT[:state_at] + b"\x09" + SEGMENT[state_at + 1 :])


def test_a_tagged_field_of_the_wrong_size_names_where_its_value_starts() -> None:
    # TxnIndexEmpty (tag 0) is one byte; the broker's value ends with it: count 1, tag 0, size 1, true.
    assert SEGMENT[-4:] == bytes([1, 0, 1, 1])
    wrong = SEGMENT[:-2] + bytes([2, 1, 1])
    with pytest.raises(
        RemoteLogMetadataError, match=rf"^byte {len(SEGMENT) - 1} of the value: tagged field 0 has 2"
    ):
        decode_remote_log_metadata(wrong)


def test_a_segment_the_broker_could_not_hold_is_refused_where_it_goes_wrong() -> None:
    """What `RemoteLogSegmentMetadata` (and the generated record reader) refuse, checked with the Kafka
    4.3.1 classes: a null or empty leader-epoch array, a negative start offset, an end below the start.
    Such a value is no remote segment: it explains no offset below a log's start as tiered."""
    start_at, end_at, epochs_at = 48, 56, 84
    assert int.from_bytes(SEGMENT[end_at : end_at + 8], "big") == 199 and SEGMENT[epochs_at] == 2

    def offsets(start: int, end: int) -> bytes:
        return start.to_bytes(8, "big", signed=True) + end.to_bytes(8, "big", signed=True)

    with pytest.raises(RemoteLogMetadataError, match=rf"^byte {start_at} of the value: start offset -5 is"):
        decode_remote_log_metadata(SEGMENT[:start_at] + offsets(-5, 199) + SEGMENT[epochs_at - 20 :])
    with pytest.raises(RemoteLogMetadataError, match=rf"^byte {end_at} of the value: end offset 50 is below"):
        decode_remote_log_metadata(SEGMENT[:start_at] + offsets(100, 50) + SEGMENT[epochs_at - 20 :])
    # The array (count + 1, then each entry: epoch, start offset, tagged fields) replaced by none.
    after_epochs = epochs_at + 1 + 4 + 8 + 1
    for count, what in ((0, "is null"), (1, "is empty")):
        value = SEGMENT[:epochs_at] + bytes([count]) + SEGMENT[after_epochs:]
        with pytest.raises(RemoteLogMetadataError, match=rf"^byte {epochs_at} of the value: .*epochs {what}"):
            decode_remote_log_metadata(value)
    # Offsets the broker holds, spliced the same way, decode: the splices change only what they name.
    fine = decode_remote_log_metadata(SEGMENT[:start_at] + offsets(100, 150) + SEGMENT[epochs_at - 20 :])
    assert (fine["start_offset"], fine["end_offset"], fine["segment_leader_epochs"]) == (100, 150, [[0, 0]])
