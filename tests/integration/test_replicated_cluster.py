"""Replicas written by a real cluster (a controller node and broker-only nodes, issue 4's "replicas and
dumps over time" and "no false alarms on real logs").

- An unclean leader election: the leader takes acknowledged writes alone, is killed, and the
  out-of-sync follower is elected and given the same offsets for other records. The audit must find
  the rewritten offsets (`REPLICA_DIVERGENCE` between the replicas and between the dumps over time),
  every acknowledged record lost (`ACKED_RECORD_MISSING`, the rewritten ones by their keys in
  record-level mode), the vanished producer (`UNKNOWN_PRODUCER_LOSS`), and nothing else. Before the
  election, the leader and its stopped follower copied as dumps of their own, the follower's dated
  later: the follower is behind, nothing lost; the elected replica's log alone beside the old
  leader's of the same dump: it lost what it was elected past.
- A clean failover: idempotent and transactional producers writing through a SIGKILL of the
  leader, its restart and a clean restart of another replica, with `acks=all` and two in-sync
  replicas required. Three replicas and the killed leader's own log: nothing above info.
- `acks=1` through a clean failover: the leader acknowledged records its in-sync follower had not
  fetched yet, then was killed. Nothing was committed above its high watermark, so no divergence;
  the ledger shows exactly the acknowledged records the failover lost (`ACKED_RECORD_MISSING`).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaCluster
from kafka_harness.polling import poll_until
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import read_log_segment
from tests.table_rows import above_info

BROKER_PROPERTIES = {
    # The high watermark reaches its checkpoint file within half a second (default 5 s).
    "replica.high.watermark.checkpoint.interval.ms": 500,
    "replica.lag.time.max.ms": 5000,
}


class Ledger:
    """The acknowledgement ledger of contract §1 (topic, partition, offset, key), filled by delivery
    reports of several producer threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def report(self, err: KafkaError | None, msg: Any) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                key = msg.key().decode()
                self.rows.append(
                    {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(), "key": key}
                )

    def write(self) -> Path:
        self.path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))
        return self.path


def batches(log_dir: Path, partition: str) -> list[BatchHeader]:
    return [
        item
        for seg in sorted((log_dir / partition).glob("*.log"))
        for item in read_log_segment(seg)
        if isinstance(item, BatchHeader)
    ]


def checkpoint(log_dir: Path, name: str, partition: str) -> int:
    """The offset a broker's checkpoint file (`replication-offset-checkpoint`: the high watermark)
    holds for a partition."""
    topic, _, number = partition.rpartition("-")
    for line in (log_dir / name).read_text().splitlines()[2:]:
        t, p, offset = line.split()
        if (t, p) == (topic, number):
            return int(offset)
    raise AssertionError(f"{partition} not in {log_dir / name}")


def wait_for_checkpoint(log_dir: Path, partition: str, offset: int, timeout_s: float = 30.0) -> None:
    """Until a live broker's `replication-offset-checkpoint` holds `offset` for `partition`."""

    def reached() -> bool | None:
        try:
            return checkpoint(log_dir, "replication-offset-checkpoint", partition) == offset
        except (AssertionError, FileNotFoundError, ValueError):
            return None  # not written yet, or caught mid-rename

    poll_until(
        reached,
        timeout_s,
        lambda: f"{log_dir}: the high watermark of {partition} did not reach {offset} in {timeout_s:.0f} s",
        interval_s=0.1,
    )


def leader_epochs(log_dir: Path, partition: str) -> list[tuple[int, int]]:
    lines = (log_dir / partition / "leader-epoch-checkpoint").read_text().splitlines()[2:]
    return [(int(e), int(o)) for e, o in (line.split() for line in lines)]


def run_audit(
    spark: Any,
    out: Path,
    inputs: dict[str, Path],
    ledger: Path,
    captured_at: dict[str | None, int] | None = None,
) -> list[dict[str, Any]]:
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath(label, str(path)) for label, path in inputs.items()],
            output=str(out),
            records=True,
            acks=[LabeledPath("acks", str(ledger))],
            captured_at=captured_at or {},
        ),
    )
    result = audit(read_bronze(spark, str(out)), load_profile())
    try:
        return [r.asDict(recursive=True) for r in result.findings.collect()]
    finally:
        result.release()


