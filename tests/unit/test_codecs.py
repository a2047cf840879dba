"""Codec layer: every Kafka codec, checked against other libraries' encoders."""

from __future__ import annotations

import gzip
import os
import struct
import threading
from collections.abc import Callable

import lz4.frame
import pytest
import snappy
import zstandard
from kafka.codec import snappy_encode

from kafka_log_decoder.codecs import CodecError, decompress, xxh32

PLAIN = os.urandom(3000) + b"kafka" * 2000
# Where no test says otherwise, what Kafka does was observed with Kafka 4.3.1's own readers
# (Compression.wrapForInput on JDK 17, read to the end of the stream) on the same bytes.


def test_gzip_concatenated_members_decode_as_one_stream() -> None:
    assert decompress("gzip", gzip.compress(PLAIN[:100]) + gzip.compress(PLAIN[100:])) == PLAIN


def test_snappy_xerial_framing_is_unframed_block_by_block() -> None:
    blocks = [PLAIN[:5000], PLAIN[5000:]]
    framed = b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
    for block in blocks:
        raw = snappy.compress(block)
        framed += len(raw).to_bytes(4, "big") + raw
    assert decompress("snappy", framed) == PLAIN


def test_snappy_raw_block_as_librdkafka_writes_it() -> None:
    assert decompress("snappy", snappy.compress(PLAIN)) == PLAIN


def test_zstd_streaming_frame_without_content_size() -> None:
    compressor = zstandard.ZstdCompressor(write_content_size=False)
    frame = compressor.compress(PLAIN)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress("zstd", frame) == PLAIN


def test_lz4_frame() -> None:
    assert decompress("lz4", lz4.frame.compress(PLAIN)) == PLAIN


def test_lz4_magic0_broken_header_checksum_is_repaired() -> None:
    frame = bytearray(lz4.frame.compress(PLAIN, content_checksum=False))
    # Old clients hashed magic+FLG+BD: recompute HC over the wrong bytes, as they did.
    descriptor_end = 6 + (8 if frame[4] & 0x08 else 0)
    frame[descriptor_end] = (xxh32(bytes(frame[0:descriptor_end])) >> 8) & 0xFF
    with pytest.raises(CodecError):
        decompress("lz4", bytes(frame), magic=1)
    assert decompress("lz4", bytes(frame), magic=0) == PLAIN


def test_xxh32_reference_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_corrupt_payload_raises_codec_error_naming_the_codec(codec: str) -> None:
    with pytest.raises(CodecError, match=codec):
        decompress(codec, b"\x82SNAPPY\x00garbage-garbage-garbage" if codec == "snappy" else b"garbage" * 10)


def test_zstd_concatenated_frames_and_a_truncated_last_frame() -> None:
    compressor = zstandard.ZstdCompressor(write_content_size=False)
    two = compressor.compress(PLAIN[:7000]) + compressor.compress(PLAIN[7000:])
    assert decompress("zstd", two) == PLAIN
    with pytest.raises(CodecError, match="truncated"):
        decompress("zstd", two[:-5])


def _xerial(plain: bytes) -> bytes:
    return bytes(snappy_encode(plain, xerial_compatible=True))


_ZEROS = bytes(4 << 20)
_HALF = len(_ZEROS) // 2
# Each codec's payload of 4 MiB of zeros, and the shapes that take its other paths: gzip members and
# bytes after them (read member by member), xerial streams back to back, an lz4 frame and bytes after it.
_BOMBS: dict[str, Callable[[], bytes]] = {
    "gzip": lambda: gzip.compress(_ZEROS),
    "gzip members, then stray bytes": lambda: (
        gzip.compress(_ZEROS[:_HALF]) + gzip.compress(_ZEROS[_HALF:]) + b"!"
    ),
    "snappy": lambda: snappy.compress(_ZEROS),
    "snappy xerial streams": lambda: _xerial(_ZEROS[:_HALF]) + _xerial(_ZEROS[_HALF:]),
    "lz4": lambda: lz4.frame.compress(_ZEROS, block_linked=False),  # Kafka refuses linked blocks
    "lz4, then stray bytes": lambda: lz4.frame.compress(_ZEROS, block_linked=False) + b"!",
    "zstd": lambda: zstandard.ZstdCompressor(write_content_size=False).compress(_ZEROS),
}


