"""A plain-Python replay of one partition log, the way a broker walks it: the test oracle for `audit_rules`.

Deliberately simple and sequential, and independent of the Spark rules: batches are visited once in
offset order while per-producer state (highest epoch, the batches of each epoch, the highest coordinator
epoch) is kept in dictionaries, as `ProducerStateManager` keeps its entries. The rules are those of
`audit_rules/RULES.md` ("Per producer", "Transactions", OFFSET_OVERLAP, CRC_MISMATCH); the broker
behaviour behind them is kafka-formats-and-rules §5. Slow by design: it is for test-sized logs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit_rules.profile import Profile

SEQUENCE_MODULUS = 1 << 31
"""Sequences are non-negative int32 values: after 2147483647 comes 0 (§1.4, `incrementSequence`)."""

_HALF_RANGE = 1 << 30

Batch = Mapping[str, Any]
Finding = dict[str, Any]

FINDING_FIELDS = (
    "kind",
    "producer_id",
    "producer_epoch",
    "first_offset",
    "last_offset",
    "base_sequence",
    "last_sequence",
    "expected_sequence",
    "related_offset",
    "missing_records",
    "explained_by",
    "message",
)


# Internal topics only a broker's coordinator writes: the broker checks no sequence there (RULES.md).
COORDINATOR_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# The findings about sequences, which such a topic does not get.
SEQUENCE_KINDS = frozenset(
    {
        "INVALID_SEQUENCE",
        "HISTORY_START_MISSING",
        "HISTORY_TRUNCATED_BY_RETENTION",
        "SEQUENCE_REGRESSION",
        "SEQUENCE_GAP",
        "SEQUENCE_GAP_UNVERIFIED",
        "DUPLICATE_BATCH",
        "NEW_EPOCH_NONZERO_SEQUENCE",
    }
)


def reference_findings(
    batches: Iterable[Batch],
    *,
    profile: Profile,
    log_start_offset: int,
    compacted: bool = False,
    sequenced: bool = True,
    first_segment_base: int | None = None,
) -> list[Finding]:
    """The findings RULES.md defines for one log's batches (BATCHES rows), sorted by offset then kind;
    `sequenced` False for a coordinator-written topic (`COORDINATOR_TOPICS`); `first_segment_base`: the
    first live segment's base offset where it lies below the log start (DeleteRecords), else None."""
    rows = list(batches)
    findings: list[Finding] = []
    findings += _crc_mismatches(rows)
    findings += _offset_overlaps(rows)
    replay = _Replay(profile, log_start_offset, compacted, _failed_data_batches(rows))
    # RULES.md's first kept offset: what lies at or above it was never deleted.
    replay.first_kept_offset = min(
        log_start_offset, log_start_offset if first_segment_base is None else first_segment_base
    )
    replay.free_before = _free_before(rows)
    replay.first_batch_offset = min((b["base_offset"] for b in rows), default=None)
    for batch in sorted(_producer_batches(rows), key=_offset_order):
        replay.append(batch)
    findings += [f for f in replay.finish() if sequenced or f["kind"] not in SEQUENCE_KINDS]
    findings += _hanging_transactions(rows, profile)
    findings += _swept_transactions(rows, profile, compacted)
    return sorted(
        findings, key=lambda f: (_none_last(f["first_offset"]), f["kind"], _none_last(f["related_offset"]))
    )


def _free_before(rows: list[Batch]) -> dict[int, int]:
    """Per base offset of a CRC-valid batch: the offset less the offsets the CRC-valid batches below it
    hold (whole ranges, an offset two hold counted once); the difference of two counts the offsets no
    batch holds between them."""
    valid = sorted((b["base_offset"], b["last_offset"]) for b in rows if b["crc_valid"])
    out: dict[int, int] = {}
    held = at_base = 0  # the offsets the batches below the current base offset hold, and those at it
    reached = -1  # the highest offset a batch so far holds
    for base, last in valid:
        if base not in out:
            held, at_base = held + at_base, 0
            out[base] = base - held
        at_base += max(last - max(base, reached + 1) + 1, 0)
        reached = max(reached, last)
    return out


# ---------------------------------------------------------------------------------------------
# Sequence arithmetic


def sequence_span(base_sequence: int, last_sequence: int) -> int:
    """How many sequence numbers after the base the batch covers, across the wrap (`last - base` mod 2^31)."""
    return (last_sequence - base_sequence) % SEQUENCE_MODULUS


