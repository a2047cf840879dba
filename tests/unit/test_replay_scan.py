"""The streaming replay scan (audit_rules/replay.py) gives the same columns however Spark cuts a task's
rows into Arrow batches: a producer's state carries from one batch to the next.

The scan's columns themselves are checked against the plain-Python reference replay through the whole
Spark audit (tests/integration/test_replay_property.py, which also runs with tiny Arrow batches).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_rules.replay import INPUTS, OUTPUTS, SEQUENCE_MODULUS, UNDECIDED, replay_batches, replay_columns
from tests.strategies import log_histories


def _table(histories: list[Any]) -> pa.Table:
    """The producer batches of several logs as the scan receives them: sorted by (log, pid, offset)."""
    rows = [
        {**b, "log_id": b["partition"]}
        for h in histories
        for b in h.batches
        if b["producer_id"] >= 0 and b["magic"] == 2 and b["crc_valid"]
    ]
    rows.sort(key=lambda r: (r["log_id"], r["producer_id"], r["base_offset"]))
    schema = pa.schema(
        [
            ("log_id", pa.int32()),
            ("producer_id", pa.int64()),
            ("base_offset", pa.int64()),
            ("last_offset", pa.int64()),
            ("base_sequence", pa.int32()),
            ("last_sequence", pa.int32()),
            ("producer_epoch", pa.int16()),
            ("is_control", pa.bool_()),
            ("is_transactional", pa.bool_()),
            ("coordinator_epoch", pa.int32()),
            ("max_timestamp", pa.int64()),
        ]
    )
    assert tuple(schema.names) == INPUTS
    return pa.Table.from_pylist([{k: r[k] for k in INPUTS} for r in rows], schema=schema)


# Several logs' random histories, and the sizes to cut their rows into Arrow batches with.
_HISTORIES = st.lists(
    st.integers(0, 3).flatmap(lambda p: log_histories(partition=p, max_events=30)), min_size=1, max_size=4
)
_CUTS = st.lists(st.integers(1, 9), min_size=1, max_size=5)


def _rows(rows: list[tuple[Any, ...]]) -> pa.Table:
    """The scan's input of `rows`, tuples of its columns (`INPUTS`) in order."""
    return pa.Table.from_pylist([dict(zip(INPUTS, r, strict=True)) for r in rows], schema=_table([]).schema)


def _cut(table: pa.Table, sizes: list[int]) -> list[pa.RecordBatch]:
    out, at, i = [], 0, 0
    while at < table.num_rows:
        size = sizes[i % len(sizes)]
        out.extend(table.slice(at, size).to_batches())
        at += size
        i += 1
    return out


@settings(max_examples=60, deadline=None)
@given(histories=_HISTORIES, sizes=_CUTS, markers_refresh=st.booleans())
def test_scan_is_the_same_whatever_the_arrow_batches(
    histories: list[Any], sizes: list[int], markers_refresh: bool
) -> None:
    table = _table(histories)
    if table.num_rows == 0:
        return
    whole = pa.Table.from_batches(list(replay_batches(table.to_batches(), markers_refresh=markers_refresh)))
    cut = pa.Table.from_batches(list(replay_batches(_cut(table, sizes), markers_refresh=markers_refresh)))
    assert cut.num_rows == whole.num_rows == table.num_rows
    assert cut.to_pylist() == whole.to_pylist()


