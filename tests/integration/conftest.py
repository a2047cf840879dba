"""One real Kafka broker per session: the scenarios of kafka_harness.scenarios are written to it, it is
stopped cleanly, and the tests decode what it left on disk.

Nothing is skipped: without Java or Maven the fixture fails with the harness's one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from kafka_harness.clean_scenarios import CleanManifest, record_clean_scenarios
from kafka_harness.jars import HarnessError
from kafka_harness.scenarios import Manifest, record_scenarios
from tests.integration.spark_fixtures import spark  # noqa: F401  (the session-scoped Spark fixture)


class BrokerDump(NamedTuple):
    """The stopped broker's data directory (its log dir) and the manifest of what was produced."""

    log_dir: Path
    manifest: Manifest


@pytest.fixture(scope="session")
def broker_dump(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerDump]:
    """`(log_dir, manifest)` of a broker that ran every scenario and then shut down cleanly.

    The work directory (data, `server.log`, `manifest.json`) stays under pytest's basetemp for
    debugging; `record_scenarios` stops the broker before returning, also when a scenario fails.
    """
    work_dir = tmp_path_factory.mktemp("kafka-broker")
    failure: str | None = None
    try:
        log_dir, manifest = record_scenarios(work_dir)
    except HarnessError as exc:
        failure = str(exc)
    if failure is not None:  # outside `except`, so the report is the one line, not a chained traceback
        pytest.fail(f"the Kafka test broker could not be run (work dir {work_dir}): {failure}", pytrace=False)
    yield BrokerDump(log_dir, manifest)


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
    work_dir = tmp_path_factory.mktemp("kafka-clean-broker")
    failure: str | None = None
    try:
        log_dir, manifest = record_clean_scenarios(work_dir)
    except HarnessError as exc:
        failure = str(exc)
    if failure is not None:  # outside `except`, so the report is the one line, not a chained traceback
        pytest.fail(
            f"the clean-scenario broker could not be run (work dir {work_dir}): {failure}", pytrace=False
        )
    yield CleanBrokerDump(log_dir, manifest)
