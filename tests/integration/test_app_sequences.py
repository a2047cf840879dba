"""App sequences of producers without idempotence, written through a real broker.

The application stamps its producer name and a sequence into each record (a header, or a field of a
JSON value); the broker checks nothing for producer id -1, so only the audit can see the Sarama
#2619 reordering, duplicates and holes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker

# Sarama #2619: batches A=(3,4) re-queued behind B=(5,6): the log reads 1,2,5,6,3,4,7.
SARAMA_ORDER = [1, 2, 5, 6, 3, 4, 7]
# A JSON-stamped producer that re-sent 3 and never sent 4 and 5.
JSON_ORDER = [1, 2, 3, 3, 6]


@pytest.fixture(scope="module")
def app_log(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[int]]]:
    work = tmp_path_factory.mktemp("app-seq-broker")
    offsets: dict[str, list[int]] = {"header": [], "json": []}
    with KafkaBroker(work) as broker:
        broker.create_topic("app-header")
        broker.create_topic("app-json")
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
        for seq in JSON_ORDER:
            producer.produce(
                "app-json",
                value=json.dumps({"producer": "p2", "seq": seq}).encode(),
                on_delivery=sent("json"),
            )
            producer.flush(30)
    out = work / "out"
    run_ingest(
        spark, IngestOptions(inputs=[LabeledPath("app", str(broker.log_dir))], output=str(out), records=True)
    )
    return out, offsets


def findings(spark: Any, out: Path, producer: str, sequence: str) -> list[dict[str, Any]]:
    profile = load_profile(app_producer=producer, app_sequence=sequence)
    return [r.asDict() for r in audit(read_bronze(spark, str(out)), profile).findings.collect()]


def test_sarama_reordering_is_one_regression_not_loss_or_duplicates(
    spark: Any, app_log: tuple[Path, dict[str, list[int]]]
) -> None:
    out, offsets = app_log
    found = [
        f for f in findings(spark, out, "header:app-producer", "header:app-seq") if f["topic"] == "app-header"
    ]
    at_three = offsets["header"][SARAMA_ORDER.index(3)]
    at_six = offsets["header"][SARAMA_ORDER.index(6)]
    assert [(f["kind"], f["first_offset"], f["related_offset"]) for f in found] == [
        ("APP_SEQUENCE_REGRESSION", at_three, at_six)
    ]
    assert found[0]["severity"] == "error" and "orders-1" in found[0]["message"]


def test_json_stamped_duplicate_and_hole(spark: Any, app_log: tuple[Path, dict[str, list[int]]]) -> None:
    out, offsets = app_log
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


def test_without_an_extractor_a_non_idempotent_log_has_no_findings(
    spark: Any, app_log: tuple[Path, dict[str, list[int]]]
) -> None:
    out, _ = app_log
    assert [r for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()] == []
