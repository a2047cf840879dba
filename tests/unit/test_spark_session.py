"""The local session factory's failure to start: one line naming what to check, not py4j's."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from jobs import spark_session


def test_a_jvm_that_does_not_start_names_the_delta_jar_and_its_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """PySpark says only "Java gateway process exited before sending its port number"; the cause (java
    missing, the Delta jar unresolved on a first run without network) is in the JVM's output above."""

    def exited(self: object) -> SparkSession:
        raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    monkeypatch.setattr(spark_session, "_prepare_local_workers", lambda: None)
    monkeypatch.setenv("KRA_CACHE", str(tmp_path))
    monkeypatch.setenv("DEFAULT_ARTIFACT_REPOSITORY", "https://repo.example/maven2/")
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", exited)
    with pytest.raises(RuntimeError, match="the local Spark JVM did not start") as raised:
        spark_session.build_local_spark("t")
    message = str(raised.value)
    assert spark_session.delta_maven_coordinate() in message and f"{tmp_path}/ivy" in message
    assert "https://repo.example/maven2/" in message and "\n" not in message
    assert isinstance(raised.value.__cause__, PySparkRuntimeError)


def test_any_other_start_failure_is_raised_as_it_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    def failed(self: object) -> SparkSession:
        raise ValueError("something else")

    monkeypatch.setattr(spark_session, "_prepare_local_workers", lambda: None)
    monkeypatch.setenv("KRA_CACHE", str(tmp_path))
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", failed)
    with pytest.raises(ValueError, match="something else"):
        spark_session.build_local_spark("t")
