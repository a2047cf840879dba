"""The reference replay (tests/reference_replay.py) against RULES.md, one behaviour per test.

Cases come from the broker's own tests (`ProducerStateManagerTest`, kafka-formats-and-rules §5) and
the failure signatures of prior-art §5. `B(off, pid, e, s..t)` in a docstring is a batch at `off`.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from audit_rules.kinds import EXPLAINED_BY, KINDS
from audit_rules.profile import DAY_MS, Profile
from tests.reference_replay import SEQUENCE_MODULUS, reference_findings, unwrap_after
from tests.strategies import MAX_SEQUENCE, MINUTE_MS, LogBuilder, LogHistory, log_histories

PID = 4242
KAFKA_3_4 = Profile()
KAFKA_1_0 = Profile(name="kafka-1.0", broker_line="1.0", producer_id_expiration_ms=7 * DAY_MS)
KAFKA_0_11 = Profile(
    name="kafka-0.11", broker_line="0.11", duplicate_window_batches=1, producer_id_expiration_ms=7 * DAY_MS
)
KIP_758 = Profile(name="kip-758-window", duplicate_window_sequences=1000)


def replay(
    log: LogBuilder, *, profile: Profile = KAFKA_3_4, log_start_offset: int = 0, compacted: bool = False
) -> list[dict[str, Any]]:
    return reference_findings(
        log.rows, profile=profile, log_start_offset=log_start_offset, compacted=compacted
    )


def kinds(findings: list[dict[str, Any]]) -> list[str]:
    return [f["kind"] for f in findings]


def only(findings: list[dict[str, Any]], kind: str | None = None) -> dict[str, Any]:
    """The single finding (of `kind`, if given)."""
    chosen = [f for f in findings if kind is None or f["kind"] == kind]
    assert len(chosen) == 1, findings
    return chosen[0]


def evidence(finding: dict[str, Any], *fields: str) -> tuple[Any, ...]:
    return tuple(finding[f] for f in fields)


def in_sequence(log: LogBuilder, *sizes: int, epoch: int = 0, first: int = 0) -> int:
    """Data batches of `sizes` records from sequence `first`; returns the next sequence."""
    seq = first
    for n in sizes:
        log.data(PID, epoch, seq, n)
        seq = (seq + n) % SEQUENCE_MODULUS
    return seq


# ---------------------------------------------------------------------------------------------
# Clean histories


def test_in_sequence_batches_have_no_findings() -> None:
    log = LogBuilder()
    in_sequence(log, 3, 1, 5, 2)
    assert replay(log) == []


def test_non_idempotent_batches_are_ignored() -> None:
    log = LogBuilder()
    log.plain(3)
    log.data(PID, 0, 0, 2)
    log.plain(1)
    log.data(PID, 0, 2, 2)
    assert replay(log) == []


def test_sequence_continues_across_a_marker_of_the_same_epoch() -> None:
    """Before transactions V2 a COMMIT keeps the epoch, and the sequence carries on (§5.6)."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)
    log.marker(PID, 0, "COMMIT", 1)
    log.data(PID, 0, 2, 2, transactional=True)
    log.marker(PID, 0, "COMMIT", 1)
    assert replay(log) == []


# ---------------------------------------------------------------------------------------------
# Where a producer's history starts


def test_gap_below_log_start_is_retention_not_loss() -> None:
    """franz-go #805 / KIP-360: the first retained batch starts mid-sequence: older segments were deleted."""
    log = LogBuilder(start_offset=1000)
    log.data(PID, 0, 50, 3)
    f = only(replay(log, log_start_offset=1000))
    assert evidence(f, "kind", "first_offset", "base_sequence", "expected_sequence", "explained_by") == (
        "HISTORY_TRUNCATED_BY_RETENTION", 1000, 50, 0, "retention",
    )  # fmt: skip


def test_mid_sequence_start_on_complete_log_is_history_start_missing() -> None:
    log = LogBuilder()
    log.data(PID, 0, 7, 3)
    f = only(replay(log))
    assert evidence(f, "kind", "expected_sequence", "explained_by") == ("HISTORY_START_MISSING", 0, None)


def test_mid_sequence_start_on_compacted_topic_is_explained_by_compaction() -> None:
    """The cleaner removed the batches of sequences 0-6 and kept their offsets free: the first retained
    batch starts at offset 7."""
    log = LogBuilder(topic="__consumer_offsets")
    log.next_offset = 7
    log.data(PID, 0, 7, 3)
    f = only(replay(log, compacted=True))
    assert evidence(f, "kind", "explained_by") == ("HISTORY_TRUNCATED_BY_RETENTION", "compaction")


def test_mid_sequence_start_with_no_offsets_free_is_missing_history_on_a_compacted_topic_too() -> None:
    """Sequences 0-6 would have needed offsets 0-6; the batch starts at offset 3: they were never here."""
    log = LogBuilder(topic="__consumer_offsets")
    log.next_offset = 3
    log.data(PID, 0, 7, 3)
    f = only(replay(log, compacted=True))
    assert evidence(f, "kind", "explained_by") == ("HISTORY_START_MISSING", None)


def test_sequences_before_the_first_batch_that_later_batches_hold_are_not_missing() -> None:
    """B(0, 5..9), then B(5, 0..4): the first batch's earlier sequences are in the log, out of order
    (one regression, nothing lost). With only B(5, 0..1) after it, 2..4 are in no batch: 3 missing."""
    log = LogBuilder()
    log.data(PID, 0, 5, 5)
    log.data(PID, 0, 0, 5)
    assert kinds(replay(log)) == ["SEQUENCE_REGRESSION"]
    part = LogBuilder()
    part.data(PID, 0, 5, 5)
    part.data(PID, 0, 0, 2)
    found = {f["kind"]: f for f in replay(part)}
    assert sorted(found) == ["HISTORY_START_MISSING", "SEQUENCE_REGRESSION"]
    assert found["HISTORY_START_MISSING"]["missing_records"] == 3