@pytest.mark.parametrize("shape", list(_BOMBS))
def test_a_payload_that_decompresses_past_the_limit_is_a_codec_error_in_bounded_memory(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few KB that decompress to gigabytes (1 MB of gzip holds 1 GiB of zeros) must not take the
    memory: past MAX_DECOMPRESSED_BYTES the payload is a CodecError. Measured against a small limit
    (the thread's buffer is made at that size), and the same payload within a larger one decodes."""
    import kafka_log_decoder.codecs as codecs

    codec = shape.split()[0].rstrip(",")
    payload = _BOMBS[shape]()
    assert len(payload) < len(_ZEROS) // 20  # snappy packs at most ~21:1, the others far more
    for limit, fits in ((1 << 20, False), (8 << 20, True)):
        monkeypatch.setattr(codecs, "MAX_DECOMPRESSED_BYTES", limit)
        monkeypatch.setattr(codecs, "_ZSTD_SMALL_PAYLOAD", limit // 32768)
        monkeypatch.setattr(codecs, "_OUTPUT", threading.local())
        if fits:
            assert decompress(codec, payload) == _ZEROS
        else:
            with pytest.raises(CodecError, match=f"{codec} payload decompresses to more than {limit} bytes"):
                decompress(codec, payload)


# gzip: GZIPInputStream (JDK 17), as GzipCompression.wrapForInput wraps it.


def test_gzip_bytes_after_the_last_member_that_are_no_gzip_header_are_ignored() -> None:
    # Kafka: OK, the member's bytes, for either (readTrailer ignores a malformed next header).
    member = gzip.compress(PLAIN)
    assert decompress("gzip", member + bytes(8)) == PLAIN
    assert decompress("gzip", member + b"garbage!" * 4) == PLAIN


def _gzip_member_ending(at: int) -> bytes:
    """A gzip member of zeros whose deflate data ends `at` bytes into one of GZIPInputStream's 8 KiB reads
    (level 0 stores the zeros, so the member's length follows their count)."""
    for size in range(16000, 16600):
        member = gzip.compress(bytes(size), compresslevel=0, mtime=0)
        if (len(member) - 8 - 10) % 8192 == at:  # after its 10-byte header, before its 8-byte trailer
            return member
    raise AssertionError(at)


def test_gzip_reads_a_next_member_only_where_gzip_input_stream_would() -> None:
    """readTrailer tries a next header only where bytes are left unread behind its 8 KiB buffer or more
    than 18 (26 with the trailer) are left in it; a cut-off member (header and empty deflate data, no
    trailer) after the last one is ignored or is an error depending on that alone."""
    cut_off_member = gzip.compress(b"", mtime=0)[:12]
    # Kafka: OK (all in the buffer, 12 bytes after the trailer: not looked at).
    assert decompress("gzip", gzip.compress(PLAIN) + cut_off_member) == PLAIN
    member = _gzip_member_ending(at=100)
    # Kafka: OK (the buffer ends past the payload's end).
    assert decompress("gzip", member + cut_off_member) == gzip.decompress(member)
    member = _gzip_member_ending(at=8190)
    # Kafka: java.io.EOFException (the trailer straddles the buffer's end: bytes are left unread, the
    # header is read, and the member after it has no trailer).
    with pytest.raises(CodecError, match="gzip"):
        decompress("gzip", member + cut_off_member)


# lz4: Kafka's Lz4BlockInputStream, which reads one frame.


def test_lz4_bytes_after_the_end_mark_are_not_read() -> None:
    frame = lz4.frame.compress(PLAIN, block_linked=False)
    # Kafka: OK, the first frame's bytes only, for both.
    assert decompress("lz4", frame + b"garbage!") == PLAIN
    assert decompress("lz4", frame + lz4.frame.compress(b"a second frame")) == PLAIN


def test_lz4_dependent_blocks_are_refused() -> None:
    # Kafka: RuntimeException "Dependent block stream is unsupported" (FLG.validate).
    frame = lz4.frame.compress(PLAIN * 8, block_linked=True)  # more than one 64 KiB block
    with pytest.raises(CodecError, match="dependent"):
        decompress("lz4", frame)


def _lz4_frame(
    flg: int, blocks: bytes, *, descriptor_tail: bytes = b"", after_end_mark: bytes = b""
) -> bytes:
    """A frame: FLG, BD 0x40 (64 KiB blocks), `descriptor_tail` (a content size, a dictionary ID) and
    their checksum, `blocks`, the EndMark, then `after_end_mark` (a content checksum)."""
    descriptor = bytes([flg, 0x40]) + descriptor_tail
    checksum = (xxh32(descriptor) >> 8) & 0xFF
    return b"\x04\x22\x4d\x18" + descriptor + bytes([checksum]) + blocks + bytes(4) + after_end_mark


def _lz4_blocks(plain: bytes) -> bytes:
    """`plain` as one uncompressed block (the high bit of its size set)."""
    return struct.pack("<I", len(plain) | 0x80000000) + plain


def test_lz4_a_dictionary_id_is_refused() -> None:
    # Kafka: RuntimeException "Reserved bits must be 0" (FLG bit 0: a dictionary ID follows BD).
    frame = _lz4_frame(0x61, _lz4_blocks(PLAIN[:100]), descriptor_tail=struct.pack("<I", 1))
    with pytest.raises(CodecError, match="dictionary ID"):
        decompress("lz4", frame)


def test_lz4_a_skippable_frame_is_not_an_lz4_payload() -> None:
    # Kafka: IOException "Stream unsupported (invalid magic bytes)".
    skippable = struct.pack("<II", 0x184D2A50, 4) + b"skip"
    with pytest.raises(CodecError, match="magic"):
        decompress("lz4", skippable + lz4.frame.compress(PLAIN))


def test_lz4_content_size_and_content_checksum_are_not_compared() -> None:
    blocks = _lz4_blocks(PLAIN)
    # Kafka: OK for both: the content size is skipped; the content checksum read but not compared (4.3.1).
    assert decompress("lz4", _lz4_frame(0x68, blocks, descriptor_tail=struct.pack("<Q", 5))) == PLAIN
    assert decompress("lz4", _lz4_frame(0x64, blocks, after_end_mark=b"\0\0\0\0")) == PLAIN
    # Kafka: java.nio.BufferUnderflowException (the content checksum is not there).
    with pytest.raises(CodecError, match="content checksum"):
        decompress("lz4", _lz4_frame(0x64, blocks, after_end_mark=b"\0\0"))


def test_lz4_an_end_mark_flagged_uncompressed_ends_the_frame() -> None:
    # Kafka: OK (a block size of 0 ends the frame, whatever the incompressible bit).
    frame = lz4.frame.compress(PLAIN, block_linked=False)
    assert frame[-4:] == bytes(4)
    assert decompress("lz4", frame[:-4] + b"\0\0\0\x80") == PLAIN


# snappy: snappy-java's SnappyInputStream.


def test_snappy_xerial_streams_written_back_to_back_read_as_one() -> None:
    # Kafka: OK, both streams' bytes (hasNextChunk skips a repeated header).
    assert decompress("snappy", _xerial(PLAIN[:5000]) + _xerial(PLAIN[5000:])) == PLAIN


@pytest.mark.parametrize("stray", [b"\0", b"ab", b"\xff\xff\xff"])
def test_snappy_fewer_than_4_bytes_after_the_last_xerial_chunk_are_ignored(stray: bytes) -> None:
    # Kafka: OK, the stream's bytes (hasNextChunk ends quietly short of a chunk length).
    assert decompress("snappy", _xerial(PLAIN) + stray) == PLAIN


@pytest.mark.parametrize("length", [8, 10, 15])
def test_snappy_a_payload_under_16_bytes_is_a_raw_block_even_with_the_xerial_magic(length: int) -> None:
    # Kafka: IOException FAILED_TO_UNCOMPRESS(5) (readHeader reads it as one raw block, readFully).
    with pytest.raises(CodecError, match="snappy"):
        decompress("snappy", _xerial(PLAIN)[:length])


def test_snappy_a_xerial_header_lookalike_ends_the_first_read_and_is_skipped_after_it() -> None:
    """A chunk length that reads as the magic's first 4 bytes is a repeated header; where the rest of
    the magic does not match, hasNextChunk returns false without finishing the stream."""
    lookalike = b"\x82SNAXXXX" + bytes(8)
    header = _xerial(b"")[:16]
    # Kafka: OK, no bytes (the first read finds no chunk; the chunk after is never read).
    assert decompress("snappy", header + lookalike + _xerial(b"after")[16:]) == b""
    # Kafka: OK, both chunks' bytes (the read that met it had bytes; the next goes on after it).
    assert decompress("snappy", _xerial(b"before") + lookalike + _xerial(b"after")[16:]) == b"beforeafter"


def test_a_position_in_a_codec_error_is_one_in_the_compressed_payload() -> None:
    # The caller names the file and the batch; the codec says where in the batch's compressed payload.
    # Kafka: IOException "failed to read chunk".
    overrun = _xerial(b"")[:16] + struct.pack(">i", 100) + b"short"
    with pytest.raises(
        CodecError, match=r"^xerial snappy chunk of 100 bytes at byte 16 of the compressed payload"
    ):
        decompress("snappy", overrun)
