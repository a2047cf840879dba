"""Logs of one partition on several brokers and in several dumps: what differs between them is a
rewrite (`REPLICA_DIVERGENCE`) only where both logs hold the offsets, below both high watermarks, and
their bytes can be read; an acknowledged offset a replica's newest log has not reached yet, while
another replica's as new or newer log holds it, is that replica behind, not loss
(`ACKED_RECORD_MISSING`); and a topic deleted and created again on other brokers is judged by the
log that holds each ack.

The brokers' log directories are written here (`meta.properties`, the high-watermark checkpoint, one
segment per partition by kafka-python's batch builder); every scenario is a topic of its own, audited
together in one ingest and audit.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from tests.builders import V2Batch, build_v2, producer_snapshot, segment
from tests.integration.test_audit_kinds import batches_of, of_topic
from tests.table_rows import kinds_above_info

Findings = list[dict[str, Any]]
DAY_S = 86_400


def broker_dir(
    dump: Path,
    node: int,
    logs: dict[str, tuple[list[bytes], int]],
    *,
    later_s: int = 0,
    topic_ids: dict[str, str] | None = None,
    snapshots: dict[str, tuple[int, list[tuple[int, ...]]]] | None = None,
    cleaned: dict[str, int] | None = None,
) -> None:
    """`dump/broker<node>/`: a KRaft log directory whose partition `name` holds the batches `logs[name][0]`
    (encoded) with high watermark `logs[name][1]`, the topic id `topic_ids[name]` if given (its
    `partition.metadata`), the producer snapshot `snapshots[name]` (offset, entries) and a
    cleaner-offset-checkpoint entry `cleaned[name]`; every file's mtime moved `later_s` seconds on."""
    log_dir = dump / f"broker{node}"
    log_dir.mkdir(parents=True)
    (log_dir / "meta.properties").write_text(f"version=1\nnode.id={node}\ncluster.id=divergence\n")
    lines = [
        f"{name.rsplit('-', 1)[0]} {name.rsplit('-', 1)[1]} {hw}" for name, (_, hw) in sorted(logs.items())
    ]
    (log_dir / "replication-offset-checkpoint").write_text("\n".join(["0", str(len(lines)), *lines]) + "\n")
    if cleaned:
        lines = [
            f"{name.rsplit('-', 1)[0]} {name.rsplit('-', 1)[1]} {at}" for name, at in sorted(cleaned.items())
        ]
        (log_dir / "cleaner-offset-checkpoint").write_text("\n".join(["0", str(len(lines)), *lines]) + "\n")
    for name, (encoded, _) in logs.items():
        part = log_dir / name
        part.mkdir()
        (part / "00000000000000000000.log").write_bytes(segment(*encoded))
        if snapshots and name in snapshots:
            offset, entries = snapshots[name]
            (part / f"{offset:020d}.snapshot").write_bytes(producer_snapshot(entries))
        if topic_ids and name in topic_ids:
            (part / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_ids[name]}\n")
    if later_s:
        for path in log_dir.rglob("*"):
            stat = path.stat()
            os.utime(path, (stat.st_atime, stat.st_mtime + later_s))


def encoded(batches: list[V2Batch]) -> list[bytes]:
    return [build_v2(b) for b in batches]


def values(n: int, tag: bytes) -> list[bytes]:
    return [tag + str(i).encode() for i in range(n)]


def rotted(batch: bytes) -> bytes:
    """The batch with the last byte of its records flipped: the header reads, the CRC fails."""
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


def acks_of(topic: str, batches: list[V2Batch]) -> list[dict[str, Any]]:
    """The ledger rows of one-record `batches` of partition 0 of `topic`."""
    return [
        {
            "topic": topic,
            "partition": 0,
            "offset": b.base_offset,
            "producer_id": b.producer_id,
            "producer_epoch": b.producer_epoch,
            "sequence": b.base_sequence,
        }
        for b in batches
    ]


class Scenarios(NamedTuple):
    found: Findings


