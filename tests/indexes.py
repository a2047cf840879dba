"""`.index` entries for tests, placed as the broker places them (the positions come from our decoder's
walk of a broker-written segment; the entries are what the check under test reads)."""

from __future__ import annotations

from pathlib import Path

from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment


def broker_like_index(log: Path, every: int = 4096) -> list[tuple[int, int]]:
    """(relative offset, position) entries as `LogSegment.append` writes them: the batch's last offset,
    before a batch once more than `every` bytes were appended since the last entry."""
    base = int(log.name.split(".")[0])
    entries, since = [], 0
    for item in read_log_segment(log):
        if isinstance(item, BatchHeader):
            if since > every:
                entries.append((item.last_offset - base, item.position))
                since = 0
            since += item.size_bytes
    return entries
