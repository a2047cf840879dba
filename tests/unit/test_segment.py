"""The streaming segment reader on real broker bytes, kafka-python-built batches and corrupt files."""

from __future__ import annotations

import itertools
import struct
import tracemalloc
from pathlib import Path

import pytest

from kafka_log_decoder import segment
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import iter_segment_runs, read_log_segment
from tests.builders import V2Batch, build_legacy, build_v2
from tests.paths import REAL_FIXTURES

REAL = REAL_FIXTURES
FOO_0 = REAL / "codecrafters-kraft-3x" / "foo-0" / "00000000000000000000.log"


def write(tmp_path: Path, data: bytes, name: str = "00000000000000000000.log") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def headers(items: list) -> list[BatchHeader]:
    return [i for i in items if isinstance(i, BatchHeader)]


def errors(items: list) -> list[DecodeError]:
    return [i for i in items if isinstance(i, DecodeError)]


def idempotent_batches(n: int, records_per_batch: int = 2, codec: str = "none") -> list[bytes]:
    out = []
    for b in range(n):
        recs = [(f"k{b}-{r}".encode(), f"value-{b}-{r}".encode()) for r in range(records_per_batch)]
        out.append(
            build_v2(
                V2Batch(
                    base_offset=b * records_per_batch,
                    records=recs,
                    producer_id=4001,
                    producer_epoch=3,
                    base_sequence=b * records_per_batch,
                    codec=codec,
                )
            )
        )
    return out


def test_real_codecrafters_segment_matches_provenance() -> None:
    items = list(read_log_segment(FOO_0, records=True))
    assert errors(items) == []
    b0, b1 = headers(items)
    assert (b0.base_offset, b0.last_offset, b0.count, b0.base_sequence, b0.last_sequence) == (0, 1, 2, 0, 1)
    assert (b1.base_offset, b1.last_offset, b1.count, b1.base_sequence, b1.last_sequence) == (2, 2, 1, 2, 2)
    for b in (b0, b1):
        assert (b.producer_id, b.producer_epoch, b.partition_leader_epoch, b.crc_valid) == (0, 0, 0, True)
    # Same values the real DumpLogSegments prints for this file.
    assert (b0.crc, b0.size_bytes, b0.position, b0.max_timestamp) == (1495201167, 80, 0, 1725272040952)
    assert (b1.crc, b1.size_bytes, b1.position, b1.max_timestamp) == (3470726263, 70, 80, 1725272041932)
    records = [i for i in items if isinstance(i, Record)]
    assert [(r.offset, r.sequence, r.key, r.value) for r in records] == [
        (0, 0, None, b"m1"),
        (1, 1, None, b"m2"),
        (2, 2, None, b"m3"),
    ]
    assert [r.timestamp for r in records] == [1725272040411, 1725272040952, 1725272041932]


def test_real_non_idempotent_batch_has_no_producer() -> None:
    items = list(read_log_segment(REAL / "induswargods-kraft" / "test-topic-0" / "00000000000000000000.log"))
    (batch,) = headers(items)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count) == (-1, -1, -1, 1)
    assert batch.crc_valid and errors(items) == []


def test_real_kraft_metadata_log_decodes_without_errors_and_marks_leader_change() -> None:
    path = REAL / "induswargods-kraft" / "__cluster_metadata-0" / "00000000000000000000.log"
    items = list(read_log_segment(path))
    batches = headers(items)
    assert errors(items) == []
    assert len(batches) > 1000
    assert all(b.crc_valid for b in batches)
    assert all(b.base_offset == a.last_offset + 1 for a, b in itertools.pairwise(batches))
    assert {b.control_type for b in batches if b.is_control} >= {"LEADER_CHANGE"}
    assert sum(b.size_bytes for b in batches) == path.stat().st_size


def test_empty_segment_yields_nothing(tmp_path: Path) -> None:
    assert list(read_log_segment(write(tmp_path, b""))) == []


