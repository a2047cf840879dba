"""Streaming: decoding a 1 GiB segment keeps a child process's peak memory far below the file size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import V2Batch, build_v2

GIB = 1 << 30
PEAK_LIMIT_MIB = 100

CHILD = r"""
import json, sys
from kafka_log_decoder.segment import BatchRun, iter_segment_runs
batches = records = 0
for run in iter_segment_runs(sys.argv[1], records=sys.argv[2] == "records"):
    if isinstance(run, BatchRun):
        batches += run.n
        records += sum(len(r.columns["offset"]) for r in run.records)
# VmHWM is this process's own peak; ru_maxrss would carry the parent's over through fork/exec.
peak_kib = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"batches": batches, "records": records, "peak_mib": peak_kib / 1024}))
"""


@pytest.fixture(scope="module")
def one_gib_segment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    batch = build_v2(
        V2Batch(records=[(b"key", b"v" * 900)] * 4, producer_id=1, producer_epoch=0, base_sequence=0)
    )
    per_block = (1 << 20) // len(batch)
    block = batch * per_block
    blocks = GIB // len(block) + 1
    path = tmp_path_factory.mktemp("big") / "00000000000000000000.log"
    with path.open("wb") as f:
        for _ in range(blocks):
            f.write(block)
    assert path.stat().st_size >= GIB
    return path, blocks * per_block


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["headers", "records"])
def test_one_gib_segment_decodes_in_bounded_memory(one_gib_segment: tuple[Path, int], mode: str) -> None:
    path, expected_batches = one_gib_segment
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    result = json.loads(done.stdout)
    assert result["batches"] == expected_batches
    assert result["records"] == (4 * expected_batches if mode == "records" else 0)
    assert result["peak_mib"] < PEAK_LIMIT_MIB, f"peak {result['peak_mib']:.0f} MiB for a 1 GiB segment"
