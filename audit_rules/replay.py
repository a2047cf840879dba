"""The producer-state scan of the history (`ProducerAppendInfo`, kafka-formats-and-rules §5.3-§5.4)
as one streaming pass per task over Arrow batches.

The rows come hash-partitioned by (log, producer id) and sorted by base offset within each task, so a
producer's batches arrive consecutively, possibly across several Arrow batches. Every running value of
RULES.md (the highest epoch so far, the last valid batch, the stream counters) is a segmented scan
over one Arrow batch, vectorised with numpy, started from the values the previous Arrow batch ended
with when the producer carries on. A task holds one Arrow batch and one row of state: a producer with
ten million batches costs its sort and nothing more (Spark's window buffers a whole producer and
spills it for every window pass). A producer that holds most of the batches may come cut into offset
ranges in several tasks (`history.split_plan`), each range starting from the state the producer's
earlier rows leave (`split_start`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEQUENCE_MODULUS = 1 << 31
HALF_RANGE = 1 << 30
NONE = -1  # no row of the producer before
CARRIED = -2  # the row is in an earlier Arrow batch: the carried value
# Running maxima run over positive codes (0: nothing yet): an epoch (int16) as epoch + EPOCH_BIAS, a
# coordinator epoch (int32) as epoch + COORD_BIAS, the lowest epoch as EPOCH_BIAS - epoch.
EPOCH_BIAS = 1 << 15 | 1
COORD_BIAS = (1 << 31) + 1

# The columns the scan reads.
INPUTS = (
    "log_id",
    "producer_id",
    "base_offset",
    "last_offset",
    "base_sequence",
    "last_sequence",
    "producer_epoch",
    "is_control",
    "is_transactional",
    "coordinator_epoch",
    "max_timestamp",
)

# The columns it adds: (name, Spark SQL type). Not among them, since they follow from each row's own
# columns (`history.derived` adds them): `ok` (neither invalid nor an epoch regression) and `in_stream`
# (an ok data batch); every column sent back through Arrow costs the JVM a conversion per row.
OUTPUTS = (
    ("invalid", "boolean"),
    ("epoch_regressed", "boolean"),
    ("max_epoch_before", "int"),
    ("regression_related_offset", "bigint"),
    ("coord_before_epoch", "int"),
    ("coord_before_offset", "bigint"),
    ("prev_offset", "bigint"),
    ("prev_producer_epoch", "smallint"),
    ("min_epoch_before", "int"),
    ("markers_before", "bigint"),
    ("prev_event_timestamp", "bigint"),
    ("prev_event_open_txn", "boolean"),
    ("first_in_stream", "boolean"),
    ("prev_base_offset", "bigint"),
    ("prev_last_sequence", "int"),
    ("stream_index", "int"),
    ("base_sequence_unwrapped", "bigint"),
    ("prev_last_unwrapped", "bigint"),
    # The highest unwrapped last sequence of the stream's earlier batches: a batch at or below it is
    # late (only a late batch can be a copy or fill a hole), one above it plus one leaves a hole.
    ("max_last_before", "bigint"),
    # The unwrapped (= raw) base sequence of the stream's first batch.
    ("stream_first_base", "bigint"),
    # A late batch whose range an earlier batch of its stream has (an exact copy, KIP-98 duplicate):
    # the offset and stream index of the nearest such batch; for a late batch the scan could not
    # decide (`COPY_LOOKBACK`), no offset and index UNDECIDED; null for every other batch.
    ("copy_of_offset", "bigint"),
    ("copy_of_index", "int"),
)

# How many in-stream batches back (the producer's, carried across Arrow batches) the scan looks for an
# earlier batch with a late batch's range. Past them it still decides when the stream began within
# them or every earlier batch of the stream ends below the late batch's base; otherwise the late batch
# is UNDECIDED and the audit finds the copies by a pass over the stored history (`history.copies`).
COPY_LOOKBACK = 16
UNDECIDED = -1


@dataclass
class _State:
    """What a producer's rows so far leave for its next row (the scans' values at its last row)."""

    key: tuple[Any, Any] | None = None
    coord: tuple[int, int] | None = None  # code of the highest marker coordinator epoch, its first offset
    max_epoch: tuple[int, int] | None = None  # code of the highest epoch of a valid row, its first offset
    last_ok: dict[str, Any] | None = None
    min_epoch: int = 0  # code of the lowest epoch of a valid row
    markers: int = 0  # markers, fenced ones too
    last_stream: dict[str, Any] | None = None
    n: int = 0  # in-stream batches
    spans: int = 0  # in-stream batches whose sequences wrap inside them
    jumps: int = 0  # 2^31 laps between consecutive stream batches
    ups: int = 0  # of them, the laps forward
    # (n, spans, jumps) before the stream's first batch, that batch's base sequence, and ups at it
    stream_start: tuple[int, int, int, int, int] | None = None
    stream_max: int | None = None  # the highest unwrapped last sequence of the stream so far
    # The producer's last COPY_LOOKBACK in-stream batches (the columns `_copies` reads), for its lookback.
    recent: dict[str, np.ndarray] | None = None


def split_start(key: tuple[Any, Any], prior: dict[str, Any] | None) -> _State:
    """The state a producer's rows before an offset leave its next row, from their aggregates
    (`history.split_plan`), for a producer whose batches are all of one epoch, none a marker, and whose
    valid batches' sequences neither wrap inside a batch nor span half the sequence range: then every
    valid batch is in one epoch stream, unwrapped as it is, and the scan's running values are a count,
    a maximum and the first and last valid batches. `prior`: `valid` (how many valid batches), `first`
    (the first one's `offset` and `base`), `last` (the last one's `offset`, `epoch`, `timestamp`,
    `transactional`, `base` and `last`) and `max_last` (the highest last sequence); None or no valid
    batch: rows the scan took none of (every one invalid). The lookback starts empty: a late batch
    within it whose original came before is UNDECIDED, and the audit's pass over the stored history
    finds its copies (`history.copies`)."""
    state = _State(key=key)
    if prior is None or not prior["valid"]:
        return state
    first, last = prior["first"], prior["last"]
    state.max_epoch = (int(last["epoch"]) + EPOCH_BIAS, int(first["offset"]))
    state.last_ok = {
        "offset": int(last["offset"]),
        "epoch": int(last["epoch"]),
        "timestamp": int(last["timestamp"]),
        "open_txn": bool(last["transactional"]),
    }
    state.min_epoch = EPOCH_BIAS - int(last["epoch"])
    state.last_stream = {
        "e": int(last["epoch"]),
        "o": int(last["offset"]),
        "b": int(last["base"]),
        "l": int(last["last"]),
        "t": int(last["timestamp"]),
    }
    state.n = int(prior["valid"])
    state.stream_start = (0, 0, 0, int(first["base"]), 0)
    state.stream_max = int(prior["max_last"])
    return state


def _segments(start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's segment number (0: the producer carried over from the previous Arrow batch, when
    row 0 is not a start) and the index of each row's segment's first row."""
    seg = np.cumsum(start)
    firsts = np.concatenate(([0], np.flatnonzero(start)))
    return seg, firsts[seg]