def test_wrapped_sequence_last_sequence(tmp_path: Path) -> None:
    raw = build_v2(
        V2Batch(records=[(None, b"a")] * 4, producer_id=7, producer_epoch=0, base_sequence=2147483646)
    )
    (batch,) = headers(list(read_log_segment(write(tmp_path, raw))))
    assert (batch.base_sequence, batch.last_sequence) == (2147483646, 1)


VALUE = b"compressible-value " * 40


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_of_every_codec_with_headers(tmp_path: Path, codec: str) -> None:
    raw = build_v2(
        V2Batch(
            base_offset=10,
            records=[(b"k1", VALUE), (None, b""), (b"k3", None)],
            producer_id=1,
            producer_epoch=0,
            base_sequence=5,
            codec=codec,
            headers=[("trace", b"abc"), ("empty", None)],
        )
    )
    items = list(read_log_segment(write(tmp_path, raw), records=True))
    assert errors(items) == []
    (batch,) = headers(items)
    assert batch.compression == codec
    records = [i for i in items if isinstance(i, Record)]
    assert [(r.offset, r.sequence, r.key, r.value, r.key_size, r.value_size) for r in records] == [
        (10, 5, b"k1", VALUE, 2, len(VALUE)),
        (11, 6, None, b"", -1, 0),
        (12, 7, b"k3", None, 2, -1),
    ]
    assert all(r.header_keys == ["trace", "empty"] and r.header_values == [b"abc", None] for r in records)


def test_mixed_legacy_and_v2_entries_in_one_segment(tmp_path: Path) -> None:
    legacy = build_legacy(1, [(b"a", b"1"), (b"b", b"2")], first_offset=0, codec="gzip")
    v2 = build_v2(V2Batch(base_offset=2, records=[(None, b"x")]))
    items = list(read_log_segment(write(tmp_path, legacy + v2), records=True))
    assert errors(items) == []
    assert [(h.magic, h.base_offset, h.last_offset) for h in headers(items)] == [(1, 0, 1), (2, 2, 2)]
    assert [r.offset for r in items if isinstance(r, Record)] == [0, 1, 2]


def test_crc_mismatch_is_reported_and_decoding_goes_on(tmp_path: Path) -> None:
    b0, b1, b2 = idempotent_batches(3)
    bad = bytearray(b1)
    bad[-1] ^= 0x55
    items = list(read_log_segment(write(tmp_path, b0 + bytes(bad) + b2)))
    assert [h.crc_valid for h in headers(items)] == [True, False, True]
    (error,) = errors(items)
    assert (error.kind, error.position, error.length) == (CorruptionKind.CRC_MISMATCH, len(b0), len(b1))


def test_truncated_tail_is_a_warning_with_its_byte_count(tmp_path: Path) -> None:
    b0, b1 = idempotent_batches(2)
    items = list(read_log_segment(write(tmp_path, b0 + b1[:30])))
    assert len(headers(items)) == 1
    (error,) = errors(items)
    assert (error.kind, error.position, error.length) == (CorruptionKind.TRUNCATED_TAIL, len(b0), 30)
    assert "00000000000000000000.log" in str(error) and f"byte {len(b0)}" in str(error)


def test_garbage_region_is_skipped_to_the_next_valid_batch(tmp_path: Path) -> None:
    b0, b1 = idempotent_batches(2)
    garbage = b"\xde\xad\xbe\xef" * 40
    items = list(read_log_segment(write(tmp_path, b0 + garbage + b1)))
    assert [h.base_offset for h in headers(items)] == [0, 2]
    (error,) = errors(items)
    assert (error.kind, error.position, error.length) == (
        CorruptionKind.UNREADABLE_BATCH,
        len(b0),
        len(garbage),
    )


def test_negative_length_without_a_following_batch_ends_the_file(tmp_path: Path) -> None:
    (b0,) = idempotent_batches(1)
    bad = struct.pack(">qi", 5, -7) + b"\x00" * 60
    items = list(read_log_segment(write(tmp_path, b0 + bad)))
    (error,) = errors(items)
    assert error.kind == CorruptionKind.UNREADABLE_BATCH and error.length == len(bad)


