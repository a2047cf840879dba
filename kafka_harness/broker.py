"""KRaft Kafka brokers on 127.0.0.1, for tests: a single node (combined broker + controller), and
broker-only nodes that join it to form a cluster of several replicas.

`python -m kafka_harness.broker` runs one in the foreground until Ctrl-C.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kafka_harness.jars import HarnessError, java_executable, kafka_classpath, run_tool
from kafka_harness.polling import poll_until

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
FORMAT_TIMEOUT_S = 120.0
FRESH_CLIENT_EVERY = 4  # failed DescribeCluster calls while a broker starts, before a new client
# The C1 compiler only: the test brokers live for seconds to minutes and write thousands of records,
# and C2 spends its CPU compiling start-up code. A one-node broker (2026-11-27, two runs each): ready
# in 4.9-5.1 s with 4.4-4.6 s of CPU against 5.6-5.7 s and 6.9-7.0 s with C2; after 20,000 idempotent
# records 4.7-4.9 s of CPU against 7.9 s. The test suite is CPU-bound on two cores and starts dozens.
JVM_OPTS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# Short-lived JVMs (StorageTool, DumpLogSegments): the same.
TOOL_JVM_OPTS = JVM_OPTS
LOG_TAIL_LINES = 40
ADMIN_TIMEOUT_S = 10.0  # one admin request (list offsets) to a live broker

# Defaults suited to a one-node test cluster; constructor overrides win. Internal topics get one
# partition each because creating 50 of them on first use costs seconds on two cores.
DEFAULT_PROPERTIES: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "num.recovery.threads.per.data.dir": "1",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}

BROKER_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.coordinator.name = org.apache.kafka.coordinator
logger.coordinator.level = warn
"""


LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"


def tiered_storage_properties(remote_dir: Path | str) -> dict[str, str]:
    """Server properties for tiered storage (KIP-405) on the file system: Kafka's own `LocalTieredStorage`
    plugin (from the kafka-storage test jar) copies closed segments under `remote_dir`, the
    topic-based metadata manager records them in `__remote_log_metadata` (one partition here), and
    the remote log manager and retention run every 500 ms. A topic opts in with
    `remote.storage.enable=true`; `local.retention.bytes`/`local.retention.ms` then bound what stays
    in the log directory."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(remote_dir),
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "500",
    }


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def random_cluster_id() -> str:
    """A Kafka `Uuid` string: URL-safe base64 of 16 random bytes, without padding or a leading '-'."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no {path.name})"
    return "\n".join(text.splitlines()[-lines:])