@pytest.fixture(scope="module")
def scenarios(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Scenarios:
    root = tmp_path_factory.mktemp("divergence")
    monday, tuesday = root / "monday", root / "tuesday"
    # later-pair: Monday's dump holds broker 1's first 10 offsets. By Tuesday brokers 1 and 2 hold 30,
    # and differ from offset 20 on: broker 2 holds another producer's batches there.
    head = batches_of(1, 0, values(20, b"a"), start_offset=0, start_seq=0)
    tail_1 = batches_of(1, 0, values(10, b"b"), start_offset=20, start_seq=20)
    tail_2 = batches_of(7, 0, values(10, b"c"), start_offset=20, start_seq=0)
    # rotted: brokers 1 and 2 hold the same 10 batches; on broker 2 the sixth one's bytes rotted.
    same = encoded(batches_of(3, 0, values(10, b"r"), start_offset=0, start_seq=0))
    # short-tail: broker 2's checkpoint says 10, but its log ends at offset 8 (its tail was not written
    # to disk before the dump): offsets it does not hold were not rewritten.
    full = encoded(batches_of(4, 0, values(10, b"s"), start_offset=0, start_seq=0))
    # regrouped: brokers 1 and 2 hold two-record batches, broker 3 the same records one per batch.
    pairs = [
        V2Batch(
            base_offset=i,
            records=((b"k", b"p" + bytes([i])), (b"k", b"p" + bytes([i + 1]))),
            producer_id=10,
            producer_epoch=0,
            base_sequence=i,
            base_timestamp=1_700_000_000_000 + i,
        )
        for i in range(0, 10, 2)
    ]
    singles = batches_of(10, 0, values(10, b"p"), start_offset=0, start_seq=0)
    # compacted-gone: the cleaner removed producer 12's only batch (offset 5) from a compacted log
    # after the newest snapshot listed it.
    survivors = [
        b for b in batches_of(1, 0, values(10, b"x"), start_offset=0, start_seq=0) if b.base_offset != 5
    ]
    survivors = [replace(b, base_sequence=i) for i, b in enumerate(survivors)]
    listed = (12, 0, 0, 5, 0, 1_700_000_000_005, 0, -1)
    # lost-listed: producer 13 wrote offsets 0-4 on Monday; by Tuesday they are gone from a log that
    # starts at 0, and Tuesday's snapshot still lists it.
    lost_pid = batches_of(13, 0, values(5, b"y"), start_offset=0, start_seq=0)
    kept = batches_of(1, 0, values(5, b"z"), start_offset=5, start_seq=0)
    # stale-snapshot: producer 15 wrote offsets 0-9 on Monday; by Tuesday they are gone, and Tuesday's
    # newest snapshot (at offset 4) still has it at offset 3.
    stale_pid = batches_of(15, 0, values(10, b"s"), start_offset=0, start_seq=0)
    after_stale = encoded(batches_of(1, 0, values(5, b"s"), start_offset=10, start_seq=0))
    # compacted-recent: as compacted-gone, but the snapshot's producer 14 wrote an hour before the
    # dump: the broker had not forgotten it, so the cleaner kept its last batch.
    recent = (14, 0, 0, 5, 0, int((time.time() + DAY_S - 3600) * 1000), 0, -1)
    # compacted-open: as compacted-gone, but producer 16's transaction, begun at offset 5, is open: the
    # broker never forgets such a producer, and the cleaner stops at the open transaction.
    open_txn = (16, 0, 0, 5, 0, 1_700_000_000_005, 0, 5)
    # uncommitted: on Monday producer 17's batches (offsets 5-7) lie above broker 1's high watermark 5;
    # by Tuesday a new leader wrote producer 18's batches there, and broker 1 followed it.
    committed = batches_of(1, 0, values(5, b"m"), start_offset=0, start_seq=0)
    unreplicated = batches_of(17, 0, values(3, b"n"), start_offset=5, start_seq=0)
    replacing = batches_of(18, 0, values(5, b"o"), start_offset=5, start_seq=0)
    # cleaned-old, cleaned-recent: Monday's broker 1 holds producer 19 (offsets 0-4) and producer 1
    # (5-9); by Tuesday the cleaner removed all of producer 19's batches. It may have, once the broker
    # forgot producer 19: its batches are from 2023 in cleaned-old, an hour before the dump in
    # cleaned-recent (the cleaner keeps a known producer's last batch).
    vanishing = batches_of(19, 0, values(5, b"g"), start_offset=0, start_seq=0)
    recently = [
        replace(b, base_timestamp=int((time.time() + DAY_S - 3600) * 1000) + i)
        for i, b in enumerate(vanishing)
    ]
    staying = batches_of(1, 0, values(5, b"h"), start_offset=5, start_seq=0)
    # repeated: in each of three daily dumps broker 2 holds producer 31's batches where broker 1 holds
    # producer 30's: one rewrite, seen in each dump.
    wednesday = root / "wednesday"
    ones = encoded(batches_of(30, 0, values(5, b"o"), start_offset=0, start_seq=0))
    twos = encoded(batches_of(31, 0, values(5, b"o"), start_offset=0, start_seq=0))
    broker_dir(monday, 2, {"repeated-0": (twos, 5)})
    broker_dir(wednesday, 1, {"repeated-0": (ones, 5)}, later_s=2 * DAY_S)
    broker_dir(wednesday, 2, {"repeated-0": (twos, 5)}, later_s=2 * DAY_S)
    # rotted-rewrite: broker 2's batch at offset 5 is another producer's, written by a later leader
    # (partition leader epoch 1), and its bytes rotted too.
    written = batches_of(40, 0, values(10, b"q"), start_offset=0, start_seq=0)
    other_leader = V2Batch(
        base_offset=5,
        records=((b"k", b"other"),),
        producer_id=41,
        producer_epoch=0,
        base_sequence=0,
        base_timestamp=1_700_000_000_005,
        partition_leader_epoch=1,
    )
    rewritten = encoded(written)
    rewritten[5] = rotted(build_v2(other_leader))
    broker_dir(
        monday,
        1,
        {
            "later-pair-0": (encoded(head[:10]), 10),
            "lost-listed-0": (encoded(lost_pid + kept), 10),
            "repeated-0": (ones, 5),
            "stale-snapshot-0": (encoded(stale_pid), 10),
            "uncommitted-0": (encoded(committed + unreplicated), 5),
            "cleaned-old-0": (encoded(vanishing + staying), 10),
            "cleaned-recent-0": (encoded(recently + staying), 10),
        },
    )
    broker_dir(
        tuesday,
        1,
        {
            "later-pair-0": (encoded(head + tail_1), 30),
            "rotted-0": (same, 10),
            "short-tail-0": (full, 10),
            "regrouped-0": (encoded(pairs), 10),
            "compacted-gone-0": (encoded(survivors), 10),
            "lost-listed-0": (encoded(kept), 10),
            "repeated-0": (ones, 5),
            "rotted-rewrite-0": (encoded(written), 10),
            "stale-snapshot-0": (after_stale, 15),
            "compacted-recent-0": (encoded(survivors), 10),
            "compacted-open-0": (encoded(survivors), 10),
            "uncommitted-0": (encoded(committed + replacing), 10),
            "cleaned-old-0": (encoded(staying), 10),
            "cleaned-recent-0": (encoded(staying), 10),
        },
        later_s=DAY_S,
        snapshots={
            "compacted-gone-0": (10, [listed]),
            "lost-listed-0": (10, [(13, 0, 4, 4, 0, 0, 0, -1)]),
            "stale-snapshot-0": (4, [(15, 0, 3, 3, 0, 0, 0, -1)]),
            "compacted-recent-0": (10, [recent]),
            "compacted-open-0": (10, [open_txn]),
        },
        cleaned={
            "compacted-gone-0": 10,
            "compacted-recent-0": 10,
            "compacted-open-0": 10,
            "cleaned-old-0": 10,
            "cleaned-recent-0": 10,
        },
    )
    broker_dir(
        tuesday,
        2,
        {
            "later-pair-0": (encoded(head + tail_2), 30),
            "rotted-0": ([*same[:5], rotted(same[5]), *same[6:]], 10),
            "short-tail-0": (full[:8], 10),
            "regrouped-0": (encoded(pairs), 10),
            "repeated-0": (twos, 5),
            "rotted-rewrite-0": (rewritten, 10),
        },
        later_s=DAY_S,
    )
    # stale-replica: Monday's dump holds brokers 1 and 2 at offset 10; Tuesday's holds broker 1 only,
    # at 20. The ledger acknowledges all 20: broker 2's newest log had not reached 10-19.
    stale = batches_of(5, 0, values(20, b"t"), start_offset=0, start_seq=0)
    # truncated: both replicas of Tuesday end at 8 where the ledger acknowledged 10: 8 and 9 are lost.
    truncated = batches_of(6, 0, values(10, b"u"), start_offset=0, start_seq=0)
    # recreated: Monday's broker 1 holds the topic's first incarnation (producer 8, offsets 0-4);
    # it was deleted and created again, and Tuesday's broker 2 holds the second (producer 9, 0-9).
    first = batches_of(8, 0, values(5, b"v"), start_offset=0, start_seq=0)
    second = batches_of(9, 0, values(10, b"w"), start_offset=0, start_seq=0)
    broker_dir(
        monday,
        3,
        {
            "stale-replica-0": (encoded(stale[:10]), 10),
            "recreated-0": (encoded(first), 5),
        },
        topic_ids={"recreated-0": "AAAAAAAAAAAAAAAAAAAAAQ"},
    )
    broker_dir(monday, 4, {"stale-replica-0": (encoded(stale[:10]), 10)})
    broker_dir(
        tuesday,
        3,
        {
            "stale-replica-0": (encoded(stale), 20),
            "truncated-0": (encoded(truncated[:8]), 8),
            "regrouped-0": (encoded(singles), 10),
        },
        later_s=DAY_S,
    )
    broker_dir(
        tuesday,
        4,
        {"truncated-0": (encoded(truncated[:8]), 8)},
        later_s=DAY_S,
    )
    broker_dir(
        tuesday,
        5,
        {"recreated-0": (encoded(second), 10)},
        later_s=DAY_S,
        topic_ids={"recreated-0": "AAAAAAAAAAAAAAAAAAAAAg"},
    )
    ledger = root / "acks.jsonl"
    rows = [
        *acks_of("stale-replica", stale),
        *acks_of("truncated", truncated),
        *acks_of("recreated", first),
        *acks_of("recreated", second),
    ]
    ledger.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = root / "out"
    run_ingest(
        spark,
        IngestOptions(
            inputs=[
                LabeledPath("monday", str(monday)),
                LabeledPath("tuesday", str(tuesday)),
                LabeledPath("wednesday", str(wednesday)),
            ],
            output=str(out),
            acks=[LabeledPath("ledger", str(ledger))],
        ),
    )
    found = audit(read_bronze(spark, str(out)), load_profile()).findings.collect()
    return Scenarios([r.asDict() for r in found])


def divergence(found: Findings) -> list[tuple[Any, ...]]:
    return sorted(
        (f["dump_id"], f["replica"], f["first_offset"], f["last_offset"], f["missing_records"])
        for f in found
        if f["kind"] == "REPLICA_DIVERGENCE"
    )


def test_two_replicas_of_a_later_dump_are_compared_whatever_an_earlier_dump_holds(
    scenarios: Scenarios,
) -> None:
    """Monday's log (the earliest, and the shortest) agrees with both of Tuesday's; Tuesday's two
    replicas differ from offset 20 on: that pair is the finding, in the later-ranked log, naming the
    other."""
    found = of_topic(scenarios.found, "later-pair")
    assert divergence(found) == [("tuesday", "2", 20, 29, None)]
    (finding,) = [f for f in found if f["kind"] == "REPLICA_DIVERGENCE"]
    assert "10 batch position(s)" in finding["message"], finding["message"]
    assert "dump tuesday replica 1" in finding["message"], finding["message"]
    assert kinds_above_info(found) == {"REPLICA_DIVERGENCE": 1}


def test_a_rewrite_seen_in_every_dump_is_one_finding_per_dump(scenarios: Scenarios) -> None:
    """Replicas are compared within a dump, and each replica with its previous dump: broker 2's
    rewrite is found once a day, in broker 2's log, naming broker 1's; its logs agree over time."""
    found = of_topic(scenarios.found, "repeated")
    assert divergence(found) == [(day, "2", 0, 4, None) for day in ("monday", "tuesday", "wednesday")]
    assert kinds_above_info(found) == {"REPLICA_DIVERGENCE": 3}


def test_a_rotted_batch_written_by_another_leader_is_still_a_rewrite(scenarios: Scenarios) -> None:
    """The partition leader epoch lies outside the CRC: where it differs, a batch whose bytes rotted
    was also rewritten."""
    found = of_topic(scenarios.found, "rotted-rewrite")
    assert divergence(found) == [("tuesday", "2", 5, 5, None)]
    assert {f["kind"] for f in found if f["replica"] == "2"} >= {"REPLICA_DIVERGENCE", "CRC_MISMATCH"}


def test_a_batch_that_rotted_on_one_replica_is_corruption_not_a_rewrite(scenarios: Scenarios) -> None:
    found = of_topic(scenarios.found, "rotted")
    assert divergence(found) == []
    (crc,) = [f for f in found if f["kind"] == "CRC_MISMATCH"]
    assert (crc["replica"], crc["first_offset"]) == ("2", 5)
    assert kinds_above_info(found) == {"CRC_MISMATCH": 1}


def test_each_pair_compares_its_own_two_logs_where_a_third_holds_other_batches(scenarios: Scenarios) -> None:
    """Broker 3 batches the records one by one where brokers 1 and 2 hold them in pairs: it differs
    from each of them at every base offset; 1 and 2 agree, although broker 3 has batches at offsets
    where neither of them has one."""
    found = of_topic(scenarios.found, "regrouped")
    assert divergence(found) == [("tuesday", "3", 0, 9, None), ("tuesday", "3", 0, 9, None)]
    assert sorted(f["message"].split(" and dump ")[1][:19] for f in found) == [
        "tuesday replica 1, ",
        "tuesday replica 2, ",
    ]
    assert kinds_above_info(found) == {"REPLICA_DIVERGENCE": 2}


def test_a_snapshot_producer_the_cleaner_removed_from_a_compacted_log_is_not_lost(
    scenarios: Scenarios,
) -> None:
    found = of_topic(scenarios.found, "compacted-gone")
    assert kinds_above_info(found) == {}


def test_a_producer_gone_since_an_earlier_dump_and_listed_in_the_snapshot_is_lost_once(
    scenarios: Scenarios,
) -> None:
    """Both the earlier dump and the later snapshot know producer 13: one loss, the snapshot's."""
    found = of_topic(scenarios.found, "lost-listed")
    lost = [f for f in found if f["kind"] == "UNKNOWN_PRODUCER_LOSS"]
    assert [(f["dump_id"], f["producer_id"], f["related_offset"]) for f in lost] == [("tuesday", 13, 10)]
    assert "producer snapshot at offset 10" in lost[0]["message"], lost[0]["message"]
    assert divergence(found) == [("tuesday", "1", 0, 4, None)]
    assert kinds_above_info(found) == {"UNKNOWN_PRODUCER_LOSS": 1, "REPLICA_DIVERGENCE": 1}


def test_a_snapshot_producer_that_wrote_within_the_expiration_is_lost_on_a_compacted_log(
    scenarios: Scenarios,
) -> None:
    """The cleaner keeps the last batch of every producer the broker still knows."""
    found = of_topic(scenarios.found, "compacted-recent")
    lost = [(f["dump_id"], f["producer_id"]) for f in found if f["kind"] == "UNKNOWN_PRODUCER_LOSS"]
    assert lost == [("tuesday", 14)]
    assert kinds_above_info(found) == {"UNKNOWN_PRODUCER_LOSS": 1}


def test_a_snapshot_producer_with_a_transaction_open_is_lost_on_a_compacted_log(scenarios: Scenarios) -> None:
    """The broker never expires a producer with a transaction open, and the cleaner does not pass the
    transaction's first offset: its batch at offset 5 was not compacted away."""
    found = of_topic(scenarios.found, "compacted-open")
    lost = [(f["dump_id"], f["producer_id"]) for f in found if f["kind"] == "UNKNOWN_PRODUCER_LOSS"]
    assert lost == [("tuesday", 16)]
    assert kinds_above_info(found) == {"UNKNOWN_PRODUCER_LOSS": 1}


def test_a_producer_the_cleaner_removed_since_an_earlier_dump_is_lost_unless_the_broker_forgot_it(
    scenarios: Scenarios,
) -> None:
    """Producer 19's batches, all of them, are gone from the compacted log: excused where they are older
    than producer.id.expiration.ms at the later dump, lost where they were written an hour before it."""
    assert kinds_above_info(of_topic(scenarios.found, "cleaned-old")) == {}
    found = of_topic(scenarios.found, "cleaned-recent")
    lost = [
        (f["dump_id"], f["producer_id"], f["related_offset"])
        for f in found
        if f["kind"] == "UNKNOWN_PRODUCER_LOSS"
    ]
    assert lost == [("tuesday", 19, 4)]
    assert kinds_above_info(found) == {"UNKNOWN_PRODUCER_LOSS": 1}


def test_a_snapshot_staler_than_the_earlier_dump_leaves_the_loss_to_it(scenarios: Scenarios) -> None:
    """Tuesday's snapshot has producer 15 at offset 3, Monday's dump at 9: one loss, the dump's."""
    found = of_topic(scenarios.found, "stale-snapshot")
    lost = [f for f in found if f["kind"] == "UNKNOWN_PRODUCER_LOSS"]
    assert [(f["dump_id"], f["producer_id"], f["related_offset"]) for f in lost] == [("tuesday", 15, 9)]
    assert "in dump monday" in lost[0]["message"], lost[0]["message"]
    assert divergence(found) == [("tuesday", "1", 0, 9, None)]


def test_a_producer_gone_that_the_earlier_dump_held_only_above_its_high_watermark(
    scenarios: Scenarios,
) -> None:
    """Producer 17's batches were above Monday's high watermark: the loss says so, and names the range;
    a producer the earlier dump held below it (stale-snapshot) has no such clause."""
    found = of_topic(scenarios.found, "uncommitted")
    (lost,) = [f for f in found if f["kind"] == "UNKNOWN_PRODUCER_LOSS"]
    assert (lost["dump_id"], lost["producer_id"], lost["last_offset"]) == ("tuesday", 17, 7)
    assert (
        "at or above the high watermark that dump's checkpoint recorded, 5 (offsets 5 to 7;"
        in lost["message"]
    ), lost["message"]
    assert divergence(found) == []
    assert kinds_above_info(found) == {"UNKNOWN_PRODUCER_LOSS": 1}
    (other,) = [
        f for f in of_topic(scenarios.found, "stale-snapshot") if f["kind"] == "UNKNOWN_PRODUCER_LOSS"
    ]
    assert "high watermark" not in other["message"], other["message"]


def test_offsets_a_replica_does_not_hold_are_not_compared_even_below_its_checkpoint(
    scenarios: Scenarios,
) -> None:
    found = of_topic(scenarios.found, "short-tail")
    assert divergence(found) == []
    assert kinds_above_info(found) == {}


def missing_acks(found: Findings) -> list[tuple[Any, ...]]:
    return sorted(
        (f["dump_id"], f["replica"], f["first_offset"], f["last_offset"])
        for f in found
        if f["kind"] == "ACKED_RECORD_MISSING"
    )


def test_acks_a_stale_replica_has_not_reached_are_held_by_a_newer_log_not_lost(scenarios: Scenarios) -> None:
    """Broker 4's newest log is Monday's, which ends at 10; broker 3's Tuesday log holds 10-19."""
    found = of_topic(scenarios.found, "stale-replica")
    assert missing_acks(found) == []
    assert kinds_above_info(found) == {}


def test_acks_no_replica_holds_are_lost_in_each(scenarios: Scenarios) -> None:
    found = of_topic(scenarios.found, "truncated")
    assert missing_acks(found) == [("tuesday", "3", 8, 9), ("tuesday", "4", 8, 9)]
    assert kinds_above_info(found) == {"ACKED_RECORD_MISSING": 2}


def test_a_topic_created_again_on_other_brokers_judges_each_ack_by_the_incarnation_holding_it(
    scenarios: Scenarios,
) -> None:
    found = of_topic(scenarios.found, "recreated")
    assert missing_acks(found) == []
    assert kinds_above_info(found) == {}
