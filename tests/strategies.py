"""Single-log producer histories as BATCHES rows: a small builder for hand-written cases and hypothesis
strategies for random ones (several producers, epoch bumps and zombies, gaps, duplicates, reordered
batches, sequences wrapping at 2^31, transaction markers, long idle times).

Offsets are contiguous and increasing, each data batch's offset range matches its sequence range (unless
the history asks for an INVALID_SEQUENCE), and every column of `schemas.tables.BATCHES` is filled.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from schemas.tables import BATCHES

MAX_SEQUENCE = (1 << 31) - 1
SEQUENCE_MODULUS = 1 << 31
T0 = 1_700_000_000_000
MINUTE_MS = 60_000
DAY_MS = 86_400_000
LOG_FILE = "/x/t-0/00000000000000000000.log"
RECORD_BATCH_OVERHEAD = 61  # DefaultRecordBatch header bytes
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

# A client-written topic the property tests' profiles name as compacted (`__consumer_offsets` is
# compacted too, but written by the group coordinator: no sequence rules there).
COMPACTED_TOPIC = "orders-compacted"


class LogBuilder:
    """Appends batches to one log at contiguous offsets and increasing byte positions, 10 ms apart.

    `data(...)`, `marker(...)` and `plain(...)` return the row they appended; `wait(ms)` moves the clock.
    """

    def __init__(
        self,
        *,
        start_offset: int = 0,
        topic: str = "orders",
        partition: int = 0,
        dump_id: str = "dump-1",
        replica: str | None = "1",
        file: str = LOG_FILE,
        clock: int = T0,
    ) -> None:
        self.rows: list[dict[str, Any]] = []
        self.next_offset = start_offset
        self.position = 0
        self.clock = clock
        self._log = {
            "dump_id": dump_id,
            "replica": replica,
            "topic": topic,
            "partition": partition,
            "file": file,
        }

    def wait(self, ms: int) -> None:
        self.clock += ms

    def overlap_previous(self) -> bool:
        """Start the next batch at the previous one's last offset (OFFSET_OVERLAP) if order survives."""
        if not self.rows or self.rows[-1]["count"] < 2:
            return False
        self.next_offset = self.rows[-1]["last_offset"]
        return True

    def data(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        records: int = 1,
        *,
        last_sequence: int | None = None,
        transactional: bool = False,
        timestamp: int | None = None,
        crc_valid: bool = True,
    ) -> dict[str, Any]:
        """A data batch of `records` records; `last_sequence` defaults to what the offsets imply."""
        if last_sequence is None:
            last_sequence = -1 if base_sequence < 0 else (base_sequence + records - 1) % SEQUENCE_MODULUS
        return self._append(
            count=records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            last_sequence=last_sequence,
            is_transactional=transactional,
            is_control=False,
            timestamp=timestamp,
            crc_valid=crc_valid,
        )

    def marker(
        self,
        producer_id: int,
        producer_epoch: int,
        control_type: str = "COMMIT",
        coordinator_epoch: int = 0,
        *,
        timestamp: int | None = None,
        crc_valid: bool = True,
    ) -> dict[str, Any]:
        """A COMMIT or ABORT marker as `writeEndTransactionalMarker` writes it: one record, sequence -1."""
        return self._append(
            count=1,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=-1,
            last_sequence=-1,
            is_transactional=True,
            is_control=True,
            control_type=control_type,
            coordinator_epoch=coordinator_epoch,
            timestamp=timestamp,
            crc_valid=crc_valid,
        )

    def plain(self, records: int = 1) -> dict[str, Any]:
        """A batch of a non-idempotent producer (producer id -1): no sequence information."""
        return self._append(
            count=records,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            last_sequence=-1,
            is_transactional=False,
            is_control=False,
        )

    def snapshot_entry(
        self,
        snapshot_offset: int,
        producer_id: int,
        producer_epoch: int,
        last_sequence: int,
        last_offset: int,
        *,
        timestamp: int | None = None,
        current_txn_first_offset: int = -1,
    ) -> dict[str, Any]:
        """A `producer_snapshots` row of this log's snapshot at `snapshot_offset` (beside its `.log`)."""
        folder = str(self._log["file"]).rsplit("/", 1)[0]
        return {
            **{k: self._log[k] for k in ("dump_id", "replica", "topic", "partition")},
            "file": f"{folder}/{snapshot_offset:020d}.snapshot",
            "position": 10,
            "snapshot_offset": snapshot_offset,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "last_sequence": last_sequence,
            "last_offset": last_offset,
            "offset_delta": 0,
            "timestamp": self.clock if timestamp is None else timestamp,
            "coordinator_epoch": 0,
            "current_txn_first_offset": current_txn_first_offset,
        }

    def _append(
        self,
        *,
        count: int,
        timestamp: int | None = None,
        crc_valid: bool = True,
        control_type: str | None = None,
        coordinator_epoch: int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        if timestamp is None:
            self.clock += 10
            timestamp = self.clock
        base_offset = self.next_offset
        size = RECORD_BATCH_OVERHEAD + 12 * count
        attributes = (_TRANSACTIONAL if fields["is_transactional"] else 0) | (
            _CONTROL if fields["is_control"] else 0
        )
        row = {
            **self._log,
            "position": self.position,
            "base_offset": base_offset,
            "last_offset": base_offset + count - 1,
            "count": count,
            "magic": 2,
            "crc": zlib.crc32(f"{base_offset}:{fields}".encode()),
            "crc_valid": crc_valid,
            "attributes": attributes,
            "compression": "none",
            "timestamp_type": "CreateTime",
            "partition_leader_epoch": 0,
            "base_timestamp": timestamp - count + 1,
            "max_timestamp": timestamp,
            "size_bytes": size,
            "delete_horizon_ms": None,
            "control_type": control_type,
            "coordinator_epoch": coordinator_epoch,
            "walk_mark": None,  # no decoder walked it (tests may mark walks with jobs.decode_tasks)
            **fields,
        }
        assert set(row) == set(BATCHES.columns), set(row) ^ set(BATCHES.columns)
        self.rows.append(row)
        self.next_offset = base_offset + count
        self.position += size
        return row


# ---------------------------------------------------------------------------------------------
# Random histories


@dataclass(frozen=True)
class LogHistory:
    """One generated log: its batches (BATCHES rows), log start offset and topic."""

    batches: list[dict[str, Any]]
    log_start_offset: int
    topic: str

    def describe(self) -> str:
        """The batches as a table, for failure messages."""
        lines = [f"topic {self.topic!r}, log start offset {self.log_start_offset}:"]
        t0 = min((b["max_timestamp"] for b in self.batches), default=0)
        for b in self.batches:
            if b["is_control"]:
                what = f"{b['control_type']} coord={b['coordinator_epoch']}"
            else:
                what = f"seq {b['base_sequence']}..{b['last_sequence']}" + (
                    " txn" if b["is_transactional"] else ""
                )
            lines.append(
                f"  {b['base_offset']:>6}-{b['last_offset']:<6} "
                f"pid={b['producer_id']:<5} e={b['producer_epoch']:<3} "
                f"{what:<40} t=+{b['max_timestamp'] - t0}ms{'' if b['crc_valid'] else ' BAD-CRC'}"
            )
        return "\n".join(lines)


@dataclass
class _Producer:
    producer_id: int
    epoch: int
    next_sequence: int
    transactional: bool
    coordinator_epoch: int = 0
    # (base_sequence, records, max_timestamp) of the current epoch's batches, for re-sends.
    sent: list[tuple[int, int, int]] = field(default_factory=list)

    def bump(self, epochs: int, first_sequence: int = 0) -> None:
        self.epoch += epochs
        self.next_sequence = first_sequence
        self.sent = []


# Weighted by repetition; "send" first so that hypothesis shrinks towards plain in-sequence writes.
_ACTIONS = (
    ["send"] * 8
    + ["gap", "duplicate", "reorder", "bump", "marker", "idle"] * 2
    + ["regress", "zombie", "invalid", "corrupt", "rot", "bump_rot", "plain", "overlap", "restart"]
    + ["marker_again"]
)

_first_sequences = st.one_of(
    st.just(0), st.just(0), st.just(0), st.integers(1, 40), st.integers(MAX_SEQUENCE - 8, MAX_SEQUENCE)
)
_idle_times = st.sampled_from([16 * MINUTE_MS, DAY_MS + 1, 2 * DAY_MS, 8 * DAY_MS])


@st.composite
def log_histories(
    draw: st.DrawFn,
    *,
    topics: tuple[str, ...] = ("orders", "orders", COMPACTED_TOPIC, "__consumer_offsets"),
    log_start_offset: int | None = None,
    partition: int = 0,
    max_events: int = 24,
    deleted_head: bool = False,
) -> LogHistory:
    """A random history of one log, driven by a list of producer actions. With `deleted_head` and a log
    start above 0, the log may keep batches below its log start, as DeleteRecords leaves them in the
    segment (the broker evicts producers before 2.4 by that log start: `truncateHead`)."""
    start = draw(st.sampled_from([0, 0, 1000])) if log_start_offset is None else log_start_offset
    first = start - draw(st.sampled_from([0, 0, 4, 20])) if deleted_head and start >= 20 else start
    topic = draw(st.sampled_from(topics))
    log = LogBuilder(
        start_offset=first, topic=topic, partition=partition, file=f"/x/{topic}-{partition}/{first:020d}.log"
    )
    producers = [
        _Producer(
            producer_id=1000 + i,
            epoch=draw(st.integers(0, 3)),
            next_sequence=draw(_first_sequences),
            transactional=draw(st.booleans()),
            coordinator_epoch=draw(st.integers(0, 2)),
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    for _ in range(draw(st.integers(1, max_events))):
        producer = draw(st.sampled_from(producers))
        _ACT[draw(st.sampled_from(_ACTIONS))](draw, log, producer)
    return LogHistory(log.rows, start, topic)


def _send(draw: st.DrawFn, log: LogBuilder, p: _Producer, records: int | None = None) -> None:
    n = draw(st.integers(1, 4)) if records is None else records
    row = log.data(p.producer_id, p.epoch, p.next_sequence, n, transactional=p.transactional)
    p.sent.append((p.next_sequence, n, row["max_timestamp"]))
    p.next_sequence = (p.next_sequence + n) % SEQUENCE_MODULUS


def _gap(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    p.next_sequence = (p.next_sequence + draw(st.integers(1, 5))) % SEQUENCE_MODULUS
    _send(draw, log, p)


def _duplicate(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """Re-send one of the producer's recent batches (mostly keeping the original records' timestamps)."""
    if not p.sent:
        return _send(draw, log, p)
    seq, n, ts = draw(st.sampled_from(p.sent[-8:]))
    keep_time = draw(st.booleans())
    row = log.data(
        p.producer_id, p.epoch, seq, n, transactional=p.transactional, timestamp=ts if keep_time else None
    )
    p.sent.append((seq, n, row["max_timestamp"]))


def _reorder(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """Two consecutive batches land in swapped order (Sarama #2619 with idempotence bypassed)."""
    n1, n2 = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    first = p.next_sequence
    second = (first + n1) % SEQUENCE_MODULUS
    for seq, n in ((second, n2), (first, n1)):
        row = log.data(p.producer_id, p.epoch, seq, n, transactional=p.transactional)
        p.sent.append((seq, n, row["max_timestamp"]))
    p.next_sequence = (second + n2) % SEQUENCE_MODULUS


def _regress(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """A batch overlapping sequences already written, but not an exact copy."""
    back = draw(st.integers(1, 3))
    seq = (p.next_sequence - back) % SEQUENCE_MODULUS
    log.data(p.producer_id, p.epoch, seq, draw(st.integers(1, 4)), transactional=p.transactional)


def _bump(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    p.bump(draw(st.integers(1, 2)), draw(st.sampled_from([0, 0, 3])))
    _send(draw, log, p)


def _zombie(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """A write with a lower epoch than the producer's current one (a fenced producer reaching the log)."""
    if p.epoch == 0:
        return _send(draw, log, p)
    epoch = p.epoch - draw(st.integers(1, p.epoch))
    if draw(st.booleans()):
        log.marker(p.producer_id, epoch, "ABORT", p.coordinator_epoch)
    else:
        log.data(
            p.producer_id,
            epoch,
            draw(st.integers(0, 20)),
            draw(st.integers(1, 3)),
            transactional=p.transactional,
        )


def _marker(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """COMMIT or ABORT; the coordinator epoch mostly holds or rises; the marker may bump the epoch (TV2)."""
    p.coordinator_epoch = max(0, p.coordinator_epoch + draw(st.sampled_from([0, 0, 1, -1])))
    bumps = draw(st.sampled_from([0, 0, 0, 1]))
    log.marker(
        p.producer_id, p.epoch + bumps, draw(st.sampled_from(["COMMIT", "ABORT"])), p.coordinator_epoch
    )
    if bumps:
        p.bump(bumps)


def _marker_again(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """A transaction (one batch) ended under transactions V2 (the marker one epoch above its data; the
    producer goes on at the marker's epoch), and its marker written again by the coordinator: once the
    next transaction's data is in (taken by brokers before KAFKA-19446), or right after itself (the
    retry with nothing open, KAFKA-19999). A producer without transactions gets a plain marker."""
    if not p.transactional:
        return _marker(draw, log, p)
    _send(draw, log, p)
    p.bump(1)
    kind = draw(st.sampled_from(["COMMIT", "COMMIT", "ABORT"]))
    log.marker(p.producer_id, p.epoch, kind, p.coordinator_epoch)
    if draw(st.sampled_from([True, True, False])):
        _send(draw, log, p)
    log.marker(p.producer_id, p.epoch, kind, p.coordinator_epoch)


def _idle(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    log.wait(draw(_idle_times))
    _ACT[draw(st.sampled_from(["send", "gap", "duplicate", "marker"]))](draw, log, p)


def _invalid(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """A batch whose sequence range disagrees with its offsets, or with no sequence at all."""
    n = draw(st.integers(1, 3))
    if draw(st.booleans()):
        log.data(p.producer_id, p.epoch, -1, n, transactional=p.transactional)
    else:
        last = (p.next_sequence + n) % SEQUENCE_MODULUS
        log.data(
            p.producer_id, p.epoch, p.next_sequence, n, last_sequence=last, transactional=p.transactional
        )


def _corrupt(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """A batch whose CRC does not match: its header (even its timestamp) cannot be trusted."""
    garbage_time = log.clock + draw(st.sampled_from([10, 3 * DAY_MS]))
    log.data(
        p.producer_id,
        draw(st.integers(0, 9)),
        draw(st.integers(0, 99)),
        1,
        timestamp=garbage_time,
        crc_valid=False,
    )


def _rot(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """A batch the producer sent in sequence whose records rotted on disk: its CRC fails, its header is
    intact, and the batches around it skip its sequences (corruption, not loss: RULES.md)."""
    n = draw(st.integers(1, 4))
    log.data(p.producer_id, p.epoch, p.next_sequence, n, transactional=p.transactional, crc_valid=False)
    p.next_sequence = (p.next_sequence + n) % SEQUENCE_MODULUS


def _bump_rot(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """A new epoch whose first batch rotted on disk: the next batch starts above sequence 0, and the
    failed batch before it holds the sequences it skips."""
    p.bump(1, 0)
    _rot(draw, log, p)
    _send(draw, log, p)


def _restart(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    """The producer writes sequence 0 again in its epoch: a transactional client before 2.5 does so
    after UNKNOWN_PRODUCER_ID, once its broker forgot it (expired, or evicted by the log start)."""
    p.next_sequence = 0
    _send(draw, log, p)


def _plain(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    log.plain(draw(st.integers(1, 3)))


def _overlap(draw: st.DrawFn, log: LogBuilder, p: _Producer) -> None:
    log.overlap_previous()
    _send(draw, log, p)


_ACT = {
    "send": _send,
    "gap": _gap,
    "duplicate": _duplicate,
    "reorder": _reorder,
    "regress": _regress,
    "bump": _bump,
    "zombie": _zombie,
    "marker": _marker,
    "idle": _idle,
    "invalid": _invalid,
    "corrupt": _corrupt,
    "rot": _rot,
    "bump_rot": _bump_rot,
    "plain": _plain,
    "overlap": _overlap,
    "restart": _restart,
    "marker_again": _marker_again,
}
