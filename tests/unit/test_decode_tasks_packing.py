"""How the driver packs work units into decode tasks: about one per core, in whole waves, in file order."""

from __future__ import annotations

from dataclasses import replace

from jobs import decode_tasks as dt
from jobs.ingest import MAX_TASK_BYTES, pack_tasks, task_count, units_for

MB = 1 << 20
SPLIT = 128 * MB


def ranges(file: str, size: int, piece: int = SPLIT) -> list[dt.WorkUnit]:
    """A segment cut into `piece`-byte ranges, as `split_segment` cuts it."""
    whole = dt.WorkUnit(dt.LOG, "d", "1", "t", 0, file, size)
    return [
        replace(whole, start=start, end=min(start + piece, size) if start + piece < size else None)
        for start in range(0, size, piece)
    ]


def test_one_task_per_core_while_a_task_stays_under_the_cap() -> None:
    assert task_count(1000 * MB, 8, SPLIT, parallelism=2) == 2
    assert task_count(256 * MB, 2, SPLIT, parallelism=2) == 2


def test_larger_inputs_take_whole_waves_of_tasks_under_the_cap() -> None:
    assert task_count(4000 * MB, 30, SPLIT, parallelism=2) == 2  # one wave
    total = 2 * MAX_TASK_BYTES + 1
    tasks = task_count(total, 300, SPLIT, parallelism=2)
    assert tasks == 4 and total / tasks <= MAX_TASK_BYTES


def test_small_inputs_stay_in_one_task_whatever_the_cores() -> None:
    assert task_count(10 * MB, 200, SPLIT, parallelism=64) == 1


def test_never_more_tasks_than_units() -> None:
    assert task_count(900 * MB, 1, SPLIT, parallelism=8) == 1


def test_without_a_spark_context_tasks_are_split_sized() -> None:
    assert task_count(1000 * MB, 8, SPLIT, parallelism=None) == 8


def test_packed_tasks_are_consecutive_ranges_of_about_equal_bytes() -> None:
    units = ranges("/a/00.log", 700 * MB) + ranges("/a/01.log", 300 * MB)
    indexed = list(enumerate(units))
    tasks = pack_tasks(reversed(indexed), 2)
    assert [unit for task in tasks for unit in task] == indexed
    sizes = [sum(u.cost for _, u in task) for task in tasks]
    assert abs(sizes[0] - sizes[1]) <= SPLIT


def test_every_unit_lands_in_exactly_one_task() -> None:
    units = list(enumerate(ranges("/a/00.log", 3000 * MB, 100 * MB)))
    for n in (1, 2, 3, 7, 30, 31):
        tasks = pack_tasks(units, n)
        assert sorted(i for task in tasks for i, _ in task) == list(range(len(units)))
        assert len(tasks) == min(n, len(units))


def test_the_quarantine_pass_skips_only_segments_known_clean() -> None:
    log_a, log_b = ranges("/a/00.log", 10 * MB)[0], ranges("/b/00.log", 10 * MB)[0]
    snapshot = dt.WorkUnit(dt.SNAPSHOT, "d", "1", "t", 0, "/a/00.snapshot", 100)
    units = [log_a, snapshot, log_b]
    assert [i for i, _ in units_for("quarantine", units, records=False)] == [0, 1, 2]
    assert [i for i, _ in units_for("quarantine", units, records=False, corrupt_logs={2})] == [1, 2]
    assert [i for i, _ in units_for("quarantine", units, records=False, corrupt_logs=set())] == [1]
    assert [i for i, _ in units_for("batches", units, records=False, corrupt_logs=set())] == [0, 2]
