"""The audit over real broker-written logs: no false alarms on clean logs, the right kinds on real evidence.

Logs come from a real Kafka 4.3.1 broker (the session's `broker_dump`), from `fixtures/real/` (brokers
2.7.1 and 3.x) and from the bundled sample; every table is real Delta written by the ingest stage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from audit_rules.kinds import KINDS
from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest, session_conf
from jobs.profiles import load_profile
from tests.integration.spark_fixtures import CODEGEN_MODE, TEST_CONF
from tests.paths import REAL_FIXTURES
from tests.table_rows import above_info

REAL = REAL_FIXTURES


def ingest(
    spark: Any, output: Path, *inputs: str | Path, acks: tuple[Path, ...] = (), records: bool = False
) -> None:
    options = IngestOptions(
        inputs=[LabeledPath.parse(str(p)) for p in inputs],
        output=str(output),
        acks=[LabeledPath.parse(str(p)) for p in acks],
        records=records,
    )
    run_ingest(spark, options)


def findings_of(spark: Any, output: Path, profile: str | None = None) -> list[dict[str, Any]]:
    out = audit(read_bronze(spark, str(output)), load_profile(profile))
    return [r.asDict() for r in out.findings.collect()]


def described_above_info(findings: list[dict[str, Any]]) -> list[str]:
    """The findings above info, one line each (what a failed assertion shows)."""
    return sorted(
        f"{f['kind']} {f['topic']}-{f['partition']} pid={f['producer_id']} @{f['first_offset']}: "
        f"{f['message']}"
        for f in above_info(findings)
    )


def acks_ledger(manifest: Any, path: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    """Every record the broker acknowledged in the scenarios, as the JSON-lines ledger of contract §1."""
    rows = []
    for key, runs in manifest.partitions.items():
        for run in runs:
            for record in run.records:
                ack = {"topic": run.topic, "partition": run.partition, "offset": record.offset}
                if run.producer_id >= 0:
                    ack.update(
                        producer_id=run.producer_id,
                        producer_epoch=run.producer_epoch,
                        sequence=record.sequence,
                    )
                rows.append(ack)
        assert key
    rows.extend(extra or [])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def real_findings(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("audit-real")
    ingest(spark, out, f"real={REAL}", records=True)
    return findings_of(spark, out)


def test_every_finding_follows_the_contract_registry(real_findings: list[dict[str, Any]]) -> None:
    assert real_findings, "the real fixtures hold retained producer state, so some info finding is expected"
    for f in real_findings:
        kind = KINDS[f["kind"]]
        assert (f["severity"], f["category"]) == (kind.severity.label, kind.category)
        assert f["message"] and "?" not in f["message"].split(":")[0], f["message"]
    assert len({f["finding_id"] for f in real_findings}) == len(real_findings)


def test_real_fixtures_raise_nothing_above_info(real_findings: list[dict[str, Any]]) -> None:
    # PROVENANCE.md: codecrafters foo-0 is clean; donaldy myTopic-0 is retention, not loss;
    # induswargods test-topic-0 is one non-idempotent batch.
    assert described_above_info(real_findings) == []


def test_donaldy_snapshot_producers_below_log_start_are_retained_state_not_loss(
    real_findings: list[dict[str, Any]],
) -> None:
    retained = {
        (f["topic"], f["producer_id"], f["last_offset"])
        for f in real_findings
        if f["kind"] == "PRODUCER_STATE_RETAINED"
    }
    assert retained == {("myTopic", 4001, 11), ("myTopic", 4002, 23), ("myTopic", 4003, 37)}
    assert all(
        f["explained_by"] == "retention" for f in real_findings if f["kind"] == "PRODUCER_STATE_RETAINED"
    )


def test_same_input_gives_the_same_finding_ids_with_generated_or_interpreted_code(
    spark: Any, tmp_path: Path, real_findings: list[dict[str, Any]]
) -> None:
    """The tests' session runs Spark's projections interpreted (spark_fixtures.TEST_CONF); this audit
    runs with the commands' default, generated code, and finds the same."""
    assert spark.conf.get(CODEGEN_MODE) == TEST_CONF[CODEGEN_MODE] != "FALLBACK"
    with session_conf(spark, {CODEGEN_MODE: "FALLBACK"}):
        ingest(spark, tmp_path, f"real={REAL}")
        again = findings_of(spark, tmp_path)
    assert sorted(f["finding_id"] for f in again) == sorted(f["finding_id"] for f in real_findings)
    assert sorted((f["finding_id"], f["kind"], f["severity"], f["message"]) for f in again) == sorted(
        (f["finding_id"], f["kind"], f["severity"], f["message"]) for f in real_findings
    )


