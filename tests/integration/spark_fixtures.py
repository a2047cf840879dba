"""One Spark session (local[2] with Delta) for the whole test run, from the project's session factory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from jobs.spark_session import get_spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = get_spark("replay-audit tests", {"spark.sql.warehouse.dir": str(warehouse)})
    yield session
    session.stop()
