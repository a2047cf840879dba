"""Benchmark segments written by an independent encoder (kafka-python's `DefaultRecordBatchBuilder`).

One template batch is built per shape and replicated with rewritten base offsets (baseOffset lies
outside the CRC, so every copy stays valid), which writes hundreds of MB in seconds. Files live in
`$KRA_CACHE/bench/<shape>/00000000000000000000.log` beside a `meta.json` of the parameters that
made them; a file whose parameters match is reused.
"""

from __future__ import annotations

import json
import os
import random
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

# Bump when the bytes a shape produces change, so cached files are regenerated.
GENERATOR_VERSION = 1
MB = 1_000_000
CODEC_IDS = {"none": 0, "zstd": 4}
SEGMENT_NAME = "00000000000000000000.log"
BASE_TIMESTAMP = 1_700_000_000_000
PRODUCER_ID = 4242
# Offsets rewritten per block of copies; blocks are written with one write() each.
_BLOCK_BYTES = 4 << 20


@dataclass(frozen=True)
class Shape:
    """What one benchmark file holds: `records_per_batch` records per batch, `target_bytes` in all."""

    name: str
    description: str
    target_bytes: int
    records_per_batch: int
    codec: str
    value_bytes: tuple[int, int]
    max_headers: int


def shapes(*, quick: bool) -> dict[str, Shape]:
    """The three shapes of the issue at full size, or small copies of them for a smoke run."""
    scale = (lambda mb: mb * MB // 25) if quick else (lambda mb: mb * MB)
    return {
        shape.name: shape
        for shape in (
            Shape("1-record", "one-record batches, 100-byte value", scale(200), 1, "none", (100, 100), 0),
            Shape(
                "500-record",
                "500-record batches, 20-40 byte values, keys, 1-2 headers",
                scale(500),
                500,
                "none",
                (20, 40),
                2,
            ),
            Shape("zstd", "500-record zstd batches (as 500-record)", scale(200), 500, "zstd", (20, 40), 2),
        )
    }


# The file `replay-audit dump --summary` is timed on: one batch of the 1-record template.
ONE_BATCH = Shape("one-batch", "a single one-record batch", 1, 1, "none", (100, 100), 0)


@dataclass(frozen=True)
class Segment:
    """A generated file: `batches` copies of one `batch_size`-byte template batch."""

    shape: str
    path: str
    batches: int
    records: int
    batch_size: int
    file_size: int

    def prefix_bytes(self, limit: int) -> int:
        """The largest whole-batch prefix of at most `limit` bytes (at least one batch)."""
        return max(1, min(limit, self.file_size) // self.batch_size) * self.batch_size


def cache_dir() -> Path:
    """`$KRA_CACHE/bench` (KRA_CACHE defaults to ~/.cache/kafka-replay-audit), outside the repository."""
    root = os.environ.get("KRA_CACHE") or "~/.cache/kafka-replay-audit"
    return Path(root).expanduser() / "bench"


def ensure_segment(shape: Shape, root: Path | None = None) -> tuple[Segment, bool]:
    """The segment of `shape`, generated unless an identical one is cached; True if it was generated."""
    directory = (root or cache_dir()) / f"{shape.name}-{shape.target_bytes}"
    path = directory / SEGMENT_NAME
    meta_path = directory / "meta.json"
    # As stored: tuples become lists (compared unconverted, the cache never matched).
    params = json.loads(json.dumps({"generator_version": GENERATOR_VERSION, **asdict(shape)}))
    if meta_path.is_file() and path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("params") == params and meta["segment"]["file_size"] == path.stat().st_size:
            return Segment(**meta["segment"]), False
    directory.mkdir(parents=True, exist_ok=True)
    template = template_batch(shape)
    batches = max(1, shape.target_bytes // len(template))
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    write_copies(tmp, template, batches, shape.records_per_batch)
    os.replace(tmp, path)
    segment = Segment(
        shape.name,
        str(path),
        batches,
        batches * shape.records_per_batch,
        len(template),
        batches * len(template),
    )
    meta_path.write_text(json.dumps({"params": params, "segment": asdict(segment)}, indent=1) + "\n")
    return segment, True


def template_batch(shape: Shape) -> bytes:
    """One batch of `shape` from kafka-python's builder, as an idempotent producer writes it."""
    rng = random.Random(f"{shape.name}/{GENERATOR_VERSION}")
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODEC_IDS[shape.codec],
        is_transactional=False,
        producer_id=PRODUCER_ID,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 30,
    )
    for delta in range(shape.records_per_batch):
        key = f"user-{rng.randrange(1_000_000):06d}".encode()
        value = _value(rng, rng.randint(*shape.value_bytes))
        headers: list[tuple[str, bytes | None]] = []
        if shape.max_headers:
            headers.append(("trace-id", rng.randbytes(8).hex().encode()))
            if shape.max_headers > 1 and delta % 3 == 0:
                headers.append(("source", b"checkout-svc"))
        builder.append(delta, timestamp=BASE_TIMESTAMP + delta, key=key, value=value, headers=headers)
    return bytes(builder.build())


def _value(rng: random.Random, size: int) -> bytes:
    """A JSON-looking value of exactly `size` bytes, so zstd sees realistic (not trivial) redundancy."""
    text = f'{{"id":{rng.randrange(10**9)},"amt":{rng.randrange(10**5)},"s":"{rng.randbytes(16).hex()}'
    text = (text + rng.randbytes(size).hex())[: size - 2] + '"}'
    return text.encode()


def write_copies(path: Path, template: bytes, batches: int, records_per_batch: int) -> None:
    """`batches` copies of `template` with base offsets 0, r, 2r, ... (r = records per batch)."""
    per_block = max(1, _BLOCK_BYTES // len(template))
    block = bytearray(template * per_block)
    pack_into = struct.pack_into
    size = len(template)
    with path.open("wb") as out:
        first = 0
        while first < batches:
            count = min(per_block, batches - first)
            for j in range(count):
                pack_into(">q", block, j * size, (first + j) * records_per_batch)
            out.write(memoryview(block)[: count * size])
            first += count