def test_zero_filled_preallocated_tail_is_not_corruption(tmp_path: Path) -> None:
    (b0,) = idempotent_batches(1)
    items = list(read_log_segment(write(tmp_path, b0 + bytes(4096))))
    assert len(headers(items)) == 1 and errors(items) == []


def test_corrupt_compressed_payload_keeps_the_header_and_reports_the_batch(tmp_path: Path) -> None:
    (raw,) = idempotent_batches(1, records_per_batch=20, codec="zstd")
    bad = bytearray(raw)
    bad[70:80] = b"\x00" * 10
    items = list(read_log_segment(write(tmp_path, bytes(bad)), records=True))
    (batch,) = headers(items)
    kinds = {e.kind for e in errors(items)}
    assert batch.base_offset == 0 and CorruptionKind.UNREADABLE_BATCH in kinds
    assert not [i for i in items if isinstance(i, Record)]


def test_start_and_end_positions_split_a_segment_without_loss_or_overlap(tmp_path: Path) -> None:
    batches = idempotent_batches(50)
    path = write(tmp_path, b"".join(batches))
    boundary = sum(len(b) for b in batches[:17])
    whole = [h.base_offset for h in headers(list(read_log_segment(path)))]
    first = [h.base_offset for h in headers(list(read_log_segment(path, end_position=boundary)))]
    second = [h.base_offset for h in headers(list(read_log_segment(path, start_position=boundary)))]
    assert first + second == whole and len(first) == 17
    assert headers(list(read_log_segment(path, start_position=boundary)))[0].position == boundary


def test_small_windows_give_the_same_rows_as_one_window(tmp_path: Path) -> None:
    path = write(tmp_path, b"".join(idempotent_batches(40, records_per_batch=7, codec="lz4")))
    big = list(read_log_segment(path, records=True))
    small = list(read_log_segment(path, records=True, chunk_size=64))
    assert small == big and len(headers(big)) == 40


def test_columnar_runs_cover_every_batch_once(tmp_path: Path) -> None:
    path = write(tmp_path, b"".join(idempotent_batches(100)))
    runs = list(iter_segment_runs(path, chunk_size=1000))
    assert len(runs) > 1
    offsets = [off for run in runs for off in run.batches["base_offset"]]
    assert offsets == [2 * i for i in range(100)]


def test_runs_kept_by_the_caller_are_not_overwritten_by_later_windows(tmp_path: Path) -> None:
    path = write(tmp_path, b"".join(idempotent_batches(60, records_per_batch=5)))
    streamed = list(read_log_segment(path, records=True, chunk_size=300))
    held = list(iter_segment_runs(path, records=True, chunk_size=300))  # every window alive at once
    assert len(held) > 10
    replayed = [item for run in held for item in run.items(with_records=True)]
    assert replayed == streamed


def test_compressed_control_batch_gets_its_type_and_coordinator_epoch(tmp_path: Path) -> None:
    import crc32c

    # Markers are written uncompressed, but a control batch's records may be compressed; the
    # walker leaves those to Python. key = (version 0, COMMIT), value = (version 0, epoch 7).
    key, value = struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7) + b"\x00" * 200
    raw = bytearray(
        build_v2(V2Batch(base_offset=5, records=[(key, value)], producer_id=3, producer_epoch=1,
                         transactional=True, codec="gzip"))
    )  # fmt: skip
    raw[22] |= 0x20  # the control bit (low byte of the int16 attributes)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    items = list(read_log_segment(write(tmp_path, bytes(raw))))
    (batch,) = headers(items)
    assert errors(items) == []
    assert (batch.is_control, batch.compression, batch.control_type, batch.coordinator_epoch) == (
        True,
        "gzip",
        "COMMIT",
        7,
    )


def test_a_segment_that_cannot_be_opened_is_one_usage_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000.log"
    with pytest.raises(NotAKafkaArtifact) as raised:
        list(iter_segment_runs(missing))
    assert str(raised.value) == f"{missing}: cannot read: No such file or directory"


