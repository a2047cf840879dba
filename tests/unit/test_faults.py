"""Fault injection (kafka_harness.faults) on a partition built by an independent encoder (kafka-python).

The faulted logs are read back with kafka-python's reader, not our decoder: every CRC must hold except
where the fault is a corrupt byte, offsets must stay contiguous, and the fault must be exactly what its
label says. The expected findings are also checked against the plain-Python reference replay.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

from audit_rules.kinds import KINDS
from audit_rules.profile import Profile
from kafka_harness import faults
from kafka_harness.faults import (
    ExpectedFinding,
    ExpectedFindings,
    FaultError,
    FaultNotApplicable,
    PartitionLog,
    apply_fault,
    build_corpus,
)
from kafka_log_decoder.errors import DecodeError
from kafka_log_decoder.index_files import read_offset_index, read_time_index, read_txn_index
from kafka_log_decoder.rows import BatchHeader, IndexEntry, TimeIndexEntry, TxnIndexEntry
from kafka_log_decoder.segment import read_log_segment
from tests.builders import V2Batch, build_v2, producer_snapshot
from tests.reference_replay import reference_findings

TOPIC, PARTITION = "orders", 0
T0 = 1_700_000_000_000
IDEMPOTENT, TRANSACTIONAL = 7, 9
# Records per batch of the idempotent producer: the 2-record batch lets a restart at 0 repeat no range.
IDEMPOTENT_SIZES = (3, 3, 2, 3, 3, 3, 3, 3, 3, 3, 3)


# ---------------------------------------------------------------------------------------------
# A broker-like partition directory written with kafka-python


@dataclass
class Spec:
    """One batch of the synthetic log: `kind` is data, plain (no producer id), commit or abort."""

    kind: str
    segment: int
    producer_id: int = -1
    producer_epoch: int = -1
    records: int = 1
    transactional: bool = False


def _specs() -> list[Spec]:
    """Two segments of interleaved producers: idempotent 7, transactional 9 (epochs 0 and 1), plain ones."""
    idem = iter(IDEMPOTENT_SIZES)

    def data(segment: int) -> Spec:
        return Spec("data", segment, IDEMPOTENT, 0, next(idem))

    def txn(segment: int, epoch: int) -> Spec:
        return Spec("data", segment, TRANSACTIONAL, epoch, 2, transactional=True)

    return [
        data(0),
        Spec("plain", 0, records=2),
        data(0),
        txn(0, 0),
        data(0),
        Spec("commit", 0, TRANSACTIONAL, 0),
        data(0),
        txn(1, 0),
        data(1),
        Spec("abort", 1, TRANSACTIONAL, 0),
        Spec("plain", 1, records=2),
        data(1),
        txn(1, 1),
        data(1),
        Spec("commit", 1, TRANSACTIONAL, 1),
        data(1),
        data(2),
        Spec("plain", 2, records=2),
        data(2),
        data(2),
    ]


def _marker(spec: Spec, offset: int, timestamp: int, leader_epoch: int) -> bytes:
    """A COMMIT/ABORT control batch: kafka-python cannot build one, so its bits and CRC are set here."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=spec.producer_id,
        producer_epoch=spec.producer_epoch,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    control_type = 1 if spec.kind == "commit" else 0
    builder.append(
        0,
        timestamp=timestamp,
        key=struct.pack(">hh", 0, control_type),
        value=struct.pack(">hi", 0, 3),
        headers=[],
    )
    raw = bytearray(builder.build())
    raw[22] |= 0x20  # isControl, in the low byte of the int16 attributes
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    struct.pack_into(">q", raw, 0, offset)
    struct.pack_into(">i", raw, 12, leader_epoch)
    return bytes(raw)