def test_a_restart_after_the_broker_forgot_the_producer_fills_no_earlier_sequence() -> None:
    """B(0, 5..9), eight days idle, B(5, 0..4): the broker had forgotten the producer and a client
    restarting its sequence wrote 0..4, other records: the first batch's 0..4 are still missing."""
    log = LogBuilder()
    log.data(PID, 0, 5, 5)
    log.wait(8 * DAY_MS)
    log.data(PID, 0, 0, 5)
    found = {f["kind"]: f for f in replay(log)}
    assert sorted(found) == ["HISTORY_START_MISSING", "SEQUENCE_REGRESSION"]
    assert found["HISTORY_START_MISSING"]["missing_records"] == 5


def test_a_regression_the_broker_took_after_forgetting_the_producer_is_explained_by_expiry() -> None:
    """B(0, 0..4), eight days idle, B(5, 2..2): 3.4 had forgotten the producer and took any sequence;
    1.0 takes only 0 from a producer it forgot, so it should have refused it: no explanation."""
    log = LogBuilder()
    log.data(PID, 0, 0, 5)
    log.wait(8 * DAY_MS)
    log.data(PID, 0, 2, 1)
    assert evidence(only(replay(log)), "kind", "explained_by") == ("SEQUENCE_REGRESSION", "expiry")
    assert evidence(only(replay(log, profile=KAFKA_1_0)), "kind", "explained_by") == (
        "SEQUENCE_REGRESSION",
        None,
    )


def test_first_batch_at_sequence_zero_needs_no_history() -> None:
    log = LogBuilder(start_offset=1000)
    log.data(PID, 3, 0, 3)
    assert replay(log, log_start_offset=1000) == []


def test_marker_only_history_then_nonzero_is_history_start() -> None:
    """`testAppendTxnMarkerWithNoProducerState`: only a marker of epoch 2 is known; 17 is not its start."""
    log = LogBuilder()
    log.marker(PID, 2, "COMMIT", 0)
    log.data(PID, 2, 17, 1)
    empty, f = replay(log)
    # The marker closes nothing the log holds, and the log holds every offset from 0.
    assert evidence(empty, "kind", "first_offset", "related_offset") == ("EMPTY_TXN_MARKER", 0, None)
    assert evidence(f, "kind", "first_offset", "expected_sequence") == ("HISTORY_START_MISSING", 1, 0)


# ---------------------------------------------------------------------------------------------
# Gaps, regressions and the Sarama #2619 shape


def test_sequence_gap_within_epoch_is_loss() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 5)
    log.data(PID, 0, 8, 2)
    f = only(replay(log))
    assert evidence(f, "kind", "first_offset", "related_offset", "expected_sequence", "missing_records") == (
        "SEQUENCE_GAP", 5, 0, 5, 3,
    )  # fmt: skip