class BrokerOut(NamedTuple):
    out: Path
    findings: list[dict[str, Any]]  # of one audit of `out`
    wrong_sequence_offset: int


@pytest.fixture(scope="module")
def broker_out(spark: Any, broker_dump: Any, tmp_path_factory: pytest.TempPathFactory) -> BrokerOut:
    """The broker's logs with their ledger (`acks_ledger`), record-level, audited once. Two kinds of
    wrong acks are added to the ledger: offsets past the end of `plain-0`, and an ack of a record of
    `idempotent-segments-0` under the next sequence; everything else the ledger says is true."""
    out = tmp_path_factory.mktemp("audit-broker")
    runs = [r for r in broker_dump.manifest.partitions["idempotent-segments-0"] if r.records]
    run, record = runs[0], runs[0].records[3]
    wrong_sequence = {
        "topic": run.topic,
        "partition": run.partition,
        "offset": record.offset,
        "producer_id": run.producer_id,
        "sequence": record.sequence + 1,
    }
    past_end = [{"topic": "plain", "partition": 0, "offset": o} for o in (1000, 1001, 1002, 1005)]
    ledger = acks_ledger(
        broker_dump.manifest, out.parent / "broker-acks.jsonl", extra=[*past_end, wrong_sequence]
    )
    ingest(spark, out, f"broker={broker_dump.log_dir}", acks=(ledger,), records=True)
    return BrokerOut(out, findings_of(spark, out), record.offset)


def missing(broker_out: BrokerOut) -> list[dict[str, Any]]:
    return [f for f in broker_out.findings if f["kind"] == "ACKED_RECORD_MISSING"]


def test_clean_broker_log_with_restarts_epoch_bumps_and_aborts_raises_nothing_above_info(
    broker_out: BrokerOut,
) -> None:
    findings = broker_out.findings
    # Nothing above info but the wrong acks planted in the ledger (the tests below).
    assert [f for f in described_above_info(findings) if not f.startswith("ACKED_RECORD_MISSING ")] == []
    assert len(described_above_info(findings)) == len(missing(broker_out)) == 3
    # The transactional scenario re-initialises its producer: the bump is reported, as info.
    bumps = [f for f in findings if f["kind"] == "EPOCH_BUMP"]
    assert bumps and all(f["topic"] == "transactional" for f in bumps)
    assert all(f["explained_by"] == "epoch_bump" for f in bumps)