def unwrap_after(
    base_sequence: int, previous_last_unwrapped: int, *, wrapped: bool = True, room: int = 0
) -> int:
    """The unwrapped value of `base_sequence` read next to the previous batch's last sequence.

    A counter that wraps is read the way a person reads a clock: the copy of `base_sequence` (plus a
    multiple of 2^31) nearest the previous value, so 2147483647 -> 0 is a step forward and
    5 -> 2147483640 a step back. A tie at exactly half the range stays on the same turn. A base of 0
    is a turn only straight after 2147483647, or where the `room` offsets between the two batches could
    have held the sequences up to 2147483647 (the cleaner removed the batch that wrapped): after
    anything else the producer started again at 0.
    A turn back only where the stream went a turn forward before (`wrapped`): 5 then 1,500,000,000
    in a stream that never wrapped is a gap, not a batch from a turn before its first.
    """
    turns, previous_last = divmod(previous_last_unwrapped, SEQUENCE_MODULUS)
    step = base_sequence - previous_last
    skipped = SEQUENCE_MODULUS - 1 - previous_last
    if step < -_HALF_RANGE and (
        base_sequence != 0 or previous_last == SEQUENCE_MODULUS - 1 or room >= skipped
    ):
        turns += 1
    elif step > _HALF_RANGE and wrapped:
        turns -= 1
    return base_sequence + turns * SEQUENCE_MODULUS


# ---------------------------------------------------------------------------------------------
# The per-producer replay


@dataclass
class _StreamBatch:
    """A data batch of an epoch stream, with its sequences unwrapped along the stream."""

    batch: Batch
    base: int
    last: int
    # The broker had forgotten the producer before it and took it as a new producer's batch: its cache
    # of the producer's last batches started again here.
    forgot: bool = False
    evicted: bool = False
    # Forgotten by expiry (the broker took the batch from a producer whose state had expired).
    forgot_by_expiry: bool = False

    @property
    def forgot_by(self) -> str | None:
        """What made the broker forget the producer before this batch: `expiry`, else `retention`."""
        return None if not self.forgot else "expiry" if self.forgot_by_expiry else "retention"


@dataclass
class _PendingGap:
    """A jump forward, resolved once the whole stream is known (the hole may be filled later)."""

    batch: Batch
    previous: _StreamBatch
    expected: int
    base: int
    stream: list[_StreamBatch]
    expired: bool
    # The highest last sequence of the stream's batches before this one (None: the previous batch's).
    highest: int | None = None


@dataclass
class _ProducerState:
    """What the broker holds for one producer id (`ProducerStateEntry`), plus the audit's memory."""

    # Batches that passed the epoch and sequence-shape checks, data and markers, as (is_control, epoch).
    accepted: list[tuple[bool, int]] = field(default_factory=list)
    previous: Batch | None = None
    previous_data: Batch | None = None
    epoch: int | None = None
    first_at_epoch: Batch | None = None
    streams: dict[int, list[_StreamBatch]] = field(default_factory=dict)
    # The epochs whose stream went a turn forward (a batch of it ended past 2^31 - 1).
    wrapped: set[int] = field(default_factory=set)
    coordinator_epoch: int | None = None
    coordinator_marker: Batch | None = None
    # A transactional data batch the replay skipped (invalid, or a lower epoch) since the last accepted.
    skipped_data: bool = False
    # The lowest and highest epoch of the accepted transactional data since the producer's last marker.
    txn: tuple[int, int] | None = None
    # The producer's last marker, if the replay took it and it was above every epoch of the data it
    # closed: its epoch and offset.
    raised_marker: tuple[int, int] | None = None
    # A COMMIT of the producer was above every epoch of its data: its markers are transactions V2 ones.
    v2: bool = False


