"""Tiered storage (KIP-405) on a real Kafka 4.3.1 broker: the log directory holds only the newest
segments, and the offsets below them are in remote storage, not deleted.

The broker runs Kafka's own `LocalTieredStorage` plugin (the remote tier is a directory here, a bucket
in production): each closed segment is copied there, then deleted locally once past
`local.retention.bytes`. The partition's log start offset stays 0 (the log-start-offset checkpoint
keeps it for every log with remote storage), while its first local segment starts thousands of
offsets later. A dump of the log directory is what an operator has; read as a log on its own, every
producer's history starts mid-sequence and every early ack lies below the log start. That is
explained, never loss, and the audit says where the data is: in remote storage.

The dump's `__remote_log_metadata` says which remote segments hold which offsets (the remote log
metadata manager's events, KIP-405). On partition 1 the test deletes the records below
`DELETED_BELOW` (DeleteRecords): the broker's log start moves there, the remote log manager deletes
the remote segments wholly below it, and their events end in DELETE_SEGMENT_FINISHED. An ack below
the local start is in remote storage when a copied remote segment holds it, and lost from the remote
tier when none does although segments on both sides were copied.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Producer, TopicPartition
from pyspark.sql import functions as F

from audit_rules.pipeline import Bronze, audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker, tiered_storage_properties
from kafka_harness.dump_log_segments import run_dump_log_segments
from kafka_harness.polling import poll_until
from kafka_log_decoder.checkpoints import decode_offset_checkpoint
from kafka_log_decoder.dump import run_dump
from kafka_log_decoder.remote_log_metadata import decode_remote_log_metadata
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import read_log_segment
from tests.table_rows import above_info, kinds_above_info

pytestmark = pytest.mark.integration

TOPIC = "tiered"
PARTITIONS = 2
WAVES, PER_WAVE = 12, 500
# Partition 1's records below this offset are deleted (DeleteRecords) once the remote tier holds them;
# it lies inside a remote segment, which stays (segments of ~250 offsets: a second of writes each).
DELETED_BELOW = 1100
# LocalTieredStorage names a remote segment `<base offset, 20 digits>-<segment id>.log`.
REMOTE_SEGMENT = re.compile(r"^(\d{20})-[A-Za-z0-9_-]{22}\.log$")
# A record of `kafka-dump-log.sh --remote-log-metadata-decoder`: its offset and the event's toString().
DUMPED_EVENT = re.compile(
    r"^\| offset: (?P<offset>\d+) .* payload: (?P<event>RemoteLogSegmentMetadata(?:Update)?)\{"
    r"remoteLogSegmentId=RemoteLogSegmentId\{"
    r"topicIdPartition=(?P<topic_id>[^:]+):(?P<topic>.+)-(?P<partition>\d+), "
    r"id=(?P<segment_id>[^}]+)\}, (?P<fields>.*)\}$",
    re.MULTILINE,
)


class TieredLog(NamedTuple):
    log_dir: Path
    remote_dir: Path
    acks: Path


def local_start(log_dir: Path, partition: int) -> int:
    return min(int(p.stem) for p in (log_dir / f"{TOPIC}-{partition}").glob("*.log"))


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> TieredLog:
    work = tmp_path_factory.mktemp("tiered-broker")
    remote = work / "remote"
    remote.mkdir()
    acks: list[dict[str, Any]] = []
    # The log start offset checkpoint written every second (default a minute) for the DeleteRecords below.
    properties = {
        **tiered_storage_properties(remote),
        "log.flush.start.offset.checkpoint.interval.ms": "1000",
    }
    with KafkaBroker(work, **properties) as broker:
        broker.create_topic(
            TOPIC,
            PARTITIONS,
            # A segment per second of writes (segment.bytes may not go below 1 MiB), each copied to the
            # remote tier when closed and then deleted locally.
            config={
                "remote.storage.enable": True,
                "segment.ms": 1000,
                "local.retention.bytes": 1,
                "retention.ms": -1,
            },
        )
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )

        def acked(err: Any, msg: Any) -> None:
            assert err is None, err
            acks.append(
                {
                    "topic": TOPIC,
                    "partition": msg.partition(),
                    "offset": msg.offset(),
                    "key": msg.key().decode(),
                }
            )

        for wave in range(WAVES):
            for i in range(wave * PER_WAVE, (wave + 1) * PER_WAVE):
                producer.produce(
                    TOPIC, key=f"k{i}".encode(), value=b"v" * 60, partition=i % PARTITIONS, on_delivery=acked
                )
                producer.poll(0)
            assert producer.flush(60) == 0
            time.sleep(1.1)
        # Wait until the remote log manager has copied the closed segments and retention has deleted
        # them locally: only the active segment is left.
        poll_until(
            lambda: all(
                local_start(broker.log_dir, p) > 0
                and len(list((broker.log_dir / f"{TOPIC}-{p}").glob("*.log"))) == 1
                for p in range(PARTITIONS)
            ),
            90,
            lambda: f"the tiered topic's segments were not moved to {remote} in 90 s",
            interval_s=0.5,
        )
        # DeleteRecords on partition 1: the remote segments wholly below DELETED_BELOW are deleted from
        # the remote tier (their events go to DELETE_SEGMENT_FINISHED) and the log start moves up.
        (deleted,) = broker.admin().delete_records([TopicPartition(TOPIC, 1, DELETED_BELOW)]).values()
        assert deleted.result(30).low_watermark == DELETED_BELOW
        # Every remote segment wholly below it gone (the remote log manager may delete them over several
        # rounds: a round's deletions all finished is not all of them).
        poll_until(
            lambda: (
                _below_deleted(sorted(int(p.name[:20]) for p in remote_segments(remote, 1)))
                and _deletions_all_finished(broker.log_dir)
                and _checkpointed_start(broker.log_dir, 1) == DELETED_BELOW
            ),
            120,
            lambda: f"partition 1's remote segments below {DELETED_BELOW} were not deleted in 120 s",
            interval_s=0.5,
        )
    ledger = work / "acks.jsonl"
    ledger.write_text("".join(json.dumps(a) + "\n" for a in acks))
    return TieredLog(broker.log_dir, remote, ledger)


def _below_deleted(bases: list[int]) -> bool:
    """Of a partition's remote segment bases (sorted): some deleted, and at most the first lies at or
    below DELETED_BELOW (the segment holding it; every one wholly below it is gone)."""
    return bool(bases) and bases[0] > 0 and (len(bases) < 2 or bases[1] > DELETED_BELOW)


def _deletions_all_finished(log_dir: Path) -> bool:
    """The broker's `__remote_log_metadata` (as written so far) records some segment deletion, and every
    deletion it started has finished."""
    states = Counter(e["state"] for e in metadata_events(log_dir).values())
    return states["DELETE_SEGMENT_FINISHED"] == states["DELETE_SEGMENT_STARTED"] > 0


def _checkpointed_start(log_dir: Path, partition: int) -> int | None:
    path = log_dir / "log-start-offset-checkpoint"
    entries, _ = decode_offset_checkpoint(path.read_bytes(), str(path))
    return next((e.offset for e in entries if (e.topic, e.partition) == (TOPIC, partition)), None)


def remote_segments(remote: Path, partition: int) -> list[Path]:
    (directory,) = remote.glob(f"kafka-tiered-storage/{TOPIC}-{partition}-*")
    return sorted(p for p in directory.iterdir() if REMOTE_SEGMENT.match(p.name))


class Audited(NamedTuple):
    findings: list[dict[str, Any]]
    summary: dict[int, dict[str, Any]]  # partition -> its partition_summary row


def audited(bronze: Bronze) -> Audited:
    result = audit(bronze, load_profile())
    stored = result.findings.where(f"topic = '{TOPIC}'").localCheckpoint()
    summary = result.summary_of(stored).where(f"topic = '{TOPIC}'").collect()
    return Audited([r.asDict() for r in stored.collect()], {r["partition"]: r.asDict() for r in summary})


@pytest.fixture(scope="module")
def bronze(spark: Any, tiered: TieredLog, tmp_path_factory: pytest.TempPathFactory) -> Bronze:
    out = tmp_path_factory.mktemp("tiered-audit")
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath("tiered", str(tiered.log_dir))],
            output=str(out),
            acks=[LabeledPath(None, str(tiered.acks))],
        ),
    )
    return read_bronze(spark, str(out))


def test_the_log_directory_holds_only_the_newest_segment_and_the_rest_is_remote(tiered: TieredLog) -> None:
    """The precondition: the log start offset checkpoint says 0 (partition 1: DELETED_BELOW, after
    DeleteRecords), the local log starts far above it, and the remote tier holds real segments (our
    decoder reads them) with every offset in between (partition 1: from the segment holding
    DELETED_BELOW)."""
    path = tiered.log_dir / "log-start-offset-checkpoint"
    entries, errors = decode_offset_checkpoint(path.read_bytes(), str(path))
    assert errors == []
    checkpoint = {(e.topic, e.partition): e.offset for e in entries}
    assert [checkpoint[(TOPIC, p)] for p in range(PARTITIONS)] == [0, DELETED_BELOW]
    for partition in range(PARTITIONS):
        start = local_start(tiered.log_dir, partition)
        assert start > DELETED_BELOW + 500
        offsets = [
            offset
            for segment in remote_segments(tiered.remote_dir, partition)
            for b in read_log_segment(segment)
            if isinstance(b, BatchHeader)
            for offset in range(b.base_offset, b.last_offset + 1)
        ]
        first = offsets[0]
        assert first == 0 if partition == 0 else 0 < first <= DELETED_BELOW
        assert offsets[: start - first] == list(range(first, start))


def test_offsets_in_remote_storage_are_explained_and_said_to_be_there(
    tiered: TieredLog, bronze: Bronze
) -> None:
    """Every ack below the local start lies in a remote segment that `__remote_log_metadata` lists as
    copied, and the finding says which offsets those segments hold; partition 1's acks below its
    DeleteRecords offset were deleted (below the broker's log start), the rest are in remote storage."""
    found, summary = audited(bronze)
    assert kinds_above_info(found) == Counter()
    by_kind = Counter((f["kind"], f["partition"]) for f in found)
    assert by_kind == Counter(
        {
            ("HISTORY_TRUNCATED_BY_RETENTION", 0): 1,
            ("HISTORY_TRUNCATED_BY_RETENTION", 1): 1,
            ("ACKED_RECORD_RETENTION", 0): 1,
            ("ACKED_RECORD_RETENTION", 1): 2,
        }
    )
    acked = {
        (f["partition"], f["first_offset"], f["last_offset"]): f["message"]
        for f in found
        if f["kind"] == "ACKED_RECORD_RETENTION"
    }
    starts = [local_start(tiered.log_dir, p) for p in range(PARTITIONS)]
    # Partition 1's remote tier now starts at the segment holding DELETED_BELOW.
    tier_start = [0, min(int(p.name[:20]) for p in remote_segments(tiered.remote_dir, 1))]
    assert sorted(acked) == [
        (0, 0, starts[0] - 1),
        (1, 0, DELETED_BELOW - 1),
        (1, DELETED_BELOW, starts[1] - 1),
    ]
    for (partition, first, _), message in acked.items():
        if (partition, first) == (1, 0):
            assert (
                f"in remote storage from offset {DELETED_BELOW} and deleted by retention below it" in message
            )
            continue
        held = re.search(
            r"KIP-405: (\d+) remote segment\(s\) that __remote_log_metadata lists as copied hold "
            r"offsets (\d+)-(\d+)\)",
            message,
        )
        assert held and "in remote storage (tiered storage" in message, message
        segments, low, high = map(int, held.groups())
        assert low == tier_start[partition] and high >= starts[partition] - 1
        assert segments == len(
            [p for p in remote_segments(tiered.remote_dir, partition) if int(p.name[:20]) < starts[partition]]
        )
    for f in found:
        assert "remote storage" in f["message"], f["message"]
    # The partition summary: the local log's start, the broker's (remote) one, the topic id.
    topic_id = (
        (tiered.log_dir / f"{TOPIC}-0" / "partition.metadata").read_text().split("topic_id:")[1].strip()
    )
    for partition in range(PARTITIONS):
        row = summary[partition]
        assert row["log_start_offset"] == local_start(tiered.log_dir, partition)
        assert (row["remote_log_start"], row["topic_id"], row["verdict"]) == (
            [0, DELETED_BELOW][partition],
            topic_id,
            "info",
        )


def test_without_evidence_of_a_remote_tier_the_same_gap_is_retention(bronze: Bronze) -> None:
    """The wording follows the evidence: the same partitions without the log directory's remote-storage
    traces (the remote log manager's index cache, `__remote_log_metadata`) read as retention."""
    traces = (F.col("topic") == "__remote_log_metadata") | F.col("file").endswith("/remote-log-index-cache")
    plain = dataclasses.replace(
        bronze,
        files=bronze.files.where(~traces),
        batches=bronze.batches.where(~traces),
        partition_state=bronze.partition_state.where(~traces),
        remote_log_metadata=None,
    )
    found, summary = audited(plain)
    assert [summary[p]["remote_log_start"] for p in range(PARTITIONS)] == [None] * PARTITIONS
    assert kinds_above_info(found) == Counter()
    assert found and all(
        "deleted by retention" in f["message"] and "remote" not in f["message"] for f in found
    )


def metadata_events(log_dir: Path) -> dict[int, dict[str, Any]]:
    """The decoder's events of the `__remote_log_metadata` segments, by offset."""
    return {
        item.offset: decode_remote_log_metadata(item.value or b"")
        for segment in sorted(log_dir.glob("__remote_log_metadata-*/*.log"))
        for item in read_log_segment(segment, records=True)
        if isinstance(item, Record)
    }


def test_ingest_writes_every_remote_log_metadata_event_and_the_deletions_are_real(
    tiered: TieredLog, bronze: Bronze
) -> None:
    """The `remote_log_metadata` table holds one row per event, equal to the decoder's (which the test
    below compares with Kafka's own tool); on partition 1 each remote segment wholly below
    DELETED_BELOW ends DELETE_SEGMENT_FINISHED and its file is gone, and every other ends copied."""
    assert bronze.remote_log_metadata is not None
    rows = {r["offset"]: r.asDict() for r in bronze.remote_log_metadata.collect()}
    events = metadata_events(tiered.log_dir)
    assert sorted(rows) == sorted(events) and events
    for offset, event in events.items():
        row = rows[offset]
        assert row["error"] is None and (row["topic"], row["partition"]) == ("__remote_log_metadata", 0)
        assert row["file"].endswith(".log") and row["batch_position"] >= 0
        assert (
            row["event"],
            row["segment_topic"],
            row["segment_partition"],
            row["topic_id"],
            row["segment_id"],
            row["start_offset"],
            row["end_offset"],
            row["state"],
            row["broker_id"],
            row["event_timestamp_ms"],
            row["segment_size_bytes"],
        ) == (
            event["event"],
            event["topic"],
            event["partition"],
            event["topic_id"],
            event.get("segment_id"),
            event.get("start_offset"),
            event.get("end_offset"),
            event["state"],
            event["broker_id"],
            event["event_timestamp_ms"],
            event.get("segment_size_bytes"),
        )
    last_state = {}
    offsets = {}
    for offset in sorted(events):
        event = events[offset]
        last_state[(event["partition"], event["segment_id"])] = event["state"]
        if event["event"] == "segment":
            offsets[(event["partition"], event["segment_id"])] = (event["start_offset"], event["end_offset"])
    on_disk = {
        (p, path.stem.split("-", 1)[1])
        for p in range(PARTITIONS)
        for path in remote_segments(tiered.remote_dir, p)
    }
    deleted = {key for key, (_, end) in offsets.items() if key[0] == 1 and end < DELETED_BELOW}
    assert len(deleted) >= 3
    for key, state in last_state.items():
        assert state == ("DELETE_SEGMENT_FINISHED" if key in deleted else "COPY_SEGMENT_FINISHED"), key
        assert (key in on_disk) == (key not in deleted)


def test_an_ack_in_no_copied_remote_segment_is_lost_from_the_remote_tier(
    tiered: TieredLog, bronze: Bronze
) -> None:
    """Faults in the dump's remote log metadata, audited at once. On partition 0 a remote segment in the
    middle of the tier ends DELETE_SEGMENT_FINISHED (an event appended after the others): its offsets
    are in neither the local log nor a copied segment while segments on both sides were copied, so the
    remote tier lost them (REMOTE_SEGMENT_MISSING, naming the segment) and with them the acknowledged
    records there (ACKED_RECORD_MISSING). On partition 1 the events of the last copied
    segment are left out, as in metadata dumped before that copy: its acks lie past the remote tier's
    end, which the broker's rule explains (info); and its first copied segment, the one holding the
    broker's log start, goes to DELETE_SEGMENT_STARTED, as remote retention does before it moves the
    log start on: its acks from the log start up were deleted from remote storage (info)."""
    assert bronze.remote_log_metadata is not None
    events = metadata_events(tiered.log_dir)
    last_states = {events[o]["segment_id"]: events[o]["state"] for o in sorted(events)}
    copied = sorted(
        (e["start_offset"], e["end_offset"], e["partition"], e["segment_id"])
        for e in events.values()
        if e["event"] == "segment" and last_states[e["segment_id"]] == "COPY_SEGMENT_FINISHED"
    )
    starts = [local_start(tiered.log_dir, p) for p in range(PARTITIONS)]
    tier0 = [c for c in copied if c[2] == 0 and c[1] < starts[0]]
    hole_start, hole_end, _, hole_id = tier0[len(tier0) // 2]
    last1 = max(c for c in copied if c[2] == 1)
    first1 = min(c for c in copied if c[2] == 1)
    assert last1[1] == starts[1] - 1 and first1[0] < DELETED_BELOW <= first1[1]
    metadata = bronze.remote_log_metadata

    def last_state(segment_id: str, state: str, offset: int) -> Any:
        return (
            metadata.where(F.col("segment_id") == segment_id)
            .orderBy("offset")
            .limit(1)
            .withColumns(
                {
                    "event": F.lit("segment_update"),
                    "state": F.lit(state),
                    "start_offset": F.lit(None).cast("long"),
                    "end_offset": F.lit(None).cast("long"),
                    "offset": F.lit(offset).cast("long"),
                }
            )
        )

    faulty = dataclasses.replace(
        bronze,
        remote_log_metadata=renumbered(
            metadata.where(F.col("segment_id") != last1[3])
            .unionByName(last_state(hole_id, "DELETE_SEGMENT_FINISHED", max(events) + 1))
            .unionByName(last_state(first1[3], "DELETE_SEGMENT_STARTED", max(events) + 2))
        ),
    )
    found, summary = audited(faulty)
    above = sorted(above_info(found), key=lambda f: str(f["kind"]))
    # The hole itself (from the metadata alone) and the acknowledged records in it (from the ledger).
    assert [(f["kind"], f["partition"], f["first_offset"], f["last_offset"]) for f in above] == [
        ("ACKED_RECORD_MISSING", 0, hole_start, hole_end),
        ("REMOTE_SEGMENT_MISSING", 0, hole_start, hole_end),
    ]
    for lost in above:
        assert (lost["missing_records"], lost["related_offset"], lost["rule"]) == (
            hole_end - hole_start + 1,
            hole_start,
            "KIP-405 remote log metadata",
        )
        assert (
            f"remote segment {hole_id} held offsets {hole_start}-{hole_end} and is DELETE_SEGMENT_FINISHED"
            in (lost["message"])
        )
    assert summary[0]["verdict"] == "critical" and summary[1]["verdict"] == "info"
    pending = [
        f
        for f in found
        if f["kind"] == "ACKED_RECORD_RETENTION" and f["partition"] == 1 and f["first_offset"] == last1[0]
    ]
    assert [
        (f["last_offset"], "so the dump's remote log metadata is older than its log" in f["message"])
        for f in pending
    ] == [(last1[1], True)]
    retention1 = sorted(
        (f["first_offset"], f["last_offset"], f["message"])
        for f in found
        if f["kind"] == "ACKED_RECORD_RETENTION" and f["partition"] == 1
    )
    assert [(first, last) for first, last, _ in retention1] == [
        (0, DELETED_BELOW - 1),
        (DELETED_BELOW, first1[1]),
        (first1[1] + 1, last1[0] - 1),
        (last1[0], last1[1]),
    ]
    assert "deleted by retention below it" in retention1[0][2]
    assert (
        f"below the remote tier (tiered storage, KIP-405: the first remote segment __remote_log_metadata "
        f"lists as copied starts at {first1[1] + 1}): deleted from remote storage by retention"
        in retention1[1][2]
    )
    assert "in remote storage (tiered storage, KIP-405" in retention1[2][2]


def renumbered(events: Any) -> Any:
    """`events` at the offsets a metadata partition that held only them would give (from 0, in order): a
    fault that removes or adds events leaves no hole a dump of the topic could not have."""
    from pyspark.sql import Window

    in_order = Window.partitionBy("dump_id", "replica", "partition").orderBy("offset")
    return events.withColumn("offset", (F.row_number().over(in_order) - 1).cast("long"))


def test_remote_log_metadata_proves_an_absence_only_when_whole(bronze: Bronze) -> None:
    """`remote_segments` marks a partition's segments `complete` only if its metadata partition holds
    its first event and every one after it (the remote log manager's producer leaves no offset out: a
    copy that lost a middle segment of the topic does), every value was an event, none of its bytes
    were quarantined, and no segment's first record is in a state the broker refuses."""
    from audit_rules.retention import remote_segments

    metadata, quarantine = bronze.remote_log_metadata, bronze.quarantine
    assert metadata is not None

    def complete(events: Any, damaged: Any = quarantine) -> set[tuple[int, bool]]:
        return {(r["partition"], r["complete"]) for r in remote_segments(events, damaged).collect()}

    assert complete(metadata) == {(0, True), (1, True)}
    assert complete(metadata.where(F.col("offset") > 0)) == {(0, False), (1, False)}
    assert complete(metadata.where(F.col("offset") != 1)) == {(0, False), (1, False)}
    first = metadata.where(F.col("event") == "segment").orderBy("offset").limit(1)
    refused = metadata.join(first.select("offset"), "offset", "left_anti").unionByName(
        first.withColumn("state", F.lit("COPY_SEGMENT_FINISHED"))
    )
    assert complete(refused) == {(0, False), (1, False)}
    unreadable = (
        metadata.orderBy("offset")
        .limit(1)
        .withColumns(
            {
                "offset": F.lit(10**6).cast("long"),
                "event": F.lit(None).cast("string"),
                "error": F.lit("byte 0 of the value: ..."),
            }
        )
    )
    assert complete(metadata.unionByName(unreadable)) == {(0, False), (1, False)}
    region = quarantine.sparkSession.createDataFrame(
        [("tiered", None, "__remote_log_metadata", 0, "x.log", 0, 1, "UNREADABLE_BATCH", "...")],
        quarantine.schema,
    )
    assert complete(metadata, quarantine.unionByName(region)) == {(0, False), (1, False)}


def test_a_segment_keeps_the_highest_state_it_reached(bronze: Bronze) -> None:
    """A late COPY_SEGMENT_FINISHED (a stale leader's) after a segment's deletion began: the broker's
    cache refuses the change back (`RemoteLogSegmentState.isValidTransition`), so the segment is not
    copied; read as its last event it was, and its offsets looked held by the remote tier."""
    from audit_rules.retention import remote_segments

    metadata = bronze.remote_log_metadata
    assert metadata is not None
    deleted = metadata.where(F.col("state") == "DELETE_SEGMENT_FINISHED").orderBy("offset").first()
    assert deleted is not None
    finished = metadata.where(
        (F.col("segment_id") == deleted["segment_id"]) & (F.col("state") == "COPY_SEGMENT_FINISHED")
    )
    end = metadata.agg(F.max("offset")).first()[0]
    late = metadata.unionByName(finished.withColumn("offset", F.lit(end + 1).cast("long")))
    (segment,) = (
        remote_segments(late, bronze.quarantine).where(F.col("segment_id") == deleted["segment_id"]).collect()
    )
    assert (segment["state"], segment["copied"], segment["complete"]) == (
        "DELETE_SEGMENT_FINISHED",
        False,
        True,
    )


def test_offsets_no_listed_segment_held_below_the_first_copied_one_were_never_copied(
    tiered: TieredLog, bronze: Bronze
) -> None:
    """Partition 1's first copied segment holds the broker's log start (DELETED_BELOW). With its events
    gone from the metadata (as if the broker had never copied it), the offsets from the log start to
    the next copied segment lie in no segment the metadata lists, copied or deleted: never copied, yet
    gone from the local log. They were "deleted from remote storage by retention" (info): lost, the
    tier's hole (REMOTE_SEGMENT_MISSING) and the acknowledged records in it (ACKED_RECORD_MISSING)."""
    assert bronze.remote_log_metadata is not None
    events = metadata_events(tiered.log_dir)
    last_states = {events[o]["segment_id"]: events[o]["state"] for o in sorted(events)}
    copied = sorted(
        (e["start_offset"], e["end_offset"], e["segment_id"])
        for e in events.values()
        if e["event"] == "segment"
        and e["partition"] == 1
        and last_states[e["segment_id"]] == "COPY_SEGMENT_FINISHED"
    )
    first1, second1 = copied[0], copied[1]
    assert first1[0] < DELETED_BELOW <= first1[1] and second1[0] == first1[1] + 1
    metadata = bronze.remote_log_metadata
    found, summary = audited(
        dataclasses.replace(
            bronze, remote_log_metadata=renumbered(metadata.where(F.col("segment_id") != first1[2]))
        )
    )
    above = sorted(
        (f["kind"], f["partition"], f["first_offset"], f["last_offset"]) for f in above_info(found)
    )
    assert above == [
        ("ACKED_RECORD_MISSING", 1, DELETED_BELOW, first1[1]),
        ("REMOTE_SEGMENT_MISSING", 1, DELETED_BELOW, first1[1]),
    ], [f["message"] for f in above_info(found)]
    messages = {f["kind"]: f["message"] for f in above_info(found)}
    assert "never copied to the remote tier" in messages["ACKED_RECORD_MISSING"]
    assert "no segment it lists ever held these" in messages["REMOTE_SEGMENT_MISSING"]
    assert "never copied to the remote tier" in messages["REMOTE_SEGMENT_MISSING"]
    assert summary[1]["verdict"] == "critical" and summary[0]["verdict"] == "info"
    # Without the log-start checkpoint the broker's log start is unknown: remote retention may have
    # taken those offsets (its events could predate what the metadata shows of the segment): not loss.
    unknown_start = dataclasses.replace(
        bronze,
        remote_log_metadata=renumbered(metadata.where(F.col("segment_id") != first1[2])),
        partition_state=bronze.partition_state.where(
            ~((F.col("state") == "log_start_offset") & (F.col("topic") == TOPIC) & (F.col("partition") == 1))
        ),
    )
    found, summary = audited(unknown_start)
    assert [f for f in above_info(found) if f["partition"] == 1] == []


def test_the_remote_log_metadata_decodes_as_kafka_dump_log_reads_it(tiered: TieredLog) -> None:
    """`replay-audit dump --records` decodes `__remote_log_metadata` values (kafka_log_decoder.
    remote_log_metadata): each event equals what Kafka's own tool prints for it, and the events name
    every segment the remote tier holds, at its base offset, copied to the end."""
    segments = sorted(tiered.log_dir.glob("__remote_log_metadata-*/*.log"))
    assert segments
    ours = metadata_events(tiered.log_dir)
    text = run_dump_log_segments(segments, extra_args=["--remote-log-metadata-decoder"])
    theirs = {int(m["offset"]): m for m in DUMPED_EVENT.finditer(text)}
    assert ours and sorted(ours) == sorted(theirs)
    for offset, event in ours.items():
        line = theirs[offset]
        fields = dict(re.findall(r"(\w+)=(\{[^}]*\}|[^,]+)", line["fields"]))
        assert (
            line["event"]
            == {"segment": "RemoteLogSegmentMetadata", "segment_update": "RemoteLogSegmentMetadataUpdate"}[
                event["event"]
            ]
        )
        assert (event["topic_id"], event["topic"], event["partition"], event["segment_id"]) == (
            line["topic_id"],
            line["topic"],
            int(line["partition"]),
            line["segment_id"],
        )
        assert (event["state"], event["broker_id"], event["event_timestamp_ms"]) == (
            fields["state"],
            int(fields["brokerId"]),
            int(fields["eventTimestampMs"]),
        )
        if event["event"] == "segment":
            epochs = [[int(e), int(o)] for e, o in re.findall(r"(\d+)=(\d+)", fields["segmentLeaderEpochs"])]
            assert (
                event["start_offset"],
                event["end_offset"],
                event["max_timestamp_ms"],
                event["segment_size_bytes"],
                event["segment_leader_epochs"],
            ) == (
                int(fields["startOffset"]),
                int(fields["endOffset"]),
                int(fields["maxTimestampMs"]),
                int(fields["segmentSizeInBytes"]),
                epochs,
            )
    # `replay-audit dump --records` prints each event on its record's line.
    out = io.StringIO()
    assert run_dump([str(s) for s in segments], records=True, summary=False, out=out) == 0
    dumped = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["offset"]: r["remote_log_metadata"] for r in dumped if r["type"] == "record"} == ours
    started = {e["segment_id"]: e for e in ours.values() if e["event"] == "segment"}
    finished = {e["segment_id"] for e in ours.values() if e["state"] == "COPY_SEGMENT_FINISHED"}
    for partition in range(PARTITIONS):
        held = remote_segments(tiered.remote_dir, partition)
        assert held
        for path in held:
            base_offset, segment_id = path.stem.split("-", 1)
            announced = started[segment_id]
            assert (announced["topic"], announced["partition"], announced["start_offset"]) == (
                TOPIC,
                partition,
                int(base_offset),
            )
            assert segment_id in finished
