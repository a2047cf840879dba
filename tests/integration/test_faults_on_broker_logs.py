"""Fault injection on a real Kafka 4.3.1 broker's log directory: every case is a valid log but for its fault.

The corpus is built once from the `broker_dump` session broker. Each case is read back by our decoder
and by Kafka's own DumpLogSegments; the fault must be exactly what its label says, and the expected
findings must agree with the plain-Python reference replay (tests/reference_replay.py).
"""

from __future__ import annotations

import filecmp
import itertools
import shutil
import struct
from pathlib import Path
from typing import NamedTuple

import pytest

from audit_rules.kinds import KINDS, Severity
from kafka_harness.dump_log_segments import run_dump_log_segments
from kafka_harness.faults import (
    CORPUS_CASES,
    PRODUCER_ID_EXPIRATION_MS,
    TRANSACTION_MAX_TIMEOUT_MS,
    CorpusCase,
    FaultError,
    PartitionLog,
    build_corpus,
    offset_and_time_index,
    transaction_index,
)
from kafka_harness.jars import ensure_kafka_jars
from kafka_log_decoder.checkpoints import read_offset_checkpoint
from kafka_log_decoder.dump_log_text import parse_dump_log_text
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from tests.integration.conftest import BrokerDump
from tests.integration.test_dump_log_text_crosscheck import cross_check, dumped_files
from tests.unit.test_faults import assert_indexes_point_at_batches, reference_all, tree_digest

pytestmark = pytest.mark.integration

CASE_NAMES = [c.name for c in CORPUS_CASES]
# What each case does to the broker's data (the partition it lands on, the findings above info).
EXPECTED_KINDS = {
    "drop_batch": ("idempotent-segments-0", ["SEQUENCE_GAP"]),
    "duplicate_batch_inside_window": ("idempotent-segments-0", ["DUPLICATE_BATCH"]),
    "duplicate_batch_outside_window": ("idempotent-segments-0", ["DUPLICATE_BATCH"]),
    "duplicate_batch_at_log_end": ("idempotent-segments-0", ["DUPLICATE_BATCH"]),
    "reorder_batches": ("idempotent-segments-0", ["SEQUENCE_REGRESSION"]),
    "lower_epoch": ("idempotent-segments-0", ["EPOCH_REGRESSION"]),
    "restart_sequence": (None, ["SEQUENCE_REGRESSION"]),
    "delete_head_segment": ("idempotent-segments-0", []),
    "truncate_tail": ("idempotent-segments-0", ["TRUNCATED_TAIL"]),
    "flip_byte": ("idempotent-segments-0", ["CRC_MISMATCH"]),
    # A batch inside a producer's sequence: the gap around it is the corruption, not a loss.
    "flip_byte_in_sequence": ("idempotent-segments-0", ["CRC_MISMATCH"]),
    # The first batch of an epoch: the next one starts above sequence 0, and nothing is missing.
    "flip_byte_first_of_epoch": ("idempotent-segments-0", ["CRC_MISMATCH"]),
    "drop_marker": (None, ["HANGING_TRANSACTION"]),
    "space_batches": ("idempotent-segments-0", ["SEQUENCE_GAP_UNVERIFIED"]),
}


class Corpus(NamedTuple):
    root: Path
    cases: dict[str, CorpusCase]
    source: Path
    source_digest_before: dict[str, str]
    source_digest_after: dict[str, str]


