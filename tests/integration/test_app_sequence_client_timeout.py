"""App-sequence holes of idempotent producers whose broker sequences run on (librdkafka #2163).

With idempotence, librdkafka drops timed-out queued messages and resets the base sequence "to the
first message in the queue ... as if they had never existed" (PR #2188): the log is gap-free in broker
sequences, and only the application's own sequence shows the values it never sent. Where the records
on either side of a hole are of one producer id and epoch with adjacent broker sequences, the hole is
an APP_SEQUENCE_GAP explained by `client_timeout`; where the broker sequences jump too, the sequence
rules judge it (SEQUENCE_GAP) and the app sequence adds nothing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from audit_rules.ordering import app_sequence_rules
from audit_rules.pipeline import audit
from audit_rules.profile import AppSequenceSpec
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from tests.builders import V2Batch, build_v2, segment

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
MAX_SEQUENCE = 2_147_483_647
APP = [1, 2, 3, 6, 7, 8]  # 4 and 5 timed out in the client's queue
# Partition directory -> (producer id, epoch, broker sequence) of each record of APP, in offset order.
SENT = {
    # The #2163 shape: broker sequences contiguous across the hole.
    "rdk-timeout-0": [(7, 0, s) for s in range(6)],
    # The control: the broker sequences jump by two where the app sequence does (a SEQUENCE_GAP).
    "seq-jump-0": [(8, 0, s) for s in (0, 1, 2, 5, 6, 7)],
    # The #2163 shape across the broker sequences' wrap: 2147483647, then 0.
    "seq-wrap-0": [(9, 0, s) for s in (MAX_SEQUENCE - 2, MAX_SEQUENCE - 1, MAX_SEQUENCE, 0, 1, 2)],
    # Adjacent broker sequences of two epochs, and of two producer ids: no one stream runs on.
    "new-epoch-0": [(10, 0, 0), (10, 0, 1), (10, 0, 2), (10, 1, 3), (10, 1, 4), (10, 1, 5)],
    "new-producer-0": [(11, 0, 0), (11, 0, 1), (11, 0, 2), (12, 0, 3), (12, 0, 4), (12, 0, 5)],
}
# A topic-wide counter of one idempotent producer: value v to partition v % 3, each partition's broker
# sequences contiguous. One partition's sequences say nothing of the values sent to the others.
SPREAD = {p: [v for v in range(1, 31) if v % 3 == p] for p in range(3)}
HEADERS = ("app-producer", "app-seq")


def stamped(offset: int, app: int, producer_id: int, epoch: int, sequence: int) -> bytes:
    """A one-record batch of app producer `rdk` stamped with app sequence `app`."""
    return build_v2(
        V2Batch(
            base_offset=offset,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            records=((None, b"order"),),
            headers=((HEADERS[0], b"rdk"), (HEADERS[1], str(app).encode())),
            base_timestamp=T0 + 1_000 * app,
        )
    )


@pytest.fixture(scope="module")
def bronze_out(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("app-client-timeout")
    dump = root / "dump"
    logs = {
        name: [stamped(i, a, *s) for i, (a, s) in enumerate(zip(APP, sent, strict=True))]
        for name, sent in SENT.items()
    }
    for p, values in SPREAD.items():
        logs[f"spread-{p}"] = [stamped(i, v, 20, 0, i) for i, v in enumerate(values)]
    for name, batches in logs.items():
        (dump / name).mkdir(parents=True)
        (dump / name / f"{0:020d}.log").write_bytes(segment(*batches))
    out = root / "out"
    run_ingest(spark, IngestOptions([LabeledPath("d", str(dump))], str(out), records=True))
    return out


_FOUND: dict[tuple[str, str], list[dict[str, Any]]] = {}


def rule_findings(spark: Any, out: Path, scope: str = "auto") -> list[dict[str, Any]]:
    """The app-sequence rules' findings over the dump's records, given its batches (their producers)."""
    key = ("rule", scope)
    if key not in _FOUND:
        bronze = read_bronze(spark, str(out))
        spec = AppSequenceSpec(f"header:{HEADERS[0]}", f"header:{HEADERS[1]}", scope)
        found = app_sequence_rules(bronze.records, spec, batches=bronze.batches).collect()
        _FOUND[key] = [r.asDict() for r in found]
    return _FOUND[key]


def audit_findings(spark: Any, out: Path) -> list[dict[str, Any]]:
    key = ("audit", "auto")
    if key not in _FOUND:
        profile = load_profile(app_producer=f"header:{HEADERS[0]}", app_sequence=f"header:{HEADERS[1]}")
        _FOUND[key] = [r.asDict() for r in audit(read_bronze(spark, str(out)), profile).findings.collect()]
    return _FOUND[key]


def app_kinds(found: list[dict[str, Any]], topic: str) -> list[tuple[Any, ...]]:
    return sorted(
        (f["kind"], f["first_offset"], f["related_offset"], f["missing_records"], f["explained_by"])
        for f in found
        if f["topic"] == topic and "APP_SEQUENCE" in f["kind"]
    )


def test_values_an_idempotent_producer_never_sent_are_a_client_timeout_gap(
    spark: Any, bronze_out: Path
) -> None:
    """1,2,3,6,7,8 at broker sequences 0-5 of producer 7 epoch 0: one hole, 4 and 5, between offsets 2
    and 3, which the client dropped before sending."""
    found = rule_findings(spark, bronze_out)
    assert app_kinds(found, "rdk-timeout") == [("APP_SEQUENCE_GAP", 3, 2, 2, "client_timeout")]
    (gap,) = [f for f in found if f["topic"] == "rdk-timeout"]
    assert (gap["severity"], gap["producer_id"], gap["producer_epoch"]) == ("warning", 7, 0)
    assert "sequences 4-5 (2 value(s))" in gap["message"], gap["message"]
    assert "broker sequences are contiguous across the hole (2, then 3)" in gap["message"], gap["message"]
    assert "the client never sent those values" in gap["message"], gap["message"]


def test_broker_sequences_that_wrap_across_the_hole_are_contiguous(spark: Any, bronze_out: Path) -> None:
    """After 2147483647 comes 0 (contract §1.4): the hole between them is the client's."""
    found = rule_findings(spark, bronze_out)
    assert app_kinds(found, "seq-wrap") == [("APP_SEQUENCE_GAP", 3, 2, 2, "client_timeout")]


