"""`jobs.pyspark_daemon.drop_spark_copies`: Spark's own zips and jars leave the workers' path only when
pyspark and py4j import from elsewhere."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyspark
import pytest

from jobs.pyspark_daemon import drop_spark_copies


def _spark_home(tmp_path: Path) -> tuple[str, list[str]]:
    home = tmp_path / "spark"
    (home / "python" / "lib").mkdir(parents=True)
    (home / "jars").mkdir()
    copies = [
        home / "python" / "lib" / "pyspark.zip",
        home / "python" / "lib" / "py4j-src.zip",
        home / "jars" / "spark-core.jar",
    ]
    for copy in copies:
        with zipfile.ZipFile(copy, "w") as z:
            z.writestr("README", "")
    return str(home), [str(c) for c in copies]


def test_spark_copies_leave_the_path_and_the_importer_cache(tmp_path: Path) -> None:
    home, copies = _spark_home(tmp_path)
    shipped = str(tmp_path / "files" / "deps.zip")  # a job's --py-files: not Spark's own
    path = [*copies, "/work/project", shipped]
    cache: dict[str, object] = {copies[0]: "zip", copies[0] + "/pyspark/": "zip", "/work/project": "dir"}
    assert drop_spark_copies(path, cache, home) == copies
    assert path == ["/work/project", shipped]
    assert cache == {"/work/project": "dir"}


def test_the_path_stays_when_pyspark_is_only_in_sparks_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, copies = _spark_home(tmp_path)
    # As on a Spark installed without pip: the imported pyspark is the zip's.
    monkeypatch.setattr(pyspark, "__file__", copies[0] + "/pyspark/__init__.py")
    path = [*copies, "/work/project"]
    cache: dict[str, object] = {copies[0]: "zip"}
    assert drop_spark_copies(path, cache, home) == []
    assert path == [*copies, "/work/project"]
    assert cache == {copies[0]: "zip"}


def test_nothing_changes_without_a_spark_home_or_outside_it(tmp_path: Path) -> None:
    home, copies = _spark_home(tmp_path)
    path = list(copies)
    assert drop_spark_copies(path, {}, "") == [] and path == copies
    # A sibling directory whose name starts with SPARK_HOME's is not inside it.
    sibling = [home + "-other/deps.zip"]
    assert drop_spark_copies(sibling, {}, home) == [] and sibling == [home + "-other/deps.zip"]