REAL_GZIP = Path(__file__).resolve().parents[2] / "samples" / "broker-4.3.1" / "codec-gzip-0"
GZIP_POSITIONS = [0, 227, 469, 648, 875, 1116, 1295, 1521, 1762]  # its nine batches (DumpLogSegments)


def test_a_length_running_past_the_end_with_valid_batches_after_it_is_corruption_not_a_tail(
    tmp_path: Path,
) -> None:
    """A broker-written segment whose second batch's length field has one bit flipped (now 268 MB, past
    the end of the 1,941-byte file): the seven valid batches after it are decoded, and the bytes up to
    the next one are an UNREADABLE_BATCH region (an error), not a TRUNCATED_TAIL (a warning) that
    would swallow them."""
    data = bytearray((REAL_GZIP / "00000000000000000000.log").read_bytes())
    data[227 + 8] ^= 0x10
    items = list(read_log_segment(write(tmp_path, bytes(data))))
    assert [h.position for h in headers(items)] == [0, *GZIP_POSITIONS[2:]]
    (error,) = errors(items)
    assert (error.kind, error.position, error.length) == (CorruptionKind.UNREADABLE_BATCH, 227, 469 - 227)
    assert "runs past the end of the file" in error.message


def test_a_length_running_past_the_end_with_nothing_valid_after_it_is_a_truncated_tail(
    tmp_path: Path,
) -> None:
    data = (REAL_GZIP / "00000000000000000000.log").read_bytes()[:1800]  # cut inside the last batch
    items = list(read_log_segment(write(tmp_path, data)))
    assert [h.position for h in headers(items)] == GZIP_POSITIONS[:-1]
    (error,) = errors(items)
    assert (error.kind, error.position, error.length) == (CorruptionKind.TRUNCATED_TAIL, 1762, 38)


def test_a_corrupt_header_is_judged_the_same_wherever_the_read_window_ends(tmp_path: Path) -> None:
    """A header with an unknown magic and a length past the end of the file, after a broker-written
    segment: with the window ending anywhere inside its first 17 bytes the walker stops for more data,
    and the header must still be judged on its own bytes (an UNREADABLE_BATCH region, an error), not on
    that stale reason (a TRUNCATED_TAIL warning)."""
    valid = (REAL_GZIP / "00000000000000000000.log").read_bytes()
    garbage = struct.pack(">qiiB", 7, 0x7FFFFFF0, 0, 0x91) + bytes(23)
    path = write(tmp_path, valid + garbage)
    whole = list(read_log_segment(path))
    (error,) = errors(whole)
    assert (error.kind, error.position, error.length) == (CorruptionKind.UNREADABLE_BATCH, len(valid), 40)
    for visible in range(1, 18):
        assert list(read_log_segment(path, chunk_size=len(valid) + visible)) == whole, visible