def _udf_rows(scan: Any, batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    """The scalar-UDF form's struct rows over `batches`, called batch by batch as Spark calls it."""
    return [row for b in batches for row in scan(*[b.column(name) for name in INPUTS]).to_pylist()]


@settings(max_examples=40, deadline=None)
@given(histories=_HISTORIES, sizes=_CUTS, markers_refresh=st.booleans())
def test_udf_form_gives_the_scan_columns(
    histories: list[Any], sizes: list[int], markers_refresh: bool
) -> None:
    """`replay_columns` (what the history runs, as a scalar Arrow UDF) returns exactly the columns
    `replay_batches` appends, however the rows are cut."""
    table = _table(histories)
    if table.num_rows == 0:
        return
    names = [name for name, _ in OUTPUTS]
    expected = [
        {k: r[k] for k in names}
        for r in pa.Table.from_batches(
            list(replay_batches(table.to_batches(), markers_refresh=markers_refresh))
        ).to_pylist()
    ]
    assert _udf_rows(replay_columns(markers_refresh=markers_refresh), _cut(table, sizes)) == expected


def test_udf_state_starts_afresh_with_each_task(monkeypatch: Any) -> None:
    """A reused Python worker runs task after task: a task's first row must not continue the producer the
    previous task ended with, even when the two tasks hold the same (log, producer id)."""
    import pyspark

    rows = [(1, 7, 0, 0, 0, 0, 0, False, False, None, 100), (1, 7, 1, 1, 1, 1, 0, False, False, None, 110)]
    table = _rows(rows)
    first, second = table.slice(0, 1).to_batches(), table.slice(1, 1).to_batches()

    class Task:
        def __init__(self, attempt: int) -> None:
            self.attempt = attempt

        def taskAttemptId(self) -> int:
            return self.attempt

    scan = replay_columns()
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: Task(1)))
    assert _udf_rows(scan, first)[0]["first_in_stream"] is True
    # Same task: the second row continues the producer.
    assert _udf_rows(scan, second)[0]["prev_offset"] == 0
    # A new task sees the same row as a producer's first.
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: Task(2)))
    again = _udf_rows(scan, second)[0]
    assert again["prev_offset"] is None and again["first_in_stream"] is True


def test_scan_columns_of_a_hand_written_producer() -> None:
    """Three batches of producer 7: in sequence, a gap's predecessor values, then an epoch bump; a marker
    of producer 8 after a row of its own. Checked column by column, cut after every row."""
    rows = [
        # (log, pid, offset, last offset, base seq, last seq, epoch, control, txn, coord epoch, ts)
        (1, 7, 0, 1, 0, 1, 0, False, False, None, 100),
        (1, 7, 2, 2, 2, 2, 0, False, False, None, 110),
        (1, 7, 3, 4, 9, 10, 0, False, False, None, 120),
        (1, 7, 5, 5, 0, 0, 1, False, False, None, 130),
        (1, 8, 6, 6, 0, 0, 0, False, True, None, 140),
        (1, 8, 7, 7, -1, -1, 0, True, True, 3, 150),
    ]
    table = _rows(rows)
    for batches in (table.to_batches(), _cut(table, [1])):
        got = pa.Table.from_batches(list(replay_batches(batches))).to_pylist()
        assert [r["prev_offset"] for r in got] == [None, 0, 2, 3, None, 6]
        assert [r["prev_last_sequence"] for r in got] == [None, 1, 2, None, None, None]
        assert [r["base_sequence_unwrapped"] for r in got] == [0, 2, 9, 0, 0, None]
        assert [r["prev_last_unwrapped"] for r in got] == [None, 1, 2, None, None, None]
        assert [r["stream_index"] for r in got] == [1, 2, 3, 1, 1, None]
        assert [r["first_in_stream"] for r in got] == [True, False, False, True, True, False]
        assert [r["max_epoch_before"] for r in got] == [None, 0, 0, 0, None, 0]
        assert [r["min_epoch_before"] for r in got] == [None, 0, 0, 0, None, 0]
        assert [r["invalid"] for r in got] == [False] * 6
        assert [r["epoch_regressed"] for r in got] == [False] * 6
        assert [r["prev_event_open_txn"] for r in got] == [None, False, False, False, None, True]
        assert [r["markers_before"] for r in got] == [0, 0, 0, 0, 0, 0]
        assert [r["coord_before_epoch"] for r in got] == [None] * 6


