"""The local session factory's failure to start: one line naming what to check, not py4j's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from jobs import spark_session


def test_a_jvm_that_does_not_start_names_the_delta_jar_and_its_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """PySpark says only "Java gateway process exited before sending its port number"; the cause (java
    missing, the Delta jar unresolved on a first run without network) is in the JVM's output above."""

    starts: list[int] = []

    def exited(self: object) -> SparkSession:
        starts.append(1)
        raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    monkeypatch.setattr(spark_session, "_prepare_local_workers", lambda: None)
    monkeypatch.setattr(spark_session.time, "sleep", lambda seconds: None)
    monkeypatch.setenv("KRA_CACHE", str(tmp_path))
    monkeypatch.setenv("DEFAULT_ARTIFACT_REPOSITORY", "https://repo.example/maven2/")
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", exited)
    with pytest.raises(RuntimeError, match="the local Spark JVM did not start") as raised:
        spark_session.build_local_spark("t")
    assert len(starts) == spark_session._JVM_START_ATTEMPTS
    message = str(raised.value)
    assert spark_session.delta_maven_coordinate() in message and f"{tmp_path}/ivy" in message
    assert "https://repo.example/maven2/" in message and "\n" not in message
    assert isinstance(raised.value.__cause__, PySparkRuntimeError)


def test_a_jvm_start_that_fails_once_is_tried_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """A first start downloads Delta's jars, and Maven Central now and then sends an empty body
    (CI, 2026-12-03: every test of both workers failed on it): the next start fetches what is missing."""
    started = SparkSession.__new__(SparkSession)
    levels: list[str] = []
    context = type("Context", (), {"setLogLevel": lambda self, level: levels.append(level)})()
    monkeypatch.setattr(SparkSession, "sparkContext", property(lambda self: context))
    starts: list[int] = []

    def flaky(self: object) -> SparkSession:
        starts.append(1)
        if len(starts) == 1:
            raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
        return started

    monkeypatch.setattr(spark_session, "_prepare_local_workers", lambda: None)
    monkeypatch.setattr(spark_session.time, "sleep", lambda seconds: None)
    monkeypatch.setenv("KRA_CACHE", str(tmp_path))
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", flaky)
    assert spark_session.build_local_spark("t") is started
    assert len(starts) == 2 and levels == ["ERROR"]


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


def test_the_clis_jvm_writes_to_its_log_and_this_process_keeps_its_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A process started while the session is built (the JVM, which pyspark starts with the parent's
    stderr) writes to the log for good; what this process writes after goes to its stderr again. Its
    Ivy report and warnings were some 60 lines before a usage error's one line."""
    import subprocess
    import sys

    log = tmp_path / "jvm.log"
    with spark_session._stderr_to(log):
        script = (
            "import sys, time; print('jvm early', file=sys.stderr); sys.stderr.flush(); "
            "time.sleep(0.5); print('jvm later', file=sys.stderr); sys.stderr.flush(); "
            "print(':: loading settings :: file = ivysettings.xml')"
        )
        child = subprocess.Popen([sys.executable, "-c", script])
    print("mine", file=sys.stderr)
    print("name\tpath")
    assert child.wait(10) == 0
    # Ivy's line on the JVM's stdout too: a script reading the CLI's stdout read it first.
    assert log.read_text() == "jvm early\njvm later\n:: loading settings :: file = ivysettings.xml\n"
    assert capfd.readouterr() == ("name\tpath\n", "mine\n")


def test_a_jvm_that_did_not_start_is_named_by_its_own_cause(tmp_path: Path) -> None:
    """The one-line error quotes what the JVM said (a real `java` refusing `-Xmxzz`), not a guess."""
    import shutil
    import subprocess

    java = shutil.which("java", path=f"{os.environ.get('JAVA_HOME', '')}/bin:{os.environ.get('PATH', '')}")
    assert java is not None, "java is on the machine (the integration tests need it too)"
    log = tmp_path / "jvm.log"
    with open(log, "w") as out:
        assert (
            subprocess.run([java, "-Xmxzz", "-version"], stdout=out, stderr=out, check=False).returncode != 0
        )
    said = spark_session._first_error(log)
    assert said is not None and said.startswith("Invalid maximum heap size: -Xmxzz"), log.read_text()
    # The JVM's generic line first, then its cause.
    with open(log, "w") as out:
        subprocess.run([java, "-Xmx1k", "-version"], stdout=out, stderr=out, check=False)
    said = spark_session._first_error(log)
    assert said == "Error occurred during initialization of VM: Too small maximum heap", log.read_text()
    assert spark_session._first_error(tmp_path / "absent.log") is None


def test_the_jvm_log_is_named_by_command_and_pid_and_the_oldest_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os

    monkeypatch.setenv("KRA_CACHE", str(tmp_path))
    monkeypatch.delenv("KRA_SPARK_LOG", raising=False)
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(25):
        old = logs / f"replay-audit-run-{i}.log"
        old.write_text("x")
        os.utime(old, (1000 + i, 1000 + i))
    path = spark_session.jvm_log_path("replay-audit ingest")
    assert path == logs / f"replay-audit-ingest-{os.getpid()}.log"
    assert sorted(p.name for p in logs.glob("*.log")) == sorted(
        f"replay-audit-run-{i}.log" for i in range(6, 25)
    )
    monkeypatch.setenv("KRA_SPARK_LOG", "stderr")
    assert spark_session.jvm_log_path("replay-audit ingest") is None
    monkeypatch.setenv("KRA_SPARK_LOG", str(tmp_path / "mine.log"))
    assert spark_session.jvm_log_path("replay-audit ingest") == tmp_path / "mine.log"


def test_without_a_stderr_nothing_is_moved(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A CLI started with `2>&-` has no sys.stderr: the session starts with the JVM's output left as it
    is, and no log is named."""
    import sys

    monkeypatch.setattr(sys, "stderr", None)
    monkeypatch.setattr(
        spark_session.os, "dup", lambda fd: (_ for _ in ()).throw(OSError(9, "Bad file descriptor"))
    )
    with spark_session._stderr_to(tmp_path / "jvm.log") as redirected:
        assert redirected is False
    assert not (tmp_path / "jvm.log").exists()