def test_a_run_ends_once_its_decompressed_payloads_pass_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window of small zstd batches that decompress to 300 KB each, between plain ones: a run keeps
    every payload it decompressed, so it ends at the first batch after its payloads pass the bound
    (here 1 MiB), and the next run starts there. The rows are those of one unbounded run."""
    value_size = 300_000
    parts = [
        build_v2(
            V2Batch(
                base_offset=b,
                records=[(b"k%d" % b, bytes([b]) * value_size)],
                codec="zstd" if b % 3 else "none",
            )
        )
        for b in range(12)
    ]
    path = write(tmp_path, b"".join(parts))
    unbounded = list(read_log_segment(path, records=True))
    monkeypatch.setattr(segment, "MAX_RUN_DECOMPRESSED_BYTES", 1 << 20)
    runs = list(iter_segment_runs(path, records=True))
    assert len(runs) > 1
    for run in runs:
        assert isinstance(run, segment.BatchRun)
        held = sum(len(r.source) for r in run.records if r.batch_index is not None)
        assert held < (1 << 20) + value_size + 100
    assert [offset for run in runs for offset in run.batches["base_offset"]] == list(range(12))
    assert list(read_log_segment(path, records=True)) == unbounded
    assert [r.value for r in unbounded if isinstance(r, Record)] == [
        bytes([b]) * value_size for b in range(12)
    ]


def test_a_run_that_ends_early_before_a_corrupt_length_loses_no_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight zstd batches of 300 KB payloads, then a batch whose length field claims the batch after it
    too (its CRC fails; a valid batch starts inside): the batches before it are a run cut short by the
    bound, and the next run must start where that one ended, not at the corrupt batch."""
    value_size = 300_000
    parts = [
        build_v2(V2Batch(base_offset=b, records=[(b"k", bytes([b]) * value_size)], codec="zstd"))
        for b in range(8)
    ]
    corrupt = bytearray(build_v2(V2Batch(base_offset=8, records=[(b"k", b"v")])))
    after = build_v2(V2Batch(base_offset=9, records=[(b"k", b"w")]))
    struct.pack_into(">i", corrupt, 8, len(corrupt) + len(after) - 12)
    path = write(tmp_path, b"".join(parts) + bytes(corrupt) + after)
    unbounded = list(read_log_segment(path, records=True))
    assert [h.base_offset for h in headers(unbounded)] == [*range(8), 9]
    monkeypatch.setattr(segment, "MAX_RUN_DECOMPRESSED_BYTES", 1 << 20)
    assert list(read_log_segment(path, records=True)) == unbounded


