"""Typed decode errors: every malformed input becomes one of these, carrying file and byte position."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

_Result = TypeVar("_Result")


class CorruptionKind(StrEnum):
    """The corruption and consistency finding kinds of audit-contract §4.

    Plus `UNREADABLE_FILE`: a checkpoint/metadata text file that cannot be parsed; reported as a
    consistency warning.
    """

    CRC_MISMATCH = "CRC_MISMATCH"
    TRUNCATED_TAIL = "TRUNCATED_TAIL"
    UNREADABLE_BATCH = "UNREADABLE_BATCH"
    OFFSET_OVERLAP = "OFFSET_OVERLAP"
    INDEX_MISMATCH = "INDEX_MISMATCH"
    SNAPSHOT_CORRUPT = "SNAPSHOT_CORRUPT"
    SNAPSHOT_MISMATCH = "SNAPSHOT_MISMATCH"
    # Offset or leader-epoch checkpoint, partition.metadata, meta.properties, quorum-state or
    # .kafka_cleanshutdown that cannot be parsed. Added beside the contract's kinds, nothing renamed.
    UNREADABLE_FILE = "UNREADABLE_FILE"


# The end of the message of a unit (a segment's byte range, a dump-log text) that could not be read or
# whose decode failed: its bytes were not all decoded, so no rest of it was read after the region.
NOT_DECODED = "were not (all) decoded"


@dataclass(frozen=True, slots=True)
class DecodeError:
    """A corrupt region: the file, where it starts, how long it is (when known) and why.

    Decoders yield these as items (decoding goes on); `DecodeFailure` raises one.
    """

    file: str
    position: int
    kind: CorruptionKind
    message: str
    length: int | None = None
    # For an error located in a `kafka-dump-log.sh` text (`file` is the text): the dumped file whose
    # section it stands in, whose partition it belongs to.
    section: str | None = None

    def __str__(self) -> str:
        return f"{self.file}: byte {self.position}: {self.kind.value}: {self.message}"


class DecodeFailure(Exception):
    """Raised where decoding of a unit (one batch's records, one snapshot) cannot go on."""

    def __init__(self, error: DecodeError) -> None:
        super().__init__(str(error))
        self.error = error


class NotAKafkaArtifact(ValueError):
    """A path given directly that is not a Kafka log artifact (a usage error, exit status 2)."""

    @classmethod
    def from_os_error(cls, path: str, exc: OSError) -> NotAKafkaArtifact:
        """The one-line usage error for a path that cannot be opened (missing, a directory, no permission)."""
        reason = exc.strerror or type(exc).__name__
        return cls(f"{path}: cannot read: {reason}")


def decode_file(path: str | os.PathLike[str], decode: Callable[[bytes, str], _Result]) -> _Result:
    """`decode(bytes, file)` of a small artifact read whole; an unreadable path raises `NotAKafkaArtifact`."""
    file = os.fspath(path)
    try:
        with open(file, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise NotAKafkaArtifact.from_os_error(file, exc) from None
    return decode(data, file)