def _last_upto(valid: np.ndarray, seg: np.ndarray, seg_first: np.ndarray) -> np.ndarray:
    """Index of the last valid row up to each row within its segment; CARRIED in segment 0 before its
    first valid row, NONE in a later segment."""
    idx = np.where(valid, np.arange(len(valid)), -1)
    m = np.maximum.accumulate(idx) if len(idx) else idx
    return np.where(m >= seg_first, m, np.where(seg == 0, CARRIED, NONE))


def _before(upto: np.ndarray, start: np.ndarray, none: Any, carried: Any) -> np.ndarray:
    """A scan's value at the previous row of the segment: `none` at a segment's first row, `carried` at
    row 0 when it continues a producer."""
    out = np.empty_like(upto)
    if len(upto):
        out[1:] = upto[:-1]
        out[0] = none if start[0] else carried
        out[1:][start[1:]] = none
    return out


def _cumsum(x: np.ndarray, start: np.ndarray, seg: np.ndarray, init: int) -> np.ndarray:
    """Running sum up to each row within its segment, segment 0 starting from `init`."""
    cs = np.cumsum(x, dtype=np.int64)
    firsts = np.flatnonzero(start)
    base = np.empty(len(firsts) + 1, dtype=np.int64)
    base[0] = -init
    base[1:] = cs[firsts] - x[firsts]
    return cs - base[seg]


