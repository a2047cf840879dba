"""Producers that write known data to a test broker with confluent-kafka, and the manifest of it.

The manifest says, per partition, which producer (id, epoch) wrote which offsets with which
sequence numbers, keys, values and headers, and how each transaction ended, so decoded segments
can be checked against what was really sent. Producer ids and epochs come from librdkafka's
statistics (`eos.producer_id`, `eos.producer_epoch`); offsets and timestamps from delivery reports.

`python -m kafka_harness.scenarios --work-dir DIR` runs every scenario on a fresh broker.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from confluent_kafka import KafkaError, Message, Producer

from kafka_harness.broker import KafkaBroker
from kafka_harness.jars import HarnessError

log = logging.getLogger(__name__)

# The smallest segment.bytes Kafka 4.x accepts (KIP-1030); the segmented topic gets ~3.7 MB.
MIN_SEGMENT_BYTES = 1024 * 1024
STATS_INTERVAL_MS = 20
FLUSH_TIMEOUT_S = 60.0
IDENTITY_TIMEOUT_S = 30.0
CODECS = ("gzip", "snappy", "lz4", "zstd")

COMMITTED = "committed"
ABORTED = "aborted"

Header = tuple[str, str | None]


@dataclass(frozen=True)
class TopicSpec:
    """A topic the scenarios write to: the scenario it serves, its partitions and topic configs."""

    name: str
    scenario: str
    partitions: int = 1
    config: dict[str, str] = field(default_factory=dict)


SEGMENTED_TOPIC = TopicSpec(
    "idempotent-segments", "idempotent", config={"segment.bytes": str(MIN_SEGMENT_BYTES)}
)
TRANSACTIONAL_TOPIC = TopicSpec("transactional", "transactional", partitions=2)
PLAIN_TOPIC = TopicSpec("plain", "non-idempotent")
HEADERS_TOPIC = TopicSpec("headers-nulls", "headers-nulls")
CODEC_TOPICS = {codec: TopicSpec(f"codec-{codec}", f"codec-{codec}") for codec in CODECS}
SCENARIO_TOPICS: tuple[TopicSpec, ...] = (
    SEGMENTED_TOPIC,
    TRANSACTIONAL_TOPIC,
    PLAIN_TOPIC,
    HEADERS_TOPIC,
    *CODEC_TOPICS.values(),
)


def partition_key(topic: str, partition: int = 0) -> str:
    """How the manifest names a partition: like its directory, `<topic>-<partition>`."""
    return f"{topic}-{partition}"


@dataclass
class ProducedRecord:
    """One acknowledged record. Keys, values and header values are UTF-8 text (None = null)."""

    offset: int
    sequence: int
    timestamp: int
    key: str | None
    value: str | None
    headers: list[Header] = field(default_factory=list)

    def key_bytes(self) -> bytes | None:
        return None if self.key is None else self.key.encode()

    def value_bytes(self) -> bytes | None:
        return None if self.value is None else self.value.encode()


@dataclass
class ProducerRun:
    """What one producer (id, epoch) wrote to one partition in one logical step, in send order.

    `transactional` is "committed", "aborted" or None (not transactional); `transaction` numbers
    the transactions of the whole manifest, so runs of one transaction share it.
    """

    scenario: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    compression: str
    transactional: str | None = None
    transaction: int | None = None
    transactional_id: str | None = None
    client_id: str = ""
    records: list[ProducedRecord] = field(default_factory=list)

    @property
    def offsets(self) -> list[int]:
        return [r.offset for r in self.records]

    @property
    def sequences(self) -> list[int]:
        return [r.sequence for r in self.records]


@dataclass
class Manifest:
    """Everything the scenarios produced, keyed by partition directory name (`<topic>-<partition>`)."""

    topics: dict[str, TopicSpec] = field(default_factory=dict)
    partitions: dict[str, list[ProducerRun]] = field(default_factory=dict)

    def add(self, run: ProducerRun) -> None:
        self.partitions.setdefault(partition_key(run.topic, run.partition), []).append(run)

    def records_by_offset(self, key: str) -> dict[int, tuple[ProducerRun, ProducedRecord]]:
        """Every acknowledged record of partition `key` (`<topic>-<partition>`) with the run that wrote it."""
        return {r.offset: (run, r) for run in self.partitions.get(key, []) for r in run.records}

    def transactions(self, key: str) -> list[list[ProducerRun]]:
        """The transactions that wrote to partition `key`, in order, each as its runs there."""
        by_number: dict[int, list[ProducerRun]] = {}
        for run in self.partitions.get(key, []):
            if run.transaction is not None:
                by_number.setdefault(run.transaction, []).append(run)
        return [by_number[n] for n in sorted(by_number)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        topics = {name: TopicSpec(**spec) for name, spec in data["topics"].items()}
        partitions = {
            name: [
                ProducerRun(
                    **{k: v for k, v in run.items() if k != "records"},
                    records=[
                        ProducedRecord(**{**r, "headers": [(k, v) for k, v in r["headers"]]})
                        for r in run["records"]
                    ],
                )
                for run in runs
            ]
            for name, runs in data["partitions"].items()
        }
        return cls(topics=topics, partitions=partitions)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class Send:
    """One record to send: partition, key, value, headers (all text; None = null), and optionally
    its CreateTime in ms (None: the producer stamps it with the current time)."""

    partition: int
    key: str | None
    value: str | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None


class Recorder:
    """Builds the Manifest: hands out sequence numbers per (pid, epoch, partition) and transaction numbers."""

    def __init__(self, bootstrap: str, topics: Sequence[TopicSpec] = SCENARIO_TOPICS) -> None:
        self.bootstrap = bootstrap
        self.manifest = Manifest(topics={t.name: t for t in topics})
        self._next_sequence: dict[tuple[int, int, str, int], int] = {}
        self._transactions = 0

    def next_sequence(self, producer_id: int, producer_epoch: int, topic: str, partition: int) -> int:
        """The next sequence: 0, 1, ... in send order per (pid, epoch, partition), as the idempotent
        producer numbers them (across transactions too: librdkafka uses transactions V1, which
        keep the epoch); -1 without a producer id."""
        if producer_id < 0:
            return -1
        key = (producer_id, producer_epoch, topic, partition)
        sequence = self._next_sequence.get(key, 0)
        self._next_sequence[key] = sequence + 1
        return sequence

    def next_transaction(self) -> int:
        self._transactions += 1
        return self._transactions - 1

    def producer(self, scenario: str, client_id: str, **config: Any) -> TrackedProducer:
        return TrackedProducer(self, scenario, client_id, **config)


class TrackedProducer:
    """A confluent-kafka Producer whose every step is recorded as ProducerRuns (pid, epoch, sequences).

    Each step is flushed before `send` returns and `linger.ms` is long, so a step becomes one batch
    per partition unless `batch.num.messages` splits it.
    """

    def __init__(self, recorder: Recorder, scenario: str, client_id: str, **config: Any) -> None:
        self.recorder = recorder
        self.scenario = scenario
        self.client_id = client_id
        self.transactional_id: str | None = config.get("transactional.id")
        self.idempotent = bool(config.get("enable.idempotence")) or self.transactional_id is not None
        self.compression = str(config.get("compression.type", "none"))
        self._stats_seen = 0
        self._eos: dict[str, Any] = {}
        self._transaction: int | None = None
        self._transaction_runs: list[ProducerRun] = []
        self._producer = Producer(
            {
                "bootstrap.servers": recorder.bootstrap,
                "client.id": client_id,
                "linger.ms": 5000,  # flush() sends at once; no batch closes early on its own
                "statistics.interval.ms": STATS_INTERVAL_MS,
                "stats_cb": self._on_stats,
                "logger": logging.getLogger(f"kafka_harness.librdkafka.{client_id}"),
                **config,
            }
        )
        if self.transactional_id is not None:
            self._producer.init_transactions(IDENTITY_TIMEOUT_S)

    def _on_stats(self, raw: str) -> None:
        self._eos = json.loads(raw).get("eos", {})
        self._stats_seen += 1

    def identity(self) -> tuple[int, int]:
        """(producer_id, producer_epoch) from a statistics report built after this call.

        (-1, -1) for a producer without idempotence."""
        if not self.idempotent:
            return -1, -1
        wanted = self._stats_seen + 2  # the next report may have been built before this call
        deadline = time.monotonic() + IDENTITY_TIMEOUT_S
        while True:
            self._producer.poll(STATS_INTERVAL_MS / 1000)
            if self._stats_seen >= wanted and self._eos.get("idemp_state") == "Assigned":
                return int(self._eos["producer_id"]), int(self._eos["producer_epoch"])
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"{self.client_id}: no producer id after {IDENTITY_TIMEOUT_S:.0f} s: {self._eos}"
                )

    def send(self, topic: str, sends: Sequence[Send]) -> list[ProducerRun]:
        """Produce `sends` in order, flush, and record one ProducerRun per partition touched."""
        identity_before = self.identity()
        reports: list[Message | None] = [None] * len(sends)
        errors: list[str] = []

        def on_delivery(index: int) -> Callable[[KafkaError | None, Message], None]:
            def report(err: KafkaError | None, msg: Message) -> None:
                if err is not None:
                    errors.append(f"record {index}: {err}")
                reports[index] = msg

            return report

        for index, item in enumerate(sends):
            self._producer.produce(
                topic,
                key=None if item.key is None else item.key.encode(),
                value=None if item.value is None else item.value.encode(),
                partition=item.partition,
                headers=[(k, None if v is None else v.encode()) for k, v in item.headers] or None,
                on_delivery=on_delivery(index),
                timestamp=0 if item.timestamp is None else item.timestamp,  # 0: librdkafka's "now"
            )
        remaining = self._producer.flush(FLUSH_TIMEOUT_S)
        if remaining or errors or any(r is None for r in reports):
            raise HarnessError(f"{self.client_id}: {remaining} records unsent; errors: {errors[:3]}")
        producer_id, producer_epoch = self.identity()
        if (producer_id, producer_epoch) != identity_before:
            # The sequences recorded below assume one (pid, epoch) for the whole step.
            raise HarnessError(
                f"{self.client_id}: producer id/epoch changed during a step: "
                f"{identity_before} -> {(producer_id, producer_epoch)}"
            )
        runs: dict[int, ProducerRun] = {}
        for item, msg in zip(sends, reports, strict=True):
            assert msg is not None
            run = runs.get(item.partition)
            if run is None:
                run = runs[item.partition] = ProducerRun(
                    scenario=self.scenario,
                    topic=topic,
                    partition=item.partition,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    compression=self.compression,
                    transaction=self._transaction,
                    transactional_id=self.transactional_id,
                    client_id=self.client_id,
                )
            offset = msg.offset()
            if offset is None or offset < 0:
                raise HarnessError(f"{self.client_id}: delivery report without an offset on {topic}")
            run.records.append(
                ProducedRecord(
                    offset=offset,
                    sequence=self.recorder.next_sequence(producer_id, producer_epoch, topic, item.partition),
                    timestamp=msg.timestamp()[1],
                    key=item.key,
                    value=item.value,
                    headers=list(item.headers),
                )
            )
        for run in runs.values():
            offsets = run.offsets
            if offsets != sorted(set(offsets)):
                raise HarnessError(f"{self.client_id}: offsets not in send order on {topic}: {offsets}")
            self.recorder.manifest.add(run)
            self._transaction_runs.append(run)
        return list(runs.values())

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()
        self._transaction = self.recorder.next_transaction()
        self._transaction_runs = []

    def end_transaction(self, commit: bool) -> None:
        """Commit or abort; records written in the transaction were already flushed by `send`."""
        if commit:
            self._producer.commit_transaction(FLUSH_TIMEOUT_S)
        else:
            self._producer.abort_transaction(FLUSH_TIMEOUT_S)
        for run in self._transaction_runs:
            run.transactional = COMMITTED if commit else ABORTED
        self._transaction = None
        self._transaction_runs = []

    def close(self) -> None:
        self._producer.flush(FLUSH_TIMEOUT_S)
        self._producer.close()


def _text(rng: random.Random, size: int) -> str:
    """`size` characters of random hex: incompressible enough that segment sizes stay predictable."""
    return rng.randbytes(size // 2).hex()


def _batch(partition: int, prefix: str, count: int, value: Callable[[int], str | None]) -> list[Send]:
    return [Send(partition, f"{prefix}-{i}", value(i)) for i in range(count)]


def produce_idempotent_segments(recorder: Recorder) -> None:
    """(a) + (f): one idempotent producer fills > 3 segments of 1 MiB in batches of 50 x 2 KB;
    a second instance interleaves with it (two pids), then the first is replaced (restart: new pid).

    Rolls write producer snapshots at segment bases; they hold one, then all three producers.
    """
    topic = SEGMENTED_TOPIC.name
    rng = random.Random(1)
    config = {"enable.idempotence": True, "batch.num.messages": 50}

    def step(producer: TrackedProducer, label: str, number: int) -> None:
        producer.send(topic, _batch(0, f"{label}-{number}", 50, lambda _: _text(rng, 2048)))

    first = recorder.producer("idempotent", "idempotent-1", **config)
    for number in range(16):
        step(first, "first", number)
    second = recorder.producer("second-producer", "idempotent-2", **config)
    for number in range(4):
        step(first, "first", 16 + number)
        step(second, "second", number)
    second.close()
    first.close()
    restarted = recorder.producer("producer-restart", "idempotent-1-restarted", **config)
    for number in range(12):
        step(restarted, "restarted", number)
    restarted.close()


def produce_transactional(recorder: Recorder) -> None:
    """(b): committed and aborted transactions over two partitions, then a second instance with the
    same transactional.id (same pid, epoch + 1) that commits and aborts once more."""
    topic = TRANSACTIONAL_TOPIC.name
    config = {"transactional.id": "kra-transactional", "batch.num.messages": 4}

    def value(i: int) -> str:
        return f"txn-value-{i}"

    plan: list[tuple[bool, list[list[Send]]]] = [
        (True, [_batch(0, "t0-p0", 5, value) + _batch(1, "t0-p1", 3, value), _batch(0, "t0-p0b", 2, value)]),
        (False, [_batch(0, "t1-p0", 3, value) + _batch(1, "t1-p1", 2, value)]),
        (True, [_batch(0, "t2-p0", 3, value)]),
        (False, [_batch(1, "t3-p1", 2, value)]),
    ]
    first = recorder.producer("transactional", "transactional-1", **config)
    for commit, steps in plan:
        first.begin_transaction()
        for sends in steps:
            first.send(topic, sends)
        first.end_transaction(commit)
    first.close()
    # init_transactions fences the first instance: the coordinator bumps the epoch.
    second = recorder.producer("transactional-restart", "transactional-2", **config)
    for commit, sends in [
        (True, _batch(0, "t4-p0", 2, value) + _batch(1, "t4-p1", 2, value)),
        (False, _batch(0, "t5-p0", 3, value)),
    ]:
        second.begin_transaction()
        second.send(topic, sends)
        second.end_transaction(commit)
    second.close()


def produce_non_idempotent(recorder: Recorder) -> None:
    """(c): `enable.idempotence=false` (librdkafka's default): batches carry producer id -1."""
    producer = recorder.producer("non-idempotent", "plain", **{"enable.idempotence": False, "acks": "all"})
    for number in range(3):
        producer.send(PLAIN_TOPIC.name, _batch(0, f"plain-{number}", 10, lambda i: f"plain-value-{i}"))
    producer.close()


def produce_codecs(recorder: Recorder) -> None:
    """(d): one idempotent producer per codec; 20-record steps split into batches of 8, 8 and 4."""
    for codec, spec in CODEC_TOPICS.items():
        producer = recorder.producer(
            spec.scenario,
            spec.name,
            **{"enable.idempotence": True, "compression.type": codec, "batch.num.messages": 8},
        )
        for number in range(3):
            sends = [
                Send(0, f"{codec}-key-{number}-{i}", f"{codec} value {number}/{i} " * 20, (("codec", codec),))
                for i in range(20)
            ]
            producer.send(spec.name, sends)
        producer.close()


def produce_headers_and_nulls(recorder: Recorder) -> None:
    """(e): null and empty keys and values, repeated, null and empty headers, non-ASCII text."""
    producer = recorder.producer("headers-nulls", "headers-nulls", **{"enable.idempotence": True})
    producer.send(
        HEADERS_TOPIC.name,
        [
            Send(0, None, "value-with-null-key"),
            Send(0, "key-with-null-value", None),
            Send(0, None, None),
            Send(0, "", ""),
            Send(0, "with-headers", "v", (("h1", "a"), ("h1", "b"), ("h-null", None), ("h-empty", ""))),
        ],
    )
    producer.send(
        HEADERS_TOPIC.name,
        [
            Send(0, "ключ", "значение", (("ü-header", "ö"),)),
            Send(0, None, "only-header", (("trace-id", "0123456789abcdef"),)),
        ],
    )
    producer.close()


SCENARIOS: tuple[Callable[[Recorder], None], ...] = (
    produce_idempotent_segments,
    produce_transactional,
    produce_non_idempotent,
    produce_codecs,
    produce_headers_and_nulls,
)


def create_scenario_topics(broker: KafkaBroker) -> None:
    for spec in SCENARIO_TOPICS:
        broker.create_topic(spec.name, spec.partitions, spec.config)


def produce_all(bootstrap: str) -> Manifest:
    """Run every scenario against a broker where `create_scenario_topics` already ran."""
    recorder = Recorder(bootstrap)
    for scenario in SCENARIOS:
        started = time.monotonic()
        scenario(recorder)
        log.info("%s took %.1f s", scenario.__name__, time.monotonic() - started)
    return recorder.manifest


class JsonManifest(Protocol):
    """A manifest `record_on_broker` can write: Manifest, CleanManifest."""

    def to_json(self, indent: int | None = None) -> str: ...


ManifestT = TypeVar("ManifestT", bound=JsonManifest)


def record_on_broker(
    work_dir: Path | str,
    produce: Callable[[KafkaBroker], ManifestT],
    manifest_name: str,
    **broker_properties: Any,
) -> tuple[Path, ManifestT]:
    """Start a broker in `work_dir`, run `produce` on it, stop it cleanly; the broker's data dir (its
    log dir) and the manifest `produce` returned, also written to `work_dir/<manifest_name>`."""
    work_dir = Path(work_dir)
    with KafkaBroker(work_dir, **broker_properties) as broker:
        manifest = produce(broker)
    if not broker.clean_shutdown:
        raise HarnessError(f"the broker in {work_dir} did not shut down cleanly; see {broker.server_log}")
    (work_dir / manifest_name).write_text(manifest.to_json(indent=1))
    return broker.log_dir, manifest


def _produce_scenarios(broker: KafkaBroker) -> Manifest:
    create_scenario_topics(broker)
    return produce_all(broker.bootstrap)


def record_scenarios(work_dir: Path | str, **broker_properties: Any) -> tuple[Path, Manifest]:
    """Start a broker in `work_dir`, run every scenario, stop it cleanly; the data dir and the manifest.

    The manifest is also written to `work_dir/manifest.json` for debugging.
    """
    return record_on_broker(work_dir, _produce_scenarios, "manifest.json", **broker_properties)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_harness.scenarios",
        description="Run every producer scenario on a fresh broker and keep its data and manifest.",
    )
    parser.add_argument("--work-dir", type=Path, required=True, help="a new or empty directory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("kafka_harness.librdkafka").setLevel(logging.WARNING)
    try:
        log_dir, _ = record_scenarios(args.work_dir)
    except HarnessError as exc:
        print(f"kafka_harness.scenarios: error: {exc}", file=sys.stderr)
        return 1
    print(f"log dir:  {log_dir}")
    print(f"manifest: {args.work_dir / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
