"""Fuzzing kafka_log_decoder._native: arbitrary and mutated bytes never crash, never raise.

Every call must return well-formed output: column lengths are n * width, next_pos lies in
[start, len], positions chain, record/header rows point inside the buffer.  Bad data is reported
in the output (reasons, crc_valid, records_decoded, error positions), never by an exception.
"""

from __future__ import annotations

import struct
from functools import cache

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_log_decoder import _native
from tests.unit.test_native_walker import (
    ALL_RECORD_FMT,
    BATCH_FMT,
    CODECRAFTERS_LOG,
    HEADER_FMT,
    METADATA_LOG,
    RECORD_FMT,
    WIDTH,
    independent_batches,
    legacy_v1_entry,
    table,
)

FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@cache
def _int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def java_increment_sequence(sequence: int, increment: int) -> int:
    """`DefaultRecordBatch.incrementSequence`, its int arithmetic wrapping as Java's does."""
    if sequence > _int32(2**31 - 1 - increment):
        return _int32(increment - _int32(2**31 - 1 - sequence) - 1)
    return _int32(sequence + increment)


def seeds() -> list[bytes]:
    meta = METADATA_LOG.read_bytes()
    # a few hundred real KRaft batches (including the control batches at the start), the
    # codecrafters file, kafka-python-built batches of every codec, a legacy entry
    return [
        CODECRAFTERS_LOG.read_bytes(),
        meta[:6000],
        meta[200_000:203_000],
        b"".join(independent_batches()),
        CODECRAFTERS_LOG.read_bytes() + legacy_v1_entry() + independent_batches()[0],
    ]


def check_walk(buf: bytes, start: int, stop: int, decode: bool, max_batches: int) -> None:
    n, cols, next_pos, reason, rcols = _native.walk_batches(buf, start, stop, decode, max_batches)
    assert isinstance(n, int) and 0 <= n <= max_batches
    assert set(cols) == set(BATCH_FMT)
    for name, code in BATCH_FMT.items():
        assert type(cols[name]) is bytes and len(cols[name]) == n * WIDTH[code], name
    assert start <= next_pos <= len(buf)
    assert reason in (0, 1, 2, 3, 4)
    if reason == _native.REACHED_STOP:
        assert next_pos >= stop
    else:
        assert next_pos < stop or (n == 0 and start == stop) or reason == _native.FULL
    b = table(cols, BATCH_FMT)
    pos = start
    for i in range(n):
        assert b["position"][i] == pos < stop
        assert 61 <= b["size_bytes"][i] <= (1 << 30) + 12
        pos += b["size_bytes"][i]
        assert b["magic"][i] == 2
        assert b["crc_valid"][i] in (0, 1)
        assert b["records_decoded"][i] in ((0, 1, 2) if decode else (0,))
        assert (b["err_offset"][i] == -1) == (b["records_decoded"][i] != 2)
        if b["records_decoded"][i] == 2:
            assert 61 <= b["err_offset"][i] <= b["size_bytes"][i]
        if b["attributes"][i] & 0x20:
            assert b["control_type"][i] >= -1
        else:
            assert b["control_type"][i] == -2
        if b["control_type"][i] not in (0, 1):
            assert b["coordinator_epoch"][i] == -1
        # DefaultRecordBatch.lastSequence: NO_SEQUENCE only for a base of -1, else incrementSequence in
        # Java ints.
        if b["base_sequence"][i] == -1:
            assert b["last_sequence"][i] == -1
        else:
            assert b["last_sequence"][i] == java_increment_sequence(
                b["base_sequence"][i], b["last_offset_delta"][i]
            )
    assert pos == next_pos
    if not decode:
        assert rcols is None
        return
    assert set(rcols) == set(ALL_RECORD_FMT)
    nrec = len(rcols["offset"]) // 8
    nhdr = len(rcols["hdr_key_pos"]) // 8
    for name, code in RECORD_FMT.items():
        assert type(rcols[name]) is bytes and len(rcols[name]) == nrec * WIDTH[code], name
    for name, code in HEADER_FMT.items():
        assert len(rcols[name]) == nhdr * WIDTH[code], name
    r = table(rcols, RECORD_FMT)
    per_batch = [0] * n
    for j in range(nrec):
        bi = r["batch_index"][j]
        assert 0 <= bi < n and (j == 0 or r["batch_index"][j - 1] <= bi)
        per_batch[bi] += 1
        lo, hi = b["position"][bi] + 61, b["position"][bi] + b["size_bytes"][bi]
        for p, ln in ((r["key_pos"][j], r["key_len"][j]), (r["value_pos"][j], r["value_len"][j])):
            assert (p == -1) == (ln == -1)
            if ln >= 0:
                assert lo <= p and p + ln <= hi
    for i in range(n):
        if b["records_decoded"][i] == 1:
            assert per_batch[i] == b["count"][i]
        else:
            assert per_batch[i] == 0
    h = table(rcols, HEADER_FMT)
    for j in range(nhdr):
        assert 0 <= h["hdr_record_index"][j] < nrec
        assert h["hdr_key_len"][j] >= 0 and h["hdr_key_pos"][j] + h["hdr_key_len"][j] <= len(buf)
        assert (h["hdr_value_pos"][j] == -1) == (h["hdr_value_len"][j] == -1)
        assert h["hdr_value_pos"][j] + max(h["hdr_value_len"][j], 0) <= len(buf)
    # decode_records=False must agree on everything but the record outcome
    n2, cols2, next2, reason2, _ = _native.walk_batches(buf, start, stop, False, max_batches)
    assert (n2, next2, reason2) == (n, next_pos, reason)
    for name in BATCH_FMT:
        if name not in ("records_decoded", "err_offset"):
            assert cols2[name] == cols[name], name