class _Replay:
    def __init__(
        self, profile: Profile, log_start_offset: int, compacted: bool, failed: list[Batch] | None = None
    ) -> None:
        self.failed = failed or []
        self.profile = profile
        self.log_start_offset = log_start_offset
        self.first_kept_offset = log_start_offset
        # The lowest offset a batch holds (set by `reference_findings`).
        self.first_batch_offset: int | None = None
        self.compacted = compacted
        # `_free_before` of the log's batches (set by `reference_findings`).
        self.free_before: dict[int, int] = {}
        self.producers: dict[int, _ProducerState] = {}
        self.findings: list[Finding] = []
        self.pending_gaps: list[_PendingGap] = []
        # Producers' first batches mid-sequence, with their streams (`_resolve_start`).
        self.pending_starts: list[tuple[Batch, list[_StreamBatch], list[tuple[int, int]]]] = []

    def append(self, batch: Batch) -> None:
        state = self.producers.setdefault(batch["producer_id"], _ProducerState())
        if batch["is_control"]:
            self._append_marker(state, batch)
        else:
            self._append_data(state, batch)

    # -- data batches --------------------------------------------------------------------------

    def _append_data(self, state: _ProducerState, batch: Batch) -> None:
        base_sequence, last_sequence = batch["base_sequence"], batch["last_sequence"]
        # LogValidator: a producer id needs a sequence, and the sequence range spans the offset range.
        if base_sequence < 0 or sequence_span(base_sequence, last_sequence) != (
            batch["last_offset"] - batch["base_offset"]
        ):
            self._emit(
                "INVALID_SEQUENCE",
                batch,
                message=(
                    f"sequences {base_sequence}-{last_sequence} do not match offsets "
                    f"{batch['base_offset']}-{batch['last_offset']}"
                ),
            )
            state.skipped_data |= batch["is_transactional"]
            return
        if self._epoch_regressed(state, batch):
            state.skipped_data |= batch["is_transactional"]
            return
        stream = state.streams.setdefault(batch["producer_epoch"], [])
        if not stream:
            current = _StreamBatch(
                batch, base_sequence, base_sequence + sequence_span(base_sequence, last_sequence)
            )
            self._first_of_epoch(state, batch)
        else:
            previous = stream[-1]
            wrapped = batch["producer_epoch"] in state.wrapped
            room = batch["base_offset"] - previous.batch["last_offset"] - 1
            base = unwrap_after(base_sequence, previous.last, wrapped=wrapped, room=room)
            current = _StreamBatch(batch, base, base + sequence_span(base_sequence, last_sequence))
            expired = self._expired(state, batch)
            # The producer's last offset as its broker kept it: 0.11's moved with markers too.
            kept_last = (state.previous if self.profile.markers_move_last_offset else previous.batch)[
                "base_offset"
            ]
            current.evicted = self._evicted(kept_last, current)
            current.forgot_by_expiry = expired and (
                self.profile.accepts_unknown_producer or base_sequence == 0
            )
            current.forgot = current.forgot_by_expiry or current.evicted
            self._next_in_epoch(stream, previous, current, expired)
        stream.append(current)
        if current.last >= SEQUENCE_MODULUS:
            state.wrapped.add(batch["producer_epoch"])
        self._accept(state, batch)

    def _first_of_epoch(self, state: _ProducerState, batch: Batch) -> None:
        epoch, base_sequence = batch["producer_epoch"], batch["base_sequence"]
        if base_sequence > 0 and self._start_filled(state, batch):
            return  # the epoch's first sequences are in CRC-failed batches before it (a failed fill)
        history_starts_here = all(is_control and e == epoch for is_control, e in state.accepted)
        if history_starts_here:
            if base_sequence == 0:
                return
            # Judged once the stream is known: later batches may hold some of sequences 0..base-1, as
            # CRC-failed batches before it may.
            self.pending_starts.append((batch, state.streams[epoch], self._start_fills(state, batch)))
            return
        # The epoch rose, through data or a marker: KIP-360 says the new epoch starts at 0.
        related = state.previous["base_offset"] if state.previous is not None else None
        previous = state.previous
        raised_by_marker = (
            previous is not None and previous["is_control"] and previous["producer_epoch"] == epoch
        )
        if base_sequence == 0 and raised_by_marker:
            return  # a transactions-V2 transaction's normal end (KIP-890): the marker bumped the epoch
        if base_sequence == 0:
            self._emit(
                "EPOCH_BUMP",
                batch,
                expected_sequence=0,
                related_offset=related,
                explained_by="epoch_bump",
                message=f"epoch {epoch} starts at sequence 0",
            )
        elif not (self.compacted and self._room_before(batch, previous, raised_by_marker) >= base_sequence):
            # 2.5 and later take an unknown (expired) producer's new epoch at any sequence: unchecked, but
            # for a transactions-V2 transaction's first batch (verified: sequence 0 without state).
            verified = batch["is_transactional"] and raised_by_marker
            unchecked = self.profile.accepts_unknown_producer and self._expired(state, batch) and not verified
            self._emit(
                "NEW_EPOCH_NONZERO_SEQUENCE",
                batch,
                expected_sequence=0,
                related_offset=related,
                explained_by="expiry" if unchecked else None,
                message=f"epoch {epoch} starts at sequence {base_sequence}, not 0",
            )

    def _expired(self, state: _ProducerState, batch: Batch) -> bool:
        """`isProducerExpired` (§5.7): no open transaction and `producer.id.expiration.ms` since the
        producer's previous batch or marker (its previous data batch in 1.0 to 2.4.0, where markers do not
        refresh `lastTimestamp`)."""
        previous = state.previous
        timed_from = previous if self.profile.markers_refresh_expiry else state.previous_data
        if previous is None or timed_from is None:
            return False
        open_transaction = previous["is_transactional"] and not previous["is_control"]
        idle = batch["max_timestamp"] - timed_from["max_timestamp"]
        return not open_transaction and idle >= self.profile.producer_id_expiration_ms

    def _next_in_epoch(
        self, stream: list[_StreamBatch], previous: _StreamBatch, current: _StreamBatch, expired: bool
    ) -> None:
        batch = current.batch
        expected = previous.last + 1
        copies = [s for s in stream if (s.base, s.last) == (current.base, current.last)]
        if copies:
            message, because = self._duplicate_verdict(
                stream, copies[0], copies[-1], previous, current, expired
            )
            self._emit(
                "DUPLICATE_BATCH",
                batch,
                related_offset=copies[0].batch["base_offset"],
                explained_by=because,
                message=message,
            )
        elif current.base == expected:
            return
        elif current.base < expected:
            forgotten = expired and (self.profile.accepts_unknown_producer or batch["base_sequence"] == 0)
            self._emit(
                "SEQUENCE_REGRESSION",
                batch,
                expected_sequence=expected % SEQUENCE_MODULUS,
                related_offset=previous.batch["base_offset"],
                # A broker that had forgotten (expiry) or evicted (retention) the producer took it.
                explained_by="expiry" if forgotten else "retention" if current.evicted else None,
                message=f"sequence {batch['base_sequence']} arrived after {previous.batch['last_sequence']}",
            )
        else:
            highest = max(s.last for s in stream)
            # Past the highest sequence yet only: a batch that goes on in order from the highest, after
            # a late one, skips nothing the jump past it did not.
            if current.base > highest + 1:
                self.pending_gaps.append(
                    _PendingGap(batch, previous, expected, current.base, stream, expired, highest)
                )

    def _evicted(self, kept_last: int, current: _StreamBatch) -> bool:
        """Before 2.4 the broker forgot a producer once the log start offset passed its last offset
        (`truncateHead`, §5.7: its last data batch's, 0.11's last batch's or marker's), and took sequence
        0 from it as from a new producer."""
        return (
            self.profile.evicts_at_log_start
            and current.batch["base_sequence"] == 0
            and kept_last < self.log_start_offset
        )

    def _duplicate_verdict(
        self,
        stream: list[_StreamBatch],
        first_copy: _StreamBatch,
        nearest_copy: _StreamBatch,
        previous: _StreamBatch,
        current: _StreamBatch,
        expired: bool,
    ) -> tuple[str, str | None]:
        """The verdict and what explains it: the broker's cache holds its last appended batches, a copy
        among them too, so the window runs from the nearest earlier copy. Outside it a broker holding the
        producer's state refuses the copy as out of sequence unless it follows the batch before it; one
        without state accepts it only if it takes any sequence from an unknown producer, or the sequence
        is 0. A broker that had forgotten the producer (expiry) or evicted it (retention) is the
        explanation."""
        profile = self.profile
        between = len(stream) - stream.index(nearest_copy) - 1
        if profile.duplicate_window_sequences is not None:
            in_window = previous.last - current.base <= profile.duplicate_window_sequences
        else:
            in_window = between < profile.duplicate_window_batches
        # A broker that forgot the producer after the copy started its cache again: the copy left it.
        restarts = [s for s in stream[stream.index(nearest_copy) + 1 :] if s.forgot]
        in_window = in_window and not restarts
        forgotten = expired and (profile.accepts_unknown_producer or current.batch["base_sequence"] == 0)
        evicted = current.evicted
        if in_window and not (forgotten or evicted):
            verdict = "a broker keeping its duplicate window should have caught it"
        elif forgotten:
            verdict = (
                f"the producer had been idle longer than {self.profile.expiration_setting}, so the broker "
                "had forgotten it"
            )
        elif evicted:
            verdict = "the log start offset passed the previous batch, so the broker had evicted the producer"
        elif expired:
            verdict = (
                "outside the window not recognised as a retry, and it should have refused it either way: "
                "out of sequence with state, unknown without"
            )
        elif (
            restarts
            and profile.has_unknown_producer_id
            and not profile.accepts_unknown_producer
            and current.base == previous.last + 1
        ):
            # Before 2.5 the broker answers a forgotten producer's next batch UNKNOWN_PRODUCER_ID but for
            # sequence 0, and the client numbers its batches from 0 again (KAFKA-7190): new records
            # under the copy's numbers, not a re-send.
            restart = restarts[-1]
            verdict = (
                f"the broker took sequence 0 at offset {restart.batch['base_offset']} from a producer it "
                "had forgotten, and this batch follows on from there: the client numbered new records "
                "from 0 again"
            )
            return self._verdict_text(first_copy, nearest_copy, between, verdict), restart.forgot_by
        elif current.base == previous.last + 1:
            verdict = (
                "outside the window not recognised as a retry, and it follows the batch before it "
                f"(offset {previous.batch['base_offset']}) in sequence"
            )
        else:
            verdict = (
                "outside the window not recognised as a retry, but a broker holding the producer's state "
                "should have refused it as out of sequence: the broker had lost the producer's state"
            )
        because = "expiry" if forgotten else "retention" if evicted else None
        return self._verdict_text(first_copy, nearest_copy, between, verdict), because

    @staticmethod
    def _verdict_text(
        first_copy: _StreamBatch, nearest_copy: _StreamBatch, between: int, verdict: str
    ) -> str:
        where = f"copy of offset {first_copy.batch['base_offset']}"
        if nearest_copy is not first_copy:
            where += f", last copied at offset {nearest_copy.batch['base_offset']}"
        return f"{where}, {between} batch(es) after it: {verdict}"

    def _room_before(self, batch: Batch, previous: Batch | None, raised_by_marker: bool) -> int:
        """The offsets a new epoch's removed first batches may have taken: those no batch holds between
        the producer's previous row and the batch, or below the batch where there is no previous row or
        it is a marker of the epoch (transactions V1: the epoch's first transaction may lie before its
        own marker, removed)."""
        at = batch["base_offset"]
        if previous is None or raised_by_marker:
            return self.free_before.get(at, at)
        before = previous["base_offset"]
        offsets = at - before - 1
        if at in self.free_before and before in self.free_before:
            offsets = min(offsets, self.free_before[at] - self.free_before[before])
        return offsets

    def _resolve_gap(self, gap: _PendingGap, fills: list[tuple[int, int]]) -> None:
        """`fills`: the ranges CRC-failed batches hold of every gap of the stream (`_failed_fills`)."""
        ranges = [(s.base, s.last) for s in gap.stream] + fills
        # From past the highest sequence before the jump: a hole below it is an earlier jump's.
        low = gap.expected if gap.highest is None else max(gap.expected, gap.highest + 1)
        missing = _uncovered(low, gap.base - 1, ranges)
        # The cleaner removes whole batches and keeps offsets: it can have taken the skipped sequences
        # only where the offsets between the two batches could have held them (counted where the
        # previous batch is the stream's highest yet; after a late one they may lie before it).
        after_highest = gap.highest is None or gap.previous.last >= gap.highest
        at, before = gap.batch["base_offset"], gap.previous.batch["base_offset"]
        offsets = at - before - 1
        if at in self.free_before and before in self.free_before:
            # Less the offsets other batches hold between the two (other producers' on a shared log).
            offsets = min(offsets, self.free_before[at] - self.free_before[before])
        room = not after_highest or offsets >= gap.base - gap.expected
        if missing == 0 or (self.compacted and room):
            return  # every skipped number arrived elsewhere: the late batches are the regression
        expired = self.profile.accepts_unknown_producer and gap.expired
        self._emit(
            "SEQUENCE_GAP_UNVERIFIED" if expired else "SEQUENCE_GAP",
            gap.batch,
            expected_sequence=gap.expected % SEQUENCE_MODULUS,
            related_offset=gap.previous.batch["base_offset"],
            missing_records=missing,
            explained_by="expiry" if expired else None,
            message=f"{missing} sequence number(s) from {gap.expected % SEQUENCE_MODULUS} are in no batch",
        )

    def _start_filled(self, state: _ProducerState, batch: Batch) -> bool:
        """Whether CRC-failed batches before `batch`, the first of its epoch, hold every sequence of
        `[0, base - 1]` (RULES.md, failed fill)."""
        return _uncovered(0, batch["base_sequence"] - 1, self._start_fills(state, batch)) == 0

    def _start_fills(self, state: _ProducerState, batch: Batch) -> list[tuple[int, int]]:
        """The ranges of `[0, base - 1]` CRC-failed batches hold before `batch`, the first of its epoch,
        and after the producer's previous row when that row's epoch is lower (a marker of the same epoch
        may follow the epoch's first, rotted, transaction)."""
        previous = state.previous
        lower = previous is not None and previous["producer_epoch"] < batch["producer_epoch"]
        low = previous["base_offset"] if previous is not None and lower else -1
        skip = _PendingGap(
            batch, _StreamBatch({"base_offset": low}, -1, -1), 0, batch["base_sequence"], [], False
        )
        return self._failed_fills(skip)

    def _failed_fills(self, gap: _PendingGap) -> list[tuple[int, int]]:
        """The skipped ranges CRC-failed batches hold, by their headers (RULES.md, corruption is not
        loss): a data batch of the same producer and epoch between the two batches, whose sequence span
        is its offset span and whose sequences all lie in the skipped range."""
        batch, previous = gap.batch, gap.previous.batch
        out = []
        for f in self.failed:
            if (f["producer_id"], f["producer_epoch"]) != (batch["producer_id"], batch["producer_epoch"]):
                continue
            if not previous["base_offset"] < f["base_offset"] <= f["last_offset"] < batch["base_offset"]:
                continue
            if f["base_sequence"] < 0 or f["last_sequence"] < 0:
                continue
            span = sequence_span(f["base_sequence"], f["last_sequence"])
            start = gap.expected + (f["base_sequence"] - gap.expected) % SEQUENCE_MODULUS
            if span == f["last_offset"] - f["base_offset"] and start + span < gap.base:
                out.append((start, start + span))
        return out

    # -- markers -------------------------------------------------------------------------------

    def _append_marker(self, state: _ProducerState, marker: Batch) -> None:
        coordinator_epoch = marker.get("coordinator_epoch")
        if coordinator_epoch is not None:
            if state.coordinator_epoch is not None and coordinator_epoch < state.coordinator_epoch:
                assert state.coordinator_marker is not None
                self._emit(
                    "COORDINATOR_EPOCH_REGRESSION",
                    marker,
                    related_offset=state.coordinator_marker["base_offset"],
                    message=f"coordinator epoch {coordinator_epoch} after {state.coordinator_epoch}",
                )
            if state.coordinator_epoch is None or coordinator_epoch > state.coordinator_epoch:
                state.coordinator_epoch, state.coordinator_marker = coordinator_epoch, marker
        txn, previous = state.txn, state.raised_marker
        state.txn = state.raised_marker = None
        if not self._epoch_regressed(state, marker):
            self._empty_transaction(state, marker)
            self._stale_marker(state, marker, txn, previous)
            self._accept(state, marker)

    def _stale_marker(
        self,
        state: _ProducerState,
        marker: Batch,
        txn: tuple[int, int] | None,
        previous: tuple[int, int] | None,
    ) -> None:
        """STALE_TXN_MARKER: a COMMIT or ABORT marker whose transaction's data is all at its own epoch,
        right after a marker at that epoch that was above the data it closed, in a producer one of whose
        COMMITs before it was above its data (transactions V2, KAFKA-19446). Keeps `raised_marker` and
        `v2` for the producer's next marker."""
        kind, epoch = marker.get("control_type"), marker["producer_epoch"]
        if kind not in ("COMMIT", "ABORT"):
            return
        at_its_data = txn is not None and txn[0] == txn[1] == epoch
        if at_its_data and previous is not None and previous[0] == epoch and state.v2:
            self._emit(
                "STALE_TXN_MARKER",
                marker,
                related_offset=previous[1],
                message=f"{kind} marker at its data's epoch {epoch} after a V2 marker at that epoch",
            )
        if txn is not None and txn[1] < epoch:
            state.raised_marker = (epoch, marker["base_offset"])
            state.v2 |= kind == "COMMIT"

    def _empty_transaction(self, state: _ProducerState, marker: Batch) -> None:
        """EMPTY_TXN_MARKER: a COMMIT or ABORT marker whose producer's previous accepted batch is not
        transactional data (any epoch: a V2 marker carries the epoch after its data's), or that has none
        in a log holding every offset from 0 in batches from 0 on; not on a compacted log (the cleaner
        removes aborted data and keeps the markers), nor where a transactional data batch of the producer
        the replay skipped, or a CRC-failed one naming it, lies between."""
        if marker.get("control_type") not in ("COMMIT", "ABORT") or self.compacted or state.skipped_data:
            return
        previous = state.previous
        after = previous["base_offset"] if previous is not None else -1
        if any(
            f["producer_id"] == marker["producer_id"] and after < f["base_offset"] < marker["base_offset"]
            for f in self.failed
        ):
            return  # a CRC-failed batch naming the producer lies between: its data may be there
        if previous is None:
            empty = self.first_kept_offset == 0 and self.first_batch_offset == 0
        else:
            empty = not (previous["is_transactional"] and not previous["is_control"])
        if empty:
            self._emit(
                "EMPTY_TXN_MARKER",
                marker,
                related_offset=previous["base_offset"] if previous is not None else None,
                message=f"{marker['control_type']} marker with no data of its transaction",
            )

    # -- shared --------------------------------------------------------------------------------

    def _epoch_regressed(self, state: _ProducerState, batch: Batch) -> bool:
        if state.epoch is None or batch["producer_epoch"] >= state.epoch:
            return False
        assert state.first_at_epoch is not None
        self._emit(
            "EPOCH_REGRESSION",
            batch,
            related_offset=state.first_at_epoch["base_offset"],
            message=f"epoch {batch['producer_epoch']} after epoch {state.epoch}",
        )
        return True

    def _accept(self, state: _ProducerState, batch: Batch) -> None:
        epoch = batch["producer_epoch"]
        if state.epoch is None or epoch > state.epoch:
            state.epoch, state.first_at_epoch = epoch, batch
        state.accepted.append((batch["is_control"], epoch))
        state.previous = batch
        state.skipped_data = False
        if not batch["is_control"]:
            state.previous_data = batch
            if batch["is_transactional"]:
                low, high = state.txn or (epoch, epoch)
                state.txn = (min(low, epoch), max(high, epoch))

    def _emit(self, kind: str, batch: Batch, **fields: Any) -> None:
        self.findings.append(_finding(kind, batch, **fields))

    def _resolve_start(self, batch: Batch, stream: list[_StreamBatch], fills: list[tuple[int, int]]) -> None:
        """A producer's first batch mid-sequence. Sequences 0..base-1 that no later batch of its stream
        holds took an offset each below the batch: below the log start (retention), or anywhere below it
        where the cleaner may have passed (it keeps offsets)."""
        base_sequence = batch["base_sequence"]
        # The later batches at or below the stream's highest sequence before them, up to the first the
        # broker took from a producer it had forgotten: a client restarting its sequence wrote the rest.
        held: list[tuple[int, int]] = []
        highest = stream[0].last
        for s in stream[1:]:
            late = s.base <= highest
            if late and s.forgot:
                break
            if late:
                held.append((s.base, s.last))
            highest = max(highest, s.last)
        needed = _uncovered(0, base_sequence - 1, held + fills)
        if needed == 0:
            return  # all of them are later in the log: out of order (SEQUENCE_REGRESSION), not lost
        below = max(min(self.first_kept_offset, batch["base_offset"]), 0)
        # Where the cleaner may have passed: the offsets below the batch that no batch holds (other
        # producers' batches never held this one's), at least those below the log start.
        at = batch["base_offset"]
        room = min(at, max(self.free_before.get(at, at), below)) if self.compacted else below
        if below >= needed:
            kind, because = "HISTORY_TRUNCATED_BY_RETENTION", "retention"
        elif self.compacted and room >= needed:
            kind, because = "HISTORY_TRUNCATED_BY_RETENTION", "compaction"
        else:
            kind, because = "HISTORY_START_MISSING", None
        self._emit(
            kind,
            batch,
            expected_sequence=0,
            # At least the sequences that no offset below the batch can have held are missing.
            missing_records=None if because else needed - room,
            explained_by=because,
            message=f"first retained batch starts at sequence {base_sequence}",
        )

    def finish(self) -> list[Finding]:
        for batch, stream, fills in self.pending_starts:
            self._resolve_start(batch, stream, fills)
        self.pending_starts = []
        # A failed batch holds the sequences it holds for the whole stream, as a late batch does.
        fills: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for gap in self.pending_gaps:
            stream = (gap.batch["producer_id"], gap.batch["producer_epoch"])
            fills.setdefault(stream, []).extend(self._failed_fills(gap))
        for gap in self.pending_gaps:
            self._resolve_gap(gap, fills[(gap.batch["producer_id"], gap.batch["producer_epoch"])])
        self.pending_gaps = []
        return self.findings


