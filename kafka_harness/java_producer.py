"""Kafka's own Java producer (`java/TransactionalProducer.java`, run by the JDK's source launcher on
the harness's kafka-clients jar): the only client here that speaks transactions V2 (KIP-890 part 2),
so the only way to get a broker to write a V2 transaction's markers."""

from __future__ import annotations

from pathlib import Path

from kafka_harness.jars import HarnessError, java_executable, kafka_classpath, run_tool, tools_log4j2_config

SOURCE = Path(__file__).parent / "java" / "TransactionalProducer.java"
JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
RUN_TIMEOUT_S = 180


def command(bootstrap: str, topic: str, transactional_id: str, mode: str, *args: str) -> list[str]:
    """The `java` command line of one run of the producer (modes: see the Java source's comment)."""
    return [
        java_executable(),
        *JVM_OPTS,
        f"-Dlog4j2.configurationFile={tools_log4j2_config()}",
        "-cp",
        kafka_classpath(),
        str(SOURCE),
        bootstrap,
        topic,
        transactional_id,
        mode,
        *args,
    ]


def run(bootstrap: str, topic: str, transactional_id: str, mode: str, *args: str) -> list[str]:
    """Run the producer to its end; its stdout lines, or a HarnessError with its stderr's tail."""
    cmd = command(bootstrap, topic, transactional_id, mode, *args)
    done = run_tool(cmd, f"the Java producer ({mode})", RUN_TIMEOUT_S)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise HarnessError(f"the Java producer ({mode}) exited with status {done.returncode}:\n{tail}")
    return done.stdout.splitlines()
