"""`.index` entries as a follower (or the cleaner) of a broker before KAFKA-806 writes them are no
INDEX_MISMATCH; entries that really are wrong still are (`IndexCheck`, spec §3.3, §6.2).

Until apache/kafka#18012, `LogSegment.append(largestOffset, ..., records)` added at most one entry per
append: the last offset of the whole appended chunk, at the position where the chunk starts, once more
than `index.interval.bytes` were appended since the last entry. A follower appends a whole fetch
response, the cleaner a whole cleaned buffer: the batch at such an entry's position need not hold its
offset, a later batch of the chunk does. After KAFKA-806 (and on a leader, one batch per produce
request) an entry names the last offset of the batch at its position.

The segments are built with kafka-python's record batch builder (`tests.builders.build_v2`), and the
entries, positions and offsets come from the bytes as built, not from the decoder under test.
"""

from __future__ import annotations

import random
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import decode_tasks as dt
from jobs.ingest import split_segment
from kafka_log_decoder.errors import CorruptionKind, DecodeError
from kafka_log_decoder.index_check import IndexCheck
from kafka_log_decoder.segment import iter_segment_runs
from schemas.tables import QUARANTINE
from tests.builders import V2Batch, build_v2

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "broker-4.3.1"
QUARANTINE_SCHEMA = to_arrow_schema(QUARANTINE.schema)


@dataclass(frozen=True)
class Built:
    """One batch as built: where it starts in the segment, its offsets and its bytes."""

    position: int
    base_offset: int
    last_offset: int
    data: bytes


def build_batches(count: int, *, base: int = 0, gaps: bool = False, seed: int = 7) -> list[Built]:
    """`count` v2 batches of 1-5 records of varied sizes, offsets from `base` (with `gaps`: holes between
    batches, as compaction leaves them); some compressed."""
    rng = random.Random(seed)
    out: list[Built] = []
    offset, position = base, 0
    for i in range(count):
        n = rng.randint(1, 5)
        records = [(b"k%d" % rng.randint(0, 9), bytes(rng.randint(5, 120))) for _ in range(n)]
        codec = "gzip" if i % 7 == 3 else "none"
        data = build_v2(V2Batch(base_offset=offset, records=records, producer_id=11, codec=codec))
        out.append(Built(position, offset, offset + n - 1, data))
        position += len(data)
        offset += n + (rng.randint(0, 3) if gaps else 0)
    return out


def chunked(batches: list[Built], *, most: int, seed: int = 3) -> list[list[Built]]:
    """The batches as the appends of a follower: fetch responses of 1 to `most` batches each."""
    rng = random.Random(seed)
    chunks, i = [], 0
    while i < len(batches):
        n = rng.randint(1, most)
        chunks.append(batches[i : i + n])
        i += n
    return chunks


def index_of(chunks: list[list[Built]], base: int, interval: int) -> list[tuple[int, int]]:
    """(relative offset, position) entries as `LogSegment.append` (3.x) writes them, one append per chunk:
    the chunk's last offset at the chunk's start, when more than `interval` bytes were appended since the
    last entry (counted before this chunk). With chunks of one batch, what 4.x writes for any append."""
    entries, since = [], 0
    for chunk in chunks:
        if since > interval:
            entries.append((chunk[-1].last_offset - base, chunk[0].position))
            since = 0
        since += sum(len(b.data) for b in chunk)
    return entries


def write(tmp_path: Path, batches: list[Built], entries: list[tuple[int, int]], base: int = 0) -> Path:
    log = tmp_path / "t-0" / f"{base:020d}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"".join(b.data for b in batches))
    write_index(log, entries)
    return log


def write_index(log: Path, entries: list[tuple[int, int]], tail: bytes = b"") -> None:
    log.with_suffix(".index").write_bytes(b"".join(struct.pack(">ii", *e) for e in entries) + tail)


def mismatches(log: Path) -> list[DecodeError]:
    """The check as `replay-audit dump` runs it: one walk of the whole `.log`."""
    check = IndexCheck(str(log), str(log.with_suffix(".index")))
    for run in iter_segment_runs(log):
        check.see(run)
    return list(check.errors())