def _cummax(v: np.ndarray, seg: np.ndarray, init: int) -> np.ndarray:
    """Running max of non-negative ints up to each row within its segment; segment 0 from `init`."""
    shift = np.int64(1) << 40
    keyed = seg.astype(np.int64) * shift + v
    m = np.maximum.accumulate(keyed) - seg.astype(np.int64) * shift if len(v) else keyed
    return np.where(seg == 0, np.maximum(m, init), m)


def _take(values: np.ndarray, idx: np.ndarray, carried: Any) -> tuple[np.ndarray, np.ndarray]:
    """values[idx] where idx >= 0, `carried` where CARRIED (null when None), and the null mask."""
    out = values[np.maximum(idx, 0)] if len(values) else values.copy()
    null = idx == NONE
    at_carry = idx == CARRIED
    if at_carry.any():
        if carried is None:
            null = null | at_carry
        else:
            out = np.where(at_carry, carried, out)
    return out, null


def _segmented_max_before(
    values: np.ndarray, present: np.ndarray, starts: np.ndarray, init: int | None
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """The max of `values` where `present` over each row's earlier rows of its segment (segments begin
    where `starts`; when row 0 is no start its segment continues from `init`): (max, its null mask),
    and the running max at the last row (None: nothing yet)."""
    n = len(values)
    if n == 0:
        return values.copy(), np.ones(0, dtype=bool), init
    floor = [int(values[present].min())] if present.any() else []
    lo = min(floor + ([init] if init is not None else [])) if floor or init is not None else 0
    shifted = np.where(present, values - lo + 1, 0)  # 0: nothing
    init_s = init - lo + 1 if init is not None else 0
    seg = np.cumsum(starts)
    width = max(int(shifted.max()), init_s) + 1
    if (int(seg[-1]) + 1) * width < (1 << 62):
        # Keys of a later segment are above every key of an earlier one: one running max serves all.
        keyed = seg * width + shifted
        keyed[0] = max(int(keyed[0]), init_s) if not starts[0] else keyed[0]
        upto = np.maximum.accumulate(keyed) - seg * width
    else:  # an astronomically wide range of sequences in one Arrow batch: segment by segment
        upto = np.empty(n, dtype=np.int64)
        bounds = [*np.flatnonzero(starts).tolist(), n]
        if bounds[0] != 0:
            bounds.insert(0, 0)
        for a, b in pairwise(bounds):
            chunk = shifted[a:b].copy()
            if a == 0 and not starts[0]:
                chunk[0] = max(int(chunk[0]), init_s)
            upto[a:b] = np.maximum.accumulate(chunk)
    before = np.empty(n, dtype=np.int64)
    before[0] = 0 if starts[0] else init_s
    before[1:] = upto[:-1]
    before[1:][starts[1:]] = 0
    last = int(upto[-1])
    return before + lo - 1, before == 0, (last + lo - 1 if last > 0 else None)


def scan_batch(
    cols: dict[str, np.ndarray],
    key_changes: np.ndarray,
    state: _State,
    lookback: int = COPY_LOOKBACK,
    markers_refresh: bool = True,
) -> dict[str, Any]:
    """The scan columns of one Arrow batch (numpy arrays, with `<name>_null` masks), updating `state`
    to the values its last producer carries into the next batch; `lookback`: `_copies`'; `markers_refresh`:
    whether a marker refreshes the producer's expiry time (`prev_event_timestamp`; the profile's)."""
    n = len(cols["base_offset"])
    start = key_changes
    seg, seg_first = _segments(start)
    carry = not start[0]
    offset = cols["base_offset"]
    control = cols["is_control"]
    epoch = cols["producer_epoch"].astype(np.int64)
    base, last = cols["base_sequence"].astype(np.int64), cols["last_sequence"].astype(np.int64)
    out: dict[str, Any] = {}

    # INVALID_SEQUENCE: a data batch's sequence range must span exactly its offset range (KIP-98).
    invalid = ~control & (
        (base < 0) | (np.mod(last - base, SEQUENCE_MODULUS) != cols["last_offset"] - offset)
    )

    # The highest earlier coordinator epoch of a marker and the first marker that carried it.
    c_code = np.where(
        control & ~cols["coordinator_epoch_null"], cols["coordinator_epoch"].astype(np.int64) + COORD_BIAS, 0
    )
    c_init = state.coord[0] if carry and state.coord else 0
    c_max_before = _before(_cummax(c_code, seg, c_init), start, 0, c_init)
    c_record = c_code > c_max_before
    c_at = _before(_last_upto(c_record, seg, seg_first), start, NONE, CARRIED)
    out["coord_before_epoch"] = c_max_before - COORD_BIAS
    out["coord_before_epoch_null"] = c_max_before == 0
    out["coord_before_offset"], out["coord_before_offset_null"] = _take(
        offset, c_at, state.coord[1] if carry and state.coord else None
    )

    # The highest earlier epoch of a valid batch or marker, and the first row that carried it.
    e_code = np.where(~invalid, epoch + EPOCH_BIAS, 0)
    e_init = state.max_epoch[0] if carry and state.max_epoch else 0
    e_max_before = _before(_cummax(e_code, seg, e_init), start, 0, e_init)
    e_record = e_code > e_max_before
    e_at = _before(_last_upto(e_record, seg, seg_first), start, NONE, CARRIED)
    regressed = ~invalid & (e_max_before > 0) & (epoch + EPOCH_BIAS < e_max_before)
    out["max_epoch_before"] = e_max_before - EPOCH_BIAS
    out["max_epoch_before_null"] = e_max_before == 0
    out["regression_related_offset"], out["regression_related_offset_null"] = _take(
        offset, e_at, state.max_epoch[1] if carry and state.max_epoch else None
    )
    ok = ~invalid & ~regressed
    in_stream = ok & ~control
    out.update(invalid=invalid, epoch_regressed=regressed)

    # The previous valid row (batch or marker) of the producer.
    last_ok = state.last_ok if carry else None
    ok_at = _before(_last_upto(ok, seg, seg_first), start, NONE, CARRIED)
    open_txn = cols["is_transactional"] & ~control
    for name, values, key in (
        ("prev_offset", offset, "offset"),
        ("prev_producer_epoch", cols["producer_epoch"], "epoch"),
        ("prev_event_open_txn", open_txn, "open_txn"),
    ):
        out[name], out[name + "_null"] = _take(values, ok_at, last_ok[key] if last_ok else None)
    # The previous in-stream batch (a valid data batch) of the producer.
    last_stream = state.last_stream if carry else None
    s_at = _before(_last_upto(in_stream, seg, seg_first), start, NONE, CARRIED)
    # The time the broker's expiry measures from: its last batch or marker, or, where markers do not
    # refresh it (`markers_refresh` false: 1.0 to 2.4.0), its last data batch.
    out["prev_event_timestamp"], out["prev_event_timestamp_null"] = (
        _take(cols["max_timestamp"], ok_at, last_ok["timestamp"] if last_ok else None)
        if markers_refresh
        else _take(cols["max_timestamp"], s_at, last_stream["t"] if last_stream else None)
    )
    # Lowest earlier epoch of a valid row: the running max of the negated epoch.
    m_init = state.min_epoch if carry else 0
    m_code = np.where(ok, EPOCH_BIAS - epoch, 0)
    m_upto = _cummax(m_code, seg, m_init)
    m_max = _before(m_upto, start, 0, m_init)
    out["min_epoch_before"] = EPOCH_BIAS - m_max
    out["min_epoch_before_null"] = m_max == 0
    # The producer's markers before this row, a fenced one (epoch regression) too: whatever marker the
    # broker appended closed the producer's transaction in its state, and its `.txnindex` follows that.
    markers = _cumsum(control.astype(np.int64), start, seg, state.markers if carry else 0)
    out["markers_before"] = markers - control
    out["markers_before_null"] = np.zeros(n, dtype=bool)

    # The previous in-stream batch: the stream's previous batch when its epoch is this one.
    p: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for key, values in (
        ("e", epoch),
        ("o", offset),
        ("b", base),
        ("l", last),
    ):
        p[key] = _take(values, s_at, last_stream[key] if last_stream else None)
    same = in_stream & ~p["e"][1] & (p["e"][0] == epoch)
    first = in_stream & ~same
    out["first_in_stream"] = first
    for name, key in (
        ("prev_base_offset", "o"),
        ("prev_last_sequence", "l"),
    ):
        out[name] = p[key][0]
        out[name + "_null"] = ~same

    # The 2^31 unwrapping of RULES.md: +1 lap where the base sequence falls more than half the range
    # below the previous last sequence, -1 where it rises that far, +1 after a batch that wraps inside.
    # A base of 0 is a lap only straight after 2147483647 (the broker's one wrap, `inSequence`): after
    # anything else it is a producer starting its sequence again (a client that restarted at 0 after
    # its broker forgot it), not 2^31 - last - 1 records lost. A lap back only where the stream has gone
    # a lap forward before (a +1, or a batch that wraps inside): a stream that never wrapped has no lap
    # to go back to, and 5 then 1,500,000,000 is a gap, not a batch from before its first.
    # Or where the offsets between the two batches could have held the sequences up to 2147483647 that
    # are not there: the cleaner removed the batch that wrapped (it keeps whole batches' offsets), or
    # its bytes failed; a lap with those missing. (A producer starting at 0 again that far up its
    # range, with that many offsets of others between, is the one case this reads wrongly.)
    step = base - p["l"][0]
    prev_last_offset = p["o"][0] + np.mod(p["l"][0] - p["b"][0], SEQUENCE_MODULUS)
    room = offset - prev_last_offset - 1 >= (SEQUENCE_MODULUS - 1) - p["l"][0]
    wraps = (step < -HALF_RANGE) & ((base != 0) | (p["l"][0] == SEQUENCE_MODULUS - 1) | room)
    up = (same & wraps).astype(np.int64)
    spans = (last < base).astype(np.int64)
    n_run = _cumsum(in_stream.astype(np.int64), start, seg, state.n if carry else 0)
    s_run = _cumsum(np.where(in_stream, spans, 0), start, seg, state.spans if carry else 0)
    u_run = _cumsum(np.where(in_stream, up, 0), start, seg, state.ups if carry else 0)
    # The running values before the stream's first batch (the latest first batch up to the row).
    f_at = _last_upto(first, seg, seg_first)
    carried_start = state.stream_start if carry else None
    n0, _ = _take(n_run - 1, f_at, carried_start[0] if carried_start else 0)
    first_base, first_base_null = _take(base, f_at, carried_start[3] if carried_start else None)
    s0, _ = _take(s_run - spans, f_at, carried_start[1] if carried_start else 0)
    u0, _ = _take(u_run, f_at, carried_start[4] if carried_start else 0)
    forward_before = (u_run - up - u0) + (s_run - spans - s0)
    down = same & (step > HALF_RANGE) & (forward_before >= 1)
    jump = up - down.astype(np.int64)
    j_run = _cumsum(np.where(in_stream, jump, 0), start, seg, state.jumps if carry else 0)
    j0, _ = _take(j_run, f_at, carried_start[2] if carried_start else 0)
    laps = (j_run - j0) + (s_run - spans - s0)
    p_spans = (p["l"][0] < p["b"][0]).astype(np.int64)
    prev_laps = (j_run - jump - j0) + (s_run - spans - p_spans - s0)
    prev_last = p["b"][0] + prev_laps * SEQUENCE_MODULUS + np.mod(p["l"][0] - p["b"][0], SEQUENCE_MODULUS)
    out["stream_index"] = n_run - n0
    out["stream_index_null"] = ~in_stream
    out["base_sequence_unwrapped"] = base + laps * SEQUENCE_MODULUS
    out["base_sequence_unwrapped_null"] = ~in_stream
    out["prev_last_unwrapped"] = prev_last
    out["prev_last_unwrapped_null"] = ~same
    out["stream_first_base"] = first_base
    out["stream_first_base_null"] = first_base_null | ~in_stream
    # Streams begin at a producer's first row or a stream's first batch; carried on when neither.
    last_u = base + laps * SEQUENCE_MODULUS + np.mod(last - base, SEQUENCE_MODULUS)
    m_before, m_null, m_last = _segmented_max_before(
        last_u, in_stream, start | first, state.stream_max if carry else None
    )
    out["max_last_before"] = m_before
    out["max_last_before_null"] = m_null | ~in_stream

    # Exact copies among the late batches (at or below the highest sequence their stream reached).
    base_u = base + laps * SEQUENCE_MODULUS
    late = in_stream & ~first & ~m_null & (base_u <= m_before)
    ins = np.flatnonzero(in_stream)
    rows = {
        "sid": seg[ins].astype(np.int64) * (np.int64(1) << 40) + n0[ins],
        "n0": n0[ins],
        "bu": base_u[ins],
        "lu": last_u[ins],
        "off": offset[ins],
        "idx": (n_run - n0)[ins],
        "first": first[ins],
        "mb": m_before[ins],
        "mb_null": m_null[ins],
    }
    recent = state.recent if carry else None
    copy_of, state.recent = _copies(
        rows,
        np.searchsorted(ins, np.flatnonzero(late)),
        recent,
        seg[ins] == seg[-1],
        bool(seg[-1] == 0),
        lookback,
    )
    out["copy_of_offset"] = np.zeros(n, dtype=np.int64)
    out["copy_of_offset_null"] = np.ones(n, dtype=bool)
    out["copy_of_index"] = np.zeros(n, dtype=np.int64)
    out["copy_of_index_null"] = np.ones(n, dtype=bool)
    at = ins[copy_of["at"]]
    out["copy_of_offset"][at] = copy_of["off"]
    out["copy_of_offset_null"][at] = copy_of["off_null"]
    out["copy_of_index"][at] = copy_of["idx"]
    out["copy_of_index_null"][at] = False

    # What the last producer of the batch carries into the next one.
    tail = seg == seg[-1]
    keep_prefix = not start[np.flatnonzero(tail)[0]]  # the last segment continues the carried one
    i = n - 1

    def last_where(mask: np.ndarray) -> int | None:
        hits = np.flatnonzero(mask & tail)
        return int(hits[-1]) if len(hits) else None

    c_i = last_where(c_record)
    state.coord = (
        (int(c_code[c_i]), int(offset[c_i])) if c_i is not None else (state.coord if keep_prefix else None)
    )
    e_i = last_where(e_record)
    state.max_epoch = (
        (int(e_code[e_i]), int(offset[e_i]))
        if e_i is not None
        else (state.max_epoch if keep_prefix else None)
    )
    o_i = last_where(ok)
    if o_i is not None:
        state.last_ok = {
            "offset": int(offset[o_i]),
            "epoch": int(epoch[o_i]),
            "timestamp": int(cols["max_timestamp"][o_i]),
            "open_txn": bool(open_txn[o_i]),
        }
    elif not keep_prefix:
        state.last_ok = None
    state.min_epoch = int(m_upto[i])
    state.markers = int(markers[i])
    st_i = last_where(in_stream)
    if st_i is not None:
        state.last_stream = {
            "e": int(epoch[st_i]),
            "o": int(offset[st_i]),
            "b": int(base[st_i]),
            "l": int(last[st_i]),
            "t": int(cols["max_timestamp"][st_i]),
        }
    elif not keep_prefix:
        state.last_stream = None
    state.n, state.spans, state.jumps, state.ups = int(n_run[i]), int(s_run[i]), int(j_run[i]), int(u_run[i])
    state.stream_max = m_last
    f_i = last_where(first)
    if f_i is not None:
        state.stream_start = (
            int(n_run[f_i] - 1),
            int(s_run[f_i] - spans[f_i]),
            int(j_run[f_i]),
            int(base[f_i]),
            int(u_run[f_i]),
        )
    elif not keep_prefix:
        state.stream_start = None
    return out


def _copies(
    rows: dict[str, np.ndarray],
    late: np.ndarray,
    recent: dict[str, np.ndarray] | None,
    last_producer: np.ndarray,
    continues: bool,
    lookback: int = COPY_LOOKBACK,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """For the late batches among one Arrow batch's in-stream batches (`rows`, in order; `late`: their
    positions), the nearest earlier batch of the same stream with the same unwrapped range: an exact
    copy's original or an earlier copy (KIP-98 duplicate). `recent` holds the producer's in-stream
    batches before this Arrow batch (the same columns, `sid` aside: they continue segment 0), so the
    answer does not depend on where Spark cuts the rows.

    Looks back `lookback` in-stream batches. Past them no earlier batch can match when the stream began
    within them, or when every earlier batch of the stream ends below the late batch's base (`mb`, the
    highest unwrapped last sequence before the oldest batch looked at); otherwise the batch is
    UNDECIDED. Returns ({at, off, off_null, idx} per late batch, the producer's last `lookback`
    in-stream batches for the next Arrow batch; `last_producer` marks the rows of this batch's last
    producer, which `continues` the held one when the batch holds no other).
    """
    names = ("n0", "bu", "lu", "off", "idx", "first", "mb", "mb_null")
    held = 0 if recent is None else len(recent["bu"])
    e = {k: np.concatenate((recent[k], rows[k])) if held else rows[k] for k in names}  # type: ignore[index]
    e["sid"] = np.concatenate((recent["n0"], rows["sid"])) if held else rows["sid"]  # type: ignore[index]
    q = late + held
    found = np.full(len(q), -1, dtype=np.int64)
    done = np.zeros(len(q), dtype=bool)
    oldest = q.copy()
    for k in range(1, lookback + 1):
        r = q - k
        live = ~done & (r >= 0)
        if not live.any():
            break
        r = np.where(live, r, 0)
        same = live & (e["sid"][r] == e["sid"][q])
        done |= live & ~same  # the stream began after r: each of its earlier batches was looked at
        hit = same & (e["bu"][r] == e["bu"][q]) & (e["lu"][r] == e["lu"][q])
        found = np.where(hit, r, found)
        done |= hit
        oldest = np.where(same, r, oldest)
    rest = ~done
    complete = e["first"][oldest] | e["mb_null"][oldest] | (e["bu"][q] > e["mb"][oldest])
    undecided = rest & ~complete
    copy = found >= 0
    keep = copy | undecided
    src = np.maximum(found, 0)
    answer = {
        "at": late[keep],
        "off": np.where(copy, e["off"][src], 0)[keep],
        "off_null": ~copy[keep],
        "idx": np.where(copy, e["idx"][src], UNDECIDED)[keep],
    }
    # The producer's last in-stream batches: the held ones when it continues them.
    tail = np.flatnonzero(last_producer) + held
    if held and continues:
        tail = np.concatenate((np.arange(held), tail))
    tail = tail[-lookback:] if lookback else tail[:0]
    kept = {k: e[k][tail] for k in names}
    return answer, kept


def _output_arrays(
    arrays: list[Any], state: _State, lookback: int = COPY_LOOKBACK, markers_refresh: bool = True
) -> list[Any]:
    """The scan columns (pyarrow arrays, in OUTPUTS order) of one Arrow batch's INPUTS columns (`arrays`,
    in INPUTS order, at least one row), updating `state`."""
    n = len(arrays[0])
    keys, pids = arrays[0], arrays[1]
    change = np.ones(n, dtype=bool)
    if n > 1:
        change[1:] = np.asarray(
            pc.or_(
                pc.not_equal(keys.slice(1), keys.slice(0, n - 1)),
                pc.not_equal(pids.slice(1), pids.slice(0, n - 1)),
            )
        )
    change[0] = state.key != (keys[0].as_py(), pids[0].as_py())
    cols: dict[str, np.ndarray] = {}
    for name, column in zip(INPUTS[2:], arrays[2:], strict=True):
        if name == "coordinator_epoch":
            cols[name + "_null"] = np.asarray(column.is_null())
            column = column.fill_null(0)
        cols[name] = np.asarray(column)
    out = scan_batch(cols, change, state, lookback, markers_refresh)
    state.key = (keys[-1].as_py(), pids[-1].as_py())
    result = []
    for name, sql_type in OUTPUTS:
        values = out[name]
        mask = out.get(name + "_null")
        if mask is not None and mask.any():
            result.append(pa.array(np.where(mask, 0, values), type=_arrow_type(sql_type), mask=mask))
        else:
            result.append(pa.array(values, type=_arrow_type(sql_type)))
    return result


_ARROW_TYPES = {"boolean": pa.bool_(), "int": pa.int32(), "bigint": pa.int64(), "smallint": pa.int16()}


def _arrow_type(sql_type: str) -> Any:
    return _ARROW_TYPES[sql_type]


def replay_batches(
    batches: Iterable[Any], lookback: int = COPY_LOOKBACK, markers_refresh: bool = True
) -> Iterator[Any]:
    """`mapInArrow` form of the scan: each input Arrow batch (sorted rows holding INPUTS) with the scan
    columns appended."""
    state = _State()
    for batch in batches:
        if batch.num_rows == 0:
            continue
        arrays = _output_arrays([batch.column(name) for name in INPUTS], state, lookback, markers_refresh)
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, *arrays], names=[*batch.schema.names, *(name for name, _ in OUTPUTS)]
        )