def test_a_resync_candidate_claiming_the_rest_of_the_file_is_checked_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """After a corrupt length, the resync meets a header that reads as a v2 batch claiming the remaining
    32 MiB (its CRC fails): its CRC is computed over that length in chunks, never by reading it whole
    (over a file of random bytes, a read per such candidate took time and memory growing with the file)."""
    garbage = struct.pack(">qi", 0, -5) + bytes(100)
    rest = 32 << 20
    candidate = bytearray(build_v2(V2Batch(base_offset=1, records=[(b"k", b"v")])))
    struct.pack_into(">i", candidate, 8, rest - 12)
    valid = build_v2(V2Batch(base_offset=2, records=[(b"k", b"w")]))
    path = write(tmp_path, garbage + bytes(candidate) + bytes(rest - len(candidate) - len(valid)) + valid)
    tracemalloc.start()
    try:
        items = list(read_log_segment(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    (error,) = errors(items)
    assert (error.kind, error.position) == (CorruptionKind.UNREADABLE_BATCH, 0)
    assert [h.base_offset for h in headers(items)] == [2]
    assert peak < 8 << 20


def test_an_unreadable_legacy_entry_whose_length_runs_over_a_valid_batch_ends_at_it(tmp_path: Path) -> None:
    """The broker-written batch at 227 with its magic byte set to 0 and its length stretched over the
    batch after it: the bytes read as a v0 entry that cannot be decoded. Its length is what is corrupt,
    as for a v2 batch whose CRC fails over a valid one: the region ends at the valid batch (469), which
    is decoded; a range of the segment that starts there reports it too."""
    data = bytearray((REAL_GZIP / "00000000000000000000.log").read_bytes())
    struct.pack_into(">i", data, 227 + 8, 648 - 227 - 12)
    data[227 + 16] = 0
    items = list(read_log_segment(write(tmp_path, bytes(data))))
    assert [h.position for h in headers(items)] == [0, *GZIP_POSITIONS[2:]]
    (error,) = errors(items)
    assert (error.kind, error.position, error.length) == (CorruptionKind.UNREADABLE_BATCH, 227, 469 - 227)
    assert error.message.startswith("unreadable legacy v0 entry: ")


def test_a_segment_truncated_while_it_is_read_ends_in_a_truncated_tail(tmp_path: Path) -> None:
    """A follower truncates its log (or a copy is written over) while a walk reads it: the walk read
    the size once, and waited for the missing bytes forever. It ends at the new size, with the cut
    batch a TRUNCATED_TAIL. In a child process with a deadline, so a regression fails the test."""

    path = tmp_path / "00000000000000000000.log"
    first = build_v2(V2Batch(base_offset=0))
    second = build_v2(V2Batch(base_offset=1, records=((None, b"x" * 5000),)))
    path.write_bytes(first + second)
    program = (
        "import os, sys\n"
        "from kafka_log_decoder.segment import iter_segment_runs\n"
        "runs = iter_segment_runs(sys.argv[1], chunk_size=1000)\n"
        "next(runs)\n"
        f"os.truncate(sys.argv[1], {len(first) + 2000})\n"
        "for run in runs:\n"
        "    for item in run if isinstance(run, list) else []:\n"
        "        print(item.kind.value, item.position, item.length)\n"
    )
    assert walked_within_a_minute(program, path).split() == ["TRUNCATED_TAIL", str(len(first)), "2000"]


def test_a_segment_truncated_at_a_batch_boundary_while_it_is_read_ends_there(tmp_path: Path) -> None:
    """A follower truncates at a batch boundary (`LogSegment.truncateTo`): the window's refill stopped
    exactly at a batch's end, and the walk, still bounded by the size read at open, asked again for the
    bytes from there forever. It ends at the new size, with the batches before it and no error."""

    path = tmp_path / "00000000000000000000.log"
    batches = [build_v2(V2Batch(base_offset=3 * i, records=((None, b"x"),) * 3)) for i in range(100)]
    path.write_bytes(b"".join(batches))
    cut = sum(map(len, batches[:50]))
    program = (
        "import os, sys\n"
        "from kafka_log_decoder.segment import BatchRun, iter_segment_runs\n"
        "runs = iter_segment_runs(sys.argv[1], chunk_size=1000)\n"
        "seen = next(runs).n\n"
        f"os.truncate(sys.argv[1], {cut})\n"
        "for run in runs:\n"
        "    seen += run.n if isinstance(run, BatchRun) else 0\n"
        "    for item in run if isinstance(run, list) else []:\n"
        "        print(item.kind.value, item.position, item.length)\n"
        "print(seen)\n"
    )
    assert walked_within_a_minute(program, path).split() == ["50"]


def test_a_batch_claiming_more_records_than_columns_can_hold_is_not_decoded(tmp_path: Path) -> None:
    """Twenty KB of zstd can hold tens of millions of empty records (7 bytes each), whose record columns
    take 68 bytes each: gigabytes. Such a batch's header is read, its records are not: one error."""
    import cramjam

    from kafka_log_decoder import native
    from kafka_log_decoder.segment import BatchRun

    count = 4_000_000  # 272 MB of columns
    # A record: length 6, attributes 0, timestamp delta 0, offset delta 0, null key, null value, no header.
    plain = b"\x0c\x00\x00\x00\x01\x01\x00" * count
    payload = bytes(cramjam.zstd.compress(plain))
    tail = struct.pack(">hiqqqhii", 4, count - 1, 0, 0, 7, 0, 0, count) + payload
    body = struct.pack(">ibI", 0, 2, native.crc32c(tail)) + tail
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(struct.pack(">qi", 0, len(body)) + body)
    runs = list(iter_segment_runs(path, records=True))
    (run,) = [r for r in runs if isinstance(r, BatchRun)]
    assert run.n == 1 and sum(len(r.columns["offset"]) for r in run.records) == 0
    errors = [e.message for e in run.errors.get(0, [])]
    assert len(errors) == 1 and f"{count} records: more than" in errors[0], errors


def _one_record_with_headers(headers: int) -> bytes:
    """A v2 record with null key and value and `headers` headers of empty key and null value (2 bytes
    each): the least payload per header row."""

    def varint(n: int) -> bytes:
        z, out = (n << 1) ^ (n >> 63), bytearray()
        while z >= 0x80:
            out.append(z & 0x7F | 0x80)
            z >>= 7
        return bytes([*out, z])

    body = b"\x00\x00\x00\x01\x01" + varint(headers) + b"\x00\x01" * headers
    return varint(len(body)) + body


def _v2_batch(payload: bytes, codec: int, count: int) -> bytes:
    from kafka_log_decoder import native

    tail = struct.pack(">hiqqqhii", codec, count - 1, 0, 0, 7, 0, 0, count) + payload
    body = struct.pack(">ibI", 0, 2, native.crc32c(tail)) + tail
    return struct.pack(">qi", 0, len(body)) + body


@pytest.mark.parametrize("codec", [0, 4], ids=["plain", "zstd"])
def test_a_batch_with_more_headers_than_columns_may_hold_is_not_decoded(tmp_path: Path, codec: int) -> None:
    """Each header takes 2 bytes of payload and 28 of columns: a 19 MB record (a few KB of zstd) held
    9.6 million header rows, 470 MB once the columns doubled past them, a batch more when it failed.
    Past `MAX_BATCH_HEADERS` (what 256 MiB of columns holds) the batch's records are not decoded: one
    error naming it, and the columns of that batch stop growing at the limit."""
    import tracemalloc

    import cramjam

    from kafka_log_decoder import native
    from kafka_log_decoder.segment import BatchRun

    plain = _one_record_with_headers(native.MAX_BATCH_HEADERS + 1)
    payload = plain if codec == 0 else bytes(cramjam.zstd.compress(plain))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_v2_batch(payload, codec, 1))
    tracemalloc.start()
    try:
        runs = list(iter_segment_runs(path, records=True))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (run,) = [r for r in runs if isinstance(r, BatchRun)]
    assert run.n == 1 and sum(len(r.columns["offset"]) for r in run.records) == 0
    errors = [e.message for e in run.errors.get(0, [])]
    limit = f"more than the {native.MAX_BATCH_HEADERS} record headers"
    assert len(errors) == 1 and limit in errors[0], errors
    assert peak < 360 << 20, peak
    # A record of a thousand headers is decoded.
    plain = _one_record_with_headers(1000)
    path.write_bytes(_v2_batch(plain if codec == 0 else bytes(cramjam.zstd.compress(plain)), codec, 1))
    (run,) = [r for r in iter_segment_runs(path, records=True) if isinstance(r, BatchRun)]
    assert not run.errors and sum(len(r.columns["offset"]) for r in run.records) == 1


def test_crafted_headers_that_each_claim_the_rest_of_the_file_do_not_make_the_scan_quadratic(
    tmp_path: Path,
) -> None:
    """Every 61 bytes a v2 header whose length claims the rest of the file and whose CRC fails: each
    was a resync candidate whose CRC covered the rest of the file (8 MiB: 32 s, a 1 GiB segment days).
    The walk's resync budget bounds them: 16 MiB is one batch whose CRC failed, read in a child process
    with a deadline so that a regression fails the test instead of stalling the suite."""
    count = (16 << 20) // 61
    size = count * 61
    header = struct.Struct(">qiibIhiqqqhii")
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(
        b"".join(
            header.pack(0, size - i * 61 - 12, 0, 2, 0xDEADBEEF, 0, 0, -1, -1, -1, -1, -1, 0)
            for i in range(count)
        )
    )
    program = (
        "import sys\n"
        "from kafka_log_decoder.segment import read_log_segment\n"
        "for item in read_log_segment(sys.argv[1]):\n"
        "    print(type(item).__name__, getattr(item, 'kind', ''), getattr(item, 'position', ''))\n"
    )
    # The first header's batch, its CRC failed over the whole file: no valid batch starts inside it.
    assert walked_within_a_minute(program, path).splitlines() == [
        "BatchHeader  0",
        "DecodeError CRC_MISMATCH 0",
    ]


def walked_within_a_minute(program: str, path: Path) -> str:
    """The output of `program` run on `path` in a child process, which must end within 60 s: a walk
    that loops fails the test instead of stalling the suite."""
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", program, str(path)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the walk did not end within 60 s")
    assert done.returncode == 0, done.stderr
    return done.stdout