def split_mismatches(log: Path, split_bytes: int) -> list[tuple[int, int | None]]:
    """The INDEX_MISMATCH rows of a split ingest's quarantine pass: (position in the index, length)."""
    whole = dt.WorkUnit(
        dt.LOG, "d", None, "t", 0, str(log), log.stat().st_size, index_file=str(log.with_suffix(".index"))
    )
    units = split_segment(whole, split_bytes)
    assert len(units) > 3
    rows = []
    for unit in units:
        for batch in dt.decode_unit_safely(unit, QUARANTINE.name, QUARANTINE_SCHEMA, records=False):
            rows += [(r["position"], r["length"]) for r in batch.to_pylist() if r["kind"] == "INDEX_MISMATCH"]
    return sorted(rows)


def at(batches: list[Built], position: int) -> Built | None:
    return next((b for b in batches if b.position == position), None)


def chunk_entries(batches: list[Built], entries: list[tuple[int, int]], base: int = 0) -> list[int]:
    """The numbers of the entries whose batch does not hold their offset (a later one of the chunk does)."""
    out = []
    for number, (relative, position) in enumerate(entries):
        batch = at(batches, position)
        assert batch is not None and batch.base_offset <= base + relative
        if base + relative > batch.last_offset:
            out.append(number)
    return out


# ---------------------------------------------------------------------------------------------
# What brokers write


@pytest.mark.parametrize("gaps", [False, True], ids=["follower", "cleaned"])
@pytest.mark.parametrize("interval", [0, 300, 4096])
def test_a_followers_chunk_entries_are_no_mismatch(tmp_path: Path, gaps: bool, interval: int) -> None:
    """A 3.x follower's segment (or a cleaned one, with offset gaps): one entry per fetch response of up
    to 8 batches, the last offset of the response at its first batch. No entry is a mismatch."""
    base = 1000
    batches = build_batches(400, base=base, gaps=gaps)
    entries = index_of(chunked(batches, most=8), base, interval)
    assert len(chunk_entries(batches, entries, base)) > len(entries) // 2  # the case at issue
    log = write(tmp_path, batches, entries, base)
    assert mismatches(log) == []


@pytest.mark.parametrize("interval", [0, 300, 4096])
def test_a_leaders_and_a_4x_brokers_entries_are_no_mismatch(tmp_path: Path, interval: int) -> None:
    """One entry per batch at most (a leader's produce requests, or any append after KAFKA-806): each
    names the last offset of the batch at its position."""
    batches = build_batches(400)
    entries = index_of([[b] for b in batches], 0, interval)
    assert entries and chunk_entries(batches, entries) == []
    assert mismatches(write(tmp_path, batches, entries)) == []


def test_a_followers_index_split_into_ranges_has_no_mismatch_and_its_wrong_entries_are_found_once(
    tmp_path: Path,
) -> None:
    """A split ingest cuts the segment at entries (here chunk entries, whose batch does not hold their
    offset) and checks each range's entries against the range's walk: none is a mismatch, whatever the
    cut; the wrong ones below are each one row, as from the whole file."""
    batches = build_batches(900)
    entries = index_of(chunked(batches, most=6), 0, 500)
    log = write(tmp_path, batches, entries)
    assert len(chunk_entries(batches, entries)) > len(entries) // 2
    for split_bytes in (4 << 10, 16 << 10, 40 << 10):
        assert split_mismatches(log, split_bytes) == [], split_bytes

    edited = list(entries)
    edited[20] = (entries[20][0], entries[20][1] + 5)  # inside its batch
    after = at(batches, entries[51][1])  # the first offset at the next entry: not before its position
    assert after is not None and entries[50][0] < after.base_offset < entries[51][0]
    edited[50] = (after.base_offset, entries[50][1])
    edited[-1] = (entries[-1][0] + 10_000, entries[-1][1])  # past the end of the log
    write_index(log, edited)
    wrong = [20, 50, len(entries) - 1]
    assert [(e.position, e.length) for e in mismatches(log)] == [(8 * i, 8) for i in wrong]
    for split_bytes in (4 << 10, 16 << 10, 40 << 10):
        assert split_mismatches(log, split_bytes) == [(8 * i, 8) for i in wrong], split_bytes


