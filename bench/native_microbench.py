"""Micro-benchmark of kafka_log_decoder._native.walk_batches (single core, bytes already in memory).

Builds ~200 MB of 1-record batches and ~500 MB of 500-record batches with kafka-python's
DefaultRecordBatchBuilder (one template batch, copied with rewritten base offsets: baseOffset is
outside the CRC, so every copy stays valid), then times walk_batches with decode_records False and
True and prints MB/s and batches/s (best of --repeat runs), once as a single call over the
whole buffer and once as a driver would call it, in windows of --window-mb (stop = pos + window).
The single call writes all its output columns into freshly mapped memory, so it also measures
the kernel's first-touch page faults; windowed calls reuse freed memory.

    .venv/bin/python -m bench.native_microbench [--small-mb 200] [--large-mb 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_log_decoder import _native


def build_template(n_records: int, key_size: int, value_size: int) -> bytes:
    rnd = os.urandom(key_size + value_size)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=1000,
        batch_size=1 << 30,
    )
    for i in range(n_records):
        key = rnd[: key_size - 4] + struct.pack(">I", i)
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=rnd[key_size:], headers=[])
    return bytes(builder.build())


def replicate(template: bytes, n_copies: int, offsets_per_batch: int) -> bytes:
    """n_copies of `template` back to back, base offsets 0, k, 2k, ..."""
    size = len(template)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is present in the dev venv
        buf = bytearray(template * n_copies)
        for i in range(n_copies):
            struct.pack_into(">q", buf, i * size, i * offsets_per_batch)
        return bytes(buf)
    arr = np.frombuffer(template * n_copies, dtype=np.uint8).reshape(n_copies, size).copy()
    offsets = (np.arange(n_copies, dtype=np.int64) * offsets_per_batch).astype(">i8")
    arr[:, 0:8] = offsets.view(np.uint8).reshape(n_copies, 8)
    return arr.tobytes()


def time_walk(buf: bytes, decode: bool, repeat: int, window: int) -> tuple[float, int, int]:
    """Best time to walk all of buf, in one call (window 0) or in calls of `window` bytes."""
    best = float("inf")
    n = n_rec = 0
    step = window or len(buf)
    for _ in range(repeat):
        n = n_rec = 0
        pos = 0
        t0 = time.perf_counter()
        while pos < len(buf):
            stop = min(pos + step, len(buf))
            k, _cols, pos, reason, rcols = _native.walk_batches(buf, pos, stop, decode, 1 << 40)
            assert reason == _native.REACHED_STOP, (pos, reason)
            n += k
            n_rec += len(rcols["offset"]) // 8 if rcols is not None else 0
            del _cols, rcols
        dt = time.perf_counter() - t0
        assert pos == len(buf)
        best = min(best, dt)
    return best, n, n_rec


def time_crc(buf: bytes, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        _native.crc32c(buf)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small-mb", type=float, default=200.0, help="MB of 1-record batches")
    ap.add_argument("--large-mb", type=float, default=500.0, help="MB of 500-record batches")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--portable-crc", action="store_true", help="also time with the table CRC")
    ap.add_argument(
        "--window-mb",
        type=float,
        default=16.0,
        help="also time calls over windows of this many MB (0: only single calls)",
    )
    args = ap.parse_args(argv)

    cases = []
    t_small = build_template(1, key_size=8, value_size=20)
    cases.append(("1-record batches", t_small, 1, args.small_mb))
    t_large = build_template(500, key_size=16, value_size=100)
    cases.append(("500-record batches", t_large, 500, args.large_mb))

    print(f"hardware CRC-32C: {bool(_native.HAVE_HW_CRC32C)}")
    impls = [True] + ([False] if args.portable_crc else [])
    for label, template, per_batch, mb in cases:
        copies = max(1, int(mb * 1e6 / len(template)))
        t0 = time.perf_counter()
        buf = replicate(template, copies, per_batch)
        gen = time.perf_counter() - t0
        mbytes = len(buf) / 1e6
        print(f"\n{label}: {copies} x {len(template)} B = {mbytes:.0f} MB (built in {gen:.1f} s)")
        for hw in impls:
            _native._set_crc_impl(hw)
            tag = "hw crc " if hw else "sw crc "
            dt = time_crc(buf, args.repeat)
            print(f"  {tag} crc32c(whole buffer)          {mbytes / dt:9.0f} MB/s")
            windows = [0] + ([int(args.window_mb * 1e6)] if args.window_mb else [])
            for decode in (False, True):
                for window in windows:
                    dt, n, n_rec = time_walk(buf, decode, args.repeat, window)
                    what = ("walk+records" if decode else "walk headers") + (
                        f" ({window / 1e6:.0f} MB calls)" if window else " (one call)"
                    )
                    extra = f"  {n_rec / dt / 1e6:7.2f} M records/s" if decode else ""
                    rate = f"{mbytes / dt:9.0f} MB/s  {n / dt / 1e6:7.2f} M batches/s"
                    print(f"  {tag} {what:<32} {rate}{extra}")
        _native._set_crc_impl(True)
        del buf
    return 0


if __name__ == "__main__":
    sys.exit(main())