def write_source(log_dir: Path, specs: list[Spec] | None = None) -> Path:
    """Write the synthetic log directory (of `_specs()`, or `specs`: segments 0 and 1 at least); returns
    its partition directory `orders-0`."""
    partition_dir = log_dir / f"{TOPIC}-{PARTITION}"
    partition_dir.mkdir(parents=True)
    segments: dict[int, list[bytes]] = {}
    bases: dict[int, int] = {}
    sequences: dict[tuple[int, int], int] = {}
    offset = 0
    for n, spec in enumerate(_specs() if specs is None else specs):
        timestamp = T0 + 1000 * n
        leader_epoch = 0 if spec.segment == 0 else 1
        bases.setdefault(spec.segment, offset)
        if spec.kind in ("commit", "abort"):
            raw, count = _marker(spec, offset, timestamp, leader_epoch), 1
        else:
            key = (spec.producer_id, spec.producer_epoch)
            base_sequence = sequences.get(key, 0) if spec.producer_id >= 0 else -1
            sequences[key] = base_sequence + spec.records
            raw = build_v2(
                V2Batch(
                    base_offset=offset,
                    records=[
                        (f"k{offset + i}".encode(), f"value-{offset + i}".encode())
                        for i in range(spec.records)
                    ],
                    producer_id=spec.producer_id,
                    producer_epoch=spec.producer_epoch,
                    base_sequence=base_sequence,
                    transactional=spec.transactional,
                    base_timestamp=timestamp,
                    partition_leader_epoch=leader_epoch,
                )
            )
            count = spec.records
        segments.setdefault(spec.segment, []).append(raw)
        offset += count
    for segment, batches in segments.items():
        (partition_dir / f"{bases[segment]:020d}.log").write_bytes(b"".join(batches))
    end = offset
    # Snapshots at the second segment's base and at the log end (clean shutdown); contents plausible.
    for at in (bases[1], end):
        entry = (IDEMPOTENT, 0, 0, at - 1, 0, T0, -1, -1)
        (partition_dir / f"{at:020d}.snapshot").write_bytes(producer_snapshot([entry]))
    (partition_dir / "leader-epoch-checkpoint").write_text(f"0\n2\n0 0\n1 {bases[1]}\n")
    (partition_dir / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (log_dir / name).write_text(f"0\n2\nother 3 99\n{TOPIC} {PARTITION} {end}\n")
    (log_dir / "log-start-offset-checkpoint").write_text("0\n0\n")
    (log_dir / "meta.properties").write_text("version=1\nnode.id=4\ncluster.id=abc\n")
    (log_dir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
    return partition_dir


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    return write_source(tmp_path / "source")


def out_dir(tmp_path: Path, case: str = "case") -> Path:
    return tmp_path / "out" / case / f"{TOPIC}-{PARTITION}"


# ---------------------------------------------------------------------------------------------
# Reading back, independently


@dataclass
class Read:
    """A batch as kafka-python reads it."""

    file: str
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    transactional: bool
    control: bool
    crc_valid: bool
    max_timestamp: int
    leader_epoch: int

    @property
    def sequences(self) -> tuple[int, int, int, int]:
        return self.producer_id, self.producer_epoch, self.base_sequence, self.last_sequence


def read_back(partition_dir: Path) -> tuple[list[Read], dict[str, int]]:
    """Every whole batch in file order, and the bytes left after the last whole batch, per segment."""
    batches: list[Read] = []
    trailing: dict[str, int] = {}
    for log in sorted(partition_dir.glob("*.log")):
        data = log.read_bytes()
        records = MemoryRecords(data)
        used = 0
        while (batch := records.next_batch()) is not None:
            used += batch.size_in_bytes
            batches.append(
                Read(
                    log.name,
                    batch.base_offset,
                    batch.last_offset,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    batch.last_sequence,
                    batch.is_transactional,
                    batch.is_control_batch,
                    batch.validate_crc(),
                    batch.max_timestamp,
                    batch.leader_epoch,
                )
            )
        if used != len(data):
            trailing[log.name] = len(data) - used
    return batches, trailing


def read_back_log(log: Path) -> list[BatchHeader]:
    return [h for h in read_log_segment(log) if isinstance(h, BatchHeader)]


def assert_valid_log(partition_dir: Path, corrupt_offsets: tuple[int, ...] = ()) -> list[Read]:
    """CRCs hold (but at `corrupt_offsets`), offsets are contiguous, and every segment and index file
    names and points at what it should."""
    batches, _ = read_back(partition_dir)
    assert [b.base_offset for b in batches if not b.crc_valid] == list(corrupt_offsets)
    for previous, batch in itertools.pairwise(batches):
        assert batch.base_offset == previous.last_offset + 1, f"{previous} then {batch}"
    for log in sorted(partition_dir.glob("*.log")):
        in_segment = [b for b in batches if b.file == log.name]
        if in_segment:
            assert int(log.stem) <= in_segment[0].base_offset
            if log != min(partition_dir.glob("*.log")):
                assert int(log.stem) == in_segment[0].base_offset
        assert_indexes_point_at_batches(log)
    return batches


def assert_indexes_point_at_batches(log: Path) -> None:
    headers = {h.position: h for h in read_log_segment(log) if isinstance(h, BatchHeader)}
    by_last_offset = {h.last_offset: h for h in headers.values()}
    index, time_index = log.with_suffix(".index"), log.with_suffix(".timeindex")
    if index.exists():
        for entry in read_offset_index(index):
            assert isinstance(entry, IndexEntry), entry
            assert headers[entry.position].last_offset == entry.offset
    if time_index.exists():
        timestamps: list[int] = []
        for time_entry in read_time_index(time_index):
            assert isinstance(time_entry, TimeIndexEntry), time_entry
            assert by_last_offset[time_entry.offset].max_timestamp == time_entry.timestamp
            timestamps.append(time_entry.timestamp)
        assert timestamps == sorted(set(timestamps))


def reference_all(partition_dir: Path, log_start_offset: int = 0) -> list[tuple[str, int | None, int]]:
    """Every finding of the reference replay on a rewritten log (batches read by our decoder)."""
    rows = [
        h.to_dict()
        for log in sorted(partition_dir.glob("*.log"))
        for h in read_log_segment(log)
        if isinstance(h, BatchHeader)
    ]
    found = reference_findings(rows, profile=Profile(), log_start_offset=log_start_offset)
    return sorted((f["kind"], f["producer_id"], f["first_offset"]) for f in found)


def reference(partition_dir: Path, log_start_offset: int = 0) -> list[tuple[str, int | None, int]]:
    """The findings above info of the reference replay."""
    return [f for f in reference_all(partition_dir, log_start_offset) if KINDS[f[0]].severity > 0]


def keys(expected: ExpectedFindings, *, above_info: bool = True) -> list[tuple[str, int | None, int]]:
    chosen = expected.above_info() if above_info else expected.findings
    return sorted((f.kind, f.producer_id, f.first_offset) for f in chosen)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def source_batches(source: Path) -> list[Read]:
    return read_back(source)[0]


def idempotent(batches: list[Read]) -> list[Read]:
    return [b for b in batches if b.producer_id == IDEMPOTENT]


def checkpoint(log_dir: Path, name: str) -> dict[tuple[str, int], int]:
    lines = (log_dir / name).read_text().splitlines()[2:]
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines)}


