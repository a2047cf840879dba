"""One real Kafka broker per session: the scenarios of kafka_harness.scenarios are written to it, it is
stopped cleanly, and the tests decode what it left on disk.

Nothing is skipped: without Java or Maven the fixture fails with the harness's one-line reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, TypeVar

import pytest

from kafka_harness.clean_scenarios import CleanManifest, record_clean_scenarios
from kafka_harness.jars import HarnessError
from kafka_harness.scenarios import Manifest, record_scenarios
from tests.integration.spark_fixtures import (  # noqa: F401  (the session's Spark, its stall report)
    jvm_report_on_stall,
    spark,
)
from tests.integration.workers import parallel, run_lock


class BrokerDump(NamedTuple):
    """The stopped broker's data directory (its log dir) and the manifest of what was produced."""

    log_dir: Path
    manifest: Manifest


@pytest.fixture(scope="session")
def broker_dump(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerDump]:
    """`(log_dir, manifest)` of a broker that ran every scenario and then shut down cleanly.

    The work directory (data, `server.log`, `manifest.json`) stays under pytest's basetemp for
    debugging; `record_scenarios` stops the broker before returning, also when a scenario fails. Under
    pytest-xdist the run's workers share one recording (`recorded_once`).
    """
    log_dir, manifest = recorded_once(
        tmp_path_factory, "kafka-broker", record_scenarios, "manifest.json", Manifest.from_json
    )
    yield BrokerDump(log_dir, manifest)


M = TypeVar("M")


def recorded_once(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    record: Callable[[Path], tuple[Path, M]],
    manifest_name: str,
    load: Callable[[str], M],
) -> tuple[Path, M]:
    """`record(work_dir)` once per test run: alone, in a new directory of this session's basetemp;
    under pytest-xdist, by the first worker that asks, in a directory the workers share, while the
    others wait for it and then read its manifest (the tests only read the broker's log dir). A
    recording that failed fails every worker that asks, with the same one line."""
    if not parallel():
        work_dir = tmp_path_factory.mktemp(name)
        try:
            return record(work_dir)
        except HarnessError as exc:
            failure = str(exc)
    else:
        with run_lock(tmp_path_factory, name) as shared:
            work_dir = shared / name
            done, failed = shared / f"{name}.log_dir", shared / f"{name}.failed"
            if done.is_file():
                return Path(done.read_text()), load((work_dir / manifest_name).read_text())
            if failed.is_file():
                failure = failed.read_text()
            else:
                work_dir.mkdir(parents=True)
                try:
                    log_dir, manifest = record(work_dir)
                except HarnessError as exc:
                    failure = str(exc)
                    failed.write_text(failure)
                else:
                    done.write_text(str(log_dir))
                    return log_dir, manifest
    # outside `except`, so the report is the one line, not a chained traceback
    pytest.fail(f"the Kafka test broker could not be run (work dir {work_dir}): {failure}", pytrace=False)


# --- clean logs for the audit's zero-findings promise (kafka_harness.clean_scenarios) --------------


class CleanBrokerDump(NamedTuple):
    """The data directory of the broker that ran the clean scenarios, and their manifest."""

    log_dir: Path
    manifest: CleanManifest


@pytest.fixture(scope="session")
def clean_broker_dump(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CleanBrokerDump]:
    """`(log_dir, manifest)` of a broker that ran kafka_harness.clean_scenarios (retention, DeleteRecords,
    producer restarts, epoch bumps, aborted transactions) and shut down cleanly; its own broker, so
    `broker_dump`'s topics are not in it. The work directory keeps `server.log` and `clean-manifest.json`.
    """
    log_dir, manifest = recorded_once(
        tmp_path_factory,
        "kafka-clean-broker",
        record_clean_scenarios,
        "clean-manifest.json",
        CleanManifest.from_json,
    )
    yield CleanBrokerDump(log_dir, manifest)