def produce(bootstrap: str, ledger: Ledger, topic: str, tag: str, count: int) -> None:
    """`count` records keyed `tag-i` from a new idempotent producer, 20 at a time."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        producer.produce(
            topic, key=f"{tag}-{i}".encode(), value=f"{tag} {i}".encode(), on_delivery=ledger.report
        )
        if i % 20 == 19:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


# --- an unclean leader election ------------------------------------------------------------------

UNCLEAN = "unclean"
PHASES = {"before": 100, "alone": 100, "elected": 50, "rejoined": 20}


class UncleanDumps(NamedTuple):
    behind: Path  # the leader (broker2) and the stopped follower (broker3) before the election
    behind_at: int  # when the leader's log dir was copied, epoch ms
    during: Path  # both replicas, the old leader dead and the elected one stopped: dump t1
    after: Path  # both replicas after the old leader rejoined and truncated: dump t2
    ledger: Path
    acked: dict[str, list[int]]  # phase -> acknowledged offsets


@pytest.fixture(scope="module")
def unclean(tmp_path_factory: pytest.TempPathFactory) -> UncleanDumps:
    work = tmp_path_factory.mktemp("unclean-election")
    ledger = Ledger(work / "acks.jsonl")
    with KafkaCluster(work / "cluster", (2, 3), **BROKER_PROPERTIES) as cluster:
        cluster.controller.create_topic(
            UNCLEAN,
            replicas=[[2, 3]],
            config={"min.insync.replicas": 1, "unclean.leader.election.enable": True},
        )
        b2, b3 = cluster.brokers[2], cluster.brokers[3]
        produce(cluster.bootstrap, ledger, UNCLEAN, "before", PHASES["before"])
        b3.stop()  # a clean shutdown: the controller takes 3 out of the in-sync replicas at once
        cluster.wait_for(UNCLEAN, 0, [2])
        produce(cluster.bootstrap, ledger, UNCLEAN, "alone", PHASES["alone"])  # acked by 2 alone
        # The high watermark reaches its checkpoint file every 500 ms: wait until it holds every ack.
        wait_for_checkpoint(b2.log_dir, f"{UNCLEAN}-0", max(r["offset"] for r in ledger.rows) + 1)
        # The live leader and the follower behind it, each copied as a dump of its own. Left out of the
        # live copy: the checkpoints' temporary files, renamed over them as they are copied, and the
        # metadata log, which the broker appends to every half second (a copy could end mid-batch).
        behind, behind_at = work / "t0", int(time.time() * 1000)
        live = shutil.ignore_patterns("*.tmp", "__cluster_metadata-0")
        shutil.copytree(b2.log_dir, behind / "broker2", ignore=live)
        shutil.copytree(b3.log_dir, behind / "broker3")
        cluster.kill(2)
        b3.start()  # the only live replica, out of sync: elected because the topic allows it
        cluster.wait_for(UNCLEAN, 0, [3])
        produce(cluster.bootstrap, ledger, UNCLEAN, "elected", PHASES["elected"])
        b3.stop()
        during = work / "t1"
        shutil.copytree(b2.log_dir, during / "broker2")
        shutil.copytree(b3.log_dir, during / "broker3")
        b3.start()
        b2.start()  # rejoins as a follower: truncates to the elected leader's epoch start and fetches
        cluster.wait_for(UNCLEAN, 0, [2, 3])
        produce(cluster.bootstrap, ledger, UNCLEAN, "rejoined", PHASES["rejoined"])
        cluster.wait_for(UNCLEAN, 0, [2, 3])
    after = work / "t2"
    shutil.copytree(b2.log_dir, after / "broker2")
    shutil.copytree(b3.log_dir, after / "broker3")
    assert ledger.errors == []
    acked: dict[str, list[int]] = {}
    for row in ledger.rows:
        acked.setdefault(row["key"].rsplit("-", 1)[0], []).append(row["offset"])
    return UncleanDumps(
        behind, behind_at, during, after, ledger.write(), {k: sorted(v) for k, v in acked.items()}
    )


def test_the_elected_replica_gave_the_acknowledged_offsets_to_other_records(unclean: UncleanDumps) -> None:
    """The precondition, read from the brokers' files: both replicas' high watermarks passed the
    offsets the old leader acknowledged alone, the elected replica's new leader epoch starts there,
    and its batches at those offsets are other producers'."""
    alone = unclean.acked["alone"]
    assert alone == list(range(PHASES["before"], PHASES["before"] + PHASES["alone"]))
    old, new = unclean.during / "broker2", unclean.during / "broker3"
    assert checkpoint(old, "replication-offset-checkpoint", f"{UNCLEAN}-0") == alone[-1] + 1
    assert checkpoint(new, "replication-offset-checkpoint", f"{UNCLEAN}-0") > alone[0]
    assert leader_epochs(new, f"{UNCLEAN}-0")[-1][1] == alone[0]
    assert unclean.acked["elected"][0] == alone[0]
    old_pids = {b.producer_id for b in batches(old, f"{UNCLEAN}-0") if b.base_offset >= alone[0]}
    new_pids = {b.producer_id for b in batches(new, f"{UNCLEAN}-0") if b.base_offset >= alone[0]}
    assert len(old_pids) == 1 and old_pids.isdisjoint(new_pids)


