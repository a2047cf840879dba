"""Decompression of batch payloads for the four Kafka codecs (kafka-formats §1.8).

One entry point, `decompress`, raises `CodecError` with a plain reason on any corrupt stream.
"""

from __future__ import annotations

import mmap
import struct
import threading
from typing import Any

import cramjam
import zstandard

# Java producers frame snappy the xerial way; librdkafka writes one raw block (rdkafka_msgset_writer.c).
XERIAL_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"

_PRIME32_1 = 0x9E3779B1
_PRIME32_2 = 0x85EBCA77
_PRIME32_3 = 0xC2B2AE3D
_PRIME32_4 = 0x27D4EB2F
_PRIME32_5 = 0x165667B1
_MASK32 = 0xFFFFFFFF


class CodecError(ValueError):
    """A compressed payload that cannot be decompressed."""


# The most bytes one payload may decompress to: past it the batch is unreadable. A bound on the
# memory a decode takes whatever the data (1 MB of gzip can hold 1 GiB of zeros); the codecs write
# into one lazily mapped buffer of this size per thread, so only the bytes written take memory.
MAX_DECOMPRESSED_BYTES = 256 << 20
# zstd's largest ratio: a 3-byte block header and one byte stand for a 128 KiB run (an RLE block).
# Payloads this small cannot pass the limit; they take the faster reused-context path.
_ZSTD_SMALL_PAYLOAD = MAX_DECOMPRESSED_BYTES // ((128 << 10) // 4)
# After a payload this large, the buffer's pages are given back.
_RELEASE_ABOVE = 16 << 20
_OUTPUT = threading.local()


def decompress(codec: str, payload: bytes | memoryview, *, magic: int = 2) -> bytes:
    """The plain bytes of a compressed batch payload (v2 records, or a legacy inner message set), at most
    MAX_DECOMPRESSED_BYTES of them."""
    try:
        if codec == "gzip":
            # GZIPInputStream reads concatenated members; cramjam does too.
            return _bounded(codec, cramjam.gzip.decompress_into, payload)
        if codec == "snappy":
            return _snappy_decompress(payload)
        if codec == "lz4":
            if magic == 0:
                payload = fix_broken_lz4_header_checksum(payload)
            return _bounded(codec, cramjam.lz4.decompress_into, payload)
        if codec == "zstd":
            if len(payload) <= _ZSTD_SMALL_PAYLOAD:
                return _zstd_decompress(payload)
            return _bounded(codec, cramjam.zstd.decompress_into, payload)
    except CodecError:
        raise
    except (cramjam.DecompressionError, zstandard.ZstdError, ValueError, OSError) as exc:
        raise CodecError(f"corrupt {codec} payload: {_first_line(exc)}") from None
    raise CodecError(f"unknown compression codec {codec!r}")


def _bounded(codec: str, decompress_into: Any, payload: bytes | memoryview) -> bytes:
    """`decompress_into` the thread's output buffer: an output past its end is a CodecError."""
    out = getattr(_OUTPUT, "buffer", None)
    if out is None:
        out = _OUTPUT.buffer = mmap.mmap(-1, MAX_DECOMPRESSED_BYTES)
    try:
        n = decompress_into(payload, out)
    except cramjam.DecompressionError as exc:
        if "failed to write whole buffer" in str(exc):
            _release(out, MAX_DECOMPRESSED_BYTES)
            raise _too_large(codec) from None
        if codec == "zstd" and "incomplete frame" in str(exc):
            raise CodecError("corrupt zstd payload: the last frame is truncated") from None
        raise
    with memoryview(out) as view:
        plain = bytes(view[:n])
    if n > _RELEASE_ABOVE:
        _release(out, n)
    return plain


def _release(buffer: mmap.mmap, length: int) -> None:
    """Give the first `length` bytes' pages back (they read as zeros again)."""
    if hasattr(mmap, "MADV_DONTNEED"):
        buffer.madvise(mmap.MADV_DONTNEED, 0, length)


_ZSTD = threading.local()


