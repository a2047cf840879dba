"""Decompression of batch payloads for the four Kafka codecs (kafka-formats §1.8).

One entry point, `decompress`, raises `CodecError` with a plain reason on any corrupt stream. It reads
what Kafka 4.3.1's readers (`Compression.wrapForInput`) read and refuses what they refuse, including
the bytes each of them ignores after the end of its stream.
"""

from __future__ import annotations

import functools
import mmap
import struct
import threading
import zlib
from typing import Any

import cramjam
import zstandard

# Java producers frame snappy the xerial way; librdkafka writes one raw block (rdkafka_msgset_writer.c).
XERIAL_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16
# SnappyInputStream reads a chunk length equal to the magic's first four bytes as a repeated header.
_XERIAL_MAGIC_HEAD = struct.unpack(">i", XERIAL_SNAPPY_MAGIC[:4])[0]
# SnappyInputStream.MAX_CHUNK_SIZE: a longer chunk is refused before it is read.
_XERIAL_MAX_CHUNK_SIZE = 512 << 20
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
# Frame descriptor flags (lz4 frame format 1.5.1), as Lz4BlockOutputStream.FLG names them.
_LZ4_FLG_RESERVED = 0x03  # bit 0 is the dictionary ID flag: Kafka takes it for a reserved bit
_LZ4_FLG_CONTENT_CHECKSUM = 0x04
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_BLOCK_CHECKSUM = 0x10
_LZ4_FLG_BLOCK_INDEPENDENCE = 0x20
_LZ4_BLOCK_SIZE_MASK = 0x7FFFFFFF  # the high bit flags an uncompressed block
# GzipCompression.wrapForInput: `new GZIPInputStream(in, 8 * 1024)`, the size of its input buffer.
_GZIP_INPUT_BUFFER = 8 << 10
# The most `_gzip_members` gives zlib at once, and takes out of it at once.
_GZIP_FEED_MAX = 256 << 10
_GZIP_PIECE = 4 << 20
# Member header flags (RFC 1952), as GZIPInputStream names them.
_GZIP_FHCRC = 0x02
_GZIP_FEXTRA = 0x04
_GZIP_FNAME = 0x08
_GZIP_FCOMMENT = 0x10

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
            return _gzip_decompress(payload)
        if codec == "snappy":
            return _snappy_decompress(payload)
        if codec == "lz4":
            return _bounded(codec, cramjam.lz4.decompress_into, _lz4_kafka_frame(payload, magic))
        if codec == "zstd":
            if len(payload) <= _ZSTD_SMALL_PAYLOAD:
                return _zstd_decompress(payload)
            return _bounded(codec, cramjam.zstd.decompress_into, payload)
    except CodecError:
        raise
    except (cramjam.DecompressionError, zstandard.ZstdError, zlib.error, ValueError, OSError) as exc:
        raise CodecError(f"corrupt {codec} payload: {_first_line(exc)}") from None
    raise CodecError(f"unknown compression codec {codec!r}")


def _output() -> mmap.mmap:
    """The thread's output buffer, lazily mapped: only the bytes written take memory."""
    out = getattr(_OUTPUT, "buffer", None)
    if out is None:
        out = _OUTPUT.buffer = mmap.mmap(-1, MAX_DECOMPRESSED_BYTES)
    return out


def _taken(out: mmap.mmap, n: int) -> bytes:
    """The first `n` bytes written to the output buffer, whose pages are given back when there are many."""
    with memoryview(out) as view:
        plain = bytes(view[:n])
    if n > _RELEASE_ABOVE:
        _release(out, n)
    return plain


def _bounded(codec: str, decompress_into: Any, payload: bytes | memoryview) -> bytes:
    """`decompress_into` the thread's output buffer: an output past its end is a CodecError."""
    out = _output()
    try:
        n = decompress_into(payload, out)
    except cramjam.DecompressionError as exc:
        if "failed to write whole buffer" in str(exc):
            _release(out, MAX_DECOMPRESSED_BYTES)
            raise _too_large(codec) from None
        if codec == "zstd" and "incomplete frame" in str(exc):
            raise CodecError("corrupt zstd payload: the last frame is truncated") from None
        raise
    return _taken(out, n)


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


