"""The run scan behind OFFSET_OVERLAP (`audit_rules.consistency.overlap_runs`) plus the window over its run
rows finds exactly the batches that start at or before the previous batch's last offset in file order,
whatever the tasks, the order the rows arrive in and the Arrow batches they come in.

The Spark rule itself is checked against the plain-Python reference through the whole audit
(tests/integration/test_replay_property.py).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_rules.consistency import _OVERLAP_INPUTS, overlap_runs

_SCHEMA = pa.schema(
    [
        ("log_id", pa.int32()),
        ("file_id", pa.int32()),
        ("position", pa.int64()),
        ("size_bytes", pa.int32()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
    ]
)
assert tuple(_SCHEMA.names) == _OVERLAP_INPUTS


@st.composite
def _logs(draw: Any) -> list[dict[str, Any]]:
    """Batches of a few logs and files at contiguous byte positions, offsets mostly increasing, with
    overlaps and gaps; some batches dropped (a CRC failure the rule filters out leaves a byte gap)."""
    rows = []
    for log_id in range(draw(st.integers(1, 3))):
        offset = 0
        for file_id in range(log_id * 10, log_id * 10 + draw(st.integers(1, 3))):
            position = 0
            for _ in range(draw(st.integers(0, 12))):
                size = draw(st.integers(61, 200))
                count = draw(st.integers(1, 3))
                step = draw(st.sampled_from([0, 0, 0, 1, -1, -3]))  # 0: contiguous
                offset = max(0, offset + step)
                if draw(st.integers(0, 9)) > 0:
                    rows.append(
                        {
                            "log_id": log_id,
                            "file_id": file_id,
                            "position": position,
                            "size_bytes": size,
                            "base_offset": offset,
                            "last_offset": offset + count - 1,
                            "producer_id": -1,
                            "producer_epoch": -1,
                        }
                    )
                position += size
                offset += count
    return rows


def _after_previous(rows: list[dict[str, Any]], base: str, last: str) -> set[tuple[int, ...]]:
    """Per log, in (file, position) order, each row starting at or before the `last` of the row before
    it: (log, file, position, that row's `base`, its `last`)."""
    out: set[tuple[int, ...]] = set()
    for log_id in {r["log_id"] for r in rows}:
        ordered = sorted(
            (r for r in rows if r["log_id"] == log_id), key=lambda r: (r["file_id"], r["position"])
        )
        for a, b in pairwise(ordered):
            if b["base_offset"] <= a[last]:
                out.add((log_id, b["file_id"], b["position"], a[base], a[last]))
    return out


def _expected(rows: list[dict[str, Any]]) -> set[tuple[int, ...]]:
    return _after_previous(rows, "base_offset", "last_offset")


def _found(tasks: list[list[dict[str, Any]]], sizes: list[int]) -> set[tuple[int, ...]]:
    """Each task through `overlap_runs` in Arrow batches of `sizes`, then the rule's window: each run's
    first batch against the end of the run before it in (file, position) order, per log."""
    out_rows: list[dict[str, Any]] = []
    for task in tasks:
        table = pa.Table.from_pylist(task, schema=_SCHEMA)
        batches, at, i = [], 0, 0
        while at < table.num_rows:
            batches.extend(table.slice(at, sizes[i % len(sizes)]).to_batches())
            at += sizes[i % len(sizes)]
            i += 1
        for batch in overlap_runs(batches):
            out_rows += batch.to_pylist()
    found: set[tuple[int, ...]] = {
        (r["log_id"], r["file_id"], r["position"], r["prev_base"], r["prev_last"])
        for r in out_rows
        if not r["is_run"]
    }
    # The rule's window: each run's first batch against the last batch of the run before it.
    found |= _after_previous([r for r in out_rows if r["is_run"]], "end_base", "end_last")
    return found


@settings(max_examples=150, deadline=None)
@given(
    rows=_logs(),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=4),
    shuffle=st.booleans(),
    data=st.data(),
)
def test_runs_find_every_overlap_whatever_the_tasks_and_order(
    rows: list[dict[str, Any]], cuts: list[int], sizes: list[int], shuffle: bool, data: Any
) -> None:
    """In ingest's order (tasks holding consecutive stretches of files) and in any other order."""
    if shuffle:
        rows = data.draw(st.permutations(rows))
    bounds = sorted({0, len(rows), *(min(c, len(rows)) for c in cuts)})
    tasks = [rows[a:b] for a, b in pairwise(bounds)]
    assert _found(tasks, sizes) == _expected(rows)


def test_one_run_per_task_and_file_in_ingest_order() -> None:
    """Adjacent batches make one run: a task reading two files whole returns two run rows and the overlap
    inside the second file, nothing else."""
    rows = []
    for file_id, offsets in ((0, [0, 1, 2, 3]), (1, [4, 5, 5, 6])):
        for i, offset in enumerate(offsets):
            rows.append(
                {
                    "log_id": 0,
                    "file_id": file_id,
                    "position": i * 100,
                    "size_bytes": 100,
                    "base_offset": offset,
                    "last_offset": offset,
                    "producer_id": 7,
                    "producer_epoch": 0,
                }
            )
    table = pa.Table.from_pylist(rows, schema=_SCHEMA)
    out = [r for b in overlap_runs(table.to_batches(max_chunksize=3)) for r in b.to_pylist()]
    assert [(r["file_id"], r["position"], r["end_last"]) for r in out if r["is_run"]] == [
        (0, 0, 3),
        (1, 0, 6),
    ]
    hits = [(r["file_id"], r["position"], r["prev_base"], r["prev_last"]) for r in out if not r["is_run"]]
    assert hits == [(1, 200, 5, 5)]