def through_pandas(scan: Callable[..., pa.Array], input_types: list[Any]) -> Callable[..., Any]:
    """`scan` (a `replay_columns` body) as the body of a scalar pandas UDF, for pyspark before 4.1 (whose
    `functions` has no `arrow_udf`: Databricks Runtime 17.3 runs Spark 4.0). Spark sends each input
    column as a pandas Series: each is read back into Arrow at its column's type (`input_types`; an
    integer column with nulls came as floats), and the struct goes back as a DataFrame whose integer
    columns hold Python ints and None (as floats, an int64 past 2^53 would lose its last digits)."""

    def via_pandas(*series: Any) -> Any:
        arrays = [pa.array(s, type=t, from_pandas=True) for s, t in zip(series, input_types, strict=True)]
        struct = scan(*arrays)
        table = pa.Table.from_arrays(struct.flatten(), names=[name for name, _ in OUTPUTS])
        return table.to_pandas(integer_object_nulls=True)

    return via_pandas


def replay_columns(
    lookback: int = COPY_LOOKBACK,
    markers_refresh: bool = True,
    starts: dict[tuple[int, int, int], dict[str, Any] | None] | None = None,
) -> Callable[..., pa.Array]:
    """The scan as the body of a scalar Arrow UDF over the INPUTS columns, returning a struct of OUTPUTS.

    Spark evaluates a scalar Arrow UDF batch by batch in the order of the task's rows (the sort's), in
    one Python worker, sending only the UDF's input columns and receiving only its struct: the other
    columns of the row stay in the JVM (`mapInArrow` would send every column there and back). The state
    the scan carries from one batch to the next lives in this closure and starts afresh with each task
    attempt (a reused worker runs several tasks).

    `starts` (`history.split_plan`): a producer's rows cut into offset ranges, scanned in several tasks.
    The UDF then takes one more column, each row's range (0 for every producer not cut), and the first
    row of a range `r > 0` of (log id, producer id) starts from `split_start(starts[log id, producer
    id, r])` instead of what the task's rows before it left.
    """
    names = [name for name, _ in OUTPUTS]
    carried: dict[str, Any] = {"task": None, "state": _State(), "at": None}

    def scan(*arrays: pa.Array) -> pa.Array:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.taskAttemptId() if context is not None else None
        if task != carried["task"]:
            carried["task"], carried["state"], carried["at"] = task, _State(), None
        columns = list(arrays[: len(INPUTS)])
        if len(columns[0]) == 0:
            empty = [pa.array([], type=_arrow_type(sql_type)) for _, sql_type in OUTPUTS]
            return pa.StructArray.from_arrays(empty, names=names)
        if starts is None:
            out = _output_arrays(columns, carried["state"], lookback, markers_refresh)
        else:
            out = _split_output_arrays(
                columns, arrays[len(INPUTS)], carried, starts, lookback, markers_refresh
            )
        return pa.StructArray.from_arrays(out, names=names)

    return scan