# ---------------------------------------------------------------------------------------------
# The faults


def test_drop_batch_leaves_one_sequence_gap_at_the_next_batch(source: Path, tmp_path: Path) -> None:
    before = idempotent(source_batches(source))
    expected = apply_fault("drop_batch", source, out_dir(tmp_path))

    after = idempotent(assert_valid_log(out_dir(tmp_path)))
    k = expected.params["batch_index"]
    assert [b.sequences for b in after] == [b.sequences for b in before[:k] + before[k + 1 :]]
    gap = after[k]
    assert keys(expected) == [("SEQUENCE_GAP", IDEMPOTENT, gap.base_offset)]
    (finding,) = expected.findings
    assert finding.related_offset == after[k - 1].base_offset
    assert finding.missing_records == before[k].last_sequence - before[k].base_sequence + 1
    assert keys(expected) == reference(out_dir(tmp_path))


def test_rewriting_never_touches_the_source(source: Path, tmp_path: Path) -> None:
    digest = tree_digest(source.parent)
    for name in faults.FAULTS:
        apply_fault(name, source, out_dir(tmp_path, name))
    assert tree_digest(source.parent) == digest


@pytest.mark.parametrize(
    ("distance", "window"), [(0, "inside"), (4, "inside"), (5, "outside"), (None, "outside")]
)
def test_duplicate_batch_is_one_duplicate_at_the_copy(
    source: Path, tmp_path: Path, distance: int | None, window: str
) -> None:
    expected = apply_fault("duplicate_batch", source, out_dir(tmp_path), distance=distance)

    batches = idempotent(assert_valid_log(out_dir(tmp_path)))
    (finding,) = expected.findings
    copy = next(b for b in batches if b.base_offset == finding.first_offset)
    original = next(b for b in batches if b.base_offset == finding.related_offset)
    assert copy.sequences == original.sequences
    assert [b.sequences for b in batches].count(copy.sequences) == 2
    between = batches.index(copy) - batches.index(original) - 1
    assert between == expected.params["batches_between"]
    assert (distance is None and copy is batches[-1]) or between == distance
    assert expected.params["window"] == window
    assert (
        keys(expected) == [("DUPLICATE_BATCH", IDEMPOTENT, copy.base_offset)] == reference(out_dir(tmp_path))
    )