class _Started:
    """A context manager over `start()` and `stop()`."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class KafkaBroker(_Started):
    """A KRaft broker+controller in its own process group, writing its data under `work_dir`.

    With `controller` (a started node of this kind), a broker-only node that joins that node's
    cluster instead: a cluster of several replicas is one combined node and N broker-only nodes.

    Use as a context manager, or call `start()` and `stop()`; `start()` again after `stop()`
    restarts the node on its existing data. `log_dir` holds the partition directories;
    `server_log` is the broker's log4j output.
    """

    def __init__(
        self,
        work_dir: Path | str | None = None,
        *,
        node_id: int = 1,
        controller: KafkaBroker | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        **properties: Any,
    ) -> None:
        """`properties` are extra server properties; underscores in names become dots
        (`log_roll_ms=100` = `log.roll.ms=100`), or pass dotted names via `**{"log.roll.ms": 100}`."""
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="kafka-broker-"))
        self.node_id = node_id
        self.controller = controller
        self.cluster_id: str = controller.cluster_id if controller is not None else random_cluster_id()
        self.ready_timeout_s = ready_timeout_s
        self.extra_properties = {key.replace("_", "."): _property_value(v) for key, v in properties.items()}
        self.log_dir = self.work_dir / "data"
        self.server_log = self.work_dir / "server.log"
        self.stdout_log = self.work_dir / "broker.stdout"
        self.properties_file = self.work_dir / "server.properties"
        self.port = 0
        self.controller_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._stdout: IO[bytes] | None = None
        self._admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        if not self.port:
            raise HarnessError("the broker has not been started")
        return f"127.0.0.1:{self.port}"

    @property
    def clean_shutdown(self) -> bool:
        """Whether the broker left its clean-shutdown marker (producer snapshots at the log end)."""
        return (self.log_dir / ".kafka_cleanshutdown").is_file()

    def server_properties(self) -> dict[str, str]:
        if self.controller is None:
            roles, quorum = "broker,controller", self.controller_port
            listeners = f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
        else:
            roles, quorum = "broker", self.controller.controller_port
            listeners = f"PLAINTEXT://127.0.0.1:{self.port}"
        props = {
            "process.roles": roles,
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{quorum}",
            # No advertised.listeners: it defaults to `listeners`.
            "listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **DEFAULT_PROPERTIES,
        }
        props.update(self.extra_properties)
        return props

    def start(self) -> KafkaBroker:
        """Format the storage (unless this node ran before), launch `kafka.Kafka` and wait until it
        answers DescribeCluster."""
        if self.process is not None and self.process.poll() is None:
            raise HarnessError("the broker was already started")
        java = java_executable()
        classpath = self._classpath()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.controller is not None and not self.controller.controller_port:
            raise HarnessError("the controller node must be started before a broker joins it")
        restart = (self.log_dir / "meta.properties").is_file()
        if not (restart and self.controller_port):  # a combined node keeps its controller port
            self.port, self.controller_port = free_port(), (free_port() if self.controller is None else 0)
            while self.controller_port == self.port:
                self.controller_port = free_port()
        else:
            self.port = free_port()
        self.properties_file.write_text(
            "".join(f"{key}={value}\n" for key, value in self.server_properties().items())
        )
        log4j2 = self.work_dir / "log4j2.properties"
        log4j2.write_text(BROKER_LOG4J2.format(log_file=self.server_log))
        system_props = [f"-Dlog4j2.configurationFile={log4j2}", f"-Dkafka.logs.dir={self.work_dir}"]
        self._prepare(java, classpath, system_props, restart)
        self._stdout = open(self.stdout_log, "ab")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(
            [java, *JVM_OPTS, *system_props, "-cp", classpath, "kafka.Kafka", str(self.properties_file)],
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() signals the group
        )
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("Kafka broker ready at %s (data in %s)", self.bootstrap, self.log_dir)
        return self

    def _classpath(self) -> str:
        return kafka_classpath()

    def _prepare(self, java: str, classpath: str, system_props: list[str], restart: bool) -> None:
        """What must be done before `kafka.Kafka` starts: a KRaft node formats its storage once."""
        if not restart:
            self._format_storage(java, classpath, system_props)

    def _format_storage(self, java: str, classpath: str, system_props: list[str]) -> None:
        cmd = [
            java,
            *TOOL_JVM_OPTS,
            *system_props,
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            *(["--standalone"] if self.controller is None else []),
            "-t",
            self.cluster_id,
            "-c",
            str(self.properties_file),
        ]
        done = run_tool(cmd, "kafka-storage format", FORMAT_TIMEOUT_S)
        if done.returncode != 0:
            raise HarnessError(
                f"kafka-storage format failed (exit {done.returncode}): "
                + (done.stderr.strip() or done.stdout.strip())
            )

    def _failure(self, why: str) -> HarnessError:
        return HarnessError(
            f"{why}\n--- {self.server_log} (tail) ---\n{_tail(self.server_log)}"
            f"\n--- {self.stdout_log} (tail) ---\n{_tail(self.stdout_log)}"
        )

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        admin = self.admin()
        last_error: object = None
        failures = 0
        while True:
            code = self.process.poll()
            if code is not None:
                raise self._failure(f"the Kafka broker exited with status {code} while starting")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._failure(
                    f"the Kafka broker was not ready after {self.ready_timeout_s:.0f} s "
                    f"(last DescribeCluster error: {last_error})"
                )
            try:
                cluster = admin.describe_cluster(request_timeout=min(5.0, remaining)).result(
                    timeout=min(10.0, remaining)
                )
                if cluster.nodes:
                    return
                last_error = "no nodes in the cluster description"
            except Exception as exc:  # KafkaException or a timeout while the broker boots
                last_error = f"{type(exc).__name__}: {exc}"
                failures += 1
                if failures % FRESH_CLIENT_EVERY == 0:
                    # A client can be left with no broker to ask (see admin()); a new one
                    # bootstraps from this node again.
                    self._admin = None
                    admin = self.admin()
            time.sleep(0.25)

    def admin(self) -> AdminClient:
        """An AdminClient for this broker (created once; librdkafka reconnects on its own)."""
        if self._admin is None:
            config: dict[str, Any] = {
                "bootstrap.servers": self.bootstrap,
                "socket.connection.setup.timeout.ms": 5000,
                "reconnect.backoff.max.ms": 500,
                # A node answers clients before the controller unfences it, and its metadata lists
                # only unfenced brokers. Restarted beside a killed node (test_replicated_cluster.py),
                # it can list only the dead one, which stays unfenced until its session times out;
                # librdkafka then forgets its bootstrap address and, by default, returns to it only
                # after 5 minutes without a reachable broker (KIP-899). Return after 2 s.
                "metadata.recovery.strategy": "rebootstrap",
                "metadata.recovery.rebootstrap.trigger.ms": 2000,
                # Connection-refused noise while the broker boots goes to Python logging.
                "logger": logging.getLogger("kafka_harness.librdkafka"),
            }
            self._admin = AdminClient(config)
        return self._admin

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: Mapping[str, Any] | None = None,
        *,
        replicas: Sequence[Sequence[int]] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Create a topic and wait until every partition has a leader. `replicas` places each
        partition's replicas on those node ids (and sets the partition count); else one replica."""
        admin = self.admin()
        configs = {key: _property_value(value) for key, value in (config or {}).items()}
        if replicas is None:
            new_topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)
        else:
            partitions = len(replicas)
            new_topic = NewTopic(
                name,
                num_partitions=partitions,
                replica_assignment=[list(r) for r in replicas],
                config=configs,
            )
        future = admin.create_topics([new_topic], operation_timeout=timeout_s, request_timeout=timeout_s)[
            name
        ]
        future.result(timeout=timeout_s)

        def led() -> bool:
            metadata = admin.list_topics(topic=name, timeout=10).topics.get(name)
            return (
                metadata is not None
                and metadata.error is None
                and len(metadata.partitions) == partitions
                and all(p.leader >= 0 for p in metadata.partitions.values())
            )

        poll_until(
            led,
            timeout_s,
            lambda: f"topic {name!r} has no leader for every partition after {timeout_s:.0f} s",
            interval_s=0.1,
        )

    def stop(self) -> int | None:
        """SIGTERM the broker's process group, wait up to 60 s, then SIGKILL. Returns the exit status.

        A SIGTERM shutdown is clean: the broker closes every log, writing a producer snapshot at
        each log end offset, and leaves `.kafka_cleanshutdown`.
        """
        self._admin = None
        process = self.process
        if process is None:
            return None
        try:
            terminate(process, "Kafka broker")
        finally:
            if self._stdout is not None:
                self._stdout.close()
                self._stdout = None
            atexit.unregister(self.stop)
        return process.returncode