def test_the_silver_rows_spread_over_the_cores_are_the_rows_of_the_history_as_stored(
    spark: Any, broker_out: BrokerOut, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`history.hot_producers`, `history.split_plan` and `history.spread`: when one producer holds more
    than a core's share of the history, its offset ranges are scanned in tasks of their own where it
    can be cut, and where a hot producer is scanned whole the `sequence_history` rows come through one
    more shuffle. Either way they must be the very same rows as those of the history scanned and
    stored as it is."""
    from audit_rules import history, pipeline

    def silver(mode: str) -> tuple[list[tuple[Any, ...]], str, Any]:
        monkeypatch.setattr(history, "SPREAD_MIN_ROWS", 1 << 62 if mode == "kept" else 0)
        # So many cores that every producer holds more than a core's share.
        monkeypatch.setattr(history, "cores", lambda session: 1 << 40)
        plans: list[Any] = []

        def hot_of(*args: Any, **kwargs: Any) -> Any:
            hot = history.hot_producers(*args, **kwargs)
            hot_by_mode[mode] = [(h.log_id, h.producer_id) for h in hot]
            return hot

        def plan_of(*args: Any, **kwargs: Any) -> Any:
            plans.append(None if mode == "spread" else history.split_plan(*args, **kwargs))
            return plans[-1]

        monkeypatch.setattr(pipeline, "split_plan", plan_of)
        monkeypatch.setattr(pipeline, "hot_producers", hot_of)
        handed: list[Any] = []
        out = audit(read_bronze(spark, str(broker_out.out)), load_profile(), on_silver=handed.append)
        # The caller gets the silver frame once, before the findings are planned, to start its write.
        assert len(handed) == 1 and handed[0] is out.history
        plan = out.history._jdf.queryExecution().executedPlan().toString()
        rows = sorted(tuple(r) for r in out.history.collect())
        out.release()
        return rows, plan, plans[0]

    hot_by_mode: dict[str, list[tuple[int, int]]] = {}
    spread, spread_plan, _ = silver("spread")
    split, split_plan, cut = silver("split")
    kept, kept_plan, none = silver("kept")
    assert "hashpartitioning(producer_id" in spread_plan
    assert "hashpartitioning(producer_id" not in kept_plan
    # The broker's idempotent producers (one epoch, no marker) are cut; not its transactional ones.
    assert none is None and cut is not None and len(cut.cuts) >= 1, cut
    # The transactional producers (hot too: every producer is, with so many cores) are scanned whole,
    # so the silver write is spread all the same.
    assert hot_by_mode["kept"] == [] and set(cut.cuts) < set(hot_by_mode["split"]), (hot_by_mode, cut)
    assert "hashpartitioning(producer_id" in split_plan
    # Every producer batch of the broker's logs, once.
    producer_batches = history.producer_batches(read_bronze(spark, str(broker_out.out)).batches).count()
    assert len(spread) == producer_batches > 0
    assert spread == kept
    assert split == kept


def test_only_the_wrong_acks_are_missing(broker_out: BrokerOut) -> None:
    assert sorted((f["topic"], f["partition"]) for f in missing(broker_out)) == [
        ("idempotent-segments", 0),
        ("plain", 0),
        ("plain", 0),
    ]


def test_acked_offsets_missing_from_the_log_are_reported_as_one_range(broker_out: BrokerOut) -> None:
    ranges = sorted(
        (f["first_offset"], f["last_offset"], f["missing_records"])
        for f in missing(broker_out)
        if f["topic"] == "plain"
    )
    assert ranges == [(1000, 1002, 3), (1005, 1005, 1)]


def test_an_ack_naming_another_producer_or_sequence_is_missing(broker_out: BrokerOut) -> None:
    found = [f for f in missing(broker_out) if f["topic"] == "idempotent-segments"]
    assert [(f["first_offset"], f["related_offset"] is not None) for f in found] == [
        (broker_out.wrong_sequence_offset, True)
    ]


def test_ack_keys_are_compared_where_the_ledger_writes_keys_as_the_records_have_them(
    spark: Any, broker_dump: Any, tmp_path: Path
) -> None:
    """Record-level mode: in one partition the ledger's keys are the records' text but for one ack,
    whose record is then reported as overwritten; in another every key is written as hex, which matches
    no record of that log and is not read as loss."""
    keyed = [
        (key, [r for run in runs for r in run.records if r.key])
        for key, runs in sorted(broker_dump.manifest.partitions.items())
        if not key.startswith("__")
    ]
    (text_key, text_records), (hex_key, hex_records) = [(k, rs) for k, rs in keyed if len(rs) >= 10][:2]

    def rows(partition_key: str, records: list[Any], key: Any) -> list[dict[str, Any]]:
        topic, _, partition = partition_key.rpartition("-")
        return [
            {"topic": topic, "partition": int(partition), "offset": r.offset, "key": key(r)} for r in records
        ]

    wrong = text_records[5]
    ledger = tmp_path / "acks.jsonl"
    ledger_rows = rows(text_key, text_records, lambda r: r.key + "!" if r is wrong else r.key)
    ledger_rows += rows(hex_key, hex_records, lambda r: r.key.encode().hex())
    ledger.write_text("".join(json.dumps(r) + "\n" for r in ledger_rows))
    ingest(spark, tmp_path / "out", f"broker={broker_dump.log_dir}", acks=(ledger,), records=True)
    found = [f for f in findings_of(spark, tmp_path / "out") if f["kind"] == "ACKED_RECORD_MISSING"]
    assert [(f"{f['topic']}-{f['partition']}", f["first_offset"], f["last_offset"]) for f in found] == [
        (text_key, wrong.offset, wrong.offset)
    ]
    assert "other records" in found[0]["message"] and found[0]["related_offset"] is not None


@pytest.fixture(scope="module")
def clean_findings(
    spark: Any, clean_broker_dump: Any, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("audit-clean")
    ingest(spark, out, f"clean={clean_broker_dump.log_dir}", records=True)
    return findings_of(spark, out)


def test_logs_truncated_by_real_retention_raise_nothing_above_info(
    clean_findings: list[dict[str, Any]],
) -> None:
    assert described_above_info(clean_findings) == []


def test_retention_and_delete_records_explain_histories_that_start_mid_sequence(
    clean_findings: list[dict[str, Any]],
) -> None:
    truncated = {
        (f["topic"], f["base_sequence"] > 0, f["explained_by"])
        for f in clean_findings
        if f["kind"] == "HISTORY_TRUNCATED_BY_RETENTION"
    }
    assert truncated == {("clean-retention", True, "retention"), ("clean-delete-records", True, "retention")}


def test_idle_producer_deleted_by_retention_is_retained_state(clean_findings: list[dict[str, Any]]) -> None:
    retained = [f for f in clean_findings if f["kind"] == "PRODUCER_STATE_RETAINED"]
    assert [(f["topic"], f["last_offset"], f["last_sequence"]) for f in retained] == [
        ("clean-retention", 59, 29)
    ]


def stored_rdds(spark: Any) -> set[str]:
    """The RDDs whose blocks the session holds, but Delta's own cache of each table's snapshot state
    ("Delta Table State #<version> - <path>")."""
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    return {f"{i.id()} {i.name()}" for i in infos if not i.name().startswith("Delta Table State")}


def test_release_frees_the_blocks_the_audit_stored(spark: Any, tmp_path: Path) -> None:
    """The stored history, its events and the log bounds are local checkpoints, which
    `DataFrame.unpersist` alone does not free: a session that audits again would keep every run's
    blocks. So are the frames the rules store for their own readers (two dumps of a partition and an
    ack ledger: the producers gone since the earlier dump, the pairs of logs compared, the ack checks
    and their runs)."""
    from audit_rules.history import cores
    from tests.integration.test_audit_kinds import batches_of, write_partition

    log_dir = write_partition(tmp_path, batches_of(7, 0, [b"a", b"b", b"c"], start_offset=0, start_seq=0))
    ledger = tmp_path / "acks.jsonl"
    ledger.write_text("".join(f'{{"topic": "orders", "partition": 0, "offset": {o}}}\n' for o in range(3)))
    alone, together = tmp_path / "alone", tmp_path / "together"
    ingest(spark, alone, f"d={log_dir}")
    ingest(spark, together, f"d={log_dir}", f"e={log_dir}", acks=(ledger,))
    stored: dict[Path, int] = {}
    for output in (alone, together):
        before = stored_rdds(spark)
        out = audit(read_bronze(spark, str(output)), load_profile())
        # (The rules' findings are read in a task per core: `findings.union_findings`.)
        assert f"Coalesce {cores(spark)}" in out.findings._jdf.queryExecution().executedPlan().toString()
        assert out.findings.count() == 0
        stored[output] = len(stored_rdds(spark) - before)
        out.release()
        assert stored_rdds(spark) - before == set()
    assert stored[alone] >= 3
    assert stored[together] >= stored[alone] + 4


def test_a_failed_report_lets_the_writes_beside_it_end_then_frees_what_the_audit_stored(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partition summary's write and findings.json run beside index.html, all reading the stored
    findings, and the silver write beside them all: when index.html fails, its error is the audit's,
    every table it had started is written whole, and what the audit stored (the history and the frames
    beside it too) is freed once the writes reading it have ended (freed sooner, they would lose the
    rows they read; not freed, a session that goes on would keep them)."""
    from jobs import report
    from jobs.audit import run_audit
    from tests.integration.test_audit_kinds import batches_of, write_partition

    # Sequences 0, 1, then 5: one gap.
    batches = batches_of(7, 0, [b"a", b"b"], start_offset=0, start_seq=0)
    batches += batches_of(7, 0, [b"c"], start_offset=2, start_seq=5)
    ingest(spark, tmp_path / "out", f"d={write_partition(tmp_path, batches)}")
    before = stored_rdds(spark)

    def html_fails(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("index.html failed")

    monkeypatch.setattr(report, "write_html_report", html_fails)
    with pytest.raises(RuntimeError, match=r"index\.html failed"):
        run_audit(spark, str(tmp_path / "out"), load_profile(), gx=False)
    assert stored_rdds(spark) - before == set()
    findings = spark.read.format("delta").load(str(tmp_path / "out" / "findings"))
    assert [r["kind"] for r in findings.collect()] == ["SEQUENCE_GAP"]
    history = spark.read.format("delta").load(str(tmp_path / "out" / "sequence_history"))
    assert history.count() == 3


def test_the_audit_plans_without_constraint_propagation_in_a_session_started_with_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`PLAN_CONF`: a local session has it from its start; in one the audit did not start (spark-submit,
    Databricks) `run_audit` sets it for its run only, and the session has its own value back after it,
    after a failure too."""
    from jobs import audit as audit_job
    from jobs.spark_session import LOCAL_CONF, PLAN_CONF
    from tests.integration.test_audit_kinds import batches_of, write_partition

    assert PLAN_CONF.items() <= LOCAL_CONF.items()
    assert {key: spark.conf.get(key) for key in PLAN_CONF} == PLAN_CONF
    log_dir = write_partition(tmp_path, batches_of(7, 0, [b"a"], start_offset=0, start_seq=0))
    ingest(spark, tmp_path / "out", f"d={log_dir}")
    seen: list[dict[str, str | None]] = []

    class Planned(Exception):
        pass

    def planning(*args: Any, **kwargs: Any) -> None:
        seen.append({key: spark.conf.get(key) for key in PLAN_CONF})
        raise Planned

    monkeypatch.setattr(audit_job, "audit", planning)
    theirs = {key: "true" for key in PLAN_CONF}
    with session_conf(spark, theirs):
        with pytest.raises(Planned):
            audit_job.run_audit(spark, str(tmp_path / "out"), load_profile(), gx=False)
        assert {key: spark.conf.get(key) for key in PLAN_CONF} == theirs
    assert seen == [PLAN_CONF]


def test_log_and_file_ids_tell_nulls_apart(spark: Any) -> None:
    """The ids are hashes of the key columns, and Spark's hashes skip a null input: without the null
    flags (d, null, t) and (d, t, null) would share an id."""
    from audit_rules.logs import file_id, log_id

    rows = [
        ("d", None, "t", 0, "/x.log"),
        ("d", "t", None, 0, "/x.log"),
        ("d", "", "t", 0, "/x.log"),
        ("d", None, "t", 0, "/y.log"),
        ("d", None, "t", 1, "/x.log"),
    ]
    df = spark.createDataFrame(
        rows, "dump_id string, replica string, topic string, partition int, file string"
    )
    ids = df.select(log_id().alias("log_id"), file_id().alias("file_id")).collect()
    assert len({r["file_id"] for r in ids}) == 5
    # The first and fourth rows differ only in their file: one log.
    assert len({r["log_id"] for r in ids}) == 4
    assert ids[0]["log_id"] == ids[3]["log_id"]


def test_check_ids_rejects_two_logs_with_one_id(spark: Any) -> None:
    from audit_rules.logs import check_ids

    logs = spark.createDataFrame([(1, "a"), (1, "b"), (2, "c")], "log_id long, log_key string")
    files = spark.createDataFrame([(7, "/a"), (8, "/b")], "file_id long, file string")
    with pytest.raises(ValueError, match="two of the 3 audited logs share a 64-bit log_id"):
        check_ids(logs, files)
    check_ids(logs.where("log_key != 'b'"), files)
    with pytest.raises(ValueError, match="audited files share a 64-bit file_id"):
        check_ids(logs.where("log_key != 'b'"), files.unionByName(files.limit(1)))


def test_started_names_the_scheduler_pool_of_its_thread_only(spark: Any) -> None:
    from audit_rules.pipeline import started

    sc = spark.sparkContext
    key = "spark.scheduler.pool"
    before = sc.getLocalProperty(key)
    inside = started(spark, lambda: sc.getLocalProperty(key), pool="audit-test")()
    assert inside == "audit-test"
    assert sc.getLocalProperty(key) == before
    assert started(spark, lambda: sc.getLocalProperty(key))() == before


def test_an_output_given_as_a_uri_gets_its_reports_there(spark: Any, tmp_path: Path) -> None:
    """`--output` as a URI (here `file:`, as `s3://` or `abfss://` on a cluster): the tables go there,
    and so do the reports, written locally and copied through the Hadoop file system; a second audit
    replaces them whole."""
    from jobs.audit import run_audit
    from tests.integration.test_audit_kinds import batches_of, write_partition

    batches = batches_of(7, 0, [b"a", b"b"], start_offset=0, start_seq=0)
    batches += batches_of(7, 0, [b"c"], start_offset=2, start_seq=5)
    uri = f"file:{tmp_path / 'out'}"  # Hadoop's own form: one slash
    ingest(spark, uri, f"d={write_partition(tmp_path, batches)}")  # type: ignore[arg-type]
    (tmp_path / "out" / "report").mkdir()
    (tmp_path / "out" / "report" / "stale.txt").write_text("from an earlier audit")
    result = run_audit(spark, uri, load_profile(), gx=False)
    assert result.report_dir == uri + "/report"
    report = tmp_path / "out" / "report"
    assert sorted(p.name for p in report.iterdir()) == ["findings.json", "index.html"]
    document = json.loads((report / "findings.json").read_text())
    assert [f["kind"] for f in document["findings"]] == ["SEQUENCE_GAP"]
    assert "SEQUENCE_GAP" in (report / "index.html").read_text()
    findings = spark.read.format("delta").load(str(tmp_path / "out" / "findings"))
    assert [r["kind"] for r in findings.collect()] == ["SEQUENCE_GAP"]
