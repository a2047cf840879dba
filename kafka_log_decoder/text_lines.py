"""Lines of a text file read with a bounded buffer: a line longer than the bound is passed over and
only its length kept, so one line of gigabytes (a payload printed whole, a ledger written without
newlines) costs no more memory than a short one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

# Longer lines are not read: a record printed by kafka-dump-log.sh takes a line, and a batch's payload
# decompresses to at most codecs.MAX_DECOMPRESSED_BYTES; records past message.max.bytes (1 MiB by
# default) are rare, past 16 MiB a sign the text is not what it should be.
MAX_LINE_BYTES = 16 << 20

# Read a block at a time: a line's bytes are copied once per block until it ends, at most `limit` each.
_BLOCK_BYTES = 1 << 20
_NEWLINE = re.compile(rb"\n")
# Universal newlines, as `open(..., newline=None)` reads them.
_ANY_LINE_END = re.compile(rb"\r\n|\r|\n")


def bounded_lines(
    handle: BinaryIO, *, universal: bool = False, limit: int | None = None
) -> Iterator[bytes | int]:
    """Each line of `handle` (its end included: `\\n`, or with `universal` also `\\r\\n` and `\\r`): its
    bytes, or its length alone where it is longer than `limit` (`MAX_LINE_BYTES`) bytes. A last line
    without an end is a line too."""
    limit = MAX_LINE_BYTES if limit is None else limit
    line_end = _ANY_LINE_END if universal else _NEWLINE
    buffer = b""  # the start of a line not ended yet (no line end in it but a last `\r`)
    passed = -1  # the bytes of an overlong line let go so far; -1: none
    while True:
        more = handle.read(_BLOCK_BYTES)
        at_end = not more
        searched = max(len(buffer) - 1, 0)
        buffer = buffer + more if buffer else more
        start = 0
        for end_of_line in line_end.finditer(buffer, searched):
            end = end_of_line.end()
            if universal and not at_end and end == len(buffer) and end_of_line.group() == b"\r":
                break  # a `\r` last of what is read may be the first half of a `\r\n`
            if passed >= 0:
                yield passed + end - start
                passed = -1
            elif end - start > limit:
                yield end - start
            else:
                yield buffer[start:end]
            start = end
        rest = len(buffer) - start
        if at_end:
            if passed >= 0:
                yield passed + rest
            elif rest:
                yield buffer[start:] if rest <= limit else rest
            return
        if passed >= 0 or rest > limit:
            # Let go of the line's bytes but a last `\r`, which the next read may make a `\r\n`.
            keep = 1 if universal and buffer.endswith(b"\r") else 0
            passed = max(passed, 0) + rest - keep
            buffer = buffer[len(buffer) - keep :]
        else:
            buffer = buffer[start:]


def overlong(length: int) -> str:
    """Why a line of `length` bytes is not read."""
    return f"{length} bytes on one line: more than the {MAX_LINE_BYTES} read of one line"
