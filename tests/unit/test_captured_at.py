"""`--captured-at [LABEL=]TIME` (contract §1: a dump's capture time, its file mtimes unless given): parsing,
and which inventory rows of a planned ingest carry it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jobs.ingest import IngestOptions, LabeledPath, UsageError, parse_captured_at, plan_ingest
from tests.paths import REAL_FIXTURES

FOO_0 = REAL_FIXTURES / "codecrafters-kraft-3x" / "foo-0"
NOV_23_0930_UTC = 1795426200000  # 2026-11-23T09:30:00Z


def test_iso_times_with_or_without_a_zone_and_epoch_milliseconds() -> None:
    assert parse_captured_at(["2026-11-23T09:30:00Z"]) == {None: NOV_23_0930_UTC}
    assert parse_captured_at(["monday=2026-11-23T10:30:00+01:00"]) == {"monday": NOV_23_0930_UTC}
    assert parse_captured_at(["2026-11-23T09:30:00"]) == {None: NOV_23_0930_UTC}  # no zone: UTC
    assert parse_captured_at([f"b/logs-2={NOV_23_0930_UTC + 5}"]) == {"b/logs-2": NOV_23_0930_UTC + 5}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["yesterday"], "not a time"),
        (["99999999999999999999"], "not a time"),  # past a long
        (["monday=2026-13-40"], "not a time"),
        (["=2026-11-23"], "an empty label"),
        (["a=1", "a=2"], "dump 'a' given twice"),
        (["1", "2"], "the unlabelled time given twice"),
    ],
)
def test_values_that_cannot_be_used_are_usage_errors(values: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_captured_at(values)


def _plan(tmp_path: Path, captured: list[str], *labels: str) -> dict[str, set[int | None]]:
    inputs = []
    for label in labels:
        shutil.copytree(FOO_0, tmp_path / label / "foo-0")
        inputs.append(LabeledPath(label, str(tmp_path / label / "foo-0")))
    plan = plan_ingest(IngestOptions(inputs=inputs, output="unused", captured_at=parse_captured_at(captured)))
    by_dump: dict[str, set[int | None]] = {}
    for row in plan.inventory:
        by_dump.setdefault(row["dump_id"], set()).add(row["captured_at_ms"])
    return by_dump


def test_each_dump_gets_its_own_time_and_an_undated_dump_none(tmp_path: Path) -> None:
    assert _plan(tmp_path, [f"b={NOV_23_0930_UTC}"], "a", "b") == {"a": {None}, "b": {NOV_23_0930_UTC}}


def test_an_unlabelled_time_dates_the_only_dump(tmp_path: Path) -> None:
    assert _plan(tmp_path, ["2026-11-23T09:30:00Z"], "a") == {"a": {NOV_23_0930_UTC}}


def test_an_unlabelled_time_for_several_dumps_or_an_unknown_label_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"without a label dates one dump.*\(a, b\)"):
        _plan(tmp_path / "1", ["2026-11-23T09:30:00Z"], "a", "b")
    with pytest.raises(UsageError, match=r"no dump c among the inputs \(a\)"):
        _plan(tmp_path / "2", ["c=2026-11-23T09:30:00Z"], "a")