def _zstd_decompress(payload: bytes | memoryview) -> bytes:
    """zstd-jni streams frames without a content size; decode frame after frame with one reused context.

    A context per thread: creating one per batch cost more than a third of the decompression time.
    """
    decompressor = getattr(_ZSTD, "decompressor", None)
    if decompressor is None:
        decompressor = _ZSTD.decompressor = zstandard.ZstdDecompressor()
    parts = []
    data = bytes(payload)
    while data:
        frame = decompressor.decompressobj()
        parts.append(frame.decompress(data))
        if not frame.eof:
            raise CodecError("corrupt zstd payload: the last frame is truncated")
        data = frame.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_decompress(payload: bytes | memoryview) -> bytes:
    view = memoryview(payload)
    if bytes(view[:8]) != XERIAL_SNAPPY_MAGIC:
        _check_snappy_length(cramjam.snappy.decompress_raw_len(view))
        return bytes(cramjam.snappy.decompress_raw(view))
    # xerial: magic(8) version(4) compatible(4), then repeated [int32 BE length][raw block].
    out = bytearray()
    pos = XERIAL_HEADER_SIZE
    while pos < len(view):
        if pos + 4 > len(view):
            raise CodecError(f"truncated xerial snappy block length at {pos}")
        (length,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CodecError(f"xerial snappy block of {length} bytes at {pos - 4} overruns the payload")
        block = view[pos : pos + length]
        _check_snappy_length(len(out) + cramjam.snappy.decompress_raw_len(block))
        out += cramjam.snappy.decompress_raw(block)
        pos += length
    return bytes(out)


def _check_snappy_length(length: int) -> None:
    """A snappy block states its plain length first: past the limit, nothing is decompressed."""
    if length > MAX_DECOMPRESSED_BYTES:
        raise _too_large("snappy")


def _too_large(codec: str) -> CodecError:
    return CodecError(f"{codec} payload decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes (the limit)")


def fix_broken_lz4_header_checksum(payload: bytes | memoryview) -> bytes:
    """Rewrite the LZ4 frame-descriptor checksum that magic-0 Kafka clients computed wrongly.

    Old clients hashed magic+FLG+BD instead of FLG+BD (Java's `useBrokenFlagDescriptorChecksum`);
    the fix matches kafka-python's `lz4_decode_old_kafka` and librdkafka's
    `rd_kafka_lz4_decompress_fixup_bad_framing`.
    """
    data = bytearray(payload)
    if len(data) < 7 or bytes(data[:4]) != LZ4_FRAME_MAGIC:
        return bytes(data)
    flg = data[4]
    descriptor_end = 6 + (8 if flg & 0x08 else 0)  # FLG, BD and the optional 8-byte content size
    if len(data) <= descriptor_end:
        return bytes(data)
    data[descriptor_end] = (xxh32(bytes(data[4:descriptor_end])) >> 8) & 0xFF
    return bytes(data)


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 for the few bytes of an LZ4 frame descriptor."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & _MASK32

    n = len(data)
    pos = 0
    if n >= 16:
        v = [
            (seed + _PRIME32_1 + _PRIME32_2) & _MASK32,
            (seed + _PRIME32_2) & _MASK32,
            seed & _MASK32,
            (seed - _PRIME32_1) & _MASK32,
        ]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos)
                v[i] = (rotl((v[i] + lane * _PRIME32_2) & _MASK32, 13) * _PRIME32_1) & _MASK32
                pos += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & _MASK32
    else:
        h = (seed + _PRIME32_5) & _MASK32
    h = (h + n) & _MASK32
    while pos + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, pos)
        h = (rotl((h + lane * _PRIME32_3) & _MASK32, 17) * _PRIME32_4) & _MASK32
        pos += 4
    while pos < n:
        h = (rotl((h + data[pos] * _PRIME32_5) & _MASK32, 11) * _PRIME32_1) & _MASK32
        pos += 1
    h ^= h >> 15
    h = (h * _PRIME32_2) & _MASK32
    h ^= h >> 13
    h = (h * _PRIME32_3) & _MASK32
    h ^= h >> 16
    return h


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