def ranges(findings: list[dict[str, Any]], kind: str, dump_id: str, replica: str) -> set[int]:
    return {
        o
        for f in findings
        if (f["kind"], f["dump_id"], f["replica"]) == (kind, dump_id, replica)
        for o in range(f["first_offset"], f["last_offset"] + 1)
    }


def test_an_unclean_election_is_divergence_and_the_loss_of_every_record_acknowledged_alone(
    spark: Any, unclean: UncleanDumps, tmp_path: Path
) -> None:
    findings = run_audit(spark, tmp_path / "out", {"t1": unclean.during, "t2": unclean.after}, unclean.ledger)
    alone = set(unclean.acked["alone"])
    first = min(alone)
    assert {f["kind"] for f in above_info(findings)} == {
        "REPLICA_DIVERGENCE",
        "ACKED_RECORD_MISSING",
        "UNKNOWN_PRODUCER_LOSS",
    }
    # The offsets the elected leader gave again diverge from where it was elected: between the two
    # replicas of t1, and between the old leader's t1 log and its t2 log (contract §4: two replicas of
    # a dump, or one replica's dumps over time).
    divergence = [f for f in findings if f["kind"] == "REPLICA_DIVERGENCE"]
    assert {f["first_offset"] for f in divergence} == {first}
    assert {(f["dump_id"], f["replica"]) for f in divergence} >= {("t1", "3"), ("t2", "2")}
    # Every record the old leader acknowledged alone is lost in each replica's newest log, and nothing
    # else is: the offsets the elected leader reused by their keys, the rest as absent.
    end = 1 + max(b.last_offset for b in batches(unclean.after / "broker3", f"{UNCLEAN}-0"))
    for replica in ("2", "3"):
        assert ranges(findings, "ACKED_RECORD_MISSING", "t2", replica) == alone
        assert ranges(findings, "ACKED_RECORD_MISSING", "t1", replica) == set()
        for f in findings:
            if (f["kind"], f["replica"]) == ("ACKED_RECORD_MISSING", replica):
                rewritten = f["last_offset"] < end
                assert (f["related_offset"] is not None) == rewritten
                assert ("other records" in f["message"]) == rewritten
    assert sum(f["missing_records"] for f in findings if f["kind"] == "ACKED_RECORD_MISSING") == 2 * len(
        alone
    )
    # The producer that wrote them is gone from the old leader's log once it rejoined.
    old = batches(unclean.during / "broker2", f"{UNCLEAN}-0")
    (pid,) = {b.producer_id for b in old if b.base_offset >= first}
    lost = [f for f in findings if f["kind"] == "UNKNOWN_PRODUCER_LOSS"]
    assert [(f["dump_id"], f["replica"], f["producer_id"]) for f in lost] == [("t2", "2", pid)]


def _ledger_of(unclean: UncleanDumps, phases: tuple[str, ...], path: Path) -> Path:
    """The ledger's rows of `phases` alone: what had been acknowledged when those phases ended."""
    rows = [json.loads(line) for line in unclean.ledger.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["key"].rsplit("-", 1)[0] in phases))
    return path


