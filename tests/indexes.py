"""`.index` entries for tests, placed as the broker places them (the positions come from our decoder's
walk of a broker-written segment; the entries are what the check under test reads)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from tests.paths import REAL_FIXTURES


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


def metadata_segment_with_index(folder: Path) -> tuple[Path, Path, list[tuple[int, int]]]:
    """A real broker's segment (3.9 MB of `__cluster_metadata`) copied to `folder/meta-0/`, with an
    `.index` of `broker_like_index` entries beside it: (log, index, entries)."""
    source = REAL_FIXTURES / "induswargods-kraft" / "__cluster_metadata-0" / "00000000000000000000.log"
    log = folder / "meta-0" / source.name
    log.parent.mkdir()
    shutil.copyfile(source, log)
    entries = broker_like_index(log)
    index = log.with_suffix(".index")
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    return log, index, entries
