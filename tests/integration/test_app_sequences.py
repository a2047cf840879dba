"""App sequences of producers without idempotence, written through a real broker.

The application stamps its producer name and a sequence into each record (a header, or a field of a
JSON value); the broker checks nothing for producer id -1, so only the audit can see the Sarama
#2619 reordering, duplicates and holes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType

from audit_rules.ordering import app_sequence_rules, app_sequences
from audit_rules.pipeline import audit
from audit_rules.profile import AppSequenceSpec
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker
from schemas.tables import RECORDS

# Sarama #2619: batches A=(3,4) re-queued behind B=(5,6): the log reads 1,2,5,6,3,4,7.
SARAMA_ORDER = [1, 2, 5, 6, 3, 4, 7]
# Seed 002's shape with the first try of [3] written but its ack lost: 3 again, and 4, after 5 and 6.
RESENT_ORDER = [1, 2, 3, 5, 6, 3, 4, 7]
# A JSON-stamped producer that re-sent 3 and never sent 4 and 5.
JSON_ORDER = [1, 2, 3, 3, 6]
# One counter for a producer's records in all three partitions of a topic, each value sent to the
# partition its key hashes to (here: value % 3): 17 never sent, 22 sent again to the next partition.
SPREAD = [(seq, seq % 3) for seq in range(1, 31) if seq != 17] + [(22, 2)]
# A counter per partition: 1-10 in each of three partitions, 5 never sent to partition 1.
PER_PARTITION = [(seq, p) for seq in range(1, 11) for p in range(3) if (seq, p) != (5, 1)]


@pytest.fixture(scope="module")
def app_log(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> AppLog:
    work = tmp_path_factory.mktemp("app-seq-broker")
    offsets: dict[str, list[int]] = {"header": [], "json": [], "resent": []}
    placed: dict[str, dict[tuple[int, int], list[int]]] = {"spread": {}, "per-partition": {}}
    with KafkaBroker(work) as broker:
        broker.create_topic("app-header")
        broker.create_topic("app-json")
        broker.create_topic("app-resent")
        broker.create_topic("app-spread", partitions=3)
        broker.create_topic("app-per-partition", partitions=3)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": False,
                "acks": "all",
                "linger.ms": 0,
            }
        )

        def sent(kind: str) -> Any:
            def report(err: Any, msg: Any) -> None:
                assert err is None, err
                offsets[kind].append(msg.offset())

            return report

        for seq in SARAMA_ORDER:
            producer.produce(
                "app-header",
                value=f"order {seq}".encode(),
                headers=[("app-producer", b"orders-1"), ("app-seq", str(seq).encode())],
                on_delivery=sent("header"),
            )
            producer.flush(30)  # one record per request: the log order is the send order
        for seq in RESENT_ORDER:
            producer.produce(
                "app-resent",
                value=f"order {seq}".encode(),
                headers=[("app-producer", b"orders-2"), ("app-seq", str(seq).encode())],
                on_delivery=sent("resent"),
            )
            producer.flush(30)
        for seq in JSON_ORDER:
            producer.produce(
                "app-json",
                value=json.dumps({"producer": "p2", "seq": seq}).encode(),
                on_delivery=sent("json"),
            )
            producer.flush(30)
        for name, sends in (("spread", SPREAD), ("per-partition", PER_PARTITION)):
            for seq, partition in sends:

                def at(err: Any, msg: Any, name: str = name, seq: int = seq) -> None:
                    assert err is None, err
                    placed[name].setdefault((seq, msg.partition()), []).append(msg.offset())

                producer.produce(
                    f"app-{name}",
                    value=f"{name} {seq}".encode(),
                    partition=partition,
                    headers=[("app-producer", name.encode()), ("app-seq", str(seq).encode())],
                    on_delivery=at,
                )
            producer.flush(30)
    out = work / "out"
    run_ingest(
        spark, IngestOptions(inputs=[LabeledPath("app", str(broker.log_dir))], output=str(out), records=True)
    )
    return out, offsets, placed


AppLog = tuple[Path, dict[str, list[int]], dict[str, dict[tuple[int, int], list[int]]]]


# The module's bronze tables are written once and never changed, and the audit is a function of its
# input and profile: each (extractor, scope) is audited once and its findings shared by the tests that
# read them (nine audits of the module's input were five).
_AUDITED: dict[tuple[str, str, str, str | None], list[dict[str, Any]]] = {}


def findings(
    spark: Any, out: Path, producer: str, sequence: str, scope: str | None = None
) -> list[dict[str, Any]]:
    key = (str(out), producer, sequence, scope)
    if key not in _AUDITED:
        profile = load_profile(app_producer=producer, app_sequence=sequence, app_sequence_scope=scope)
        _AUDITED[key] = [r.asDict() for r in audit(read_bronze(spark, str(out)), profile).findings.collect()]
    return [dict(f) for f in _AUDITED[key]]


def test_sarama_reordering_is_one_regression_not_loss_or_duplicates(spark: Any, app_log: AppLog) -> None:
    out, offsets, _ = app_log
    found = [
        f for f in findings(spark, out, "header:app-producer", "header:app-seq") if f["topic"] == "app-header"
    ]
    at_three = offsets["header"][SARAMA_ORDER.index(3)]
    at_six = offsets["header"][SARAMA_ORDER.index(6)]
    assert [(f["kind"], f["first_offset"], f["related_offset"]) for f in found] == [
        ("APP_SEQUENCE_REGRESSION", at_three, at_six)
    ]
    assert found[0]["severity"] == "error" and "orders-1" in found[0]["message"]


def test_a_reordering_right_after_a_duplicate_is_still_a_regression(spark: Any, app_log: AppLog) -> None:
    """1,2,3,5,6,3,4,7: the 4 was compared with the copy of 3 before it, not with 6, and the
    reordering was missed; it is the duplicate and one regression, at 4."""
    out, offsets, _ = app_log
    found = sorted(
        (f["kind"], f["first_offset"], f["related_offset"])
        for f in findings(spark, out, "header:app-producer", "header:app-seq")
        if f["topic"] == "app-resent"
    )
    o = offsets["resent"]
    assert found == [("APP_SEQUENCE_REGRESSION", o[6], o[4]), ("DUPLICATE_APP_SEQUENCE", o[5], o[2])]


def test_json_stamped_duplicate_and_hole(spark: Any, app_log: AppLog) -> None:
    out, offsets, _ = app_log
    found = sorted(
        (f["kind"], f["first_offset"], f["related_offset"], f["missing_records"])
        for f in findings(spark, out, "json:producer", "json:seq")
        if f["topic"] == "app-json"
    )
    o = offsets["json"]
    assert found == [
        ("APP_SEQUENCE_GAP", o[4], o[2], 2),
        ("DUPLICATE_APP_SEQUENCE", o[3], o[2], None),
    ]


def test_without_an_extractor_a_non_idempotent_log_has_no_findings(spark: Any, app_log: AppLog) -> None:
    out, _, _ = app_log
    assert [r for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()] == []


def topic_findings(spark: Any, out: Path, topic: str, scope: str | None = None) -> list[tuple[Any, ...]]:
    return sorted(
        (f["kind"], f["partition"], f["first_offset"], f["related_offset"], f["missing_records"])
        for f in findings(spark, out, "header:app-producer", "header:app-seq", scope)
        if f["topic"] == topic
    )


def test_a_counter_across_partitions_is_audited_over_the_topic(spark: Any, app_log: AppLog) -> None:
    """Each partition holds every third value: read per partition, every step would be a hole. Over the
    topic only 17 is missing, and the 22 sent to a second partition is a duplicate."""
    out, _, placed = app_log
    at = placed["spread"]
    (after_hole,) = at[(18, 0)]
    (below_hole,) = at[(16, 1)]  # in another partition: no related offset in the finding's log
    (copy,) = at[(22, 2)]
    expected = [
        ("APP_SEQUENCE_GAP", 0, after_hole, None, 1),
        ("DUPLICATE_APP_SEQUENCE", 2, copy, None, None),
    ]
    assert topic_findings(spark, out, "app-spread") == expected
    assert topic_findings(spark, out, "app-spread", "topic") == expected
    gap = next(
        f
        for f in findings(spark, out, "header:app-producer", "header:app-seq")
        if f["topic"] == "app-spread" and f["kind"] == "APP_SEQUENCE_GAP"
    )
    assert (
        f"16 (partition 1, offset {below_hole})" in gap["message"] and "across partitions" in gap["message"]
    )
    # The dump does not tell how many partitions the topic has: one not dumped may hold the value.
    assert "to none of the topic's dumped partitions" in gap["message"]
    assert "unless a partition of the topic that is not in the dump holds them" in gap["message"]
    # Read per partition (forced), the same log is all holes (9 + 9 + 8 steps of three values) and the
    # 22 re-sent after 29 goes back: what `auto` is there to avoid.
    forced = Counter(f[0] for f in topic_findings(spark, out, "app-spread", "partition"))
    assert forced == {"APP_SEQUENCE_GAP": 26, "APP_SEQUENCE_REGRESSION": 1}


def test_a_counter_per_partition_is_audited_per_partition(spark: Any, app_log: AppLog) -> None:
    out, _, placed = app_log
    at = placed["per-partition"]
    (after_hole,) = at[(6, 1)]
    (below_hole,) = at[(4, 1)]
    assert topic_findings(spark, out, "app-per-partition") == [
        ("APP_SEQUENCE_GAP", 1, after_hole, below_hole, 1)
    ]
    # Read over the topic (forced), every value but the first of each is a duplicate: 2 x 10 - 1.
    forced = topic_findings(spark, out, "app-per-partition", "topic")
    assert [f[0] for f in forced] == ["DUPLICATE_APP_SEQUENCE"] * 19


def test_an_ack_naming_another_app_sequence_than_its_record_is_missing(
    spark: Any, app_log: AppLog, tmp_path: Path
) -> None:
    """Record-level mode with the extractor: an ack's app producer and sequence must be its record's.
    One ack of the header-stamped topic names the sequence of another record; the JSON-stamped topic's
    acks, which the header extractor reads in none of its records, prove nothing."""
    out, offsets, _ = app_log
    log_dir = out.parent / "data"
    wrong = SARAMA_ORDER.index(5)
    rows = [
        {"topic": "app-header", "partition": 0, "offset": o, "app_producer": "orders-1", "app_sequence": seq}
        for o, seq in zip(offsets["header"], SARAMA_ORDER, strict=True)
    ]
    rows[wrong]["app_sequence"] = 4
    rows += [
        {"topic": "app-json", "partition": 0, "offset": o, "app_producer": "p2", "app_sequence": seq}
        for o, seq in zip(offsets["json"], JSON_ORDER, strict=True)
    ]
    ledger = tmp_path / "acks.jsonl"
    ledger.write_text("".join(json.dumps(r) + "\n" for r in rows))
    acked = tmp_path / "out"
    options = IngestOptions(
        inputs=[LabeledPath("app", str(log_dir))],
        output=str(acked),
        records=True,
        acks=[LabeledPath("acks", str(ledger))],
    )
    run_ingest(spark, options)
    found = [
        f
        for f in findings(spark, acked, "header:app-producer", "header:app-seq")
        if f["kind"].startswith("ACKED")
    ]
    at = offsets["header"][wrong]
    assert [(f["kind"], f["topic"], f["first_offset"], f["last_offset"]) for f in found] == [
        ("ACKED_RECORD_MISSING", "app-header", at, at)
    ]
    assert "other records" in found[0]["message"]


def test_a_json_sequence_written_as_a_float_with_a_zero_fraction_is_that_number(spark: Any) -> None:
    """`json.dumps(3.0)` and Jackson write `3.0`: a whole number all the same. `3.5`, `3.0.0`, text and a
    value past a long are no app sequence."""
    written = ["3.0", "4", " 5.00 ", "-6.0", "3.5", "3.0.0", "seven", "9223372036854775808"]
    defaults = {LongType: 0, IntegerType: -1, StringType: "x", BinaryType: None, ArrayType: []}
    rows = []
    for offset, seq in enumerate(written):
        row = {f.name: defaults.get(type(f.dataType)) for f in RECORDS.schema.fields}
        row.update(offset=offset, value=b'{"producer": "p", "seq": ' + seq.strip().encode() + b"}")
        rows.append(row)
    records = spark.createDataFrame(rows, RECORDS.schema)
    read = app_sequences(records, AppSequenceSpec("json:producer", "json:seq"))
    assert sorted((r["offset"], r["app_sequence"]) for r in read.collect()) == [
        (0, 3),
        (1, 4),
        (2, 5),
        (3, -6),
    ]


def test_a_value_in_two_partitions_is_the_duplicate_where_it_was_written_later(spark: Any) -> None:
    """A topic-wide counter: values 1-40 dealt to partitions 0-2 (value v to partition v % 3, offsets
    in order), and value 38, first written to partition 2, written again 30 s later to partition 0.
    Offsets of two partitions do not compare in time: the copy is the later record, in partition 0,
    not the original in partition 2 (nor whichever partition has the lower number)."""
    defaults = {LongType: 0, IntegerType: -1, StringType: "x", BinaryType: None, ArrayType: []}
    placed = [(v, v % 3, 1_000 * v) for v in range(1, 41)] + [(38, 0, 1_000 * 38 + 30_000)]
    offsets: Counter[int] = Counter()
    rows = []
    for value, partition, timestamp in placed:
        row = {f.name: defaults.get(type(f.dataType)) for f in RECORDS.schema.fields}
        row.update(
            dump_id="d",
            replica="1",
            topic="spread",
            partition=partition,
            file=f"/d/spread-{partition}/{0:020d}.log",
            offset=offsets[partition],
            timestamp=timestamp,
            header_keys=["app-producer", "app-seq"],
            header_values=[b"p", str(value).encode()],
        )
        offsets[partition] += 1
        rows.append(row)
    records = spark.createDataFrame(rows, RECORDS.schema)
    spec = AppSequenceSpec("header:app-producer", "header:app-seq", "topic")
    found = app_sequence_rules(records, spec).collect()
    assert [(f["kind"], f["partition"], f["first_offset"]) for f in found] == [
        ("DUPLICATE_APP_SEQUENCE", 0, offsets[0] - 1)
    ], [f["message"] for f in found]
    assert "first in partition 2 at offset 12" in found[0]["message"]


def test_on_a_compacted_log_offsets_other_records_hold_are_no_room_for_missing_values(spark: Any) -> None:
    """A compacted log, app producer p1's counter per partition: 48 at offset 98, then 50 at offset 100
    with 49 missing. Where offset 99 holds another producer's record (`held`), 49 was never there: the
    cleaner keeps every offset it keeps, so an APP_SEQUENCE_GAP. Where no record holds 99 (`free`), the
    cleaner may have removed 49 there: none."""
    from pyspark.sql import functions as F

    from audit_rules.logs import with_log_key

    defaults = {LongType: 0, IntegerType: -1, StringType: "x", BinaryType: None, ArrayType: []}
    rows = []
    for topic in ("held", "free"):
        placed = [(98, "p1", 48), (100, "p1", 50)] + ([(99, "p2", 7)] if topic == "held" else [])
        for offset, producer, value in placed:
            row = {f.name: defaults.get(type(f.dataType)) for f in RECORDS.schema.fields}
            row.update(
                dump_id="d",
                replica="1",
                topic=topic,
                partition=0,
                file=f"/d/{topic}-0/{0:020d}.log",
                offset=offset,
                key=f"key-{offset}".encode(),
                header_keys=["app-producer", "app-seq"],
                header_values=[producer.encode(), str(value).encode()],
            )
            rows.append(row)
    records = spark.createDataFrame(rows, RECORDS.schema)
    logs = (
        with_log_key(records).select("log_key").distinct().withColumn("cleaned_to", F.lit(1000).cast("long"))
    )
    spec = AppSequenceSpec("header:app-producer", "header:app-seq", "partition")
    found = app_sequence_rules(records, spec, logs=logs).collect()
    assert [(f["kind"], f["topic"], f["first_offset"], f["missing_records"]) for f in found] == [
        ("APP_SEQUENCE_GAP", "held", 100, 1)
    ], [f["message"] for f in found]