def _uncovered(low: int, high: int, ranges: Iterable[tuple[int, int]]) -> int:
    """How many integers of `[low, high]` lie in none of the inclusive `ranges`."""
    clipped = sorted((max(a, low), min(b, high)) for a, b in ranges if a <= high and b >= low)
    covered, reach = 0, low - 1
    for a, b in clipped:
        if b > reach:
            covered += b - max(a, reach + 1) + 1
            reach = b
    return (high - low + 1) - covered


# ---------------------------------------------------------------------------------------------
# Log-level rules


def _crc_mismatches(rows: list[Batch]) -> list[Finding]:
    return [
        _finding(
            "CRC_MISMATCH",
            b,
            producer_id=None,
            producer_epoch=None,
            base_sequence=None,
            last_sequence=None,
            message=f"{b['file']} at byte {b['position']}: stored CRC does not match",
        )
        for b in rows
        if not b["crc_valid"]
    ]


def _offset_overlaps(rows: list[Batch]) -> list[Finding]:
    """OFFSET_OVERLAP: in file order, a batch starting at or before the previous batch's last offset."""
    out: list[Finding] = []
    previous: Batch | None = None
    for b in sorted((b for b in rows if b["crc_valid"]), key=lambda b: (b["file"], b["position"])):
        if previous is not None and b["base_offset"] <= previous["last_offset"]:
            has_producer = b["producer_id"] >= 0
            out.append(
                _finding(
                    "OFFSET_OVERLAP",
                    b,
                    producer_id=b["producer_id"] if has_producer else None,
                    producer_epoch=b["producer_epoch"] if has_producer else None,
                    base_sequence=None,
                    last_sequence=None,
                    related_offset=previous["base_offset"],
                    message=f"offsets {b['base_offset']}-{b['last_offset']} overlap the previous batch",
                )
            )
        previous = b
    return out


