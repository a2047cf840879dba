"""Fetch the Kafka broker and tool jars with Maven into a cache outside the repository.

`python -m kafka_harness.jars` fetches them (if needed) and prints the directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

# Keep in step with <kafka.version> in pom.xml.
KAFKA_VERSION = "4.3.1"
# The last line with ZooKeeper mode, whose brokers still write the legacy message formats v0 and v1
# (`log.message.format.version` below 3.0; KIP-724 dropped them in 4.0). Keep in step with pom-zk.xml.
ZK_KAFKA_VERSION = "3.9.1"
POM = Path(__file__).with_name("pom.xml")
POMS = {KAFKA_VERSION: POM, ZK_KAFKA_VERSION: Path(__file__).with_name("pom-zk.xml")}
# Jars whose presence proves the copy finished (besides the stamp): the broker, the tools and the
# tiered-storage test plugin, or the broker and ZooKeeper.
REQUIRED_JARS = {
    KAFKA_VERSION: (
        f"kafka_2.13-{KAFKA_VERSION}.jar",
        f"kafka-tools-{KAFKA_VERSION}.jar",
        f"kafka-storage-{KAFKA_VERSION}-test.jar",
    ),
    ZK_KAFKA_VERSION: (f"kafka_2.13-{ZK_KAFKA_VERSION}.jar", "zookeeper-3.8.4.jar"),
}
STAMP_NAME = ".copied"
MVN_TIMEOUT_S = 900

# Tools print their results on stdout, so their own logging must go to stderr (what
# Kafka's bin/*.sh do with config/tools-log4j2.yaml).
TOOLS_LOG4J2 = """\
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
"""


class HarnessError(RuntimeError):
    """A missing tool, a failed download or a broker that would not start: one line for the user."""


def run_tool(
    cmd: Sequence[str], what: str, timeout_s: float, error: type[HarnessError] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a tool to its end, its output captured as text; `error` (a HarnessError) names `what` when
    it outlasts `timeout_s`. The caller judges the exit status."""
    try:
        return subprocess.run(
            list(cmd), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        raise (error or HarnessError)(f"{what} did not finish in {timeout_s:.0f} s") from exc


def cache_root() -> Path:
    """`$KRA_CACHE`, else `~/.cache/kafka-replay-audit`."""
    return Path(os.environ.get("KRA_CACHE") or "~/.cache/kafka-replay-audit").expanduser()


def kafka_home(version: str = KAFKA_VERSION) -> Path:
    return cache_root() / f"kafka-{version}"


def kafka_lib_dir(version: str = KAFKA_VERSION) -> Path:
    return kafka_home(version) / "lib"


def require_executable(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise HarnessError(f"`{name}` not found on PATH; {why}")
    return path


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return require_executable("java", "the Kafka broker needs a JDK 17+ (install openjdk-17-jdk-headless)")


def _pom_digest(version: str) -> str:
    return hashlib.sha256(POMS[version].read_bytes()).hexdigest()


def _is_complete(lib: Path, digest: str, version: str) -> bool:
    stamp = lib / STAMP_NAME
    return (
        stamp.is_file()
        and stamp.read_text().strip() == digest
        and all((lib / jar).is_file() for jar in REQUIRED_JARS[version])
    )


def _mvn_failure_line(output: str) -> str:
    """The first `[ERROR]` line Maven printed (it explains the failure), else its last line."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    lines = [line.strip() for line in plain.splitlines() if line.strip()]
    for line in lines:
        if "[ERROR]" in line:
            return line
    return lines[-1] if lines else "no output"


def ensure_kafka_jars(version: str = KAFKA_VERSION) -> Path:
    """The directory holding the runtime classpath of Kafka `version` (`KAFKA_VERSION` or
    `ZK_KAFKA_VERSION`), copied there by Maven on first use.

    Idempotent: a stamp holding the pom's digest marks a finished copy. Copies go to a temporary
    directory first and are renamed into place, so concurrent callers never see half a classpath.
    """
    if version not in POMS:
        raise HarnessError(f"no pom for Kafka {version}; the harness has {', '.join(POMS)}")
    lib = kafka_lib_dir(version)
    digest = _pom_digest(version)
    if _is_complete(lib, digest, version):
        return lib
    mvn = require_executable("mvn", "install Maven (apt-get install maven) to fetch the Kafka jars")
    lib.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="lib.", dir=lib.parent))
    try:
        cmd = [
            mvn,
            "-q",
            "-B",
            "-Dstyle.color=never",
            "-f",
            str(POMS[version]),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        done = run_tool(cmd, "mvn, fetching the Kafka jars,", MVN_TIMEOUT_S)
        if done.returncode != 0:
            raise HarnessError(
                f"mvn failed to fetch the Kafka {version} jars (exit {done.returncode}): "
                + _mvn_failure_line(done.stdout + "\n" + done.stderr)
            )
        missing = [jar for jar in REQUIRED_JARS[version] if not (staging / jar).is_file()]
        if missing:
            raise HarnessError(f"mvn finished but did not copy {', '.join(missing)} into {staging}")
        (staging / STAMP_NAME).write_text(digest + "\n")
        if _is_complete(lib, digest, version):  # another process finished first
            return lib
        if lib.exists():
            shutil.rmtree(lib)
        try:
            staging.rename(lib)
        except OSError:
            if not _is_complete(lib, digest, version):
                raise
        return lib
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def kafka_classpath(version: str = KAFKA_VERSION) -> str:
    """A `java -cp` value for every Kafka runtime jar (fetching them first if needed)."""
    return f"{ensure_kafka_jars(version)}/*"


def tools_log4j2_config() -> Path:
    """A log4j2 configuration that sends tool logging to stderr at WARN, written once into the cache."""
    path = kafka_home() / "tools-log4j2.properties"
    if not path.is_file() or path.read_text() != TOOLS_LOG4J2:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(TOOLS_LOG4J2)
        tmp.replace(path)
    return path


def main() -> int:
    try:
        for version in POMS:
            print(ensure_kafka_jars(version))
    except HarnessError as exc:
        print(f"kafka_harness.jars: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
