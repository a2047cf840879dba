"""Clean logs from a real broker that the audit must pass without findings above `info` (issue 4).

Five topics: one truncated by real time-based retention (a producer whose retained history starts
mid-sequence, and an idle producer whose batches were all deleted but whose state stays in the
producer snapshot, as since Kafka 2.5 / KIP-360); one truncated by DeleteRecords inside a batch
(the only way the broker writes a `log-start-offset-checkpoint` entry: it records a log start
offset only when it lies past the first segment's base offset); an idempotent producer restart
(new producer id); transactional producers re-initialised with the same transactional.id (epoch
bumps, one of them fenced with a transaction open so the coordinator aborts it) and one that
commits and aborts in turn; and an idempotent producer running across many pipelined batches and
segments. The manifest (`CleanManifest`) says what was produced and which offsets were deleted.

`python -m kafka_harness.clean_scenarios --work-dir DIR` records them on a fresh broker.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafka_harness.broker import ADMIN_TIMEOUT_S, KafkaBroker, list_offsets, wait_for_markers
from kafka_harness.jars import HarnessError
from kafka_harness.polling import poll_until
from kafka_harness.scenarios import (
    ABORTED,
    Manifest,
    ProducerRun,
    Recorder,
    Send,
    TopicSpec,
    TrackedProducer,
    partition_key,
    record_on_broker,
)

log = logging.getLogger(__name__)

# KIP-1030 put a 1 MiB floor under `segment.bytes`; its internal twin `internal.segment.bytes`
# (what Kafka's own tests use) has none, so a few KiB of records roll several segments.
SMALL_SEGMENT_BYTES = 16 * 1024
LONG_RUN_SEGMENT_BYTES = 64 * 1024
# Retention deletes a segment once its largest record timestamp is older than `retention.ms`.
# Records written with a CreateTime BACKDATE_MS in the past are therefore deleted on the next
# retention pass, while records stamped now are kept: deterministic, with no waiting for the clock.
# BACKDATE_MS stays far below `producer.id.expiration.ms` (1 day), so no producer state expires.
RETENTION_MS = 10 * 60 * 1000
BACKDATE_MS = 60 * 60 * 1000
# `segment.ms` rolls when a batch's timestamp is this far past the segment's first one, so the
# first batch stamped now opens a fresh segment instead of keeping a backdated one alive.
ROLL_MS = 5 * 60 * 1000
DELETION_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.2

# Broker settings that make retention act within a second instead of minutes.
BROKER_PROPERTIES: dict[str, Any] = {
    "log.initial.task.delay.ms": 0,  # the first retention pass otherwise waits 30 s after start-up
    "log.retention.check.interval.ms": 250,
    "log.segment.delete.delay.ms": 0,  # no `.deleted` files are left behind for the dump
    "log.flush.start.offset.checkpoint.interval.ms": 500,
}

RETENTION_TOPIC = TopicSpec(
    "clean-retention",
    "retention",
    config={
        "internal.segment.bytes": str(SMALL_SEGMENT_BYTES),
        "segment.ms": str(ROLL_MS),
        "retention.ms": str(RETENTION_MS),
    },
)
DELETE_RECORDS_TOPIC = TopicSpec(
    "clean-delete-records", "delete-records", config={"internal.segment.bytes": str(SMALL_SEGMENT_BYTES)}
)
RESTART_TOPIC = TopicSpec("clean-idempotent-restart", "idempotent-restart")
LONG_RUN_TOPIC = TopicSpec(
    "clean-idempotent-long",
    "idempotent-long-run",
    partitions=2,
    config={"internal.segment.bytes": str(LONG_RUN_SEGMENT_BYTES)},
)
TRANSACTIONS_TOPIC = TopicSpec("clean-transactions", "transactions", partitions=2)
CLEAN_TOPICS: tuple[TopicSpec, ...] = (
    RETENTION_TOPIC,
    DELETE_RECORDS_TOPIC,
    RESTART_TOPIC,
    LONG_RUN_TOPIC,
    TRANSACTIONS_TOPIC,
)

# Client ids name the producer instances in the manifest (ProducerRun.client_id).
RETAINED_PRODUCER = "retention-retained"
IDLE_PRODUCER = "retention-idle"
DELETE_RECORDS_PRODUCER = "delete-records"
RESTART_BEFORE = "restart-before"
RESTART_AFTER = "restart-after"
LONG_RUN_PRODUCER = "long-run"
REINIT_TRANSACTIONAL_ID = "clean-reinit"
REINIT_INSTANCES = 3
MIXED_TRANSACTIONAL_ID = "clean-mixed"
MIXED_PRODUCER = MIXED_TRANSACTIONAL_ID
MIXED_OUTCOMES = (True, False, True, False, False, True)  # commit?
FENCED_TRANSACTIONAL_ID = "clean-fenced"
FENCED_ZOMBIE = f"{FENCED_TRANSACTIONAL_ID}-zombie"
FENCED_SUCCESSOR = f"{FENCED_TRANSACTIONAL_ID}-successor"


def reinit_client_id(instance: int) -> str:
    """The client id of instance `instance` (0, 1, ...) of the re-initialised transactional.id."""
    return f"{REINIT_TRANSACTIONAL_ID}-{instance}"


@dataclass
class PartitionOutcome:
    """What the broker reported for a partition just before it stopped (ListOffsets).

    `deleted_offsets` are the acknowledged offsets below `log_start_offset`. Where records were
    deleted, `log_start_offset_at_deletion` and `log_end_offset_at_deletion` are the offsets seen
    once the deletion was done; records at or past the latter were produced after it.
    """

    log_start_offset: int
    log_end_offset: int
    deleted_offsets: list[int] = field(default_factory=list)
    log_start_offset_at_deletion: int | None = None
    log_end_offset_at_deletion: int | None = None


@dataclass
class CleanManifest:
    """What the clean scenarios produced (`produced`, as in kafka_harness.scenarios) and what the
    broker reported at the end per partition (`outcomes`), both keyed `<topic>-<partition>`."""

    produced: Manifest
    outcomes: dict[str, PartitionOutcome] = field(default_factory=dict)

    def runs_of(self, client_id: str) -> list[ProducerRun]:
        """Every ProducerRun of one producer instance, in the order they were written."""
        return [
            run for runs in self.produced.partitions.values() for run in runs if run.client_id == client_id
        ]

    def to_json(self, indent: int | None = None) -> str:
        outcomes = {key: asdict(outcome) for key, outcome in self.outcomes.items()}
        return json.dumps({"produced": self.produced.to_dict(), "outcomes": outcomes}, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> CleanManifest:
        data = json.loads(text)
        return cls(
            produced=Manifest.from_dict(data["produced"]),
            outcomes={key: PartitionOutcome(**outcome) for key, outcome in data["outcomes"].items()},
        )


def _values(
    rng: random.Random, partition: int, prefix: str, count: int, size: int, timestamp: int | None = None
) -> list[Send]:
    """`count` records of `size` random hex characters (incompressible: segment sizes stay predictable),
    with the CreateTime `timestamp` (None: now)."""
    return [
        Send(partition, f"{prefix}-{i}", rng.randbytes(size // 2).hex(), timestamp=timestamp)
        for i in range(count)
    ]


def _now_ms() -> int:
    return int(time.time() * 1000)


def produce_retention(broker: KafkaBroker, recorder: Recorder) -> tuple[int, int]:
    """A retained and an idle producer write backdated batches (~5 KB: three per 16 KiB segment),
    the retained one goes on with batches stamped now (a fresh segment, by `segment.ms`), retention
    deletes every backdated segment, then the retained producer writes more under the same id.

    Returns the (log start, log end) offsets seen once the deletion was done.
    """
    topic = RETENTION_TOPIC.name
    rng = random.Random(4)
    config = {"enable.idempotence": True, "batch.num.messages": 10}
    retained = recorder.producer(RETENTION_TOPIC.scenario, RETAINED_PRODUCER, **config)
    idle = recorder.producer(RETENTION_TOPIC.scenario, IDLE_PRODUCER, **config)
    backdated = _now_ms() - BACKDATE_MS
    for step in range(8):
        retained.send(topic, _values(rng, 0, f"retained-old-{step}", 10, 500, backdated + step))
        if step < 3:
            idle.send(topic, _values(rng, 0, f"idle-{step}", 10, 500, backdated + step))
    idle.close()
    first_kept = retained.send(topic, _values(rng, 0, "retained-kept-0", 10, 500))[0].offsets[0]
    retained.send(topic, _values(rng, 0, "retained-kept-1", 10, 500))
    at_deletion = wait_for_deletion(broker, topic, 0, first_kept)
    for step in range(3):
        retained.send(topic, _values(rng, 0, f"retained-after-{step}", 10, 500))
    retained.close()
    return at_deletion


def produce_delete_records(broker: KafkaBroker, recorder: Recorder) -> tuple[int, int]:
    """An idempotent producer writes six ~5 KB batches (two 16 KiB segments), DeleteRecords moves
    the log start offset into the middle of its fifth batch, the retention pass deletes the segment
    wholly below it, and the producer writes two batches more.

    Returns the (log start, log end) offsets seen once the deletion was done.
    """
    topic = DELETE_RECORDS_TOPIC.name
    rng = random.Random(8)
    producer = recorder.producer(
        DELETE_RECORDS_TOPIC.scenario,
        DELETE_RECORDS_PRODUCER,
        **{"enable.idempotence": True, "batch.num.messages": 10},
    )
    runs = [producer.send(topic, _values(rng, 0, f"before-{step}", 10, 500))[0] for step in range(6)]
    middle = runs[4].offsets[len(runs[4].offsets) // 2]
    tp = TopicPartition(topic, 0, middle)
    broker.admin().delete_records([tp], request_timeout=ADMIN_TIMEOUT_S, operation_timeout=ADMIN_TIMEOUT_S)[
        tp
    ].result(timeout=ADMIN_TIMEOUT_S)
    at_deletion = wait_for_deletion(broker, topic, 0, middle)
    for step in range(2):
        producer.send(topic, _values(rng, 0, f"after-{step}", 10, 500))
    producer.close()
    return at_deletion


def wait_for_deletion(
    broker: KafkaBroker, topic: str, partition: int, log_start_offset: int
) -> tuple[int, int]:
    """Wait until the broker's log start offset reached `log_start_offset` and every segment wholly
    below it is deleted from disk. Returns the (log start, log end) offsets then."""
    directory = broker.log_dir / partition_key(topic, partition)

    def segments_below(start: int) -> int:
        bases = sorted(int(path.name.split(".")[0]) for path in directory.glob("*.log"))
        whole = sum(1 for following in bases[1:] if following <= start)  # next segment starts by `start`
        return whole + len(list(directory.glob("*.deleted")))

    def offsets() -> tuple[int, int]:
        return list_offsets(broker.admin(), [(topic, partition)])[(topic, partition)]

    def deleted() -> tuple[int, int] | None:
        start, end = offsets()
        return None if start < log_start_offset or segments_below(start) else (start, end)

    def failure() -> str:
        start = offsets()[0]
        return (
            f"{topic}-{partition}: log start offset {start} (waiting for {log_start_offset}) and "
            f"{segments_below(start)} segment files below it after {DELETION_TIMEOUT_S:.0f} s; "
            f"see {broker.server_log}"
        )

    start, end = poll_until(deleted, DELETION_TIMEOUT_S, failure, POLL_INTERVAL_S)
    if start != log_start_offset:
        # Retention only: a backdated batch shared a segment with the first fresh one (no roll).
        raise HarnessError(
            f"{topic}-{partition}: the log start offset moved to {start}, not to {log_start_offset}; "
            f"see {broker.server_log}"
        )
    return start, end


def produce_idempotent_restart(recorder: Recorder) -> None:
    """An idempotent producer writes five steps and closes; a new instance (new producer id, sequences
    from 0 again) writes five more. Steps of 20 records go out as two pipelined batches."""
    topic = RESTART_TOPIC.name
    rng = random.Random(5)
    config = {"enable.idempotence": True, "batch.num.messages": 10}
    for client_id in (RESTART_BEFORE, RESTART_AFTER):
        producer = recorder.producer(RESTART_TOPIC.scenario, client_id, **config)
        for step in range(5):
            producer.send(topic, _values(rng, 0, f"{client_id}-{step}", 20, 100))
        producer.close()


def produce_long_run(recorder: Recorder) -> None:
    """One idempotent producer, 16 steps of 40 records per partition in batches of 8: five batches in
    flight at once per partition, 80 batches and three 64 KiB segments per partition."""
    topic = LONG_RUN_TOPIC.name
    rng = random.Random(6)
    producer = recorder.producer(
        LONG_RUN_TOPIC.scenario, LONG_RUN_PRODUCER, **{"enable.idempotence": True, "batch.num.messages": 8}
    )
    for step in range(16):
        producer.send(
            topic,
            [
                send
                for p in range(LONG_RUN_TOPIC.partitions)
                for send in _values(rng, p, f"long-{step}-p{p}", 40, 200)
            ],
        )
    producer.close()


def _transaction_sends(rng: random.Random, label: str, counts: tuple[int, int]) -> list[Send]:
    """`counts[p]` small records for partition p of the transactions topic."""
    return [send for p, count in enumerate(counts) for send in _values(rng, p, f"{label}-p{p}", count, 60)]


def _transaction(producer: TrackedProducer, commit: bool, sends: list[Send]) -> None:
    producer.begin_transaction()
    producer.send(TRANSACTIONS_TOPIC.name, sends)
    producer.end_transaction(commit)


def produce_transactions(recorder: Recorder) -> None:
    """Three instances of one transactional.id (each init_transactions bumps the epoch, same producer
    id), each committing then aborting; a producer that commits and aborts in turn; and a zombie
    fenced with a transaction open: its successor's init_transactions makes the coordinator abort
    that transaction (ABORT markers at the zombie's epoch + 1; the successor gets epoch + 2)."""
    scenario = TRANSACTIONS_TOPIC.scenario
    rng = random.Random(7)
    config = {"batch.num.messages": 4}
    for instance in range(REINIT_INSTANCES):
        producer = recorder.producer(
            scenario, reinit_client_id(instance), **{"transactional.id": REINIT_TRANSACTIONAL_ID, **config}
        )
        _transaction(producer, True, _transaction_sends(rng, f"reinit-{instance}-commit", (3, 2)))
        _transaction(producer, False, _transaction_sends(rng, f"reinit-{instance}-abort", (2, 0)))
        producer.close()

    mixed = recorder.producer(
        scenario, MIXED_PRODUCER, **{"transactional.id": MIXED_TRANSACTIONAL_ID, **config}
    )
    for number, commit in enumerate(MIXED_OUTCOMES):
        counts = (number % 3 + 1, 5 - number % 4)
        _transaction(mixed, commit, _transaction_sends(rng, f"mixed-{number}", counts))
    mixed.close()

    zombie = recorder.producer(
        scenario, FENCED_ZOMBIE, **{"transactional.id": FENCED_TRANSACTIONAL_ID, **config}
    )
    zombie.begin_transaction()
    open_runs = zombie.send(TRANSACTIONS_TOPIC.name, _transaction_sends(rng, "zombie", (4, 3)))
    successor = recorder.producer(
        scenario, FENCED_SUCCESSOR, **{"transactional.id": FENCED_TRANSACTIONAL_ID, **config}
    )
    for run in open_runs:
        run.transactional = ABORTED  # by the coordinator, when the successor's init fenced the zombie
    try:
        zombie.close()  # close() tries to abort the open transaction: the zombie learns it was fenced
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._FENCED:
            raise
    log.info("%s was fenced by %s, as intended", FENCED_ZOMBIE, FENCED_SUCCESSOR)
    _transaction(successor, True, _transaction_sends(rng, "successor", (2, 2)))
    successor.close()


def produce_clean(broker: KafkaBroker) -> CleanManifest:
    """Create the clean topics on `broker`, run every clean scenario and report the final offsets."""
    for spec in CLEAN_TOPICS:
        broker.create_topic(spec.name, spec.partitions, spec.config)
    recorder = Recorder(broker.bootstrap, CLEAN_TOPICS)
    started = time.monotonic()
    at_deletion = {
        RETENTION_TOPIC.name: produce_retention(broker, recorder),
        DELETE_RECORDS_TOPIC.name: produce_delete_records(broker, recorder),
    }
    produce_idempotent_restart(recorder)
    produce_long_run(recorder)
    produce_transactions(recorder)
    log.info("the clean scenarios took %.1f s", time.monotonic() - started)
    manifest = CleanManifest(recorder.manifest)
    keys = [(spec.name, p) for spec in CLEAN_TOPICS for p in range(spec.partitions)]
    wait_for_markers(broker.admin(), keys)
    for (topic, partition), (start, end) in list_offsets(broker.admin(), keys).items():
        key = partition_key(topic, partition)
        outcome = PartitionOutcome(
            log_start_offset=start,
            log_end_offset=end,
            deleted_offsets=sorted(o for o in recorder.manifest.records_by_offset(key) if o < start),
        )
        if topic in at_deletion:
            outcome.log_start_offset_at_deletion, outcome.log_end_offset_at_deletion = at_deletion[topic]
        manifest.outcomes[key] = outcome
    return manifest


def record_clean_scenarios(work_dir: Path | str) -> tuple[Path, CleanManifest]:
    """Start a broker in `work_dir`, run the clean scenarios, stop it cleanly; its data dir (the log
    dir) and the manifest, also written to `work_dir/clean-manifest.json`."""
    return record_on_broker(work_dir, produce_clean, "clean-manifest.json", **BROKER_PROPERTIES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_harness.clean_scenarios",
        description="Record clean logs (retention, restarts, epoch bumps, aborts) on a fresh broker.",
    )
    parser.add_argument("--work-dir", type=Path, required=True, help="a new or empty directory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("kafka_harness.librdkafka").setLevel(logging.WARNING)
    started = time.monotonic()
    try:
        log_dir, _ = record_clean_scenarios(args.work_dir)
    except HarnessError as exc:
        print(f"kafka_harness.clean_scenarios: error: {exc}", file=sys.stderr)
        return 1
    print(f"log dir:  {log_dir}")
    print(f"manifest: {args.work_dir / 'clean-manifest.json'}")
    print(f"took {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