@pytest.fixture(scope="module")
def corpus(broker_dump: BrokerDump, tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    before = tree_digest(broker_dump.log_dir)
    root = tmp_path_factory.mktemp("fault-corpus") / "corpus"
    cases = build_corpus(broker_dump.log_dir, root)
    return Corpus(
        root, {c.name: c for c in cases}, broker_dump.log_dir, before, tree_digest(broker_dump.log_dir)
    )


def partition_dir(corpus: Corpus, name: str) -> Path:
    return Path(corpus.cases[name].expected.partition_dir)


def decoded(directory: Path) -> tuple[list[BatchHeader], list[DecodeError]]:
    headers: list[BatchHeader] = []
    errors: list[DecodeError] = []
    for log in sorted(directory.glob("*.log")):
        for item in read_log_segment(log, records=True):
            if isinstance(item, BatchHeader):
                headers.append(item)
            elif isinstance(item, DecodeError):
                errors.append(item)
    return headers, errors


def source_of(corpus: Corpus, name: str) -> Path:
    return corpus.source / partition_dir(corpus, name).name


def at(headers: list[BatchHeader], offset: int | None) -> BatchHeader:
    return next(h for h in headers if h.base_offset == offset)


def stream_of(headers: list[BatchHeader], producer_id: int | None, epoch: int) -> list[BatchHeader]:
    return [
        h for h in headers if h.producer_id == producer_id and h.producer_epoch == epoch and not h.is_control
    ]


def log_start_offset(directory: Path) -> int:
    start = int(min(directory.glob("*.log")).stem)
    checkpoint = directory.parent / "log-start-offset-checkpoint"
    entries, _ = read_offset_checkpoint(checkpoint) if checkpoint.exists() else ([], [])
    topic, _, partition = directory.name.rpartition("-")
    return max([start] + [e.offset for e in entries if (e.topic, e.partition) == (topic, int(partition))])


# ---------------------------------------------------------------------------------------------
# The corpus as a whole


def test_every_case_lands_where_expected_and_the_source_is_untouched(corpus: Corpus) -> None:
    assert list(corpus.cases) == CASE_NAMES
    for name, (where, kinds) in EXPECTED_KINDS.items():
        expected = corpus.cases[name].expected
        if where is not None:
            assert partition_dir(corpus, name).name == where, name
        assert [f.kind for f in expected.above_info()] == kinds, name
    assert corpus.cases["drop_marker"].expected.topic == "transactional"
    assert corpus.source_digest_after == corpus.source_digest_before


@pytest.mark.parametrize("name", CASE_NAMES)
def test_every_case_is_a_valid_contiguous_log_but_for_its_fault(corpus: Corpus, name: str) -> None:
    directory = partition_dir(corpus, name)
    headers, errors = decoded(directory)
    expected = corpus.cases[name].expected
    if expected.fault == "flip_byte":
        (finding,) = expected.findings
        assert [(e.kind, e.position) for e in errors] == [
            (CorruptionKind.CRC_MISMATCH, at(headers, finding.first_offset).position)
        ]
        assert [h.base_offset for h in headers if not h.crc_valid] == [finding.first_offset]
    elif name == "truncate_tail":
        assert [e.kind for e in errors] == [CorruptionKind.TRUNCATED_TAIL]
        assert all(h.crc_valid for h in headers)
    else:
        assert errors == [] and all(h.crc_valid for h in headers)
    for previous, batch in itertools.pairwise(headers):
        assert batch.base_offset == previous.last_offset + 1, (
            f"{previous.base_offset} then {batch.base_offset}"
        )
    for log in sorted(directory.glob("*.log")):
        first = next((h for h in headers if h.file == str(log)), None)
        assert first is None or int(log.stem) == first.base_offset
        assert_indexes_point_at_batches(log)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_expected_findings_agree_with_the_reference_replay(corpus: Corpus, name: str) -> None:
    directory = partition_dir(corpus, name)
    expected = corpus.cases[name].expected
    found = reference_all(directory, log_start_offset(directory))
    # The reference replays batch headers; a torn tail is a decode error, which the decoder reports.
    headers, errors = decoded(directory)
    end = headers[-1].last_offset + 1
    found += [(e.kind.value, None, end) for e in errors if e.kind is CorruptionKind.TRUNCATED_TAIL]
    assert sorted(f for f in found if KINDS[f[0]].severity > Severity.INFO) == sorted(
        (f.kind, f.producer_id, f.first_offset) for f in expected.above_info()
    )
    assert {(f.kind, f.producer_id, f.first_offset) for f in expected.findings} <= set(found)


# ---------------------------------------------------------------------------------------------
# Each fault is what its label says


def test_drop_batch_removes_exactly_the_sequences_of_one_batch(corpus: Corpus) -> None:
    expected = corpus.cases["drop_batch"].expected
    (gap,) = expected.findings
    before, _ = decoded(source_of(corpus, "drop_batch"))
    after, _ = decoded(partition_dir(corpus, "drop_batch"))
    epoch = expected.params["producer_epoch"]
    old, new = stream_of(before, gap.producer_id, epoch), stream_of(after, gap.producer_id, epoch)
    dropped = old[expected.params["batch_index"]]
    assert [(h.base_sequence, h.last_sequence) for h in new] == [
        (h.base_sequence, h.last_sequence) for h in old if h is not dropped
    ]
    assert at(after, gap.first_offset).base_sequence == dropped.last_sequence + 1
    assert at(after, gap.related_offset).last_sequence + 1 == dropped.base_sequence
    assert len(after) == len(before) - 1


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("duplicate_batch_inside_window", "inside"),
        ("duplicate_batch_outside_window", "outside"),
        ("duplicate_batch_at_log_end", "outside"),
    ],
)
def test_duplicate_batch_repeats_pid_epoch_and_sequences_at_a_second_offset(
    corpus: Corpus, name: str, window: str
) -> None:
    expected = corpus.cases[name].expected
    (finding,) = expected.findings
    headers, _ = decoded(partition_dir(corpus, name))
    copy, original = at(headers, finding.first_offset), at(headers, finding.related_offset)
    identity = ("producer_id", "producer_epoch", "base_sequence", "last_sequence", "count", "crc")
    assert [getattr(copy, f) for f in identity] == [getattr(original, f) for f in identity]
    assert copy.base_offset > original.base_offset
    stream = stream_of(headers, copy.producer_id, copy.producer_epoch)
    between = stream.index(copy) - stream.index(original) - 1
    assert between == expected.params["batches_between"]
    assert expected.params["window"] == window
    assert (between < 5) == (window == "inside")
    if name == "duplicate_batch_at_log_end":
        assert copy is headers[-1]