def test_sarama_2619_shape_is_one_regression_no_gap() -> None:
    """Sequences 0-1, 4-5, 2-3, 6: the late batch is the regression and nothing is lost."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2)  # offsets 0-1
    log.data(PID, 0, 4, 2)  # 2-3
    log.data(PID, 0, 2, 2)  # 4-5
    log.data(PID, 0, 6, 1)  # 6
    f = only(replay(log))
    assert evidence(f, "kind", "first_offset", "related_offset", "expected_sequence") == (
        "SEQUENCE_REGRESSION", 4, 2, 6,
    )  # fmt: skip


def test_gap_counts_only_numbers_no_batch_covers() -> None:
    """0-4, then 12: 5-11 skipped, but 7-8 arrive later, so 5 numbers are missing."""
    log = LogBuilder()
    log.data(PID, 0, 0, 5)
    log.data(PID, 0, 12, 1)
    log.data(PID, 0, 7, 2)
    gap = only(replay(log), "SEQUENCE_GAP")
    assert evidence(gap, "first_offset", "expected_sequence", "missing_records") == (5, 5, 5)


def test_regression_then_jump_counts_from_the_regression() -> None:
    """RULES.md step 5: `expected` follows the previous batch, even when that batch was the late one."""
    log = LogBuilder()
    log.data(PID, 0, 0, 5)  # offsets 0-4
    log.data(PID, 0, 5, 5)  # 5-9
    log.data(PID, 0, 2, 2)  # 10-11: regression
    log.data(PID, 0, 20, 1)  # 12: expected 4, of 4-19 only 10-19 are in no batch
    findings = replay(log)
    assert kinds(findings) == ["SEQUENCE_REGRESSION", "SEQUENCE_GAP"]
    assert evidence(findings[1], "related_offset", "expected_sequence", "missing_records") == (10, 4, 10)


def test_gap_on_compacted_topic_is_not_reported_where_offsets_could_have_held_it() -> None:
    """Sequences 5-7 need three offsets no batch holds between the batch at 0-4 and the next: 5-7 empty
    could have held them. Right after it (offset 5), or with another producer's batch holding 5-7, they
    never had offsets in this log: the cleaner keeps the offsets of every batch it keeps."""
    log = LogBuilder(topic="__consumer_offsets")
    log.data(PID, 0, 0, 5)
    log.next_offset = 8
    log.data(PID, 0, 8, 2)
    assert replay(log, compacted=True) == []
    for other in (False, True):
        tight = LogBuilder(topic="__consumer_offsets")
        tight.data(PID, 0, 0, 5)
        if other:
            tight.data(PID + 1, 0, 0, 3)
        tight.data(PID, 0, 8, 2)
        assert [f["kind"] for f in replay(tight, compacted=True)] == ["SEQUENCE_GAP"], other
    # Two copies of the batch at 0-4 hold those offsets once: 5-7 are still free.
    copied = LogBuilder(topic="__consumer_offsets")
    copied.data(PID, 0, 0, 5)
    copied.next_offset = 0
    copied.data(PID, 0, 0, 5)
    copied.next_offset = 8
    copied.data(PID, 0, 8, 2)
    assert "SEQUENCE_GAP" not in {f["kind"] for f in replay(copied, compacted=True)}
    # After a regression (sequences 2-3 at offsets 10-11), sequences 5-9 may lie before it (offsets 5-9,
    # where the cleaner removed them): the offsets are not counted from the late batch.
    late = LogBuilder(topic="__consumer_offsets")
    late.data(PID, 0, 0, 5)
    late.next_offset = 10
    late.data(PID, 0, 2, 2)
    late.data(PID, 0, 10, 1)
    assert [f["kind"] for f in replay(late, compacted=True)] == ["SEQUENCE_REGRESSION"]


# ---------------------------------------------------------------------------------------------
# Expiry (KIP-854) and broker lines


def test_gap_after_expiry_is_unverified() -> None:
    """KIP-854: idle for longer than producer.id.expiration.ms, a 2.5+ broker accepts any sequence."""
    log = LogBuilder()
    log.data(PID, 0, 0, 5)
    log.wait(2 * DAY_MS)
    log.data(PID, 0, 9, 1)
    f = only(replay(log))
    assert evidence(f, "kind", "explained_by", "expected_sequence", "missing_records") == (
        "SEQUENCE_GAP_UNVERIFIED", "expiry", 5, 4,
    )  # fmt: skip


def test_gap_after_expiry_on_1_0_line_is_gap() -> None:
    """Brokers before 2.5 answer UNKNOWN_PRODUCER_ID to a producer they forgot: a gap was never accepted."""
    log = LogBuilder()
    log.data(PID, 0, 0, 5)
    log.wait(8 * DAY_MS)
    log.data(PID, 0, 9, 1)
    assert kinds(replay(log, profile=KAFKA_1_0)) == ["SEQUENCE_GAP"]


def test_gap_after_exactly_the_expiration_is_unverified() -> None:
    """`isProducerExpired`: now - lastTimestamp >= producerIdExpirationMs."""
    log = LogBuilder()
    first = log.data(PID, 0, 0, 1)
    log.data(PID, 0, 5, 1, timestamp=first["max_timestamp"] + DAY_MS)
    assert kinds(replay(log)) == ["SEQUENCE_GAP_UNVERIFIED"]


def test_gap_one_millisecond_before_expiration_is_gap() -> None:
    log = LogBuilder()
    first = log.data(PID, 0, 0, 1)
    log.data(PID, 0, 5, 1, timestamp=first["max_timestamp"] + DAY_MS - 1)
    assert kinds(replay(log)) == ["SEQUENCE_GAP"]


# ---------------------------------------------------------------------------------------------
# Wraparound at 2^31 (§1.4, `testProducerSequenceWrapAround` and friends)


def test_unwrap_reads_the_counter_nearest_the_previous_value() -> None:
    assert unwrap_after(0, MAX_SEQUENCE) == SEQUENCE_MODULUS
    assert unwrap_after(MAX_SEQUENCE, SEQUENCE_MODULUS + 3) == MAX_SEQUENCE
    assert unwrap_after(MAX_SEQUENCE - 1, 5) == -2
    assert unwrap_after(6, 5) == 6


# A log whose start lies past 2^31 offsets: room below it for a producer's first 2^31 - 1 sequences.
LATE = 1 << 32


def test_wrap_from_max_to_zero_is_in_sequence() -> None:
    log = LogBuilder(start_offset=LATE)
    in_sequence(log, 1, 1, 2, 1, first=MAX_SEQUENCE - 1)  # ..., 2147483647, 0-1, 2
    assert kinds(replay(log, log_start_offset=LATE)) == ["HISTORY_TRUNCATED_BY_RETENTION"]


def test_batch_spanning_wrap() -> None:
    """`testProducerSequenceWithWrapAroundBatchRecord`: one batch from MaxInt-10 to 9, then 10."""
    log = LogBuilder(start_offset=LATE)
    spanning = log.data(PID, 0, MAX_SEQUENCE - 10, 21)
    log.data(PID, 0, 10, 1)
    assert spanning["last_sequence"] == 9
    assert kinds(replay(log, log_start_offset=LATE)) == ["HISTORY_TRUNCATED_BY_RETENTION"]


def test_a_first_sequence_the_offsets_below_cannot_have_held_is_missing() -> None:
    """Sequences 0..999 took an offset each below the first batch: with the log starting at 10, at
    least 990 of them were never in the log (retention cannot explain them)."""
    log = LogBuilder(start_offset=10)
    log.data(PID, 0, 1000, 5)
    f = only(replay(log, log_start_offset=10), "HISTORY_START_MISSING")
    assert evidence(f, "expected_sequence", "missing_records") == (0, 990)
    roomy = LogBuilder(start_offset=1000)
    roomy.data(PID, 0, 1000, 5)
    assert kinds(replay(roomy, log_start_offset=1000)) == ["HISTORY_TRUNCATED_BY_RETENTION"]
    # On a compacted log the cleaner may have taken the offsets above the start too.
    assert kinds(replay(roomy, log_start_offset=10, compacted=True)) == ["HISTORY_TRUNCATED_BY_RETENTION"]


def test_a_restart_at_zero_far_from_the_wrap_is_a_regression_not_a_gap() -> None:
    """A base of 0 wraps only straight after 2147483647 (or where the offsets after the batch before could
    hold the sequences skipped to it: none here); after 1,499,999,999 the producer started again
    (a client restarting at 0 once its broker forgot it), not 647,483,648 records lost."""
    log = LogBuilder(start_offset=LATE)
    log.data(PID, 0, 1_499_999_990, 10)
    log.data(PID, 0, 0, 5)
    log.data(PID, 0, 5, 5)
    found = kinds(replay(log, log_start_offset=LATE))
    assert "SEQUENCE_GAP" not in found and "SEQUENCE_REGRESSION" in found, found
    assert unwrap_after(0, 1_499_999_999) == 0
    assert unwrap_after(0, MAX_SEQUENCE) == SEQUENCE_MODULUS
    assert unwrap_after(3, 1_499_999_999) == SEQUENCE_MODULUS + 3


def test_invalid_wrap_to_one_is_gap_or_regression() -> None:
    """`testProducerSequenceInvalidWrapAround`: MaxInt then 1 skips 0: a gap of one, expected 0."""
    log = LogBuilder(start_offset=1000)
    log.data(PID, 0, MAX_SEQUENCE, 1)
    log.data(PID, 0, 1, 1)
    f = only(replay(log, log_start_offset=1000), "SEQUENCE_GAP")
    assert evidence(f, "expected_sequence", "missing_records", "related_offset") == (0, 1, 1000)


def test_step_back_across_the_wrap_is_regression() -> None:
    log = LogBuilder(start_offset=1000)
    log.data(PID, 0, MAX_SEQUENCE - 1, 2)  # offsets 1000-1001
    log.data(PID, 0, 0, 4)  # 1002-1005: 0-3 after the wrap
    log.data(PID, 0, MAX_SEQUENCE, 1)  # 1006: back before the wrap
    f = only(replay(log, log_start_offset=1000), "SEQUENCE_REGRESSION")
    assert evidence(f, "first_offset", "related_offset", "expected_sequence") == (1006, 1002, 4)


def test_gap_across_the_wrap_reports_expected_modulo_2_31() -> None:
    log = LogBuilder(start_offset=1000)
    log.data(PID, 0, MAX_SEQUENCE - 1, 2)
    log.data(PID, 0, 3, 1)
    f = only(replay(log, log_start_offset=1000), "SEQUENCE_GAP")
    assert evidence(f, "expected_sequence", "missing_records") == (0, 3)


def test_duplicate_is_matched_on_unwrapped_sequences() -> None:
    """A retry of the batch spanning the wrap is a duplicate, not a regression."""
    log = LogBuilder(start_offset=1000)
    log.data(PID, 0, MAX_SEQUENCE - 1, 4)  # 2147483646..1
    log.data(PID, 0, 2, 1)
    log.data(PID, 0, MAX_SEQUENCE - 1, 4)
    f = only(replay(log, log_start_offset=1000), "DUPLICATE_BATCH")
    assert f["related_offset"] == 1000


# ---------------------------------------------------------------------------------------------
# Duplicates and the broker's window (KAFKA-5494, KIP-758 draft)


def test_duplicate_inside_window_message_says_caught() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 1)
    log.data(PID, 0, 1, 1)
    log.data(PID, 0, 1, 1)
    f = only(replay(log))
    assert evidence(f, "kind", "first_offset", "related_offset") == ("DUPLICATE_BATCH", 2, 1)
    assert "should have caught" in f["message"]


def test_duplicate_outside_window_message_says_not_caught() -> None:
    """Five batches lie between the copies: the first copy has left the 5-batch cache."""
    log = LogBuilder()
    in_sequence(log, 1, 1, 1, 1, 1, 1)
    log.data(PID, 0, 0, 1)
    f = only(replay(log))
    assert (f["kind"], f["related_offset"]) == ("DUPLICATE_BATCH", 0)
    assert "should have caught" not in f["message"]


def test_duplicate_four_batches_later_is_inside_the_window() -> None:
    log = LogBuilder()
    in_sequence(log, 1, 1, 1, 1, 1)
    log.data(PID, 0, 0, 1)
    assert "should have caught" in only(replay(log))["message"]


def test_duplicate_after_expiry_message_says_not_caught() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 1)
    log.wait(2 * DAY_MS)
    log.data(PID, 0, 0, 1)
    assert "should have caught" not in only(replay(log))["message"]


def test_duplicate_window_of_one_batch_on_0_11() -> None:
    """0.11 cached only the last batch: a copy one batch later was not recognised."""
    log = LogBuilder()
    log.data(PID, 0, 0, 1)
    log.data(PID, 0, 1, 1)
    log.data(PID, 0, 0, 1)
    assert "should have caught" not in only(replay(log, profile=KAFKA_0_11))["message"]


def test_duplicate_within_kip_758_sequence_window_is_caught_many_batches_later() -> None:
    log = LogBuilder()
    in_sequence(log, *[10] * 20)  # 200 sequences in 20 batches
    log.data(PID, 0, 0, 10)
    assert "should have caught" in only(replay(log, profile=KIP_758))["message"]


def test_the_kip_758_window_reads_the_copys_first_sequence_and_takes_1000_itself() -> None:
    """Seed 003: "within 1000 of the latest sequence number", the produce request's: its first. A copy
    of 0-899 after 900-1800 is 1800 back (it was read from its last, 899: 901, caught); one whose first
    sequence is exactly 1000 back is within (it was not)."""
    far = LogBuilder()
    in_sequence(far, 900, 901)
    far.data(PID, 0, 0, 900)
    assert "should have caught" not in only(replay(far, profile=KIP_758))["message"]
    edge = LogBuilder()
    in_sequence(edge, 1, *[100] * 10)  # 0, 1-100, ..., 901-1000
    edge.data(PID, 0, 0, 1)
    assert "should have caught" in only(replay(edge, profile=KIP_758))["message"]


def test_every_further_copy_points_at_the_first() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 2)
    log.data(PID, 0, 0, 2)
    log.data(PID, 0, 0, 2)
    findings = replay(log)
    assert [(f["kind"], f["first_offset"], f["related_offset"]) for f in findings] == [
        ("DUPLICATE_BATCH", 2, 0),
        ("DUPLICATE_BATCH", 4, 0),
    ]


def test_a_copy_of_a_copy_is_measured_from_the_nearest_copy() -> None:
    """B(0..5, s0..5), then s0 at 6 and again at 7: the broker's cache holds the appended copy at 6, so
    the copy at 7 (0 batches after it) was inside the window, though the original is 7 batches back."""
    log = LogBuilder()
    in_sequence(log, 1, 1, 1, 1, 1, 1)
    log.data(PID, 0, 0, 1)
    log.data(PID, 0, 0, 1)
    outside, inside = replay(log)
    assert [evidence(f, "kind", "first_offset", "related_offset") for f in (outside, inside)] == [
        ("DUPLICATE_BATCH", 6, 0),
        ("DUPLICATE_BATCH", 7, 0),
    ]
    assert "should have caught" not in outside["message"]
    assert "should have caught" in inside["message"]
    assert "last copied at offset 6, 0 batch(es) after it" in inside["message"]


def test_duplicate_outside_window_should_have_been_refused_as_out_of_sequence() -> None:
    """Past the window the broker does not recognise a retry, but while it holds the producer's state it
    refuses a batch out of sequence (OUT_OF_ORDER_SEQUENCE_NUMBER): the copy means the state was lost."""
    log = LogBuilder()
    in_sequence(log, 1, 1, 1, 1, 1, 1)
    log.data(PID, 0, 0, 1)
    message = only(replay(log))["message"]
    assert "should have refused it as out of sequence" in message
    assert "lost the producer's state" in message
    assert "should have caught" not in message


def test_duplicate_outside_window_that_follows_the_batch_before_it_in_sequence() -> None:
    """B(0..6, s0..6), then s0 at 7 and s1 at 8: the copy at 8 is 6 batches after the s1 at 1, outside
    the window, but in sequence after the copy at 7: the broker that appended that one appended it."""
    log = LogBuilder()
    in_sequence(log, 1, 1, 1, 1, 1, 1, 1)
    log.data(PID, 0, 0, 1)
    log.data(PID, 0, 1, 1)
    refused, follows = replay(log)
    assert "should have refused it" in refused["message"]
    assert "follows the batch before it (offset 7) in sequence" in follows["message"]
    assert "should have" not in follows["message"]


@pytest.mark.parametrize(
    ("profile", "sequences", "verdict"),
    [
        # 1.0-2.4 answer UNKNOWN_PRODUCER_ID to a producer with no state and a sequence above 0, 0.11
        # OUT_OF_ORDER_SEQUENCE_NUMBER: expiry does not explain the copy, the window decides.
        (KAFKA_1_0, (0, 1, 2, 1), "should have caught"),
        (KAFKA_0_11, (0, 1, 2, 1), "should have refused it either way"),
        # 2.5+ take any sequence from a producer with no state (KAFKA-8710), and every line takes 0.
        (KAFKA_3_4, (0, 1, 2, 1), "had forgotten it"),
        (KAFKA_1_0, (0, 1, 0), "had forgotten it"),
        (KAFKA_0_11, (0, 1, 2, 0), "had forgotten it"),
    ],
    ids=["1.0-nonzero", "0.11-nonzero", "3.4-nonzero", "1.0-zero", "0.11-zero"],
)
def test_expiry_explains_a_copy_only_where_the_broker_accepts_it_without_state(
    profile: Profile, sequences: tuple[int, ...], verdict: str
) -> None:
    log = LogBuilder()
    for seq in sequences[:-1]:
        log.data(PID, 0, seq, 1)
    log.wait(8 * DAY_MS)  # past producer.id.expiration.ms in every profile
    log.data(PID, 0, sequences[-1], 1)
    message = only(replay(log, profile=profile))["message"]
    assert verdict in message, message
    if verdict != "had forgotten it":
        assert "forgotten" not in message, message


def test_a_copy_after_the_broker_forgot_the_producer_was_not_in_its_cache() -> None:
    """Sequences 0, 1, 2; idle past the expiration; 0 and 1 again. The broker forgot the producer and
    took 0 as a new producer's: its cache started again there, so the 1 that follows is appended in
    sequence, not a retry the window should have caught."""
    log = LogBuilder()
    in_sequence(log, 1, 1, 1)
    log.wait(2 * DAY_MS)
    log.data(PID, 0, 0, 1)
    log.data(PID, 0, 1, 1)
    restart, follower = replay(log)
    assert "had forgotten it" in restart["message"], restart["message"]
    assert "follows the batch before it (offset 3) in sequence" in follower["message"], follower["message"]
    assert "should have" not in follower["message"], follower["message"]


def test_a_restart_at_zero_after_the_log_start_passed_the_producer_before_2_5() -> None:
    """Sequences 0-4 at offsets 0-4, another producer's batches at 5 and 6, DeleteRecords to offset 7
    (the segment keeps the batches below it), then sequences 0 and 1 again: 1.0-2.4 evicted the producer
    when the log start passed its last batch, and took 0 as a new producer's; 2.5+ kept its state."""
    log = LogBuilder()
    in_sequence(log, 1, 1, 1, 1, 1)
    log.data(PID + 1, 0, 0, 2)
    log.data(PID, 0, 0, 1)
    log.data(PID, 0, 1, 1)
    restart, follower = replay(log, profile=KAFKA_1_0, log_start_offset=7)
    assert "the broker had evicted the producer" in restart["message"], restart["message"]
    # The client, refused as an unknown producer, numbered its next records from 0 again (KAFKA-7190):
    # the batch after the restart is no re-send, explained as the restart is.
    assert "took sequence 0 at offset 7" in follower["message"], follower["message"]
    assert (restart["explained_by"], follower["explained_by"]) == ("retention", "retention")
    # 0.11 answers OUT_OF_ORDER_SEQUENCE_NUMBER there, fatal to its client: no such restart.
    kafka_0_11 = Profile(name="kafka-0.11", broker_line="0.11", producer_id_expiration_ms=7 * DAY_MS)
    follower_0_11 = replay(log, profile=kafka_0_11, log_start_offset=7)[-1]
    assert "took sequence 0" not in follower_0_11["message"], follower_0_11["message"]
    assert follower_0_11["explained_by"] is None
    kept = replay(log, log_start_offset=7)
    assert all("should have caught" in f["message"] for f in kept), kept