def test_a_follower_behind_copied_after_its_leader_lost_nothing(
    spark: Any, unclean: UncleanDumps, tmp_path: Path
) -> None:
    """The follower stopped before the records the leader acknowledged alone; each broker's log dir is
    a dump of its own, the follower's dated five seconds after the leader's (its copy came second).
    It knew no leader epoch later than the one that wrote those records, so it is behind, not a log
    that gave them up: nothing above info (they were ACKED_RECORD_MISSING on the follower, critical,
    when only a log from a dump captured as late or later counted)."""
    leader, follower = unclean.behind / "broker2", unclean.behind / "broker3"
    alone = unclean.acked["alone"]
    assert max(b.last_offset for b in batches(follower, f"{UNCLEAN}-0")) + 1 == alone[0]
    assert leader_epochs(follower, f"{UNCLEAN}-0")[-1][0] == leader_epochs(leader, f"{UNCLEAN}-0")[-1][0]
    ledger = _ledger_of(unclean, ("before", "alone"), tmp_path / "acks.jsonl")
    captured = {"leader": unclean.behind_at, "follower": unclean.behind_at + 5000}
    findings = run_audit(spark, tmp_path / "out", {"leader": leader, "follower": follower}, ledger, captured)
    assert above_info(findings) == [], [f["message"] for f in above_info(findings)]


def test_a_replica_elected_past_the_acknowledged_offsets_lost_them_though_the_old_leader_holds_them(
    spark: Any, unclean: UncleanDumps, tmp_path: Path
) -> None:
    """Dump t1 alone, with the acks written before the election: the elected replica (broker3) ends
    inside the records the old leader acknowledged alone, and its leader-epoch-checkpoint names the
    epoch it was elected at, later than theirs. The old leader's log of the same dump holds them, but
    they are lost on the elected one: the offsets it reused by their keys, the rest as absent (those
    were taken for a follower behind)."""
    ledger = _ledger_of(unclean, ("before", "alone"), tmp_path / "acks.jsonl")
    findings = run_audit(spark, tmp_path / "out", {"t1": unclean.during}, ledger)
    alone = set(unclean.acked["alone"])
    assert ranges(findings, "ACKED_RECORD_MISSING", "t1", "3") == alone
    assert ranges(findings, "ACKED_RECORD_MISSING", "t1", "2") == set()


def test_after_the_rejoin_the_replicas_agree_and_only_the_ledger_shows_the_loss(
    spark: Any, unclean: UncleanDumps, tmp_path: Path
) -> None:
    findings = run_audit(spark, tmp_path / "out", {"t2": unclean.after}, unclean.ledger)
    assert {f["kind"] for f in above_info(findings)} == {"ACKED_RECORD_MISSING"}
    alone = set(unclean.acked["alone"])
    assert ranges(findings, "ACKED_RECORD_MISSING", "t2", "2") == alone
    assert ranges(findings, "ACKED_RECORD_MISSING", "t2", "3") == alone


# --- a clean failover --------------------------------------------------------------------------------

ORDERS, TXN = "orders", "payments"


class FailoverDumps(NamedTuple):
    killed: Path  # the killed leader's log dir, as it was left: dump t1
    final: Path  # every replica after the restarts, stopped cleanly: dump t2
    killed_id: int
    ledger: Path
    transactions: int


def _idempotent(cluster: KafkaCluster, ledger: Ledger, name: str, stop: threading.Event) -> None:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 120_000,
        }
    )
    i = 0
    while not stop.is_set():
        for partition in (0, 1):
            key = f"{name}-{i}".encode()
            producer.produce(ORDERS, key=key, value=b"v", partition=partition, on_delivery=ledger.report)
        i += 1
        producer.poll(0)
        if i % 2 == 0:  # a few hundred records a second from each producer: batches, not a flood
            time.sleep(0.01)
    assert producer.flush(120) == 0