def test_reorder_batches_puts_the_higher_sequences_first(corpus: Corpus) -> None:
    (finding,) = corpus.cases["reorder_batches"].expected.findings
    headers, _ = decoded(partition_dir(corpus, "reorder_batches"))
    later, earlier = at(headers, finding.first_offset), at(headers, finding.related_offset)
    assert earlier.base_offset < later.base_offset
    assert earlier.base_sequence == later.last_sequence + 1


def test_lower_epoch_writes_a_lower_epoch_after_higher_ones(corpus: Corpus) -> None:
    (finding,) = corpus.cases["lower_epoch"].expected.findings
    headers, _ = decoded(partition_dir(corpus, "lower_epoch"))
    zombie = at(headers, finding.first_offset)
    earlier = [
        h.producer_epoch
        for h in headers
        if h.producer_id == zombie.producer_id and h.base_offset < zombie.base_offset
    ]
    assert earlier and zombie.producer_epoch < min(earlier)


def test_restart_sequence_starts_again_at_zero_mid_epoch(corpus: Corpus) -> None:
    expected = corpus.cases["restart_sequence"].expected
    (finding,) = expected.findings
    headers, _ = decoded(partition_dir(corpus, "restart_sequence"))
    restarted = at(headers, finding.first_offset)
    stream = stream_of(headers, restarted.producer_id, restarted.producer_epoch)
    k = stream.index(restarted)
    assert restarted.base_sequence == 0 and stream[k - 1].last_sequence > 0
    for previous, batch in itertools.pairwise(stream[k:]):
        assert batch.base_sequence == previous.last_sequence + 1


def test_delete_head_segment_advances_the_log_start(corpus: Corpus) -> None:
    expected = corpus.cases["delete_head_segment"].expected
    directory = partition_dir(corpus, "delete_head_segment")
    source = source_of(corpus, "delete_head_segment")
    start = expected.params["log_start_offset"]
    assert sorted(p.name for p in directory.glob("*.log")) == sorted(p.name for p in source.glob("*.log"))[1:]
    assert log_start_offset(directory) == start == int(min(directory.glob("*.log")).stem)
    assert (directory / "leader-epoch-checkpoint").read_text().splitlines()[2:] == [f"0 {start}"]
    assert all(int(p.stem) >= start for p in directory.glob("*.snapshot"))
    # The untouched segments keep the broker's own index files.
    for suffix in (".index", ".timeindex"):
        for kept in directory.glob(f"*{suffix}"):
            assert filecmp.cmp(kept, source / kept.name, shallow=False)
    headers, _ = decoded(directory)
    for finding in expected.findings:
        assert finding.kind == "HISTORY_TRUNCATED_BY_RETENTION"
        assert at(headers, finding.first_offset).base_sequence > 0


def test_truncate_tail_leaves_part_of_the_last_batch(corpus: Corpus) -> None:
    expected = corpus.cases["truncate_tail"].expected
    directory = partition_dir(corpus, "truncate_tail")
    source_headers, _ = decoded(source_of(corpus, "truncate_tail"))
    headers, errors = decoded(directory)
    torn = source_headers[-1]
    (error,) = errors
    assert error.length == torn.size_bytes - expected.params["cut_bytes"]
    assert [h.base_offset for h in headers] == [h.base_offset for h in source_headers[:-1]]
    assert not (directory.parent / ".kafka_cleanshutdown").exists()