def test_markers_before_counts_a_fenced_marker_too() -> None:
    """Producer 7's transactions at epoch 1, then a zombie's at epoch 0 (an epoch regression, data and
    marker), then epoch 1 again: the zombie's marker closed a transaction in the broker's state as any
    other, so the rows after it count it. Checked cut after every row."""
    rows = [
        (1, 7, 0, 0, 0, 0, 1, False, True, None, 100),
        (1, 7, 1, 1, -1, -1, 1, True, True, 3, 110),
        (1, 7, 2, 2, 0, 0, 0, False, True, None, 120),
        (1, 7, 3, 3, -1, -1, 0, True, True, 3, 130),
        (1, 7, 4, 4, 0, 0, 1, False, True, None, 140),
    ]
    table = _rows(rows)
    for batches in (table.to_batches(), _cut(table, [1])):
        got = pa.Table.from_batches(list(replay_batches(batches))).to_pylist()
        assert [r["epoch_regressed"] for r in got] == [False, False, True, True, False]
        assert [r["markers_before"] for r in got] == [0, 0, 1, 1, 2]


def test_expiry_is_timed_from_the_last_marker_or_from_the_last_data_batch_by_broker_line() -> None:
    """Producer 7 writes at 100, a regression at epoch 0 fenced at 150, commits a transaction at 200
    (marker) and writes again at 300; producer 8 carries on at 400. 0.11 and 2.5+ time a producer's
    expiry from its last batch or marker; 1.0 to 2.4 from its last data batch (the marker at 200 does
    not count there, nor does the fenced batch). Checked cut after every row."""
    rows = [
        (1, 7, 0, 0, 0, 0, 1, False, True, None, 100),
        (1, 7, 1, 1, 1, 1, 0, False, False, None, 150),
        (1, 7, 2, 2, -1, -1, 1, True, True, 3, 200),
        (1, 7, 3, 3, 1, 1, 1, False, False, None, 300),
        (1, 8, 4, 4, 0, 0, 0, False, False, None, 400),
    ]
    table = _rows(rows)
    for batches in (table.to_batches(), _cut(table, [1])):
        refreshed = pa.Table.from_batches(list(replay_batches(batches))).to_pylist()
        data_only = pa.Table.from_batches(list(replay_batches(batches, markers_refresh=False))).to_pylist()
        assert [r["epoch_regressed"] for r in refreshed] == [False, True, False, False, False]
        assert [r["prev_event_timestamp"] for r in refreshed] == [None, 100, 100, 200, None]
        assert [r["prev_event_timestamp"] for r in data_only] == [None, 100, 100, 100, None]
        # The open transaction is the last valid row's, whichever the time is taken from.
        assert [r["prev_event_open_txn"] for r in data_only] == [None, True, True, False, None]


def test_highest_sequence_before_and_first_base_of_a_stream() -> None:
    """A stream that starts at sequence 5, runs to 7, goes back to 3 (late), jumps to 10; then a new epoch
    from 0. Each batch sees the stream's highest last sequence before it and the stream's first base."""
    rows = [
        (1, 7, 0, 0, 5, 5, 0, False, False, None, 100),
        (1, 7, 1, 2, 6, 7, 0, False, False, None, 110),
        (1, 7, 3, 3, 3, 3, 0, False, False, None, 120),
        (1, 7, 4, 4, 10, 10, 0, False, False, None, 130),
        (1, 7, 5, 5, 0, 0, 1, False, False, None, 140),
        (1, 7, 6, 6, 1, 1, 1, False, False, None, 150),
    ]
    table = _rows(rows)
    for batches in (table.to_batches(), _cut(table, [1]), _cut(table, [2, 3])):
        got = pa.Table.from_batches(list(replay_batches(batches))).to_pylist()
        assert [r["max_last_before"] for r in got] == [None, 5, 7, 7, None, 0]
        assert [r["stream_first_base"] for r in got] == [5, 5, 5, 5, 0, 0]


