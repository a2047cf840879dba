"""Test cases audited together: an audit costs seconds of Spark planning and small jobs whatever the
data size, so tests that each need an audit of a few batches share one per profile and copy lookback
(`Together`), run when the first of its tests asks. Each case writes partitions of its own (one
number for every topic it writes) under dump ids of its own, so no rule compares its logs with
another case's (a dump's capture time is its newest file's); each test reads its case's findings,
and a finding that falls in no case's partition fails every test of its audit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from audit_rules.pipeline import Bronze, audit
from audit_rules.replay import COPY_LOOKBACK
from schemas.tables import ACKS, BATCHES, FILES, PARTITION_STATE, PRODUCER_SNAPSHOTS, QUARANTINE
from tests.strategies import LogBuilder
from tests.table_rows import crc_quarantine

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from audit_rules.profile import Profile

Found = list[dict[str, Any]]


@dataclass(frozen=True)
class Place:
    """Where one case's logs go in a shared audit: partition `partition` of each topic it writes, its
    dumps named `<case>/<dump id>`."""

    case: str
    partition: int

    def log(
        self,
        *,
        topic: str = "orders",
        dump_id: str = "dump-1",
        start_offset: int = 0,
        file: str | None = None,
        **kwargs: Any,
    ) -> LogBuilder:
        """A log of `topic` in this case's partition; its segment file `file`, else one of the case's own."""
        return LogBuilder(
            topic=topic,
            partition=self.partition,
            dump_id=f"{self.case}/{dump_id}",
            start_offset=start_offset,
            file=file or f"/x/{self.case}/{topic}-{self.partition}/{start_offset:020d}.log",
            **kwargs,
        )


@dataclass
class Case:
    """One case's bronze rows: `rows` (BATCHES; each failing its CRC gets the CRC_MISMATCH quarantine
    row ingest writes), every log's first segment at `log_start_offset` (`Bronze.from_batches`), and
    the other tables' rows (`acks`: the ledger's, in the case's partition of any topic, their
    `dump_id` the ledger's name under the case's). `captured`: the files' mtime per dump id (else 0).
    `facts`: what the test asserts by (offsets, rows)."""

    rows: list[dict[str, Any]]
    log_start_offset: int = 0
    rolled: bool = False
    quarantine: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    partition_state: list[dict[str, Any]] = field(default_factory=list)
    acks: list[dict[str, Any]] = field(default_factory=list)
    captured: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


def _bronze(spark: SparkSession, cases: list[Case]) -> Bronze:
    """The cases' rows as one bronze input, each table one small frame, as ingest's few files are (a
    union of the cases' frames made every stage of the audit as many tasks as there are cases). The
    files are `Bronze.from_batches`' of each case's batches, one job for the cases of each log start
    and `rolled`, each with its dump's mtime."""

    def frame(rows: list[Any], schema: StructType) -> DataFrame:
        return spark.createDataFrame(rows, schema)

    batches = [r for c in cases for r in c.rows]
    captured = {dump_id: ms for c in cases for dump_id, ms in c.captured.items()}
    files = []
    for start, rolled in sorted({(c.log_start_offset, c.rolled) for c in cases}):
        alike = [r for c in cases if (c.log_start_offset, c.rolled) == (start, rolled) for r in c.rows]
        derived = Bronze.from_batches(frame(alike, BATCHES.schema), log_start_offset=start, rolled=rolled)
        files += [
            {**f.asDict(), "mtime_ms": captured.get(f["dump_id"], f["mtime_ms"])}
            for f in derived.files.collect()
        ]
    return replace(
        Bronze.from_batches(frame(batches, BATCHES.schema)),
        files=frame(files, FILES.schema),
        quarantine=frame(
            crc_quarantine(batches) + [r for c in cases for r in c.quarantine], QUARANTINE.schema
        ),
        producer_snapshots=frame([r for c in cases for r in c.snapshots], PRODUCER_SNAPSHOTS.schema),
        partition_state=frame([r for c in cases for r in c.partition_state], PARTITION_STATE.schema),
        acks=frame([r for c in cases for r in c.acks], ACKS.schema),
    )


Group = tuple["Profile", int]


class Together:
    """The cases, by the audit they share (profile, copy lookback); each audit's findings by case."""

    def __init__(self) -> None:
        self._cases: dict[Group, dict[str, Case]] = defaultdict(dict)
        self._found: dict[Group, dict[str | None, Found]] = {}

    def add(
        self, profile: Profile, case: str, build: Callable[[Place], Case], *, lookback: int = COPY_LOOKBACK
    ) -> None:
        cases = self._cases[(profile, lookback)]
        assert case not in cases, case
        built = cases[case] = build(Place(case, len(cases)))
        # Every row in the case's place (a log written outside it would be another case's).
        for row in (*built.rows, *built.quarantine, *built.snapshots, *built.partition_state, *built.acks):
            assert row["partition"] == len(cases) - 1 and row["dump_id"].startswith(f"{case}/"), (case, row)

    def audited(
        self, spark: SparkSession, profile: Profile, case: str, *, lookback: int = COPY_LOOKBACK
    ) -> tuple[Case, Found]:
        """`case` and its findings, from its group's audit (run on the first call)."""
        group = (profile, lookback)
        if group not in self._found:
            self._found[group] = self._audit(spark, profile, self._cases[group], lookback)
        found = self._found[group]
        assert not found.get(None), f"findings in no case's partition: {found[None]}"
        return self._cases[group][case], found.get(case, [])

    @staticmethod
    def _audit(
        spark: SparkSession, profile: Profile, cases: dict[str, Case], lookback: int
    ) -> dict[str | None, Found]:
        by_partition = dict(enumerate(cases))
        out: dict[str | None, Found] = defaultdict(list)
        bronze = _bronze(spark, list(cases.values()))
        for row in audit(bronze, profile, copy_lookback=lookback).findings.collect():
            f = row.asDict()
            case = by_partition.get(f["partition"])
            if case is not None and f["dump_id"] is not None:
                assert f["dump_id"].startswith(f"{case}/"), f
                f["dump_id"] = f["dump_id"].removeprefix(f"{case}/")
            out[case].append(f)
        return out