@pytest.mark.parametrize("name", ["flip_byte", "flip_byte_in_sequence", "flip_byte_first_of_epoch"])
def test_flip_byte_changes_one_payload_byte(corpus: Corpus, name: str) -> None:
    expected = corpus.cases[name].expected
    directory, source = partition_dir(corpus, name), source_of(corpus, name)
    changed = [
        (log.name, i)
        for log in sorted(directory.glob("*.log"))
        for i, (a, b) in enumerate(zip(log.read_bytes(), (source / log.name).read_bytes(), strict=True))
        if a != b
    ]
    (flipped,) = changed
    header = at(decoded(directory)[0], expected.params["batch_offset"])
    assert flipped == (Path(header.file).name, header.position + expected.params["position"])
    assert expected.params["position"] >= 61  # inside the records, past the header
    if name != "flip_byte":
        # A batch the replay of its producer's epoch needs: the ones after it skip its sequences.
        headers = decoded(directory)[0]
        stream = [h.base_offset for h in stream_of(headers, header.producer_id, header.producer_epoch)]
        assert header.producer_id >= 0 and not header.is_transactional
        if name == "flip_byte_in_sequence":
            assert stream[0] < header.base_offset < stream[-1]
        else:
            assert stream[0] == header.base_offset < stream[-1]


def test_drop_marker_leaves_an_open_transaction_older_than_the_timeout(corpus: Corpus) -> None:
    expected = corpus.cases["drop_marker"].expected
    (finding,) = expected.findings
    before, _ = decoded(source_of(corpus, "drop_marker"))
    headers, _ = decoded(partition_dir(corpus, "drop_marker"))
    pid = finding.producer_id
    assert sum(h.is_control for h in headers) == sum(h.is_control for h in before) - 1
    assert [h.control_type for h in before if h.is_control and h.producer_id == pid][-1] == expected.params[
        "marker"
    ]
    first_open = at(headers, finding.first_offset)
    assert first_open.is_transactional and not first_open.is_control
    assert not any(
        h.is_control and h.producer_id == pid for h in headers if h.base_offset > first_open.base_offset
    )
    assert max(h.max_timestamp for h in headers) - first_open.max_timestamp > TRANSACTION_MAX_TIMEOUT_MS


def test_space_batches_puts_more_than_a_day_across_the_gap(corpus: Corpus) -> None:
    (finding,) = corpus.cases["space_batches"].expected.findings
    headers, _ = decoded(partition_dir(corpus, "space_batches"))
    after, before = at(headers, finding.first_offset), at(headers, finding.related_offset)
    assert after.max_timestamp - before.max_timestamp >= PRODUCER_ID_EXPIRATION_MS
    assert after.base_sequence > before.last_sequence + 1


# ---------------------------------------------------------------------------------------------
# Kafka's own tool, and the files around the batches


def test_dump_log_segments_reads_every_rewritten_batch_and_only_the_injected_damage(
    corpus: Corpus, tmp_path: Path
) -> None:
    # DumpLogSegments trims .index files in place: give it a copy.
    copy = tmp_path / "corpus"
    shutil.copytree(corpus.root, copy)
    # The tool and our decoders agree on every segment, index, time index, txn index and snapshot. One
    # text per case: each case is a copy of the same partitions, and one text is read as one replica's
    # (a second copy of a partition's file in it is left out).
    cases = sorted(p for p in copy.iterdir() if p.is_dir())
    for case in cases:
        cross_check(dumped_files(case))
    ensure_kafka_jars()
    texts = [run_dump_log_segments(sorted(case.rglob("*.log")), deep_iteration=False) for case in cases]
    text = "".join(texts)
    batches = [
        b
        for one in texts
        for b in parse_dump_log_text(one.splitlines(keepends=True), source="stdout")
        if isinstance(b, BatchHeader)
    ]
    invalid = [(Path(b.file).parts[-3], b.base_offset) for b in batches if not b.crc_valid]
    flipped = [
        (name, corpus.cases[name].expected.params["batch_offset"])
        for name in ("flip_byte", "flip_byte_first_of_epoch", "flip_byte_in_sequence")
    ]
    assert sorted(invalid) == flipped
    assert len(batches) == sum(len(decoded(Path(c.expected.partition_dir))[0]) for c in corpus.cases.values())
    torn = corpus.cases["truncate_tail"].expected.params["cut_bytes"]
    assert text.count("invalid bytes at the end of") == 1
    assert f"Found {_torn_size(corpus) - torn} invalid bytes at the end of" in text