def _hanging_transactions(rows: list[Batch], profile: Profile) -> list[Finding]:
    """HANGING_TRANSACTION: per producer, transactional data after its last marker, older than the timeout,
    on one clock at a time, the longer: the newest marker's timestamp less the earliest's, of the markers
    after its first batch, summed over the partition leader epochs (the brokers'), and the newest data
    batch's less its first batch's (the producers')."""
    trusted = [b for b in rows if b["crc_valid"]]
    if not trusted:
        return []
    data_max = max((b["max_timestamp"] for b in trusted if not b["is_control"]), default=None)
    markers = [b for b in _producer_batches(rows) if b["is_control"]]
    by_producer: dict[int, list[Batch]] = {}
    for b in sorted(_producer_batches(rows), key=_offset_order):
        by_producer.setdefault(b["producer_id"], []).append(b)
    out: list[Finding] = []
    for batches in by_producer.values():
        open_batches: list[Batch] = []
        for b in batches:
            if b["is_control"]:
                open_batches = []
            elif b["is_transactional"]:
                open_batches.append(b)
        if not open_batches:
            continue
        first, last = open_batches[0], open_batches[-1]
        ages = [] if data_max is None else [data_max - first["max_timestamp"]]
        # The markers after it, one partition leader epoch (one leader's clock) at a time, summed.
        by_leader: dict[int, list[int]] = {}
        for m in markers:
            if m["base_offset"] > first["base_offset"]:
                by_leader.setdefault(m["partition_leader_epoch"], []).append(m["max_timestamp"])
        if by_leader:
            ages.append(sum(max(times) - min(times) for times in by_leader.values()))
        age = max(ages, default=0)
        if age > profile.transaction_max_timeout_ms:
            out.append(
                _finding(
                    "HANGING_TRANSACTION",
                    first,
                    last_offset=last["last_offset"],
                    last_sequence=None,
                    message=f"transaction open since offset {first['base_offset']}, {age} ms before the end",
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# Helpers


def _swept_transactions(rows: list[Batch], profile: Profile, compacted: bool) -> list[Finding]:
    """HANGING_TRANSACTION of a transaction a later epoch swept up: per producer, its transactional data
    since its previous marker (flagged batches left out: invalid sequences, epochs below the highest
    before) holds a higher epoch after epoch e, a marker follows, and the higher epoch's first batch is
    more than the timeout after e's first; not on a compacted log (a marker between may be gone), nor
    with a CRC-failed batch naming the producer between the two."""
    if compacted:
        return []
    by_producer: dict[int, list[Batch]] = {}
    for b in sorted(_producer_batches(rows), key=_offset_order):
        by_producer.setdefault(b["producer_id"], []).append(b)
    failed = [b for b in rows if b["magic"] == 2 and b["producer_id"] >= 0 and not b["crc_valid"]]
    out: list[Finding] = []
    for producer_id, batches in by_producer.items():
        highest: int | None = None
        txn: list[Batch] = []
        swept: tuple[Batch, Batch, Batch] | None = None  # e's first and last batch, the later epoch's first
        for b in batches:
            epoch = b["producer_epoch"]
            invalid = not b["is_control"] and (
                b["base_sequence"] < 0
                or sequence_span(b["base_sequence"], b["last_sequence"])
                != b["last_offset"] - b["base_offset"]
            )
            flagged = invalid or (highest is not None and epoch < highest)
            if not flagged:
                highest = epoch if highest is None else max(highest, epoch)
            if b["is_control"]:
                if swept is not None:
                    newest = max(
                        t["max_timestamp"] for t in txn if t["producer_epoch"] > swept[0]["producer_epoch"]
                    )
                    out += _swept_finding(swept, newest, failed, producer_id, profile)
                swept, txn = None, []
                continue
            if flagged or not b["is_transactional"]:
                continue
            if txn and swept is None and epoch > txn[0]["producer_epoch"]:
                last = [t for t in txn if t["producer_epoch"] == txn[0]["producer_epoch"]][-1]
                swept = (txn[0], last, b)
            txn.append(b)
    return out


def _swept_finding(
    swept: tuple[Batch, Batch, Batch], newest: int, failed: list[Batch], producer_id: int, profile: Profile
) -> list[Finding]:
    """`newest`: the newest timestamp of the later epochs' data before the marker (open until then)."""
    first, last, by = swept
    age = newest - first["max_timestamp"]
    between = [
        b
        for b in failed
        if b["producer_id"] == producer_id and first["base_offset"] < b["base_offset"] < by["base_offset"]
    ]
    if age <= profile.transaction_max_timeout_ms or between:
        return []
    return [
        _finding(
            "HANGING_TRANSACTION",
            first,
            last_offset=max(t["last_offset"] for t in (first, last)),
            last_sequence=None,
            related_offset=by["base_offset"],
            message=f"epoch {first['producer_epoch']}'s transaction swept up by epoch {by['producer_epoch']}",
        )
    ]


def _producer_batches(rows: Iterable[Batch]) -> list[Batch]:
    """Batches that take part in producer state (§5.1): magic 2, a producer id, a header to trust."""
    return [b for b in rows if b["magic"] == 2 and b["producer_id"] >= 0 and b["crc_valid"]]


def _failed_data_batches(rows: Iterable[Batch]) -> list[Batch]:
    """CRC-failed data batches whose header names a producer: they take no part in producer state, but
    may hold the sequences a gap skipped (`_Replay._failed_fills`)."""
    return [
        b
        for b in rows
        if b["magic"] == 2 and b["producer_id"] >= 0 and not b["crc_valid"] and not b["is_control"]
    ]


def _offset_order(b: Batch) -> tuple[int, str, int]:
    return (b["base_offset"], b["file"], b["position"])


def _none_last(value: int | None) -> tuple[bool, int]:
    return (value is None, value or 0)


def _finding(kind: str, batch: Batch, **fields: Any) -> Finding:
    """A finding about `batch`: its producer, offsets and sequences unless `fields` say otherwise."""
    out: Finding = dict.fromkeys(FINDING_FIELDS)
    out.update(
        kind=kind,
        producer_id=batch["producer_id"],
        producer_epoch=batch["producer_epoch"],
        first_offset=batch["base_offset"],
        last_offset=batch["last_offset"],
        base_sequence=batch["base_sequence"],
        last_sequence=batch["last_sequence"],
    )
    out.update(fields)
    return out