# ---------------------------------------------------------------------------------------------
# Epochs (KIP-98 fencing, KIP-360 bumps)


def test_epoch_bump_to_sequence_zero_is_info() -> None:
    """Sarama #2803 churn: each new epoch restarts at 0."""
    log = LogBuilder()
    log.data(PID, 0, 0, 3)
    log.data(PID, 1, 0, 2)
    log.data(PID, 3, 0, 1)
    findings = replay(log)
    assert [evidence(f, "kind", "first_offset", "related_offset", "explained_by") for f in findings] == [
        ("EPOCH_BUMP", 3, 0, "epoch_bump"),
        ("EPOCH_BUMP", 5, 3, "epoch_bump"),
    ]


def test_new_epoch_nonzero_sequence() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 3)
    log.data(PID, 1, 4, 2)
    f = only(replay(log))
    assert evidence(f, "kind", "first_offset", "related_offset", "expected_sequence") == (
        "NEW_EPOCH_NONZERO_SEQUENCE", 3, 0, 0,
    )  # fmt: skip


def test_new_epoch_nonzero_on_compacted_topic_is_not_reported() -> None:
    """Offsets 3-6 are free: the cleaner may have removed epoch 1's sequences 0-3 there."""
    log = LogBuilder(topic="__consumer_offsets")
    log.data(PID, 0, 0, 3)
    log.next_offset += 4
    log.data(PID, 1, 4, 2)
    assert replay(log, compacted=True) == []
    contiguous = LogBuilder(topic="__consumer_offsets")
    contiguous.data(PID, 0, 0, 3)
    contiguous.data(PID, 1, 4, 2)
    assert [f["kind"] for f in replay(contiguous, compacted=True)] == ["NEW_EPOCH_NONZERO_SEQUENCE"]


