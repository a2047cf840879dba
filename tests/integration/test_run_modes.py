"""The run modes of issue 3 besides local[2]: a real `spark-submit` of the ingest job, and the
Databricks Asset Bundle (databricks.yml + resources/*.yml) validated offline with databricks-bundles."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from databricks.bundles.jobs import Job
from deltalake import DeltaTable

from jobs import spark_session
from jobs.cli import build_parser
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "broker-4.3.1"
SUBMIT = ROOT / "conf" / "spark-submit.sh"
DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"
PAGE_SIZE = "spark.buffer.pageSize"
# Set in the parent only when a session (or platform) exists: the child must decide for itself.
PLATFORM_ENV = (
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "DATABRICKS_RUNTIME_VERSION",
    "KRA_SPARK_MASTER",
)

pytestmark = pytest.mark.integration


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _event_log(directory: Path) -> list[dict[str, Any]]:
    """Every event Spark logged (Spark 4 writes `eventlog_v2_<app>/events_<n>_<app>`, uncompressed here)."""
    files = sorted(
        p for p in directory.rglob("*") if p.is_file() and not p.name.startswith((".", "appstatus"))
    )
    assert files, f"no event log under {directory}"
    return [json.loads(line) for path in files for line in path.read_text().splitlines() if line]


# ---------------------------------------------------------------------------------------------
# spark-submit


def test_spark_submit_ingest_uses_the_submitted_session(tmp_path: Path) -> None:
    output = tmp_path / "out"
    events = tmp_path / "events"
    events.mkdir()
    app_name = f"kra-submit-{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if k not in PLATFORM_ENV}
    env["KRA_PYTHON"] = sys.executable
    env["SPARK_MASTER"] = "local[2]"
    # Observable evidence of who built the session: the event log records the master and app name
    # the JVM actually ran with. The local factory would have set appName("replay-audit ingest").
    env["KRA_SUBMIT_ARGS"] = (
        f"--name {app_name} --conf spark.eventLog.enabled=true --conf spark.eventLog.dir={events} "
        "--conf spark.eventLog.compress=false"
    )
    proc = subprocess.run(
        ["bash", str(SUBMIT), "ingest", "--input", f"sample={SAMPLE}", "--output", str(output)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"batches\t{output / 'batches'}" in proc.stdout.splitlines()

    # The job ran under spark-submit's session: its master and app name, not the factory's.
    log = _event_log(events)
    start = [e for e in log if e["Event"] == "SparkListenerApplicationStart"]
    assert [e["App Name"] for e in start] == [app_name]
    (environment,) = [e for e in log if e["Event"] == "SparkListenerEnvironmentUpdate"]
    properties = dict(environment["Spark Properties"])
    assert properties["spark.master"] == "local[2]"
    assert properties["spark.app.name"] == app_name
    # --packages became spark.jars: the Delta jar resolved into the shared Ivy cache.
    group, artifact, version = spark_session.delta_maven_coordinate().split(":")
    delta_jar = (spark_session.cache_dir() / "ivy" / "jars" / f"{group}_{artifact}-{version}.jar").as_uri()
    assert delta_jar in properties["spark.jars"].split(",")
    assert properties["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    # The same Delta artifact and Ivy cache/settings as local runs: one resolution serves both.
    ivy = spark_session.cache_dir() / "ivy"
    assert properties["spark.jars.ivy"] == str(ivy)
    assert properties["spark.jars.ivySettings"] == str(ivy / "ivysettings.xml")
    # The script passes LOCAL_CONF's Python debugging switch (no call site per Column call) and its
    # page size (a page per broadcast hash relation).
    assert properties[DEBUGGING] == spark_session.LOCAL_CONF[DEBUGGING] == "false"
    assert properties[PAGE_SIZE] == spark_session.LOCAL_CONF[PAGE_SIZE] == "2m"

    # Every batch of every segment of the sample, as the decoder yields it, is a row of `batches`.
    logs = sorted(SAMPLE.rglob("*.log"))
    assert logs
    expected = sum(isinstance(item, BatchHeader) for path in logs for item in read_log_segment(path))
    rows = DeltaTable(str(output / "batches")).to_pyarrow_table(columns=["dump_id"]).column("dump_id")
    assert rows.to_pylist() == ["sample"] * expected
    assert expected > 0


@pytest.mark.parametrize("master", ["local[2]", "spark://10.0.0.5:7077", "yarn"])
def test_spark_submit_sets_this_machines_settings_only_for_a_local_master(
    tmp_path: Path, master: str
) -> None:
    """A loopback driver address, this repo's interpreter on the workers and two shuffle partitions
    suit a run on this machine; under a cluster's master, executors elsewhere could reach no loopback
    driver nor run that interpreter. The script's spark-submit is a stand-in that prints its arguments
    (the real one is run by the test above)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    fake = bin_dir / "spark-submit"
    fake.write_text('#!/bin/sh\necho "PYSPARK_PYTHON=${PYSPARK_PYTHON:-}"\nprintf "%s\\n" "$@"\n')
    for script in (python, fake):
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in (*PLATFORM_ENV, "PYSPARK_PYTHON")}
    env.update(KRA_PYTHON=str(python), SPARK_MASTER=master)
    proc = subprocess.run(
        ["bash", str(SUBMIT), "audit", "--output", "out"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    args = proc.stdout.splitlines()
    assert args[args.index("--master") + 1] == master
    assert args[-4:] == [str(ROOT / "jobs" / "run.py"), "audit", "--output", "out"]
    local = master.startswith("local")
    for setting in (
        "spark.driver.host=127.0.0.1",
        "spark.driver.bindAddress=127.0.0.1",
        "spark.sql.shuffle.partitions=2",
        f"spark.pyspark.python={python}",
        # pyspark takes the workers' interpreter from the environment as well as from the setting.
        f"PYSPARK_PYTHON={python}",
        # A cluster's driver memory and UI are its operators'.
        "--driver-memory",
        "spark.ui.enabled=false",
    ):
        assert (setting in args) == local, (setting, args)
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in args
    assert f"spark.pyspark.driver.python={python}" in args
    assert args[args.index("--packages") + 1] == spark_session.delta_maven_coordinate()
    # The Delta build of the cluster's Spark line, or none where the cluster has Delta.
    for package, expected in (("io.delta:delta-spark_4.0_2.13:4.0.0", ["--packages"]), ("", [])):
        proc = subprocess.run(
            ["bash", str(SUBMIT), "audit", "--output", "out"],
            env={**env, "KRA_DELTA_PACKAGE": package},
            capture_output=True,
            text=True,
            timeout=120,
        )
        args = proc.stdout.splitlines()
        assert [a for a in args if a == "--packages"] == expected, args
        assert not expected or args[args.index("--packages") + 1] == package


def test_spark_submit_without_the_delta_jar_is_a_usage_error(tmp_path: Path) -> None:
    """A session spark-submit made with Delta's settings but not its jar (no --packages): one line naming
    the flags, exit 2, before any work; it was a Java trace at the first table write, exit 3."""
    env = {k: v for k, v in os.environ.items() if k not in PLATFORM_ENV}
    env.update(KRA_PYTHON=sys.executable, SPARK_MASTER="local[2]", KRA_DELTA_PACKAGE="")
    proc = subprocess.run(
        ["bash", str(SUBMIT), "ingest", "--input", f"sample={SAMPLE}", "--output", str(tmp_path / "out")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # spark-submit's PythonRunner writes the job's stderr to stdout.
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("replay-audit:")]
    assert proc.returncode == 2, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert len(said) == 1 and "has not its jar" in said[0], said
    assert f"--packages io.delta:delta-spark_{'.'.join(_spark_version().split('.')[:2])}_2.13:" in said[0]
    assert not (tmp_path / "out" / "batches").exists()


def _spark_version() -> str:
    import pyspark

    return pyspark.__version__


# ---------------------------------------------------------------------------------------------
# Databricks Asset Bundle


def _yaml(path: Path) -> Any:
    with path.open() as f:
        return yaml.safe_load(f)


def _resource_files(bundle: dict[str, Any]) -> list[Path]:
    files = sorted(p for p in (ROOT / "resources").rglob("*.yml"))
    assert files, "no resources/*.yml"
    included = [
        p for p in files if any(fnmatch.fnmatch(p.relative_to(ROOT).as_posix(), g) for g in bundle["include"])
    ]
    assert included == files, "a resources file is not included by databricks.yml"
    return files


def test_bundle_jobs_validate_and_run_a_real_console_script() -> None:
    bundle = _yaml(ROOT / "databricks.yml")
    assert set(bundle) <= {"bundle", "include", "variables", "artifacts", "targets", "workspace"}
    assert bundle["bundle"]["name"]
    assert any(t.get("default") for t in bundle["targets"].values())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    scripts = pyproject["project"]["scripts"]
    distribution = _normalize(pyproject["project"]["name"])
    (artifact,) = bundle["artifacts"].values()
    assert artifact["type"] == "whl"
    assert (ROOT / artifact["path"] / "pyproject.toml").is_file()
    # Built by the Makefile's target, which empties dist/ and build/ first: the jobs install every
    # ../dist/*.whl, so a stale wheel left there would be uploaded too.
    assert artifact["build"] == "make wheel"
    recipe = re.search(r"^wheel:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert recipe and recipe.group(1).startswith("rm -rf dist build && "), recipe

    variables = set(bundle.get("variables", {}))
    wheel_tasks = 0
    for path in _resource_files(bundle):
        jobs = _yaml(path)["resources"]["jobs"]
        assert jobs
        for key, spec in jobs.items():
            job: Any = Job.from_dict(spec)  # raises on unknown keys and missing required fields
            for name in re.findall(r"\$\{var\.(\w+)\}", json.dumps(spec)):
                assert name in variables, f"{key}: undefined bundle variable {name}"
            # Every job cluster carries LOCAL_CONF's Python debugging switch and page size.
            assert job.job_clusters
            for cluster in job.job_clusters:
                spark_conf = dict(cluster.new_cluster.spark_conf or {})
                for name in (DEBUGGING, PAGE_SIZE):
                    assert spark_conf.get(name) == spark_session.LOCAL_CONF[name], cluster.job_cluster_key
            for task in job.tasks:
                wheel = task.python_wheel_task
                if wheel is None:
                    continue
                wheel_tasks += 1
                assert _normalize(str(wheel.package_name)) == distribution
                assert wheel.entry_point in scripts, (
                    f"{key}.{task.task_key}: no console script {wheel.entry_point}"
                )
                assert list(task.libraries), f"{key}.{task.task_key}: the wheel is not installed"
                # The wheel the artifact builds (--wheel-dir dist), seen from resources/.
                assert all(str(library.whl).startswith("../dist/") for library in task.libraries)
                # The parameters are a valid `replay-audit` command line.
                build_parser().parse_args([str(p) for p in wheel.parameters])
    assert wheel_tasks >= 1


def test_job_validator_rejects_unknown_keys() -> None:
    """The check above is strict: a typo anywhere in the job is an error, not silently dropped."""
    bundle = _yaml(ROOT / "databricks.yml")
    spec = next(iter(_yaml(_resource_files(bundle)[0])["resources"]["jobs"].values()))
    with pytest.raises(ValueError, match="Unexpected field"):
        Job.from_dict(cast(Any, {**spec, "taskz": spec["tasks"]}))
    task = {
        **spec["tasks"][0],
        "python_wheel_task": {**spec["tasks"][0]["python_wheel_task"], "entrypoint": "x"},
    }
    with pytest.raises(ValueError, match="Unexpected field"):
        Job.from_dict(cast(Any, {**spec, "tasks": [task]}))


def test_local_conf_documents_the_session_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KRA_DELTA_VERSION", raising=False)
    local = _yaml(ROOT / "conf" / "local.yaml")
    assert local["master"] == spark_session.LOCAL_MASTER
    assert local["delta"]["package"] == spark_session.delta_maven_coordinate()
    assert local["spark_conf"] == spark_session.LOCAL_CONF
    monkeypatch.delenv("KRA_DRIVER_MEMORY", raising=False)
    assert local["job_conf"] == spark_session.job_local_conf("ingest")
    for command in ("audit", "run"):
        assert {**local["job_conf"], **local["audit_job_conf"]} == spark_session.job_local_conf(command)


def test_local_python_workers_import_pyspark_from_the_installation_not_sparks_zip(spark: Any) -> None:
    """`jobs.pyspark_daemon`: the local sessions' workers run without Spark's zipped copies of pyspark
    and py4j on their path (each task would read their directories again)."""
    import pyspark.sql.functions as F

    @F.udf("string")
    def where(_):  # no type hints: PySpark would read them as the UDF's eval type
        import os as os_
        import sys as sys_

        import pyspark as pyspark_

        home = os_.environ.get("SPARK_HOME", "")
        copies = [p for p in sys_.path if p.startswith(home) and p.endswith((".zip", ".jar"))]
        return json.dumps({"pyspark": pyspark_.__file__, "copies": copies, "home": home})

    rows = {r.w for r in spark.range(0, 4, numPartitions=2).select(where("id").alias("w")).collect()}
    for row in map(json.loads, rows):
        assert row["home"] and row["copies"] == [], row
        assert ".zip" not in row["pyspark"] and row["pyspark"].startswith(
            str(Path(sys.executable).parent.parent)
        ), row


def test_local_python_workers_read_the_sessions_jars_once(spark: Any) -> None:
    """`jobs.pyspark_daemon.ReadOnceJar`: the jars the session ships (delta-spark's, its Python
    includes too) are on the workers' path, and their importers do not read them again at each task."""
    import pyspark.sql.functions as F

    @F.udf("string")
    def importers(_):  # no type hints: PySpark would read them as the UDF's eval type
        import importlib.util as util_
        import json as json_
        import sys as sys_

        util_.find_spec("kra_nowhere")  # an import that searches every path entry, making its importer
        jars = [p for p in sys_.path if p.endswith(".jar")]
        kinds = {type(sys_.path_importer_cache.get(p)).__name__ for p in jars}
        return json_.dumps({"jars": len(jars), "kinds": sorted(kinds)})

    for _ in range(2):  # the second job's tasks run in workers that ran a task before
        rows = {r.w for r in spark.range(0, 4, numPartitions=2).select(importers("id").alias("w")).collect()}
        for row in map(json.loads, rows):
            assert row["jars"] > 0 and row["kinds"] == ["ReadOnceJar"], row


def test_the_local_sessions_page_holds_a_broadcast_relation_in_two_mib(spark: Any) -> None:
    """The page size is read once, when the context starts: the factory's session must have it, or each
    hash relation a broadcast join reads holds a page of Spark's default (32-64 MiB with the tests' 4 GiB
    heap) on the heap for as long as its plan lives."""
    env = spark.sparkContext._jsc.sc().env()
    assert env.memoryManager().pageSizeBytes() == 2 * 1024 * 1024


def test_concurrent_tasks_inherit_the_callers_local_properties_each_into_its_own(spark: Any) -> None:
    """`spark_session.concurrently`: each thread starts with the caller's local properties, and what one
    sets is not seen by another. Sharing one copy, a Delta write ending on one thread cleared the
    `spark.sql.execution.root.id` of another's write: `NumberFormatException: Cannot parse null string`
    in a CI run's ingest (SPARK-55505)."""
    import threading

    sc = spark.sparkContext
    met = threading.Barrier(2, timeout=60)
    seen: dict[str, tuple[str | None, str | None]] = {}

    def task(name: str) -> None:
        if name == "a":
            sc.setLocalProperty("kra.test.mark", "a")
        met.wait()  # a has set its mark before b reads
        seen[name] = (sc.getLocalProperty("kra.test.caller"), sc.getLocalProperty("kra.test.mark"))
        met.wait()  # b has read before a's thread ends

    sc.setLocalProperty("kra.test.caller", "c")
    try:
        spark_session.concurrently(spark, [lambda: task("a"), lambda: task("b")])
    finally:
        sc.setLocalProperty("kra.test.caller", None)
    assert seen == {"a": ("c", "a"), "b": ("c", None)}
    assert sc.getLocalProperty("kra.test.mark") is None