def _transactional(cluster: KafkaCluster, stop: threading.Event, done: list[int]) -> None:
    """Transactions of 20 records, every fifth aborted. A transactional error the client cannot recover
    from ends this producer; a new one with the same transactional id fences it and carries on.
    `done[0]` counts the ended transactions as they end."""

    def new() -> Producer:
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "transactional.id": "payments-1", "linger.ms": 2}
        )
        producer.init_transactions(60)
        return producer

    producer, n = new(), 0
    while not stop.is_set():
        try:
            producer.begin_transaction()
            for i in range(20):
                producer.produce(TXN, key=f"t{n}-{i}".encode(), value=b"x")
            if n % 5 == 4:
                producer.abort_transaction(60)
            else:
                producer.commit_transaction(60)
            n += 1
            done[0] = n
        except KafkaException as exc:
            try:
                if exc.args[0].txn_requires_abort():
                    producer.abort_transaction(60)
                elif not exc.args[0].retriable():
                    producer = new()
            except KafkaException:
                producer = new()
            time.sleep(0.2)


MIN_TRANSACTIONS = 5  # every fifth is aborted


@pytest.fixture(scope="module")
def failover(tmp_path_factory: pytest.TempPathFactory) -> FailoverDumps:
    work = tmp_path_factory.mktemp("failover")
    ledger = Ledger(work / "acks.jsonl")
    properties = {
        **BROKER_PROPERTIES,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
    }
    with KafkaCluster(work / "cluster", (2, 3, 4), **properties) as cluster:
        cluster.controller.create_topic(
            ORDERS, replicas=[[2, 3, 4], [3, 4, 2]], config={"min.insync.replicas": 2}
        )
        cluster.controller.create_topic(TXN, replicas=[[4, 2, 3]], config={"min.insync.replicas": 2})
        stop, transactions = threading.Event(), [0]
        threads = [
            threading.Thread(target=_idempotent, args=(cluster, ledger, f"p{k}", stop)) for k in range(2)
        ] + [threading.Thread(target=_transactional, args=(cluster, stop, transactions))]
        for thread in threads:
            thread.start()
        try:
            time.sleep(5)
            killed = cluster.leader(ORDERS, 0)[0]
            cluster.kill(killed)
            killed_dir = work / "t1" / f"broker{killed}"
            shutil.copytree(cluster.brokers[killed].log_dir, killed_dir)
            time.sleep(5)
            cluster.brokers[killed].start()
            cluster.wait_for(ORDERS, 0, [2, 3, 4])
            other = next(i for i in cluster.brokers if i != killed)
            cluster.brokers[other].stop()
            time.sleep(3)
            cluster.brokers[other].start()
            for topic, partition in ((ORDERS, 0), (ORDERS, 1), (TXN, 0)):
                cluster.wait_for(topic, partition, [2, 3, 4])
            time.sleep(3)
            # Enough transactions for an aborted one among them, however slowly the coordinator moved
            # (a loaded machine once ended only 2 in the time above).
            deadline = time.monotonic() + 120
            while transactions[0] < MIN_TRANSACTIONS and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=180)
    final = work / "t2"
    for i, broker in cluster.brokers.items():
        shutil.copytree(broker.log_dir, final / f"broker{i}")
    assert ledger.errors == []
    return FailoverDumps(killed_dir, final, killed, ledger.write(), transactions[0])


def test_leadership_moved_while_the_producers_wrote(failover: FailoverDumps) -> None:
    """The precondition: every replica of orders-0 saw the kill move its leadership (a new leader
    epoch with data after it), and the killed leader's log is behind the final one."""
    for replica in failover.final.iterdir():
        epochs = leader_epochs(replica, f"{ORDERS}-0")
        assert len(epochs) >= 2
    killed_end = max(b.last_offset for b in batches(failover.killed, f"{ORDERS}-0"))
    final_end = max(
        b.last_offset for b in batches(failover.final / f"broker{failover.killed_id}", f"{ORDERS}-0")
    )
    assert killed_end < final_end
    assert failover.transactions >= MIN_TRANSACTIONS


def test_a_failover_under_acks_all_leaves_nothing_above_info(
    spark: Any, failover: FailoverDumps, tmp_path: Path
) -> None:
    findings = run_audit(
        spark, tmp_path / "out", {"t1": failover.killed, "t2": failover.final}, failover.ledger
    )
    assert above_info(findings) == []


# --- acks=1 through a clean failover --------------------------------------------------------------------

LEADER_ONLY = "leader-only"


class LeaderOnlyDumps(NamedTuple):
    killed: Path  # the killed leader's log dir: dump t1
    final: Path  # both replicas once the killed leader rejoined: dump t2
    ledger: Path
    acked: list[tuple[int, str]]  # (offset, key) of every acknowledged record


