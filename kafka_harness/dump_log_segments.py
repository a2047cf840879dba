"""Run Kafka's own DumpLogSegments (`kafka-dump-log.sh`) from the harness jars: the reference decoder."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from kafka_harness.jars import (
    KAFKA_VERSION,
    ZK_KAFKA_VERSION,
    HarnessError,
    java_executable,
    kafka_classpath,
    run_tool,
    tools_log4j2_config,
)

# Since Kafka 4.3 the tool is Java code in kafka-tools (KAFKA-14579); before, kafka.tools.DumpLogSegments
# (Scala, in the broker's jar), whose text differs in details.
DUMP_LOG_SEGMENTS_CLASSES = {
    KAFKA_VERSION: "org.apache.kafka.tools.DumpLogSegments",
    ZK_KAFKA_VERSION: "kafka.tools.DumpLogSegments",
}
TOOL_JVM_OPTS = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
DUMP_TIMEOUT_S = 600


class DumpLogSegmentsError(HarnessError):
    """DumpLogSegments exited non-zero; the message carries its stderr."""


def run_dump_log_segments(
    files: Sequence[Path | str],
    deep_iteration: bool = True,
    extra_args: Iterable[str] = (),
    version: str = KAFKA_VERSION,
    errors: list[str] | None = None,
) -> str:
    """DumpLogSegments' stdout for `.log`, `.index`, `.timeindex`, `.snapshot` or `.txnindex` files.

    `extra_args` go through as-is (e.g. `--print-data-log`, `--verify-index-only`). `version`: the
    Kafka whose tool runs (`KAFKA_VERSION`, or `ZK_KAFKA_VERSION` for the 3.x tool). `errors`, where
    given, receives the lines of its stderr: its own checks print there (an index entry that names
    another batch's last offset, `Mismatches in :<file>`; time index errors; `Non-consecutive offsets
    in <file>`, which with `--deep-iteration` names every segment not starting at 0 as following -1).
    """
    if not files:
        raise ValueError("run_dump_log_segments needs at least one file")
    cmd = [
        java_executable(),
        *TOOL_JVM_OPTS,
        f"-Dlog4j2.configurationFile={tools_log4j2_config()}",
        "-cp",
        kafka_classpath(version),
        DUMP_LOG_SEGMENTS_CLASSES[version],
        "--files",
        ",".join(str(Path(f)) for f in files),
    ]
    if deep_iteration:
        cmd.append("--deep-iteration")
    cmd.extend(extra_args)
    done = run_tool(cmd, "DumpLogSegments", DUMP_TIMEOUT_S, DumpLogSegmentsError)
    if done.returncode != 0:
        raise DumpLogSegmentsError(
            f"DumpLogSegments failed (exit {done.returncode}) on {', '.join(map(str, files))}: "
            + (done.stderr.strip() or "no stderr")
        )
    if errors is not None:
        errors.extend(done.stderr.splitlines())
    return done.stdout
