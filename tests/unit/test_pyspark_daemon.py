"""`jobs.pyspark_daemon.drop_spark_copies`: Spark's own zips and jars leave the workers' path only when
pyspark and py4j import from elsewhere. `read_jars_once`: a jar on the path is read once, whatever
`importlib.invalidate_caches()` is called for, and still imports."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from jobs.pyspark_daemon import ReadOnceJar, drop_spark_copies, read_jars_once


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


@pytest.fixture
def jars_read_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's import system as the daemon sets it, given back afterwards."""
    monkeypatch.setattr(sys, "path_hooks", list(sys.path_hooks))
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    monkeypatch.setattr(sys, "path", list(sys.path))
    read_jars_once(sys.path_hooks, sys.path_importer_cache)
    yield
    for name in [m for m in sys.modules if m.startswith("kra_in_")]:
        del sys.modules[name]


def _archive(path: Path, modules: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "a") as z:
        for name, text in modules.items():
            z.writestr(f"{name}.py", text)
    return str(path)


def test_a_jar_imports_through_an_importer_that_reads_it_once(tmp_path: Path, jars_read_once: None) -> None:
    jar = _archive(tmp_path / "pkg.jar", {"kra_in_jar": "VALUE = 1\n"})
    sys.path.insert(0, jar)
    assert importlib.import_module("kra_in_jar").VALUE == 1
    assert isinstance(sys.path_importer_cache[jar], ReadOnceJar)
    # A module added to the jar afterwards is not seen, however often the caches are invalidated: its
    # directory was read once (what a task's `invalidate_caches` no longer repeats).
    _archive(tmp_path / "pkg.jar", {"kra_in_jar_later": "VALUE = 2\n"})
    importlib.invalidate_caches()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kra_in_jar_later")


def test_a_package_in_a_jar_imports_through_an_importer_that_reads_it_once(
    tmp_path: Path, jars_read_once: None
) -> None:
    jar = _archive(tmp_path / "pkg.jar", {"kra_in_jar_pkg/__init__": "", "kra_in_jar_pkg/mod": "VALUE = 1\n"})
    sys.path.insert(0, jar)
    assert importlib.import_module("kra_in_jar_pkg.mod").VALUE == 1
    folder = importlib.import_module("kra_in_jar_pkg").__path__[0]
    assert folder.startswith(jar) and isinstance(sys.path_importer_cache[folder], ReadOnceJar)
    _archive(tmp_path / "pkg.jar", {"kra_in_jar_pkg/later": "VALUE = 2\n"})
    importlib.invalidate_caches()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kra_in_jar_pkg.later")


def test_a_zip_keeps_the_standard_importer_and_is_read_again(tmp_path: Path, jars_read_once: None) -> None:
    archive = _archive(tmp_path / "deps.zip", {"kra_in_zip": "VALUE = 1\n"})
    sys.path.insert(0, archive)
    assert importlib.import_module("kra_in_zip").VALUE == 1
    importer = sys.path_importer_cache[archive]
    assert type(importer) is zipimport.zipimporter
    _archive(tmp_path / "deps.zip", {"kra_in_zip_later": "VALUE = 2\n"})
    importlib.invalidate_caches()
    assert importlib.import_module("kra_in_zip_later").VALUE == 2


def test_read_jars_once_hooks_once_and_forgets_the_jars_standard_importers(tmp_path: Path) -> None:
    jar = _archive(tmp_path / "pkg.jar", {"kra_in_jar": ""})
    hooks: list[object] = [zipimport.zipimporter]
    cache: dict[str, object] = {
        jar: zipimport.zipimporter(jar),
        jar + "/kra_in_jar": zipimport.zipimporter(jar),
        "/work/project": "dir",
    }
    read_jars_once(hooks, cache)
    read_jars_once(hooks, cache)
    assert hooks == [ReadOnceJar, zipimport.zipimporter]
    assert cache == {"/work/project": "dir"}
    with pytest.raises(zipimport.ZipImportError):
        ReadOnceJar(str(tmp_path / "deps.zip"))