def test_a_hole_where_the_broker_sequences_jump_is_the_sequence_rules(spark: Any, bronze_out: Path) -> None:
    """The same app values at broker sequences 0,1,2,5,6,7: the broker-level SEQUENCE_GAP judges it, and
    the app sequence adds no APP_SEQUENCE_GAP."""
    assert app_kinds(rule_findings(spark, bronze_out), "seq-jump") == []
    found = audit_findings(spark, bronze_out)
    assert app_kinds(found, "seq-jump") == []
    gaps = [
        (f["producer_id"], f["first_offset"])
        for f in found
        if f["topic"] == "seq-jump" and f["kind"] == "SEQUENCE_GAP"
    ]
    assert gaps == [(8, 3)], gaps


def test_adjacent_sequences_of_two_epochs_or_two_producers_explain_no_hole(
    spark: Any, bronze_out: Path
) -> None:
    found = rule_findings(spark, bronze_out)
    assert app_kinds(found, "new-epoch") == []
    assert app_kinds(found, "new-producer") == []


def test_a_topic_wide_counter_has_no_client_timeout_gaps(spark: Any, bronze_out: Path) -> None:
    """Each partition holds every third value at contiguous broker sequences: read per partition
    (forced), every step would be a hole the client never sent (9 in each of the three); read over the
    topic (`auto` decides so, or `topic`), none."""
    assert app_kinds(rule_findings(spark, bronze_out), "spread") == []
    assert app_kinds(rule_findings(spark, bronze_out, "topic"), "spread") == []
    forced = Counter(f[-1] for f in app_kinds(rule_findings(spark, bronze_out, "partition"), "spread"))
    assert forced == {"client_timeout": 27}, forced


def test_the_audit_reports_the_client_timeout_gap(spark: Any, bronze_out: Path) -> None:
    assert app_kinds(audit_findings(spark, bronze_out), "rdk-timeout") == [
        ("APP_SEQUENCE_GAP", 3, 2, 2, "client_timeout")
    ]