def check_decode_records(data: bytes, count: int, base_sequence: int, lat: bool) -> None:
    cols, err, status = _native.decode_records(data, 1 << 62, -(1 << 62), 7, lat, base_sequence, count)
    assert status == (1 if err == -1 else 2)  # never 3: these blobs hold far fewer headers than the limit
    assert set(cols) == set(ALL_RECORD_FMT)
    nrec = len(cols["offset"]) // 8
    for name, code in RECORD_FMT.items():
        assert len(cols[name]) == nrec * WIDTH[code]
    assert err == -1 or 0 <= err <= len(data)
    if err == -1:
        assert nrec == count
    else:
        assert nrec <= max(count, 0)
    r = table(cols, RECORD_FMT)
    for j in range(nrec):
        for p, ln in ((r["key_pos"][j], r["key_len"][j]), (r["value_pos"][j], r["value_len"][j])):
            assert (p == -1) == (ln == -1)
            assert p + max(ln, 0) <= (len(data) if err == -1 else err)
        if base_sequence < 0:
            assert r["sequence"][j] == -1


walk_params = st.tuples(st.booleans(), st.integers(0, 5000), st.floats(0, 1), st.floats(0, 1))


def run_walks(buf: bytes, params: tuple[bool, int, float, float]) -> None:
    decode, max_batches, start_frac, stop_frac = params
    start = int(start_frac * len(buf))
    stop = start + int(stop_frac * (len(buf) - start))
    check_walk(buf, start, stop, decode, max_batches)
    check_walk(buf, 0, len(buf), True, 1 << 40)


@FUZZ
@given(st.binary(max_size=3000), walk_params)
def test_random_bytes(buf: bytes, params) -> None:
    run_walks(buf, params)


@FUZZ
@given(st.binary(min_size=17, max_size=400), st.integers(49, 400), walk_params)
def test_random_bytes_with_plausible_v2_header(body: bytes, length: int, params) -> None:
    # random content behind a header that passes the framing checks, to reach the record decoder
    buf = bytearray(body)
    struct.pack_into(">i", buf, 8, length)
    buf[16] = 2
    if len(buf) > 22:
        buf[22] &= 0xD8  # codec none, not control: records get decoded
    run_walks(bytes(buf) * 2, params)


mutation = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 8)),
    st.tuples(st.just("int32"), st.floats(0, 1), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("length"), st.integers(0, 40), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("count"), st.integers(0, 40), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("varint"), st.floats(0, 1), st.binary(min_size=1, max_size=10)),
)


def batch_starts(buf: bytes) -> list[int]:
    _n, cols, *_ = _native.walk_batches(buf, 0, len(buf), False, 1 << 40)
    return memoryview(cols["position"]).cast("q").tolist() or [0]


def mutate(buf: bytes, ops) -> bytes:
    out = bytearray(buf)
    for kind, where, arg in ops:
        if not out:
            break
        if kind in ("length", "count"):
            starts = batch_starts(bytes(out))
            at = starts[where % len(starts)] + (8 if kind == "length" else 57)
            if at + 4 <= len(out):
                struct.pack_into(">i", out, at, arg)
            continue
        i = min(int(where * len(out)), len(out) - 1)
        if kind == "flip":
            out[i] ^= arg
        elif kind == "truncate":
            del out[i:]
        elif kind == "insert":
            out[i:i] = arg
        elif kind == "delete":
            del out[i : i + arg]
        elif kind == "int32" and i + 4 <= len(out):
            struct.pack_into(">i", out, i, arg)
        elif kind == "varint":
            out[i : i + len(arg)] = arg
    return bytes(out)


@FUZZ
@given(st.integers(0, 4), st.lists(mutation, min_size=1, max_size=6), walk_params)
def test_mutated_real_batches(seed_index: int, ops, params) -> None:
    run_walks(mutate(seeds()[seed_index], ops), params)


@FUZZ
@given(
    st.integers(0, 3),
    st.floats(0, 1),
    st.lists(mutation, min_size=0, max_size=4),
    st.integers(-3, 60),
    st.integers(-2, 3),
    st.booleans(),
)
def test_decode_records_on_mutated_blobs(
    seed_index: int, which: float, ops, count: int, seq: int, lat: bool
) -> None:
    # the records region of one uncompressed batch of a seed, mutated
    src = seeds()[seed_index]
    n, cols, *_ = _native.walk_batches(src, 0, len(src), False, 1 << 40)
    pos = memoryview(cols["position"]).cast("q").tolist()
    size = memoryview(cols["size_bytes"]).cast("i").tolist()
    k = min(int(which * n), n - 1)
    blob = src[pos[k] + 61 : pos[k] + size[k]] if n else src
    check_decode_records(mutate(blob, ops), count, seq, lat)


@FUZZ
@given(st.binary(max_size=2000), st.integers(-5, 400), st.integers(-(2**31), 2**31 - 1), st.booleans())
def test_decode_records_on_random_bytes(data: bytes, count: int, seq: int, lat: bool) -> None:
    check_decode_records(data, count, seq, lat)


def test_every_truncation_and_single_byte_corruption_of_small_seeds() -> None:
    for buf in seeds()[0], seeds()[3][:3000]:
        for cut in range(len(buf) + 1):
            check_walk(buf[:cut], 0, cut, True, 1 << 40)
        for i in range(0, len(buf), 3):
            for value in (0x00, 0x7F, 0x80, 0xFF):
                bad = bytearray(buf)
                bad[i] = value
                check_walk(bytes(bad), 0, len(bad), True, 1 << 40)
