"""A follower's index after it truncated its active segment, copied from the running broker: the entries
the truncation left past the broker's count are no INDEX_MISMATCH (issue 4's "no false alarms on real
logs"; `IndexCheck._kept_entries`).

A real cluster: broker 2 leads a topic alone (its follower stopped) and indexes every batch
(`index.interval.bytes=0`), is killed, the out-of-sync follower is elected (unclean election allowed)
and takes larger batches at the same offsets; broker 2 rejoins as a follower, truncates its active
segment to where the new leader's epoch starts (`OffsetIndex.truncateTo` moves the index's position and
nothing else) and fetches the new batches. Its `.index` then holds, past the entries of the fetched
batches, the entries of its own truncated batches: pointing inside the larger batches. A copy of both
live log directories is audited: nothing above info.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaCluster
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from tests.table_rows import above_info

TOPIC = "truncated"
PARTITION = f"{TOPIC}-0"


def produce(bootstrap: str, batches: int, records: int, value: bytes) -> None:
    """`batches` batches of `records` records each from a new idempotent producer (a flush after each)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 50})
    for b in range(batches):
        for r in range(records):
            producer.produce(TOPIC, key=f"{b}-{r}".encode(), value=value)
        assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def live_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("index-truncation")
    with KafkaCluster(work / "cluster", (2, 3), **{"replica.lag.time.max.ms": 5000}) as cluster:
        cluster.controller.create_topic(
            TOPIC,
            replicas=[[2, 3]],
            config={
                "min.insync.replicas": 1,
                "unclean.leader.election.enable": True,
                "index.interval.bytes": 0,
            },
        )
        b2, b3 = cluster.brokers[2], cluster.brokers[3]
        produce(cluster.bootstrap, 10, 1, b"before")
        b3.stop()
        cluster.wait_for(TOPIC, 0, [2])
        produce(cluster.bootstrap, 60, 1, b"alone")  # small batches, each indexed, on broker 2 alone
        cluster.kill(2)
        b3.start()
        cluster.wait_for(TOPIC, 0, [3])
        produce(cluster.bootstrap, 4, 40, b"elected " * 16)  # larger batches at the same offsets
        b2.start()  # recovers, then truncates to the new leader's epoch start and fetches
        cluster.wait_for(TOPIC, 0, [2, 3])
        copy = work / "live"
        shutil.copytree(b2.log_dir, copy / "broker2")
        shutil.copytree(b3.log_dir, copy / "broker3")
    return copy


def index_entries(log_dir: Path) -> tuple[list[tuple[int, int]], int, list[BatchHeader]]:
    """The `.index` entries of the partition's active segment before its zero-filled tail (absolute
    offset, position), the `.log`'s size, and its batches."""
    (index,) = sorted((log_dir / PARTITION).glob("*.index"))
    data = index.read_bytes()
    base = int(index.stem)
    entries = [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]
    while entries and entries[-1] == (0, 0):
        entries.pop()
    log = index.with_suffix(".log")
    headers = [b for b in read_log_segment(log) if isinstance(b, BatchHeader)]
    return [(base + r, p) for r, p in entries], log.stat().st_size, headers


def test_the_followers_index_holds_entries_of_its_truncated_batches(live_copy: Path) -> None:
    """The precondition, from the copied bytes: broker 2's index is preallocated (zeros after its
    entries), and past the entries that lead to its batches it holds entries at positions inside the
    log where no batch starts."""
    entries, size, headers = index_entries(live_copy / "broker2")
    (index,) = (live_copy / "broker2" / PARTITION).glob("*.index")
    assert index.stat().st_size > 8 * len(entries)
    starts = {b.position: b for b in headers}
    good = [
        starts.get(p) is not None and starts[p].base_offset <= o <= starts[p].last_offset for o, p in entries
    ]
    first_bad = good.index(False)
    assert all(good[:first_bad]) and not any(good[first_bad:])
    assert any(p < size and p not in starts for _, p in entries[first_bad:])
    assert len(entries) - first_bad > 20


def test_a_live_copy_after_a_truncation_has_no_finding_above_info(
    spark: Any, live_copy: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions(inputs=[LabeledPath("live", str(live_copy))], output=str(out)))
    result = audit(read_bronze(spark, str(out)), load_profile())
    try:
        findings = [r.asDict(recursive=True) for r in result.findings.collect()]
    finally:
        result.release()
    assert above_info(findings) == []
    assert not [f for f in findings if f["kind"] == "INDEX_MISMATCH"]