def _split_output_arrays(
    columns: list[Any],
    ranges: Any,
    carried: dict[str, Any],
    starts: dict[tuple[int, int, int], dict[str, Any] | None],
    lookback: int,
    markers_refresh: bool,
) -> list[Any]:
    """`_output_arrays` of one Arrow batch whose rows carry their range (`replay_columns`' `starts`):
    the batch cut where a range `r > 0` begins, each piece scanned on from the state before it, but
    a range's first piece, which starts from that range's own start state."""
    n = len(columns[0])
    logs = np.asarray(columns[0])
    pids = np.asarray(columns[1])
    rng = np.asarray(ranges)
    moved = np.ones(n, dtype=bool)
    if n > 1:
        moved[1:] = (logs[1:] != logs[:-1]) | (pids[1:] != pids[:-1]) | (rng[1:] != rng[:-1])
    moved[0] = carried["at"] != (int(logs[0]), int(pids[0]), int(rng[0]))
    cuts = np.flatnonzero(moved & (rng > 0)).tolist()
    bounds = sorted({0, *cuts, n})
    pieces: list[list[Any]] = []
    for a, b in pairwise(bounds):
        if a in cuts:
            key = (int(logs[a]), int(pids[a]))
            carried["state"] = split_start(key, starts[(*key, int(rng[a]))])
        piece = [c.slice(a, b - a) for c in columns] if (a, b) != (0, n) else columns
        pieces.append(_output_arrays(piece, carried["state"], lookback, markers_refresh))
    carried["at"] = (int(logs[-1]), int(pids[-1]), int(rng[-1]))
    if len(pieces) == 1:
        return pieces[0]
    return [pa.concat_arrays([p[i] for p in pieces]) for i in range(len(OUTPUTS))]