def tool_complaints(errors: list[str]) -> dict[str, list[str]]:
    """DumpLogSegments' stderr lines by the file they name, but its note that a segment's first offset
    follows -1 (with `--deep-iteration` it reads each file from -1: every segment not starting at 0)."""
    complaints: dict[str, list[str]] = {}
    current = ""
    for line in errors:
        if not line.startswith(" "):
            current = line.split(":", 1)[1] if line.startswith("Mismatches in :") else line.rsplit(" ", 1)[-1]
            complaints.setdefault(current, []).append(line)
        elif current.endswith(".log") and line.strip() == f"-1 is followed by {int(Path(current).stem)}":
            continue
        else:
            complaints.setdefault(current, []).append(line)
    return {
        f: lines for f, lines in complaints.items() if len(lines) > 1 or "Non-consecutive" not in lines[0]
    }


def test_dump_log_segments_own_checks_pass_on_every_rewritten_index_and_segment(
    corpus: Corpus, tmp_path: Path
) -> None:
    """Kafka's tool verifies every case's offset and time indexes against its segments and each segment's
    offsets follow one another (its stderr); an index entry moved to another batch is caught, so the
    check can fail."""
    copy = tmp_path / "corpus"
    shutil.copytree(corpus.root, copy)
    files = sorted(f for suffix in ("log", "index", "timeindex") for f in copy.rglob(f"*.{suffix}"))
    ensure_kafka_jars()
    errors: list[str] = []
    run_dump_log_segments(files, extra_args=["--verify-index-only"], errors=errors)
    assert tool_complaints(errors) == {}, "\n".join(errors)
    # The control: the last entry of a segment's offset index (two entries or more) moved onto the
    # segment's first batch, which ends below it.
    index = next(f for f in sorted(copy.rglob("*.index")) if f.stat().st_size >= 16)
    data = bytearray(index.read_bytes())
    data[-4:] = (0).to_bytes(4, "big")
    index.write_bytes(bytes(data))
    errors = []
    run_dump_log_segments([index], extra_args=["--verify-index-only"], errors=errors)
    assert list(tool_complaints(errors)) == [str(index)], errors


def _torn_size(corpus: Corpus) -> int:
    return decoded(source_of(corpus, "truncate_tail"))[0][-1].size_bytes


def data_partitions(log_dir: Path) -> list[Path]:
    return sorted(p for p in log_dir.iterdir() if p.is_dir() and not p.name.startswith("__"))


def test_rebuilt_index_files_equal_the_brokers_own(broker_dump: BrokerDump) -> None:
    compared = 0
    for directory in data_partitions(broker_dump.log_dir):
        log = PartitionLog.read(directory)
        aborted = transaction_index(log.batches)
        for index, segment in enumerate(log.segments):
            batches = [b for b in log.batches if b.segment == index]
            offsets, times = offset_and_time_index(batches, segment.base_offset)
            files = segment.files
            assert files.index is not None and files.timeindex is not None
            assert offsets == Path(files.index.path).read_bytes(), files.index.path
            assert times == Path(files.timeindex.path).read_bytes(), files.timeindex.path
            entries = [e for b in batches for e in aborted.get(id(b), [])]
            txn = b"".join(struct.pack(">hqqqq", 0, *e) for e in entries)
            assert txn == (Path(files.txnindex.path).read_bytes() if files.txnindex else b""), directory
            compared += 1
    assert compared >= 12


def test_an_unchanged_rewrite_reproduces_the_brokers_files(broker_dump: BrokerDump, tmp_path: Path) -> None:
    for directory in data_partitions(broker_dump.log_dir):
        out = PartitionLog.read(directory).write(tmp_path / "copy" / directory.name)
        comparison = filecmp.dircmp(directory, out)
        assert (comparison.left_only, comparison.right_only) == ([], [])
        _, mismatch, errors = filecmp.cmpfiles(directory, out, comparison.common_files, shallow=False)
        assert (mismatch, errors) == ([], []), directory


def test_the_internal_topics_are_refused(broker_dump: BrokerDump, tmp_path: Path) -> None:
    with pytest.raises(FaultError, match="internal topic"):
        PartitionLog.read(broker_dump.log_dir / "__transaction_state-0")
