"""A ZooKeeper-mode Kafka 3.9 broker on 127.0.0.1, with its own ZooKeeper: the last brokers that
write the legacy message formats.

A broker (or topic) whose `log.message.format.version` is below 0.11 writes every append in magic 0
(0.8-0.9) or magic 1 (0.10), converting a client's v2 batches on the way in and refusing idempotent
and transactional ones (UNSUPPORTED_FOR_MESSAGE_FORMAT). The setting counts only while
`inter.broker.protocol.version` is below 3.0 (KIP-724), hence the default of 2.8 here. Raising a
topic's format later (an upgrade) leaves the old entries in place, so one segment holds both.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from kafka_harness.broker import DEFAULT_PROPERTIES, KafkaBroker, free_port, terminate
from kafka_harness.jars import ZK_KAFKA_VERSION, HarnessError, kafka_classpath

ZOOKEEPER_READY_TIMEOUT_S = 60.0
ZOOKEEPER_JVM_OPTS = ("-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# KRaft-only or 4.x names that a 3.9 broker in ZooKeeper mode does not know.
_NOT_IN_ZK_MODE = {
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
}


class ZooKeeperKafkaBroker(KafkaBroker):
    """Kafka 3.9.1 in ZooKeeper mode (broker id `node_id`), and a standalone ZooKeeper for it, both
    under `work_dir`. `log_message_format_version="0.10.2"` (magic 1) or `"0.9.0"` (magic 0) sets
    the broker's default format; topics may set `message.format.version` of their own.

    Starts and stops like `KafkaBroker` (ZooKeeper first, then the broker; the broker, then
    ZooKeeper); a restart keeps both data directories and ZooKeeper's port."""

    def __init__(self, work_dir: Path | str | None = None, *, node_id: int = 1, **properties: Any) -> None:
        properties.setdefault("inter_broker_protocol_version", "2.8")
        super().__init__(work_dir, node_id=node_id, **properties)
        self.zookeeper_dir = self.work_dir / "zookeeper"
        self.zookeeper_log = self.work_dir / "zookeeper.log"
        self.zookeeper_port = 0
        self.zookeeper: subprocess.Popen[bytes] | None = None
        self._zookeeper_stdout: IO[bytes] | None = None

    def server_properties(self) -> dict[str, str]:
        props = {
            "broker.id": str(self.node_id),
            "zookeeper.connect": f"127.0.0.1:{self.zookeeper_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            **{k: v for k, v in DEFAULT_PROPERTIES.items() if k not in _NOT_IN_ZK_MODE},
        }
        props.update(self.extra_properties)
        return props

    def _classpath(self) -> str:
        return kafka_classpath(ZK_KAFKA_VERSION)

    def start(self) -> ZooKeeperKafkaBroker:
        if not self.zookeeper_port:
            self.zookeeper_port = free_port()
        try:
            super().start()
        except BaseException:
            self._stop_zookeeper()
            raise
        return self

    def _prepare(self, java: str, classpath: str, system_props: list[str], restart: bool) -> None:
        """Start ZooKeeper (a ZooKeeper-mode broker has no storage to format)."""
        if self.zookeeper is not None and self.zookeeper.poll() is None:
            return
        self.zookeeper_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "zoo.cfg"
        config.write_text(
            f"dataDir={self.zookeeper_dir}\n"
            f"clientPort={self.zookeeper_port}\n"
            "clientPortAddress=127.0.0.1\n"
            "tickTime=2000\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
        )
        log4j2 = self.work_dir / "zookeeper-log4j2.properties"
        log4j2.write_text(
            (self.work_dir / "log4j2.properties")
            .read_text()
            .replace(str(self.server_log), str(self.zookeeper_log))
        )
        self._zookeeper_stdout = open(self.work_dir / "zookeeper.stdout", "ab")  # noqa: SIM115 (closed in stop())
        self.zookeeper = subprocess.Popen(
            [
                java,
                *ZOOKEEPER_JVM_OPTS,
                f"-Dlog4j2.configurationFile={log4j2}",
                "-cp",
                classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(config),
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._zookeeper_stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + ZOOKEEPER_READY_TIMEOUT_S
        while True:
            code = self.zookeeper.poll()
            if code is not None:
                raise HarnessError(
                    f"ZooKeeper exited with status {code} while starting; see {self.zookeeper_log}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.zookeeper_port), timeout=1.0):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise HarnessError(
                        f"ZooKeeper did not listen on 127.0.0.1:{self.zookeeper_port} in "
                        f"{ZOOKEEPER_READY_TIMEOUT_S:.0f} s; see {self.zookeeper_log}"
                    ) from None
                time.sleep(0.2)

    def stop(self) -> int | None:
        try:
            return super().stop()
        finally:
            self._stop_zookeeper()

    def _stop_zookeeper(self) -> None:
        try:
            if self.zookeeper is not None:
                terminate(self.zookeeper, "ZooKeeper")
        finally:
            self.zookeeper = None
            if self._zookeeper_stdout is not None:
                self._zookeeper_stdout.close()
                self._zookeeper_stdout = None