def test_the_4_3_1_brokers_own_indexes_have_no_mismatch(tmp_path: Path) -> None:
    """The indexes a real Kafka 4.3.1 broker wrote (`samples/broker-4.3.1`) all check out."""
    checked = 0
    for index in sorted(SAMPLE.glob("*/*.index")):
        if not index.stat().st_size:
            continue
        copy = tmp_path / index.parent.name / index.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(index, copy)
        shutil.copyfile(index.with_suffix(".log"), copy.with_suffix(".log"))
        assert mismatches(copy.with_suffix(".log")) == [], index
        checked += 1
    assert checked >= 2


# ---------------------------------------------------------------------------------------------
# What is wrong, follower or not


@pytest.fixture
def follower(tmp_path: Path) -> tuple[list[Built], list[tuple[int, int]], Path]:
    batches = build_batches(300)
    entries = index_of(chunked(batches, most=5, seed=5), 0, 300)
    assert len(entries) > 40
    return batches, entries, write(tmp_path, batches, entries)


def flagged(log: Path) -> list[tuple[int, str]]:
    errors = mismatches(log)
    assert all(e.kind is CorruptionKind.INDEX_MISMATCH and e.length == 8 for e in errors)
    assert all(e.file == str(log.with_suffix(".index")) for e in errors)
    return [(e.position // 8, e.message) for e in errors]


def test_an_entry_inside_a_batch_is_a_mismatch(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    _, entries, log = follower
    entries[10] = (entries[10][0], entries[10][1] + 5)
    write_index(log, entries)
    ((number, message),) = flagged(log)
    assert number == 10 and "does not point at the start of a batch" in message


def test_entries_of_a_trimmed_index_past_the_logs_end_say_so(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    """A trimmed index (a closed segment's: no preallocated tail) whose .log ends before its last
    entries' positions: the .log was cut short after the entries were written, and the entries say so,
    not only that they do not point at a batch."""
    _, entries, log = follower
    cut = entries[-3][1]
    with open(log, "r+b") as segment:
        segment.truncate(cut)
    found = flagged(log)
    assert [number for number, _ in found] == [len(entries) - 3, len(entries) - 2, len(entries) - 1]
    assert all(f"points past the end of {log} ({cut} bytes): the .log was cut short" in m for _, m in found)


def truncated_and_appended(tmp_path: Path, *, cut_at: int, tail: bool) -> tuple[Path, list[int], IndexCheck]:
    """A segment as a broker leaves it after `LogSegment.truncateTo` (a follower truncating to its new
    leader): 200 batches indexed one entry per batch, truncated at batch `cut_at`'s base offset, then 12
    larger batches of other records appended from there. `OffsetIndex.truncateTo` keeps the entries
    below the offset and only moves the index's position (`AbstractIndex.truncateToEntries`), the
    appends overwrite the slots from there on (the first appended batch gets none: the truncation
    resets the bytes since the last entry), and the entries past them stay, pointing into the new
    batches or past the new end. With `tail`, the file keeps its preallocated zeros (the broker still
    holds it open); without, as if trimmed. Returns the .log, the leftover entries' numbers, and the
    check of the whole segment."""
    old = build_batches(200)
    entries = index_of([[b] for b in old], 0, 0)
    cut = old[cut_at]
    kept = [e for e in entries if e[0] < cut.base_offset]
    rng = random.Random(11)
    new, offset, position = [], cut.base_offset, cut.position
    for i in range(12):
        n = rng.randint(8, 20)
        records = [(b"n%d" % i, bytes(rng.randint(60, 200))) for _ in range(n)]
        data = build_v2(V2Batch(base_offset=offset, records=records, producer_id=12))
        new.append(Built(position, offset, offset + n - 1, data))
        offset, position = offset + n, position + len(data)
    appended = [(b.last_offset, b.position) for b in new[1:]]
    stale = entries[len(kept) + len(appended) :]
    assert len(stale) > 10 and any(p < position for _, p in stale)  # some point inside the new batches
    log = write(tmp_path, old[:cut_at] + new, kept + appended + stale)
    if tail:
        write_index(log, kept + appended + stale, tail=bytes(8 * 2000))
    check = IndexCheck(str(log), str(log.with_suffix(".index")))
    for run in iter_segment_runs(log):
        check.see(run)
    return log, list(range(len(kept) + len(appended), len(entries))), check


def test_entries_a_truncation_left_in_a_preallocated_index_are_not_the_brokers(tmp_path: Path) -> None:
    """The broker never reads the entries past its count (its lookups search its own entries, and a
    restart after a crash rebuilds an active segment's index): a live or crashed broker's copy holding
    them is no INDEX_MISMATCH, whole or split into ranges."""
    log, leftovers, check = truncated_and_appended(tmp_path, cut_at=150, tail=True)
    assert list(check.errors()) == []
    assert check.leftovers == len(leftovers)
    assert split_mismatches(log, 8 << 10) == []


def test_the_same_entries_in_a_trimmed_index_are_mismatches(tmp_path: Path) -> None:
    """Trimmed, the index is the broker's whole (it trims to its count when it closes a segment): the
    same entries are its own and wrong."""
    log, leftovers, check = truncated_and_appended(tmp_path, cut_at=150, tail=False)
    assert check.leftovers == 0
    found = [number for number, _ in flagged(log)]
    assert found and set(found) <= set(leftovers)
    assert len(found) > len(leftovers) // 2


def test_a_wrong_entry_before_a_right_last_one_stays_a_mismatch(tmp_path: Path) -> None:
    """Only the run at the end is a truncation's: a wrong entry followed by one that leads to its batch
    is checked, preallocated tail or not."""
    log, leftovers, _ = truncated_and_appended(tmp_path, cut_at=150, tail=True)
    index = log.with_suffix(".index")
    entries = [struct.unpack_from(">ii", index.read_bytes(), 8 * i) for i in range(leftovers[-1] + 1)]
    last_kept = leftovers[0] - 1
    inside = (entries[last_kept - 1][0], entries[last_kept - 1][1] + 5)
    edited = [*entries[: last_kept - 1], inside, *entries[last_kept : leftovers[0]]]
    write_index(log, edited, tail=bytes(8 * 2000))
    assert [number for number, _ in flagged(log)] == [last_kept - 1]


def test_a_wrong_last_entry_of_a_live_index_inside_the_log_stays_a_mismatch(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    """A last entry pointing inside a batch, following the one before it: nothing shows a truncation
    left it (it is neither past the .log's end nor going back), so it is checked, preallocated tail or
    not. Past the end it is let be: a truncated log's, or the .log copied before the index's last
    appends."""
    _, entries, log = follower
    wrong = [*entries[:-1], (entries[-1][0], entries[-1][1] + 5)]
    write_index(log, wrong, tail=bytes(8 * 1000))
    assert [number for number, _ in flagged(log)] == [len(entries) - 1]
    past = [*entries[:-1], (entries[-1][0], log.stat().st_size + 100)]
    write_index(log, past, tail=bytes(8 * 1000))
    assert flagged(log) == []


def test_a_preallocated_index_of_legacy_compressed_messages_is_checked(tmp_path: Path) -> None:
    """A compressed legacy wrapper's offset field is its last inner message's, and brokers before 0.11
    indexed an append's first offset: such entries lead to a message though their offset is below the
    wrapper's. They were all taken for a truncation's leftovers, and a wrong one among them was let be."""
    from tests.builders import build_legacy, segment

    messages = [build_legacy(1, [(b"k", b"v" * 40)] * 3, codec="gzip", first_offset=3 * i) for i in range(20)]
    data = segment(*messages)
    starts = [sum(len(m) for m in messages[:i]) for i in range(len(messages))]
    log = tmp_path / "t-0" / f"{0:020d}.log"
    log.parent.mkdir()
    log.write_bytes(data)
    entries = [(3 * i, starts[i]) for i in range(1, 20, 2)]
    write_index(log, entries, tail=bytes(8 * 1000))
    assert flagged(log) == []
    entries[4] = (entries[4][0], entries[4][1] + 3)
    write_index(log, entries, tail=bytes(8 * 1000))
    assert [number for number, _ in flagged(log)] == [4]


def test_garbage_at_the_end_of_a_preallocated_index_stays_a_mismatch(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    """Entries at the end that lead to no batch but go back in offset or position among themselves are
    not an index the broker wrote before a truncation: checked, and wrong."""
    _, entries, log = follower
    garbage = [(5_000_000, 9_000_000), (4_000_000, 8_000_000), (3_000_000, 7_000_000)]
    write_index(log, entries + garbage, tail=bytes(8 * 1000))
    assert [number for number, _ in flagged(log)] == [len(entries), len(entries) + 1]


def test_an_entry_at_a_batch_starting_above_its_offset_is_a_mismatch(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    """The entry names the offset just before its batch's first (still above the previous entry's): a
    lookup of that offset would start after it."""
    batches, entries, log = follower
    # An entry whose batch is not the first after the previous entry's offset.
    i = next(
        i for i in range(1, len(entries)) if at(batches, entries[i][1]).base_offset - 1 > entries[i - 1][0]
    )
    batch = at(batches, entries[i][1])
    entries[i] = (batch.base_offset - 1, entries[i][1])
    write_index(log, entries)
    ((number, message),) = flagged(log)
    assert number == i and f"starting at offset {batch.base_offset}, above the entry's" in message


def test_an_offset_not_reached_before_the_next_entry_is_a_mismatch(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    """The entry names the first offset of the next entry's batch: its own position and the batches up to
    the next entry's position do not hold it (a lookup would scan past the next entry's position)."""
    batches, entries, log = follower
    after = at(batches, entries[15][1])
    assert after is not None and entries[14][0] < after.base_offset < entries[15][0]
    entries[14] = (after.base_offset, entries[14][1])
    write_index(log, entries)
    ((number, message),) = flagged(log)
    assert number == 14
    assert f"no batch from its position up to position {entries[15][1]} of" in message
    assert message.endswith(f"holds offset {after.base_offset}")


def test_a_last_entry_past_the_logs_offsets_is_a_mismatch(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    batches, entries, log = follower
    entries[-1] = (batches[-1].last_offset + 1, entries[-1][1])
    write_index(log, entries)
    ((number, message),) = flagged(log)
    assert number == len(entries) - 1 and "up to the end of" in message


def test_entries_going_backwards_are_mismatches(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    """Two entries swapped (each right by itself): the second goes back in offset and position, which
    `OffsetIndex.append` never writes and its binary search cannot use."""
    _, entries, log = follower
    entries[20], entries[21] = entries[21], entries[20]
    write_index(log, entries)
    ((number, message),) = flagged(log)
    assert number == 21 and f"does not follow the entry before it (offset {entries[20][0]}," in message


def test_an_entry_repeating_the_one_before_is_a_mismatch(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    _, entries, log = follower
    entries.insert(25, entries[24])
    write_index(log, entries)
    assert [number for number, _ in flagged(log)] == [25]


def test_entries_after_a_zeroed_entry_are_checked_as_the_broker_reads_them(
    follower: tuple[list[Built], list[tuple[int, int]], Path],
) -> None:
    """Entry 12 zeroed (a zeroed page inside the index) and entry 30 wrong, before the preallocated zero
    tail: the broker counts every entry of the file (`AbstractIndex`) and looks offsets up among them,
    so both are mismatches; DumpLogSegments stops at entry 12 and shows neither."""
    _, entries, log = follower
    entries[12] = (0, 0)
    entries[30] = (entries[30][0], entries[30][1] + 5)
    write_index(log, entries, tail=bytes(8 * 1000))
    found = flagged(log)
    assert [number for number, _ in found] == [12, 30]
    assert "does not follow the entry before it" in found[0][1]
    assert "does not point at the start of a batch" in found[1][1]


def test_a_split_at_a_followers_chunk_entry_starts_there(tmp_path: Path) -> None:
    """Each range of a follower's segment, cut at chunk entries, decodes from its own boundary: with the
    split check as strict as the old IndexCheck, most fell back to the split point before and decoded
    the range before them twice."""
    batches = build_batches(900)
    entries = index_of(chunked(batches, most=6), 0, 500)
    log = write(tmp_path, batches, entries)
    whole = dt.WorkUnit(
        dt.LOG, "d", None, "t", 0, str(log), log.stat().st_size, index_file=str(log.with_suffix(".index"))
    )
    units = split_segment(whole, 8 << 10)
    cut = [u for u in units if u.boundary is not None]
    assert len(cut) > 5
    chunks = set(chunk_entries(batches, entries))
    assert any(entries.index((u.boundary.offset, u.boundary.position)) in chunks for u in cut)
    assert [dt.resolve_start(u) for u in cut] == [u.start for u in cut]
