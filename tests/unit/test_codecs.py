"""Codec layer: every Kafka codec, checked against other libraries' encoders."""

from __future__ import annotations

import gzip
import os
import threading

import lz4.frame
import pytest
import snappy
import zstandard

from kafka_log_decoder.codecs import CodecError, decompress, fix_broken_lz4_header_checksum, xxh32

PLAIN = os.urandom(3000) + b"kafka" * 2000


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
    assert fix_broken_lz4_header_checksum(lz4.frame.compress(PLAIN)) == lz4.frame.compress(PLAIN)


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


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_payload_that_decompresses_past_the_limit_is_a_codec_error_in_bounded_memory(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few KB that decompress to gigabytes (1 MB of gzip holds 1 GiB of zeros) must not take the
    memory: past MAX_DECOMPRESSED_BYTES the payload is a CodecError. Measured against a small limit
    (the thread's buffer is made at that size), and the same payload within a larger one decodes."""
    import kafka_log_decoder.codecs as codecs

    zeros = bytes(4 << 20)
    payload = {
        "gzip": lambda: gzip.compress(zeros),
        "snappy": lambda: snappy.compress(zeros),
        "lz4": lambda: lz4.frame.compress(zeros),
        "zstd": lambda: zstandard.ZstdCompressor(write_content_size=False).compress(zeros),
    }[codec]()
    assert len(payload) < len(zeros) // 20  # snappy packs at most ~21:1, the others far more
    for limit, fits in ((1 << 20, False), (8 << 20, True)):
        monkeypatch.setattr(codecs, "MAX_DECOMPRESSED_BYTES", limit)
        monkeypatch.setattr(codecs, "_ZSTD_SMALL_PAYLOAD", limit // 32768)
        monkeypatch.setattr(codecs, "_OUTPUT", threading.local())
        if fits:
            assert decompress(codec, payload) == zeros
        else:
            with pytest.raises(CodecError, match=f"{codec} payload decompresses to more than {limit} bytes"):
                decompress(codec, payload)