def test_marker_epoch_bump_then_nonzero_is_new_epoch_nonzero() -> None:
    """`testOutOfSequenceAfterControlRecordEpochBump`: a marker with a higher epoch clears the sequences."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)
    log.marker(PID, 1, "ABORT", 0)  # offset 2
    log.data(PID, 1, 2, 1, transactional=True)
    f = only(replay(log), "NEW_EPOCH_NONZERO_SEQUENCE")
    assert evidence(f, "first_offset", "related_offset") == (3, 2)


def test_marker_epoch_bump_then_zero_is_a_transaction_end() -> None:
    """Transactions V2 (KIP-890 part 2), as a Kafka 4.3.1 broker writes them for a Java producer: each
    marker is one epoch above its transaction's data, and the next transaction goes on at the marker's
    epoch from sequence 0. That is no finding; a re-initialised producer above the marker's epoch is."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)
    log.marker(PID, 1, "COMMIT", 0)  # offset 2
    log.data(PID, 1, 0, 1, transactional=True)
    log.marker(PID, 2, "ABORT", 0)  # offset 4
    log.data(PID, 2, 0, 1, transactional=True)
    log.marker(PID, 3, "ABORT", 0)  # offset 6: the coordinator aborted it (timeout, or a new instance)
    log.data(PID, 4, 0, 1, transactional=True)  # offset 7: the new instance's epoch
    log.marker(PID, 5, "COMMIT", 0)
    found = replay(log)
    assert [evidence(f, "kind", "first_offset", "related_offset") for f in found] == [("EPOCH_BUMP", 7, 6)]