def test_reorder_batches_is_one_regression_at_the_later_of_the_two(source: Path, tmp_path: Path) -> None:
    before = idempotent(source_batches(source))
    expected = apply_fault("reorder_batches", source, out_dir(tmp_path))

    after = idempotent(assert_valid_log(out_dir(tmp_path)))
    k = expected.params["batch_index"]
    assert [b.sequences for b in after[k : k + 2]] == [before[k + 1].sequences, before[k].sequences]
    assert keys(expected) == [("SEQUENCE_REGRESSION", IDEMPOTENT, after[k + 1].base_offset)]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_lower_epoch_is_one_epoch_regression(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("lower_epoch", source, out_dir(tmp_path))

    after = idempotent(assert_valid_log(out_dir(tmp_path)))
    # Producer 7 only had epoch 0: its epochs move up to 1 and its last batch drops to 0.
    assert expected.params["relabelled"] is True
    assert [b.producer_epoch for b in after] == [1] * (len(after) - 1) + [0]
    assert keys(expected) == [("EPOCH_REGRESSION", IDEMPOTENT, after[-1].base_offset)]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_lower_epoch_of_a_middle_batch_also_leaves_a_gap_in_its_former_epoch(
    source: Path, tmp_path: Path
) -> None:
    expected = apply_fault("lower_epoch", source, out_dir(tmp_path), producer_id=IDEMPOTENT, batch_index=4)

    after = idempotent(assert_valid_log(out_dir(tmp_path)))
    lowered = after[4]
    assert lowered.producer_epoch == 0 and {b.producer_epoch for b in after if b is not lowered} == {1}
    assert keys(expected) == [
        ("EPOCH_REGRESSION", IDEMPOTENT, lowered.base_offset),
        ("SEQUENCE_GAP", IDEMPOTENT, after[5].base_offset),
    ]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_lower_epoch_of_a_transactional_producer_keeps_its_epochs_below(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("lower_epoch", source, out_dir(tmp_path), producer_id=TRANSACTIONAL)

    batches = [b for b in assert_valid_log(out_dir(tmp_path)) if b.producer_id == TRANSACTIONAL]
    # Epochs 0, 0 | 1 were raised to 1, 1 | 2 (markers too); the last data batch fell to 0, never used.
    assert [(b.control, b.producer_epoch) for b in batches] == [
        (False, 1),
        (True, 1),
        (False, 1),
        (True, 1),
        (False, 0),
        (True, 2),
    ]
    assert keys(expected) == [("EPOCH_REGRESSION", TRANSACTIONAL, batches[4].base_offset)]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_restart_sequence_is_one_regression_and_the_rest_follows_on(source: Path, tmp_path: Path) -> None:
    before = idempotent(source_batches(source))
    expected = apply_fault("restart_sequence", source, out_dir(tmp_path))

    after = idempotent(assert_valid_log(out_dir(tmp_path)))
    k = expected.params["batch_index"]
    assert k == 2  # the 2-record batch: restarted, its range (0, 1) repeats no earlier one
    assert [b.sequences for b in after[:k]] == [b.sequences for b in before[:k]]
    assert after[k].base_sequence == 0
    for previous, batch in zip(after[k:], after[k + 1 :], strict=False):
        assert batch.base_sequence == previous.last_sequence + 1
    assert keys(expected) == [("SEQUENCE_REGRESSION", IDEMPOTENT, after[k].base_offset)]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_restart_sequence_that_repeats_a_range_is_a_duplicate_by_definition(
    source: Path, tmp_path: Path
) -> None:
    expected = apply_fault(
        "restart_sequence", source, out_dir(tmp_path), producer_id=IDEMPOTENT, batch_index=1
    )

    after = idempotent(assert_valid_log(out_dir(tmp_path)))
    assert (
        after[1].sequences == after[0].sequences
    )  # (0, 2) again: contract DUPLICATE_BATCH, not a regression
    assert keys(expected) == [("DUPLICATE_BATCH", IDEMPOTENT, after[1].base_offset)]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_delete_head_segment_is_retention_only(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("delete_head_segment", source, out_dir(tmp_path))

    out = out_dir(tmp_path)
    batches = assert_valid_log(out)
    log_start = expected.params["log_start_offset"]
    assert batches[0].base_offset == log_start > 0
    assert sorted(p.name for p in out.glob("*.log"))[0] == f"{log_start:020d}.log"
    assert checkpoint(out.parent, "log-start-offset-checkpoint") == {(TOPIC, PARTITION): log_start}
    assert (out / "leader-epoch-checkpoint").read_text() == f"0\n1\n1 {log_start}\n"
    end = batches[-1].last_offset + 1
    assert [p.name for p in sorted(out.glob("*.snapshot"))] == [
        f"{log_start:020d}.snapshot",
        f"{end:020d}.snapshot",
    ]
    assert expected.above_info() == []
    # Both producers' first retained data batches start mid-sequence: history below the log start.
    firsts = [
        next(b for b in batches if b.producer_id == pid and not b.control)
        for pid in (IDEMPOTENT, TRANSACTIONAL)
    ]
    assert all(b.base_sequence > 0 for b in firsts)
    assert keys(expected, above_info=False) == sorted(
        ("HISTORY_TRUNCATED_BY_RETENTION", b.producer_id, b.base_offset) for b in firsts
    )
    assert reference(out, log_start_offset=log_start) == []


def test_truncate_tail_leaves_a_torn_batch_and_an_unclean_shutdown(source: Path, tmp_path: Path) -> None:
    whole = source_batches(source)
    last_size = [h for h in read_log_segment(max(source.glob("*.log"))) if isinstance(h, BatchHeader)][
        -1
    ].size_bytes
    expected = apply_fault("truncate_tail", source, out_dir(tmp_path), cut_bytes=10)

    out = out_dir(tmp_path)
    batches = assert_valid_log(out)
    _, trailing = read_back(out)
    assert batches == whole[:-1]
    last_log = max(out.glob("*.log")).name
    assert trailing == {last_log: last_size - 10}
    assert keys(expected) == [("TRUNCATED_TAIL", None, whole[-1].base_offset)]
    end = whole[-1].base_offset
    assert checkpoint(out.parent, "replication-offset-checkpoint")[(TOPIC, PARTITION)] == end
    assert checkpoint(out.parent, "recovery-point-offset-checkpoint")[(TOPIC, PARTITION)] == end
    assert not (out.parent / ".kafka_cleanshutdown").exists()
    assert not (out / f"{whole[-1].last_offset + 1:020d}.snapshot").exists()
    assert any(
        e.kind.value == "TRUNCATED_TAIL"
        for e in read_log_segment(out / last_log)
        if isinstance(e, DecodeError)
    )


def test_a_torn_batch_alone_in_its_segment_stays_in_that_segment(tmp_path: Path) -> None:
    partition_dir = tmp_path / "src" / "t-0"
    partition_dir.mkdir(parents=True)
    batches = [
        build_v2(V2Batch(base_offset=i, producer_id=1, producer_epoch=0, base_sequence=i)) for i in range(3)
    ]
    (partition_dir / "00000000000000000000.log").write_bytes(b"".join(batches[:2]))
    (partition_dir / "00000000000000000002.log").write_bytes(batches[2])
    out = tmp_path / "out" / "t-0"
    expected = apply_fault("truncate_tail", partition_dir, out, cut_bytes=5)

    assert (out / "00000000000000000000.log").read_bytes() == b"".join(batches[:2])
    assert (out / "00000000000000000002.log").read_bytes() == batches[2][:-5]
    assert keys(expected) == [("TRUNCATED_TAIL", None, 2)]


def test_flip_byte_breaks_one_crc_and_nothing_else(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("flip_byte", source, out_dir(tmp_path))

    (finding,) = expected.findings
    assert (finding.kind, finding.producer_id) == ("CRC_MISMATCH", None)
    batches = assert_valid_log(out_dir(tmp_path), corrupt_offsets=(finding.first_offset,))
    flipped = next(b for b in batches if b.base_offset == finding.first_offset)
    assert flipped.producer_id == -1  # a batch without a producer id is preferred: no sequence to disturb
    assert [replace(b, crc_valid=True) for b in batches] == source_batches(source)
    # Record-level decoding still frames every record: only the CRC tells.
    items = [
        i for log in sorted(out_dir(tmp_path).glob("*.log")) for i in read_log_segment(log, records=True)
    ]
    errors = [i for i in items if isinstance(i, DecodeError)]
    assert [(e.kind.value, e.position) for e in errors] == [("CRC_MISMATCH", errors[0].position)]
    assert reference(out_dir(tmp_path)) == [("CRC_MISMATCH", None, finding.first_offset)]


def test_flip_byte_in_sequence_is_corruption_not_a_gap(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("flip_byte", source, out_dir(tmp_path), in_sequence=True)

    (finding,) = expected.findings
    assert (finding.kind, finding.producer_id) == ("CRC_MISMATCH", None)
    batches = assert_valid_log(out_dir(tmp_path), corrupt_offsets=(finding.first_offset,))
    flipped = next(b for b in batches if b.base_offset == finding.first_offset)
    stream = [b for b in idempotent(batches) if not b.control]
    # Inside the producer's sequence: the batches around it skip exactly its sequences.
    assert stream[0].base_offset < flipped.base_offset < stream[-1].base_offset
    i = stream.index(flipped)
    assert stream[i - 1].last_sequence + 1 == flipped.base_sequence
    assert flipped.last_sequence + 1 == stream[i + 1].base_sequence
    # Its header fills that gap: the replay reports the corruption, not a loss.
    assert reference(out_dir(tmp_path)) == [("CRC_MISMATCH", None, finding.first_offset)]


def test_flip_byte_first_of_epoch_is_corruption_not_a_missing_start(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("flip_byte", source, out_dir(tmp_path), first_of_epoch=True)

    (finding,) = expected.findings
    batches = assert_valid_log(out_dir(tmp_path), corrupt_offsets=(finding.first_offset,))
    stream = [b for b in idempotent(batches) if not b.control]
    assert stream[0].base_offset == finding.first_offset and stream[0].base_sequence == 0
    assert stream[1].base_sequence == stream[0].last_sequence + 1
    # The next batch starts above 0 in a log complete from offset 0; the failed batch holds the start.
    assert reference(out_dir(tmp_path)) == [("CRC_MISMATCH", None, finding.first_offset)]


def test_a_corrupt_batch_whose_header_does_not_fit_the_gap_leaves_it_reported(
    source: Path, tmp_path: Path
) -> None:
    """The header is believed only where it fits the gap exactly: a batch whose producer fields were hit
    too (here its base sequence) does not explain the gap, which stays a loss."""
    expected = apply_fault("flip_byte", source, out_dir(tmp_path), in_sequence=True)
    (finding,) = expected.findings
    log = next(
        p
        for p in sorted(out_dir(tmp_path).glob("*.log"))
        if any(b.base_offset == finding.first_offset for b in read_back_log(p))
    )
    data = bytearray(log.read_bytes())
    header = next(b for b in read_back_log(log) if b.base_offset == finding.first_offset)
    data[header.position + 53 + 3] ^= 0x01  # the base sequence's low byte (CRC-covered, formats §1.3)
    log.write_bytes(bytes(data))
    stream = [b for b in idempotent(read_back(out_dir(tmp_path))[0]) if not b.control]
    after = next(b for b in stream if b.base_offset > finding.first_offset)
    assert reference(out_dir(tmp_path)) == sorted(
        [("CRC_MISMATCH", None, finding.first_offset), ("SEQUENCE_GAP", IDEMPOTENT, after.base_offset)]
    )


def test_drop_marker_leaves_an_old_open_transaction(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("drop_marker", source, out_dir(tmp_path))

    out = out_dir(tmp_path)
    batches = assert_valid_log(out)
    markers = [b for b in batches if b.control]
    assert len(markers) == 2 and expected.params["marker"] == "COMMIT"
    (finding,) = expected.findings
    first_open = next(b for b in batches if b.base_offset == finding.first_offset)
    assert first_open.transactional and first_open.producer_epoch == 1
    assert (
        max(b.max_timestamp for b in batches) - first_open.max_timestamp > faults.TRANSACTION_MAX_TIMEOUT_MS
    )
    assert keys(expected) == [("HANGING_TRANSACTION", TRANSACTIONAL, first_open.base_offset)]
    assert keys(expected) == reference(out)


def test_drop_marker_of_an_abort_removes_its_transaction_index_entry(source: Path, tmp_path: Path) -> None:
    # The producer's last marker is a COMMIT: drop it first, then the ABORT is the last one.
    first = tmp_path / "first" / f"{TOPIC}-{PARTITION}"
    apply_fault("drop_marker", source, first)
    assert len(_txn_entries(first)) == 1
    second = out_dir(tmp_path)
    expected = apply_fault("drop_marker", first, second)
    assert expected.params["marker"] == "ABORT"
    assert _txn_entries(second) == []
    # The transaction the ABORT closed is open now, and so is everything after it.
    assert [f.kind for f in expected.findings] == ["HANGING_TRANSACTION"]


def _txn_entries(partition_dir: Path) -> list[TxnIndexEntry]:
    return [
        e
        for f in sorted(partition_dir.glob("*.txnindex"))
        for e in read_txn_index(f)
        if isinstance(e, TxnIndexEntry)
    ]


def test_transaction_index_follows_renumbered_offsets(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("drop_batch", source, out_dir(tmp_path), producer_id=IDEMPOTENT, batch_index=1)

    batches = assert_valid_log(out_dir(tmp_path))
    abort = [b for b in batches if b.control][1]
    first = [b for b in batches if b.transactional and not b.control and b.base_offset < abort.base_offset][
        -1
    ]
    (entry,) = _txn_entries(out_dir(tmp_path))
    assert (entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset) == (
        TRANSACTIONAL,
        first.base_offset,
        abort.base_offset,
        abort.base_offset + 1,
    )
    assert expected.findings[0].first_offset == idempotent(batches)[1].base_offset


def test_space_batches_turns_the_gap_into_an_unverified_one(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("space_batches", source, out_dir(tmp_path))

    after = idempotent(assert_valid_log(out_dir(tmp_path)))
    k = expected.params["batch_index"]
    assert after[k].max_timestamp - after[k - 1].max_timestamp > faults.PRODUCER_ID_EXPIRATION_MS
    assert keys(expected) == [("SEQUENCE_GAP_UNVERIFIED", IDEMPOTENT, after[k].base_offset)]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_a_gap_inside_an_open_transaction_is_verified_however_long_the_idle(tmp_path: Path) -> None:
    """Producer 9's transaction holds three batches; the middle one dropped and the last moved two days
    on: a broker never expires a producer with a transaction open, so the gap is a SEQUENCE_GAP."""
    specs = [
        Spec("data", 0, TRANSACTIONAL, 0, 2, transactional=True),
        Spec("data", 0, TRANSACTIONAL, 0, 2, transactional=True),
        Spec("data", 1, TRANSACTIONAL, 0, 2, transactional=True),
        Spec("commit", 1, TRANSACTIONAL, 0),
    ]
    source = write_source(tmp_path / "source", specs)
    expected = apply_fault("space_batches", source, out_dir(tmp_path), producer_id=TRANSACTIONAL)

    after = [b for b in assert_valid_log(out_dir(tmp_path)) if b.producer_id == TRANSACTIONAL]
    assert after[1].max_timestamp - after[0].max_timestamp > faults.PRODUCER_ID_EXPIRATION_MS
    assert keys(expected) == [("SEQUENCE_GAP", TRANSACTIONAL, after[1].base_offset)]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_a_copy_at_the_log_end_is_of_the_producers_last_epoch(tmp_path: Path) -> None:
    """Producer 7 wrote epoch 0 (three batches), then epoch 1 (two): a copy of an epoch-0 batch at the
    log end would be an EPOCH_REGRESSION; the fault copies from epoch 1, a DUPLICATE_BATCH."""
    specs = [
        Spec("data", 0, IDEMPOTENT, 0, 1),
        Spec("data", 0, IDEMPOTENT, 0, 1),
        Spec("data", 0, IDEMPOTENT, 0, 1),
        Spec("data", 1, IDEMPOTENT, 1, 1),
        Spec("data", 1, IDEMPOTENT, 1, 1),
    ]
    source = write_source(tmp_path / "source", specs)
    expected = apply_fault("duplicate_batch", source, out_dir(tmp_path), distance=None)

    assert expected.params["producer_epoch"] == 1
    assert [k for k, _, _ in keys(expected)] == ["DUPLICATE_BATCH"]
    assert keys(expected) == reference(out_dir(tmp_path))


def test_space_batches_without_a_drop_is_no_finding(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("space_batches", source, out_dir(tmp_path), drop=False)

    assert_valid_log(out_dir(tmp_path))
    assert expected.findings == [] and reference(out_dir(tmp_path)) == []


# ---------------------------------------------------------------------------------------------
# Files around the batches


def test_checkpoints_and_leader_epochs_follow_the_new_log_end(source: Path, tmp_path: Path) -> None:
    expected = apply_fault("duplicate_batch", source, out_dir(tmp_path), distance=None)

    out = out_dir(tmp_path)
    batches = assert_valid_log(out)
    end = batches[-1].last_offset + 1
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        assert checkpoint(out.parent, name) == {
            (TOPIC, PARTITION): end
        }  # other partitions' lines are not copied
    assert checkpoint(out.parent, "log-start-offset-checkpoint") == {}
    assert (out.parent / "meta.properties").exists() and (out.parent / ".kafka_cleanshutdown").exists()
    assert (out / "leader-epoch-checkpoint").read_text() == (source / "leader-epoch-checkpoint").read_text()
    # The copy went to the log end: every snapshot below it still describes the log.
    assert sorted(p.name for p in out.glob("*.snapshot")) == sorted(p.name for p in source.glob("*.snapshot"))
    assert expected.findings[0].first_offset == batches[-1].base_offset


def test_a_log_start_inside_a_batch_stays_where_delete_records_put_it(source: Path, tmp_path: Path) -> None:
    """DeleteRecords moved the log start into segment 1's first batch (2 records), and retention then
    deleted segment 0 (the broker writes a log-start-offset-checkpoint entry only for such a start; the
    leader epoch cache is truncated to it; the snapshot at segment 1's base stays with its segment). A
    rewrite keeps all three where they were (a review: the start moved to the next batch, 2 offsets the
    log still holds read as deleted, and the snapshot was dropped)."""
    first, second = sorted(source.glob("*.log"))[:2]
    base = int(second.stem)
    start = base + 1
    for path in source.glob(f"{first.stem}.*"):
        path.unlink()
    (source.parent / "log-start-offset-checkpoint").write_text(f"0\n1\n{TOPIC} {PARTITION} {start}\n")
    (source / "leader-epoch-checkpoint").write_text(f"0\n1\n1 {start}\n")
    assert source_batches(source)[0].last_offset == start  # inside the first batch

    PartitionLog.read(source).write(out_dir(tmp_path, "unchanged"))
    apply_fault("drop_batch", source, out_dir(tmp_path, "dropped"), producer_id=IDEMPOTENT, batch_index=5)
    for case in ("unchanged", "dropped"):
        out = out_dir(tmp_path, case)
        assert checkpoint(out.parent, "log-start-offset-checkpoint") == {(TOPIC, PARTITION): start}, case
        assert (out / "leader-epoch-checkpoint").read_text() == f"0\n1\n1 {start}\n", case
        assert f"{base:020d}.snapshot" in {p.name for p in out.glob("*.snapshot")}, case


def test_snapshots_after_the_first_change_are_deleted(source: Path, tmp_path: Path) -> None:
    apply_fault("drop_batch", source, out_dir(tmp_path), producer_id=IDEMPOTENT, batch_index=8)
    # The dropped batch is in the last segment: the snapshot below it still holds, the one at the log end not.
    names = sorted(p.name for p in out_dir(tmp_path).glob("*.snapshot"))
    assert names == [sorted(p.name for p in source.glob("*.snapshot"))[0]]


def test_partition_leader_epoch_is_kept(source: Path, tmp_path: Path) -> None:
    apply_fault("reorder_batches", source, out_dir(tmp_path))
    before = [b.leader_epoch for b in source_batches(source)]
    assert [b.leader_epoch for b in read_back(out_dir(tmp_path))[0]] == before


# ---------------------------------------------------------------------------------------------
# Usage errors


def test_output_inside_the_source_log_dir_is_refused(source: Path) -> None:
    with pytest.raises(FaultError, match="source log directory"):
        apply_fault("drop_batch", source, source.parent / "x" / source.name)


def test_output_must_be_new_and_named_like_the_source(source: Path, tmp_path: Path) -> None:
    apply_fault("drop_batch", source, out_dir(tmp_path))
    with pytest.raises(FaultError, match="already exists"):
        apply_fault("drop_batch", source, out_dir(tmp_path))
    with pytest.raises(FaultError, match="must be named"):
        apply_fault("drop_batch", source, tmp_path / "other" / "orders-1")


def test_unknown_fault_and_unknown_params_are_one_line_errors(source: Path, tmp_path: Path) -> None:
    with pytest.raises(FaultError, match="unknown fault 'nope'"):
        apply_fault("nope", source, out_dir(tmp_path))
    with pytest.raises(FaultError, match="drop_batch: got an unexpected keyword argument 'distance'"):
        apply_fault("drop_batch", source, out_dir(tmp_path), distance=3)


def test_a_partition_without_transactions_has_no_marker_to_drop(tmp_path: Path) -> None:
    partition_dir = tmp_path / "src" / "plain-0"
    partition_dir.mkdir(parents=True)
    (partition_dir / "00000000000000000000.log").write_bytes(
        b"".join(
            build_v2(V2Batch(base_offset=i, producer_id=1, producer_epoch=0, base_sequence=i))
            for i in range(4)
        )
    )
    with pytest.raises(FaultNotApplicable, match="no transactional producer"):
        apply_fault("drop_marker", partition_dir, tmp_path / "out" / "plain-0")
    with pytest.raises(FaultNotApplicable, match="cannot delete 1 and keep one"):
        apply_fault("delete_head_segment", partition_dir, tmp_path / "out" / "plain-0")


def test_a_corrupt_source_is_refused(source: Path, tmp_path: Path) -> None:
    log = sorted(source.glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    data[70] ^= 1
    log.write_bytes(data)
    with pytest.raises(FaultError, match=r"source is not clean: .*CRC_MISMATCH"):
        apply_fault("drop_batch", source, out_dir(tmp_path))


# ---------------------------------------------------------------------------------------------
# Corpus, CLI and the kinds


def test_build_corpus_writes_one_log_dir_per_case_and_expected_json(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    cases = build_corpus(source.parent, out)

    assert [c.name for c in cases] == [c.name for c in faults.CORPUS_CASES]
    document = json.loads((out / "expected.json").read_text())
    assert document["profile"] == faults.PROFILE
    for case, entry in zip(cases, document["cases"], strict=True):
        assert entry["name"] == case.name and entry["log_dir"] == case.name
        assert (out / entry["partition_dir"]).is_dir()
        assert [p.name for p in (out / case.name).iterdir() if p.is_dir()] == [f"{TOPIC}-{PARTITION}"]
        assert entry["findings"] == [_json(f) for f in case.expected.findings]
        assert {f["kind"] for f in entry["findings"]} <= set(faults.SEVERITY)


def _json(finding: ExpectedFinding) -> dict[str, Any]:
    return {
        "kind": finding.kind,
        "topic": finding.topic,
        "partition": finding.partition,
        "producer_id": finding.producer_id,
        "first_offset": finding.first_offset,
        "severity": finding.severity,
        "related_offset": finding.related_offset,
        "missing_records": finding.missing_records,
    }


def test_cli_writes_the_chosen_faults(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    assert (
        faults.main(
            ["--source", str(source), "--out", str(out), "--fault", "duplicate_batch", "--fault", "flip_byte"]
        )
        == 0
    )

    names = [c["name"] for c in json.loads((out / "expected.json").read_text())["cases"]]
    assert names == [
        "duplicate_batch_inside_window",
        "duplicate_batch_outside_window",
        "duplicate_batch_at_log_end",
        "flip_byte",
        "flip_byte_in_sequence",
        "flip_byte_first_of_epoch",
    ]
    assert "flip_byte: " in capsys.readouterr().out


def test_cli_reports_a_bad_source_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert faults.main(["--source", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file or directory" in err


def test_severities_agree_with_the_auditors_kinds() -> None:
    assert {k: KINDS[k].severity.label for k in faults.SEVERITY} == faults.SEVERITY


def test_shifting_a_batch_without_a_max_timestamp_keeps_its_crc() -> None:
    """A batch whose max timestamp is -1 (NO_TIMESTAMP) but whose base timestamp is set: moving it in
    time changes a byte the CRC covers, so it is sealed again (kafka-python's CRC-32C checks it)."""
    raw = bytearray(build_v2(V2Batch(base_offset=0)))
    struct.pack_into(">q", raw, 35, -1)  # maxTimestamp
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    batch = faults.LogBatch(bytes(raw), 0, 0)
    before = batch.base_timestamp
    batch.shift_timestamps(60_000)
    data = bytes(batch.data)
    assert batch.base_timestamp == before + 60_000 and batch.max_timestamp == -1
    assert struct.unpack_from(">I", data, 17)[0] == calc_crc32c(data[21:])
