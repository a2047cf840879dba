"""CRC-32C (Castagnoli), the checksum of v2 record batches and producer snapshots (`Crc32C.java`).

The one place that chooses an implementation: the package's C extension `_native` when built, else
the `crc32c` PyPI package (a test-only dependency), else a slow pure-Python table so that decoding
never depends on anything outside the standard library.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["CRC32C_IMPLEMENTATION", "crc32c"]

_CASTAGNOLI_REVERSED = 0x82F63B78


def _make_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CASTAGNOLI_REVERSED if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _make_table()


def _crc32c_pure(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_impl: Callable[..., int]
try:
    from kafka_log_decoder._native import crc32c as _impl  # type: ignore[attr-defined,no-redef,unused-ignore]

    CRC32C_IMPLEMENTATION = "native"
except ImportError:
    try:
        from crc32c import crc32c as _impl  # type: ignore[no-redef,unused-ignore]

        CRC32C_IMPLEMENTATION = "crc32c"
    except ImportError:
        _impl = _crc32c_pure
        CRC32C_IMPLEMENTATION = "pure-python"


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of `data` as an unsigned 32-bit int; pass a previous result as `crc` to continue it."""
    return int(_impl(data, crc))