def test_lower_epoch_after_higher_is_epoch_regression() -> None:
    """A zombie write: related offset is the first batch that carried the higher epoch."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2)
    log.data(PID, 2, 0, 1)  # offset 2
    log.data(PID, 2, 1, 1)
    log.data(PID, 1, 0, 1)  # offset 4
    f = only(replay(log), "EPOCH_REGRESSION")
    assert evidence(f, "first_offset", "producer_epoch", "related_offset") == (4, 1, 2)


def test_marker_with_lower_epoch_is_epoch_regression() -> None:
    """`testOldEpochForControlRecord`."""
    log = LogBuilder()
    log.data(PID, 3, 0, 1, transactional=True)
    log.marker(PID, 2, "ABORT", 0)
    f = only(replay(log, log_start_offset=0))
    assert evidence(f, "kind", "first_offset", "related_offset") == ("EPOCH_REGRESSION", 1, 0)


def test_epoch_regressed_batch_takes_no_part_in_its_epoch() -> None:
    """The zombie's sequences are not compared with anything, and do not move the real stream."""
    log = LogBuilder()
    log.data(PID, 1, 0, 2)
    log.data(PID, 0, 5, 1)
    log.data(PID, 1, 2, 1)
    assert kinds(replay(log)) == ["EPOCH_REGRESSION"]


# ---------------------------------------------------------------------------------------------
# INVALID_SEQUENCE


def test_negative_base_sequence_is_invalid() -> None:
    log = LogBuilder()
    log.data(PID, 0, -1, 2)
    assert kinds(replay(log)) == ["INVALID_SEQUENCE"]