def _copies_by_brute_force(rows: list[dict[str, Any]]) -> list[tuple[int, int, int] | None]:
    """Per scanned row: (offset, stream index, how many of the producer's in-stream batches back) of the
    nearest earlier in-stream batch of its stream (log, producer id, epoch) with the same unwrapped
    sequence range, for a late batch; None otherwise."""
    answers: list[tuple[int, int, int] | None] = []
    seen: dict[tuple[Any, ...], list[tuple[int, int, int, int, int]]] = {}
    count: dict[tuple[Any, ...], int] = {}
    for r in rows:
        in_stream = not (r["invalid"] or r["epoch_regressed"] or r["is_control"])
        if not in_stream:
            answers.append(None)
            continue
        producer = (r["log_id"], r["producer_id"])
        at = count[producer] = count.get(producer, 0) + 1
        base_u = r["base_sequence_unwrapped"]
        last_u = base_u + (r["last_sequence"] - r["base_sequence"]) % SEQUENCE_MODULUS
        stream = seen.setdefault((*producer, r["producer_epoch"]), [])
        late = (
            not r["first_in_stream"] and r["max_last_before"] is not None and base_u <= r["max_last_before"]
        )
        match = (
            [(o, i, at - n) for o, i, n, b, last in stream if (b, last) == (base_u, last_u)] if late else []
        )
        answers.append(match[-1] if match else None)
        stream.append((r["base_offset"], r["stream_index"], at, base_u, last_u))
    return answers


@settings(max_examples=60, deadline=None)
@given(histories=_HISTORIES, sizes=_CUTS, lookback=st.sampled_from([0, 1, 2, 16, 1000]))
def test_scan_finds_the_exact_copies(histories: list[Any], sizes: list[int], lookback: int) -> None:
    """`copy_of_offset`/`copy_of_index` name the nearest earlier batch of the stream with a late batch's
    range, or UNDECIDED; the same however the rows are cut; never UNDECIDED when the lookback reaches
    every earlier batch, and only for a late batch with no such batch within the lookback."""
    table = _table(histories)
    if table.num_rows == 0:
        return
    rows = pa.Table.from_batches(list(replay_batches(table.to_batches(), lookback))).to_pylist()
    cut = pa.Table.from_batches(list(replay_batches(_cut(table, sizes), lookback))).to_pylist()
    assert cut == rows
    for row, expected in zip(rows, _copies_by_brute_force(rows), strict=True):
        got = (row["copy_of_offset"], row["copy_of_index"])
        if got == (None, UNDECIDED):
            late = (
                row["max_last_before"] is not None
                and row["base_sequence_unwrapped"] <= row["max_last_before"]
            )
            assert late and not row["first_in_stream"] and lookback < 1000
            assert expected is None or expected[2] > lookback
            continue
        assert got == (expected[:2] if expected is not None else (None, None))


def test_unwrapping_goes_a_lap_back_only_after_a_lap_forward() -> None:
    """Producer 7: 0-4, then 1,500,000,000 (no lap before: a step forward, a gap), then a restart at 0
    (not a lap forward: 0 follows only 2147483647 as a lap). Producer 8: 2147483646-2147483647, 0-1 (a
    lap forward), then 2147483640 (a lap back: a batch from before the wrap). Cut after every row too."""
    rows = [
        (1, 7, 0, 4, 0, 4, 0, False, False, None, 100),
        (1, 7, 5, 9, 1_500_000_000, 1_500_000_004, 0, False, False, None, 110),
        (1, 7, 10, 10, 0, 0, 0, False, False, None, 120),
        (1, 8, 11, 12, 2_147_483_646, 2_147_483_647, 0, False, False, None, 130),
        (1, 8, 13, 14, 0, 1, 0, False, False, None, 140),
        (1, 8, 15, 15, 2_147_483_640, 2_147_483_640, 0, False, False, None, 150),
    ]
    table = _rows(rows)
    m = SEQUENCE_MODULUS
    for batches in (table.to_batches(), _cut(table, [1]), _cut(table, [2])):
        got = pa.Table.from_batches(list(replay_batches(batches))).to_pylist()
        assert [r["base_sequence_unwrapped"] for r in got] == [0, 1_500_000_000, 0, m - 2, m, m - 8]