class KafkaCluster(_Started):
    """Several replicas on 127.0.0.1: a combined broker + controller node (id 1) and broker-only nodes
    (`broker_ids`) that join it. Tests place their topics' replicas on the broker-only nodes
    (`create_topic(..., replicas=...)`), so stopping or killing one never stops the controller.
    `properties` go to the broker-only nodes."""

    def __init__(self, work_dir: Path | str, broker_ids: Sequence[int] = (2, 3), **properties: Any) -> None:
        work = Path(work_dir)
        self.controller = KafkaBroker(work / "node1", node_id=1)
        self.brokers = {
            i: KafkaBroker(work / f"node{i}", node_id=i, controller=self.controller, **properties)
            for i in broker_ids
        }

    def start(self) -> KafkaCluster:
        self.controller.start()
        for broker in self.brokers.values():
            broker.start()
        return self

    @property
    def bootstrap(self) -> str:
        """The running broker-only nodes, as a client's bootstrap list."""
        return ",".join(b.bootstrap for b in self.brokers.values() if b.process and b.process.poll() is None)

    def kill(self, node_id: int) -> None:
        """SIGKILL a broker: no clean shutdown, no final checkpoints or snapshots."""
        broker = self.brokers[node_id]
        assert broker.process is not None
        _signal_group(broker.process, signal.SIGKILL)
        broker.process.wait(timeout=STOP_TIMEOUT_S)
        broker.stop()

    def leader(self, topic: str, partition: int) -> tuple[int, list[int]]:
        """The partition's leader and in-sync replicas, as the controller node's metadata has them."""
        meta = (
            self.controller.admin().list_topics(topic=topic, timeout=10).topics[topic].partitions[partition]
        )
        return meta.leader, sorted(meta.isrs)

    def wait_for(self, topic: str, partition: int, isr: Sequence[int], timeout_s: float = 60.0) -> int:
        """Wait until the partition's in-sync replicas are `isr`; returns its leader."""

        def leader() -> int | None:
            leader, current = self.leader(topic, partition)
            return leader if current == sorted(isr) and leader in isr else None

        return poll_until(
            leader,
            timeout_s,
            lambda: (
                f"{topic}-{partition}: in-sync replicas {self.leader(topic, partition)[1]}, "
                f"not {sorted(isr)}, after {timeout_s:.0f} s"
            ),
            interval_s=0.25,
        )

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop()
        self.controller.stop()