@pytest.fixture(scope="module")
def leader_only(tmp_path_factory: pytest.TempPathFactory) -> LeaderOnlyDumps:
    """A producer with `acks=1` (no idempotence) writes while the leader is killed. The follower
    fetches at most once a second (`replica.fetch.min.bytes` it never reaches, `replica.fetch.wait.max.ms`
    1 s), so the leader acknowledged up to a second of records the follower never had; the follower is
    still in sync, and the election is clean."""
    work = tmp_path_factory.mktemp("leader-only")
    ledger = Ledger(work / "acks.jsonl")
    properties = {
        **BROKER_PROPERTIES,
        "replica.fetch.min.bytes": 1 << 20,
        "replica.fetch.wait.max.ms": 1000,
    }
    with KafkaCluster(work / "cluster", (2, 3), **properties) as cluster:
        cluster.controller.create_topic(LEADER_ONLY, replicas=[[2, 3]], config={"min.insync.replicas": 1})
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": False, "acks": 1, "linger.ms": 5}
        )

        def send(seconds: float, tag: str) -> None:
            end, i = time.monotonic() + seconds, 0
            while time.monotonic() < end:
                producer.produce(
                    LEADER_ONLY, key=f"{tag}-{i}".encode(), value=b"v", on_delivery=ledger.report
                )
                producer.poll(0)
                i += 1
                if i % 5 == 0:
                    time.sleep(0.005)

        send(3, "before")
        producer.poll(0.2)  # the acknowledgements of what the leader has appended
        cluster.kill(2)
        killed = work / "t1" / "broker2"
        shutil.copytree(cluster.brokers[2].log_dir, killed)
        cluster.wait_for(LEADER_ONLY, 0, [3])
        send(2, "after")
        assert producer.flush(60) == 0
        cluster.brokers[2].start()  # rejoins: truncates what only it had, and fetches the new leader's
        cluster.wait_for(LEADER_ONLY, 0, [2, 3])
    final = work / "t2"
    for i, broker in cluster.brokers.items():
        shutil.copytree(broker.log_dir, final / f"broker{i}")
    acked = sorted((r["offset"], r["key"]) for r in ledger.rows)
    return LeaderOnlyDumps(killed, final, ledger.write(), acked)


def held(log_dir: Path, partition: str) -> set[tuple[int, str]]:
    """(offset, key) of every record of a partition's log."""
    return {
        (item.offset, item.key.decode())
        for seg in sorted((log_dir / partition).glob("*.log"))
        for item in read_log_segment(seg, records=True)
        if isinstance(item, Record) and item.key is not None
    }


def test_acks_1_lost_acknowledged_records_the_follower_never_had(leader_only: LeaderOnlyDumps) -> None:
    """The precondition: some acknowledged records are in neither final replica, and all of them lie at
    or above the killed leader's high watermark (never committed)."""
    final = held(leader_only.final / "broker3", f"{LEADER_ONLY}-0")
    assert final == held(leader_only.final / "broker2", f"{LEADER_ONLY}-0")
    lost = [offset for offset, key in leader_only.acked if (offset, key) not in final]
    watermark = checkpoint(leader_only.killed, "replication-offset-checkpoint", f"{LEADER_ONLY}-0")
    assert lost and min(lost) >= watermark


def test_acks_1_loss_is_every_lost_acknowledged_record_and_no_divergence(
    spark: Any, leader_only: LeaderOnlyDumps, tmp_path: Path
) -> None:
    """Above the killed leader's high watermark nothing was committed, so its log and the final ones
    do not diverge; the ledger alone shows the acknowledged records the failover lost."""
    findings = run_audit(
        spark, tmp_path / "out", {"t1": leader_only.killed, "t2": leader_only.final}, leader_only.ledger
    )
    final = held(leader_only.final / "broker3", f"{LEADER_ONLY}-0")
    lost = {offset for offset, key in leader_only.acked if (offset, key) not in final}
    assert {f["kind"] for f in above_info(findings)} == {"ACKED_RECORD_MISSING"}, [
        f["message"] for f in above_info(findings) if f["kind"] != "ACKED_RECORD_MISSING"
    ]
    for replica in ("2", "3"):
        assert ranges(findings, "ACKED_RECORD_MISSING", "t2", replica) == lost