def test_sequence_range_disagreeing_with_offsets_is_invalid() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 3, last_sequence=3)
    assert kinds(replay(log)) == ["INVALID_SEQUENCE"]


def test_invalid_batch_takes_no_part_in_replay() -> None:
    """Neither its sequences nor its epoch count: the next batch follows the last valid one."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2)
    log.data(PID, 5, 2, 2, last_sequence=9)
    log.data(PID, 0, 2, 1)
    assert kinds(replay(log)) == ["INVALID_SEQUENCE"]


# ---------------------------------------------------------------------------------------------
# Transactions (KIP-664, KAFKA-9144)


def test_coordinator_epoch_regression() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 1, transactional=True)
    log.marker(PID, 0, "COMMIT", 5)  # offset 1
    log.data(PID, 0, 1, 1, transactional=True)
    log.marker(PID, 0, "COMMIT", 5)
    log.data(PID, 0, 2, 1, transactional=True)
    log.marker(PID, 0, "ABORT", 3)  # offset 5
    f = only(replay(log))
    assert evidence(f, "kind", "first_offset", "related_offset") == ("COORDINATOR_EPOCH_REGRESSION", 5, 1)


def test_hanging_transaction() -> None:
    """Transactional data with no marker, 20 minutes before the partition's last write."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)  # offsets 0-1
    log.data(PID, 0, 2, 3, transactional=True)  # 2-4
    log.wait(20 * MINUTE_MS)
    log.data(7, 0, 0, 1)
    f = only(replay(log))
    assert evidence(f, "kind", "producer_id", "first_offset", "last_offset") == (
        "HANGING_TRANSACTION",
        PID,
        0,
        4,
    )


def test_hanging_transaction_starts_after_the_last_marker() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)
    log.marker(PID, 0, "COMMIT", 0)  # offset 2
    log.data(PID, 0, 2, 1, transactional=True)  # offset 3
    log.wait(20 * MINUTE_MS)
    log.plain()
    f = only(replay(log))
    assert evidence(f, "kind", "first_offset", "last_offset") == ("HANGING_TRANSACTION", 3, 3)


def test_rejected_transactional_batch_still_opens_the_transaction() -> None:
    """State rebuilt from the log (REPLICATION origin) starts a transaction at any transactional batch,
    an INVALID_SEQUENCE one too, so read_committed consumers stop there."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True, last_sequence=5)  # offsets 0-1, invalid
    log.data(PID, 0, 0, 1, transactional=True)  # offset 2
    log.wait(20 * MINUTE_MS)
    log.plain()
    f = only(replay(log), "HANGING_TRANSACTION")
    assert evidence(f, "first_offset", "last_offset") == (0, 2)


def test_bad_crc_batch_timestamp_does_not_age_transactions() -> None:
    """The log's highest timestamp is taken from batches whose header can be trusted."""
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)
    log.data(7, 0, 0, 1, timestamp=log.clock + 3 * DAY_MS, crc_valid=False)
    assert kinds(replay(log)) == ["CRC_MISMATCH"]


def test_transaction_closed_by_a_marker_is_not_hanging() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)
    log.wait(20 * MINUTE_MS)
    log.marker(PID, 0, "ABORT", 0)
    log.wait(20 * MINUTE_MS)
    log.plain()
    assert replay(log) == []


def test_open_transaction_younger_than_the_timeout_is_not_hanging() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 2, transactional=True)
    log.wait(14 * MINUTE_MS)
    log.plain()
    assert replay(log) == []


# ---------------------------------------------------------------------------------------------
# Corruption and consistency


def test_offset_overlap() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 3)  # offsets 0-2
    assert log.overlap_previous()
    log.data(PID, 0, 3, 2)  # offsets 2-3
    f = only(replay(log), "OFFSET_OVERLAP")
    assert evidence(f, "first_offset", "last_offset", "related_offset", "producer_id") == (2, 3, 0, PID)


def test_bad_crc_batch_is_crc_mismatch_and_skipped_by_replay() -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 2)
    log.data(PID, 9, 77, 1, crc_valid=False)
    log.data(PID, 0, 2, 1)
    f = only(replay(log))
    assert (f["kind"], f["first_offset"], f["producer_id"]) == ("CRC_MISMATCH", 2, None)


@pytest.mark.parametrize("profile", [KAFKA_3_4, KAFKA_1_0, KAFKA_0_11, KIP_758], ids=lambda p: p.name)
def test_every_finding_has_the_contract_fields(profile: Profile) -> None:
    log = LogBuilder()
    log.data(PID, 0, 0, 5)
    log.data(PID, 0, 9, 1)
    log.data(PID, 0, 9, 1)
    for f in replay(log, profile=profile):
        assert set(f) >= {"kind", "producer_id", "first_offset", "related_offset", "expected_sequence"}
        assert f["message"]


@settings(max_examples=300, deadline=None)
@given(history=log_histories())
def test_replay_of_any_generated_history_names_only_contract_kinds(history: LogHistory) -> None:
    compacted = KAFKA_3_4.is_compacted(history.topic)
    for f in reference_findings(
        history.batches, profile=KAFKA_3_4, log_start_offset=history.log_start_offset, compacted=compacted
    ):
        assert f["kind"] in KINDS and f["explained_by"] in (None, *EXPLAINED_BY), f
        assert f["expected_sequence"] is None or 0 <= f["expected_sequence"] <= MAX_SEQUENCE, f
        assert f["missing_records"] is None or f["missing_records"] > 0, f


