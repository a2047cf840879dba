from typing_extensions import Buffer

MAX_BATCH_HEADERS: int
HAVE_HW_CRC32C: bool
REACHED_STOP: int
NEED_MORE_DATA: int
NOT_V2: int
BAD_LENGTH: int
FULL: int
BATCH_COLUMNS: tuple[tuple[str, str], ...]
RECORD_COLUMNS: tuple[tuple[str, str], ...]
HEADER_COLUMNS: tuple[tuple[str, str], ...]

def crc32c(data: Buffer, crc: int = 0) -> int: ...
def xxh64(data: Buffer, seed: int = 0) -> int: ...
def walk_batches(
    buf: Buffer,
    start: int,
    stop: int,
    decode_records: bool,
    max_batches: int,
    hash_values: bool = False,
    max_records: int = -1,
) -> tuple[int, dict[str, bytes], int, int, dict[str, bytes] | None]: ...
def decode_records(
    data: Buffer,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    base_sequence: int,
    count: int,
    hash_values: bool = False,
) -> tuple[dict[str, bytes], int, int]: ...
def _crc32c_portable(data: Buffer, crc: int = 0) -> int: ...
def _set_crc_impl(hw: bool) -> None: ...