def _gzip_decompress(payload: bytes | memoryview) -> bytes:
    """Read gzip members as JDK 17's GZIPInputStream does behind GzipCompression.wrapForInput.

    cramjam reads only a payload made of whole members, and parses member headers more strictly than
    GZIPInputStream (reserved flags, long names), which reads such a payload the same: where cramjam
    reads it, that is Kafka's result, in about a fifth less time. Anything else is read by `_gzip_members`.
    """
    try:
        return _bounded("gzip", cramjam.gzip.decompress_into, payload)
    except (CodecError, cramjam.DecompressionError):
        return _gzip_members(payload)


def _gzip_members(payload: bytes | memoryview) -> bytes:
    """Read gzip members one by one, as GZIPInputStream (JDK 17) does.

    After a member's trailer it reads on only where bytes are left behind its 8 KiB input buffer or
    more than 18 in it (`readTrailer`: `this.in.available() > 0 || n > 26`), and only if they start with
    a gzip header: anything else after a member is ignored and the stream ends quietly.
    """
    data = bytes(payload)
    view = memoryview(data)
    out = _output()
    written = 0
    start = _gzip_header_end(data, 0)  # the constructor reads the first header: there it is an error
    read_to = start  # how far GZIPInputStream has read the payload: where its input buffer ends
    while True:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        crc = size = 0
        fed = start
        feed = _GZIP_INPUT_BUFFER
        pending: bytes | memoryview = b""
        full = False
        while not inflater.eof:
            if not pending and not full:
                if fed == len(data):
                    raise CodecError("corrupt gzip payload: unexpected end of the deflate stream")
                # Fed in growing steps, so that what follows a member is copied (`unused_data`) at
                # most in a step of about the member's length.
                pending = view[fed : fed + feed]
                fed += len(pending)
                feed = min(2 * feed, _GZIP_FEED_MAX)
            # Pieces of at most _GZIP_PIECE bytes; one byte past the limit tells a payload that passes it.
            room = min(MAX_DECOMPRESSED_BYTES - written + 1, _GZIP_PIECE)
            piece = inflater.decompress(pending, room)
            pending = inflater.unconsumed_tail
            full = len(piece) == room  # then more may come out with no more input
            if written + len(piece) > MAX_DECOMPRESSED_BYTES:
                _release(out, written)
                raise _too_large("gzip")
            out[written : written + len(piece)] = piece
            written += len(piece)
            size += len(piece)
            crc = zlib.crc32(piece, crc)
        trailer = fed - len(inflater.unused_data)  # where the deflate data ends
        if trailer > read_to:
            # Past what its buffer held, GZIPInputStream read on in 8 KiB steps up to the deflate end.
            steps = -(-(trailer - read_to) // _GZIP_INPUT_BUFFER)
            read_to = min(len(data), read_to + steps * _GZIP_INPUT_BUFFER)
        left = read_to - trailer  # Inflater.getRemaining(): n
        if trailer + 8 > len(data):
            raise CodecError(f"corrupt gzip payload: the member trailer {_at(trailer)} is truncated")
        read_to = max(read_to, trailer + 8)
        if struct.unpack_from("<II", data, trailer) != (crc, size & _MASK32):
            raise CodecError(f"corrupt gzip payload: the member trailer {_at(trailer)} does not match")
        if read_to == len(data) and left <= 26:
            break
        try:
            start = _gzip_header_end(data, trailer + 8)
        except CodecError:
            break  # "ignore any malformed, do nothing"
        read_to = max(read_to, start)
    return _taken(out, written)


def _gzip_header_end(data: bytes, pos: int) -> int:
    """Where the gzip member header at `pos` ends, read as GZIPInputStream.readHeader reads it: the
    magic, method 8, then the optional fields its flags name (the other flag bits are not looked at)."""
    if data[pos : pos + 2] != b"\x1f\x8b"[: len(data) - pos]:
        raise CodecError("corrupt gzip payload: not in gzip format")
    if len(data) - pos > 2 and data[pos + 2] != 8:
        raise CodecError(f"corrupt gzip payload: unsupported compression method {data[pos + 2]}")
    truncated = CodecError("corrupt gzip payload: the member header is truncated")
    end = pos + 10  # magic, method, flags, mtime, xfl and os
    if end > len(data):
        raise truncated
    flags = data[pos + 3]
    if flags & _GZIP_FEXTRA:
        end += 2 + int.from_bytes(data[end : end + 2], "little")
        if end > len(data):
            raise truncated
    for zero_terminated in (_GZIP_FNAME, _GZIP_FCOMMENT):
        if flags & zero_terminated:
            end = data.find(b"\0", end) + 1
            if end == 0:
                raise truncated
    if flags & _GZIP_FHCRC:
        if end + 2 > len(data):
            raise truncated
        if int.from_bytes(data[end : end + 2], "little") != zlib.crc32(data[pos:end]) & 0xFFFF:
            raise CodecError("corrupt gzip payload: the member header's checksum does not match")
        end += 2
    return end


def _snappy_decompress(payload: bytes | memoryview) -> bytes:
    """Unframe snappy as snappy-java 1.1.10.7's SnappyInputStream does (SnappyCompression.wrapForInput).

    16 bytes or more that start with the xerial magic are read chunk by chunk (`hasNextChunk`; the
    header's version is not looked at); anything else, librdkafka's one raw block included, is one raw
    block (`readFully`).
    """
    view = memoryview(payload)
    if len(view) < XERIAL_HEADER_SIZE or bytes(view[:8]) != XERIAL_SNAPPY_MAGIC:
        _check_snappy_length(cramjam.snappy.decompress_raw_len(view))
        return bytes(cramjam.snappy.decompress_raw(view))
    # xerial: magic(8) version(4) compatible(4), then repeated [int32 BE length][raw block].
    out = bytearray()
    pos = XERIAL_HEADER_SIZE
    # Fewer than 4 bytes left end the stream quietly: stray bytes after the last chunk are not read.
    while len(view) - pos >= 4:
        (length,) = struct.unpack_from(">i", view, pos)
        if length == _XERIAL_MAGIC_HEAD:
            # Another header: xerial streams written back to back read as one; one of version 0 is
            # refused (`isValidHeader`). Where the magic does not go on to match, `hasNextChunk` says
            # "no next chunk" without finishing the stream: Kafka's first read ends there, a later one
            # goes on after it (unless that read happens to start exactly at it).
            if len(view) - pos < XERIAL_HEADER_SIZE:
                raise CodecError(f"truncated xerial snappy header {_at(pos)}")
            (version,) = struct.unpack_from(">i", view, pos + 8)
            if bytes(view[pos : pos + 8]) != XERIAL_SNAPPY_MAGIC:
                if not out:
                    break
            elif version < 1:
                raise CodecError(f"xerial snappy header {_at(pos)} has version {version}, below 1")
            pos += XERIAL_HEADER_SIZE
            continue
        if not 0 <= length <= _XERIAL_MAX_CHUNK_SIZE:
            raise CodecError(f"invalid xerial snappy chunk size {length} {_at(pos)}")
        if pos + 4 + length > len(view):
            raise CodecError(f"xerial snappy chunk of {length} bytes {_at(pos)} runs past its end")
        block = view[pos + 4 : pos + 4 + length]
        _check_snappy_length(len(out) + cramjam.snappy.decompress_raw_len(block))
        out += cramjam.snappy.decompress_raw(block)
        pos += 4 + length
    return bytes(out)


def _check_snappy_length(length: int) -> None:
    """A snappy block states its plain length first: past the limit, nothing is decompressed."""
    if length > MAX_DECOMPRESSED_BYTES:
        raise _too_large("snappy")


def _too_large(codec: str) -> CodecError:
    return CodecError(f"{codec} payload decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes (the limit)")


def _lz4_kafka_frame(payload: bytes | memoryview, magic: int) -> bytes | memoryview:
    """The one LZ4 frame Kafka 4.3.1's Lz4BlockInputStream reads in `payload`, as liblz4 reads it the same.

    Kafka reads the first frame only, nothing after its EndMark (any block size 0, even flagged
    uncompressed), and refuses what `FLG.validate`/`BD.validate` refuse: dependent blocks, a dictionary
    ID, reserved bits. It skips the content size and the content checksum (4.3.1 reads it without
    comparing it), and for magic 0 the header checksum, which old clients computed over the magic too
    (`ignoreFlagDescriptorChecksum`, KAFKA-3160). Where liblz4 would check any of those the frame is
    rebuilt without them.
    """
    view = memoryview(payload)
    end = len(view)
    if end < 6:
        raise CodecError("corrupt lz4 payload: the frame header is truncated")
    if bytes(view[:4]) != LZ4_FRAME_MAGIC:
        raise CodecError("corrupt lz4 payload: not an LZ4 frame (invalid magic bytes)")
    flg, bd = view[4], view[5]
    problem = _lz4_descriptor_problem(flg, bd)
    if problem:
        raise CodecError(f"corrupt lz4 payload: {problem}")
    descriptor_end = 6 + (8 if flg & _LZ4_FLG_CONTENT_SIZE else 0)  # FLG, BD and the optional content size
    if end <= descriptor_end:
        raise CodecError("corrupt lz4 payload: the frame header is truncated")
    header_checksum = _lz4_header_checksum(bytes(view[4:descriptor_end]))
    if magic != 0 and view[descriptor_end] != header_checksum:
        raise CodecError("corrupt lz4 payload: the frame descriptor checksum does not match")
    max_block_size = 1 << (8 + 2 * ((bd >> 4) & 7))
    block_checksum = 4 if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
    blocks = pos = descriptor_end + 1
    while True:
        if end - pos < 4:
            raise CodecError(f"corrupt lz4 payload: the frame ends without an EndMark {_at(pos)}")
        size = struct.unpack_from("<I", view, pos)[0] & _LZ4_BLOCK_SIZE_MASK
        if size == 0:
            break
        block = f"corrupt lz4 payload: block of {size} bytes {_at(pos)}"
        if size > max_block_size:
            raise CodecError(f"{block} is larger than the frame's maximum, {max_block_size}")
        if end - pos - 4 < size + block_checksum:
            raise CodecError(f"{block} runs past its end")
        pos += 4 + size + block_checksum
    end_mark = pos
    frame_end = end_mark + 4 + (4 if flg & _LZ4_FLG_CONTENT_CHECKSUM else 0)
    if frame_end > end:
        raise CodecError(f"corrupt lz4 payload: the content checksum {_at(end_mark + 4)} is truncated")
    if (
        not flg & (_LZ4_FLG_CONTENT_SIZE | _LZ4_FLG_CONTENT_CHECKSUM)
        and view[descriptor_end] == header_checksum
        and view[end_mark + 3] == 0
    ):
        return view[:frame_end]
    descriptor = bytes([flg & ~(_LZ4_FLG_CONTENT_SIZE | _LZ4_FLG_CONTENT_CHECKSUM), bd])
    header = LZ4_FRAME_MAGIC + descriptor + bytes([_lz4_header_checksum(descriptor)])
    return b"".join((header, view[blocks:end_mark], bytes(4)))


@functools.lru_cache(maxsize=64)
def _lz4_header_checksum(descriptor: bytes) -> int:
    """The frame descriptor's checksum byte (HC): the second byte of XXH32 of FLG, BD and any content size."""
    return (xxh32(descriptor) >> 8) & 0xFF


def _lz4_descriptor_problem(flg: int, bd: int) -> str | None:
    """Why Lz4BlockOutputStream.FLG/BD `validate` refuse a frame descriptor, or None."""
    if flg & _LZ4_FLG_RESERVED:
        return "reserved FLG bits are set (a dictionary ID is not supported)"
    if not flg & _LZ4_FLG_BLOCK_INDEPENDENCE:
        return "dependent (linked) blocks are not supported"
    if flg >> 6 != 1:
        return f"frame version {flg >> 6} is not supported"
    if bd & 0x0F:
        return "reserved BD bits are set"
    if not 4 <= (bd >> 4) & 7 <= 7:
        return f"block maximum size id {(bd >> 4) & 7} is not between 4 and 7"
    if bd & 0x80:
        return "the reserved BD bit is set"
    return None


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


def _at(position: int) -> str:
    """Where in the compressed payload: the caller names the file and the batch's position."""
    return f"at byte {position} of the compressed payload"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