def test_a_0_11_producer_whose_marker_lies_past_the_log_start_was_not_evicted() -> None:
    """0.11's last offset moved with markers (`ProducerIdEntry.lastOffset`): producer PID's sequences 0
    and 1, its commit at offset 4 past the log start 3, then sequence 0 again is a retry its one-batch
    window missed, not a restart after eviction; without the marker it is."""
    for with_marker, verdict in ((True, "should have refused it"), (False, "had evicted the producer")):
        log = LogBuilder()
        log.data(PID, 0, 0, 1, transactional=True)
        log.data(PID, 0, 1, 1, transactional=True)
        log.data(PID + 1, 0, 0, 2)
        if with_marker:
            log.marker(PID, 0)
        else:
            log.data(PID + 1, 0, 2, 1)
        log.data(PID, 0, 0, 1, transactional=True)
        message = only(replay(log, profile=KAFKA_0_11, log_start_offset=3), "DUPLICATE_BATCH")["message"]
        assert verdict in message, message


def test_a_first_batch_below_the_log_start_bounds_the_room_itself() -> None:
    """DeleteRecords moved the log start to 1000 inside a segment starting at 990: the batch at 990
    with sequence 995 had only 990 offsets below it, so at least 5 records are missing."""
    log = LogBuilder(start_offset=990)
    log.data(PID, 0, 995, 20)
    f = only(replay(log, log_start_offset=1000), "HISTORY_START_MISSING")
    assert evidence(f, "missing_records") == (5,)


def test_a_jump_of_more_than_half_the_range_in_a_stream_that_never_wrapped_is_a_gap() -> None:
    """5 then 1,500,000,000: the stream never went a turn forward, so there is no turn to go back to;
    1,499,999,995 sequences are missing, not a batch from before the stream's first."""
    log = LogBuilder()
    log.data(PID, 0, 0, 5)
    log.data(PID, 0, 1_500_000_000, 5)
    log.data(PID, 0, 1_500_000_005, 5)
    f = only(replay(log), "SEQUENCE_GAP")
    assert evidence(f, "expected_sequence", "missing_records") == (5, 1_499_999_995)
    assert unwrap_after(1_500_000_000, 4, wrapped=False) == 1_500_000_000
    # After a turn forward, a batch from the turn before is a step back (a regression), as before.
    assert unwrap_after(MAX_SEQUENCE - 1, SEQUENCE_MODULUS + 5) == MAX_SEQUENCE - 1


def test_new_epoch_nonzero_after_its_own_kept_marker_on_a_compacted_topic_is_not_reported() -> None:
    """Transactions V1: epoch 1's first transaction (sequences 0-1) was aborted and the cleaner removed
    it before its ABORT, which it keeps until the delete horizon; the epoch goes on at sequence 2 right
    after that marker. Not compacted, it is a NEW_EPOCH_NONZERO_SEQUENCE."""
    log = LogBuilder()
    log.data(PID, 0, 0, transactional=True)
    log.marker(PID, 0, "COMMIT")
    log.next_offset = 4
    log.marker(PID, 1, "ABORT")
    log.data(PID, 1, 2, transactional=True)
    log.marker(PID, 1, "COMMIT")
    assert replay(log, compacted=True) == []
    # (Its ABORT closing no data the log holds is an EMPTY_TXN_MARKER there, an info.)
    assert [f["kind"] for f in replay(log)] == ["EMPTY_TXN_MARKER", "NEW_EPOCH_NONZERO_SEQUENCE"]


def _late_batch_after_abort(
    log: LogBuilder, *, marker_between: bool = False, wait_ms: int = 3 * 3_600_000
) -> None:
    """Producer PID's epoch 5 transaction aborted (0-1), then a produce request of it that landed late
    (2, epoch 5, sequence 1); three hours later the producer's next session writes epoch 6 (3) and
    commits (4). Transactions V1: the late batch opened a transaction the epoch change did not close."""
    log.data(PID, 5, 0, transactional=True)
    log.marker(PID, 5, "ABORT")
    log.data(PID, 5, 1, transactional=True)
    log.wait(wait_ms)
    if marker_between:
        log.marker(PID, 6, "ABORT")  # the coordinator's abort at the fenced epoch: the normal path
    log.data(PID, 6, 0, transactional=True)
    log.marker(PID, 6, "COMMIT")


def test_transactional_data_a_later_epoch_swept_up_is_a_hanging_transaction() -> None:
    log = LogBuilder()
    _late_batch_after_abort(log)
    found = only(replay(log), "HANGING_TRANSACTION")
    assert evidence(found, "producer_epoch", "first_offset", "last_offset", "related_offset") == (5, 2, 2, 3)
    # With the marker between, within the timeout, or on a compacted log (the cleaner may have removed
    # the marker): nothing.
    for kwargs in ({"marker_between": True}, {"wait_ms": 60_000}):
        quiet = LogBuilder()
        _late_batch_after_abort(quiet, **kwargs)  # type: ignore[arg-type]
        assert "HANGING_TRANSACTION" not in {f["kind"] for f in replay(quiet)}, kwargs
    assert "HANGING_TRANSACTION" not in {f["kind"] for f in replay(log, compacted=True)}


def test_a_swept_transaction_is_open_until_the_later_epochs_newest_data_before_the_marker() -> None:
    """Epoch 6 starts a minute after the late batch, and writes on for three hours before its COMMIT:
    the late batch's transaction was open all that time (the epoch change does not close it)."""
    log = LogBuilder()
    log.data(PID, 5, 0, transactional=True)
    log.marker(PID, 5, "ABORT")
    log.data(PID, 5, 1, transactional=True)
    log.wait(60_000)
    log.data(PID, 6, 0, transactional=True)
    log.wait(3 * 3_600_000)
    log.data(PID, 6, 1, transactional=True)
    log.marker(PID, 6, "COMMIT")
    found = only(replay(log), "HANGING_TRANSACTION")
    assert evidence(found, "producer_epoch", "first_offset", "related_offset") == (5, 2, 3)