def terminate(process: subprocess.Popen[bytes], what: str) -> None:
    """SIGTERM a process started with `start_new_session`, and its group; SIGKILL it after 60 s."""
    if process.poll() is None:
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in %.0f s; killing it", what, STOP_TIMEOUT_S)
            _signal_group(process, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)  # start_new_session: the group id is the broker's pid


def _property_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_harness.broker",
        description="Run a single-node KRaft Kafka broker on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument("--work-dir", type=Path, help="where to keep data and logs (default: a new temp dir)")
    parser.add_argument("--node-id", type=int, default=1)
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="an extra server property, e.g. --set log.segment.bytes=1048576 (repeatable)",
    )
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set expects KEY=VALUE, got {item!r}")
        extra[key] = value
    logging.basicConfig(level=logging.WARNING)
    broker = KafkaBroker(args.work_dir, node_id=args.node_id, **extra)
    try:
        broker.start()
        print(f"bootstrap: {broker.bootstrap}", flush=True)
        print(f"log dir:   {broker.log_dir}", flush=True)
        print(f"broker log: {broker.server_log}", flush=True)
        print("Ctrl-C stops the broker.", flush=True)
        assert broker.process is not None
        status = broker.process.wait()
        print(f"the broker exited with status {status}; see {broker.server_log}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping the broker ...", file=sys.stderr, flush=True)
        code = broker.stop()
        print(f"stopped (exit status {code}, clean shutdown: {broker.clean_shutdown})", file=sys.stderr)
        return 0
    except HarnessError as exc:
        print(f"kafka_harness.broker: error: {exc}", file=sys.stderr)
        return 1
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())


def list_offsets(admin: AdminClient, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start offset, log end offset) per (topic, partition), as the broker reports them."""
    earliest = _list_offsets(admin, keys, OffsetSpec.earliest())
    latest = _list_offsets(admin, keys, OffsetSpec.latest())
    return {key: (earliest[key], latest[key]) for key in keys}


def wait_for_markers(admin: AdminClient, keys: list[tuple[str, int]], timeout_s: float = 30.0) -> None:
    """Until no partition has a transaction open: `commit_transaction` returns once the coordinator has
    logged PREPARE_COMMIT, and it writes the markers to the partitions afterwards (KIP-98), so a log end
    read at once can miss the last marker. The last stable offset (read_committed) reaches the log end
    when the marker is in."""

    def open_transactions() -> dict[str, tuple[int, int]]:
        """(last stable offset, log end offset) of each partition where they differ."""
        stable = _list_offsets(admin, keys, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        end = _list_offsets(admin, keys, OffsetSpec.latest())
        return {f"{t}-{p}": (stable[(t, p)], end[(t, p)]) for t, p in keys if stable[(t, p)] != end[(t, p)]}

    poll_until(
        lambda: None if open_transactions() else True,
        timeout_s,
        lambda: f"transaction markers still missing after {timeout_s:.0f} s: {open_transactions()}",
    )


def _list_offsets(
    admin: AdminClient,
    keys: list[tuple[str, int]],
    spec: OffsetSpec,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets(
        {TopicPartition(topic, partition): spec for topic, partition in keys},
        isolation_level=isolation,
        request_timeout=ADMIN_TIMEOUT_S,
    )
    return {
        (tp.topic, tp.partition): int(future.result(timeout=ADMIN_TIMEOUT_S).offset)
        for tp, future in futures.items()
    }
