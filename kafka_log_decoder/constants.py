"""Protocol constants, named as Kafka names them (clients/.../common/record/*.java)."""

from __future__ import annotations

# RecordBatch.java / Records.java
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1
MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
INT32_MAX = 2**31 - 1

# Records.java: every log entry starts with offset int64 + size int32.
OFFSET_OFFSET = 0
SIZE_OFFSET = 8
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
# The 17 bytes up to and including the magic byte decide which layout follows.
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1

# DefaultRecordBatch.java
PARTITION_LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
# batchLength counts the bytes after the length field: an empty batch has 49.
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIMESTAMP_TYPE_NAMES = {0: "CreateTime", 1: "LogAppendTime"}
NO_TIMESTAMP_TYPE = "NoTimestampType"

# LegacyRecord.java: crc(4) magic(1) attributes(1) [timestamp(8)] keyLength(4) ...
LEGACY_CRC_OFFSET = 0
LEGACY_MAGIC_OFFSET = 4
LEGACY_ATTRIBUTES_OFFSET = 5
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
LEGACY_TIMESTAMP_TYPE_MASK = 0x08

# ControlRecordType.java
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
CONTROL_TYPE_UNKNOWN = "UNKNOWN"
END_TXN_MARKER_TYPES = frozenset({"ABORT", "COMMIT"})
CONTROL_KEY_SIZE = 4
END_TXN_MARKER_VALUE_SIZE = 6

# ProducerSnapshot.json: version int16 | crc uint32 | count int32 | 46-byte entries.
PRODUCER_SNAPSHOT_VERSION = 1
PRODUCER_SNAPSHOT_HEADER_SIZE = 10
PRODUCER_SNAPSHOT_ENTRY_SIZE = 46

# OffsetIndex.java / TimeIndex.java / AbortedTxn.java
OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12
TXN_INDEX_ENTRY_SIZE = 34

# ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the broker's duplicate window.
NUM_BATCHES_TO_RETAIN = 5

# A declared batch larger than this is treated as garbage rather than allocated
# (the broker's own limit, message.max.bytes, is an int32; real batches are far smaller).
MAX_SANE_BATCH_LENGTH = 1 << 30

# AbortedTxn.CURRENT_VERSION: the only `.txnindex` entry version.
TXN_INDEX_CURRENT_VERSION = 0

# LogFileUtils.java / UnifiedLog.java: file and directory names of a partition directory.
LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
# The suffixes a segment file takes on its way in or out of the log (LogFileUtils): what it was before
# them is its kind.
FILE_STATE_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
# CheckpointFile.java / PartitionMetadataFile: writes go to `<name>.tmp`, then an atomic rename.
TMP_FILE_SUFFIX = ".tmp"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
# filenamePrefixFromOffset: offsets are written as 20-digit zero-padded decimals.
FILE_NAME_OFFSET_DIGITS = 20
# Snapshots.java (KRaft `__cluster_metadata`): `<endOffset 20 digits>-<epoch 10 digits>.checkpoint`.
KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
KRAFT_SNAPSHOT_PARTIAL_SUFFIX = ".checkpoint.part"
KRAFT_SNAPSHOT_DELETE_SUFFIX = ".checkpoint.deleted"
# BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME: the KRaft bootstrap snapshot in a log directory.
KRAFT_BOOTSTRAP_FILENAME = "bootstrap.checkpoint"

# Files of a broker log directory (ReplicaManager, LogManager, CleanShutdownFileHandler,
# MetaPropertiesEnsemble).
REPLICATION_OFFSET_CHECKPOINT_FILENAME = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT_FILENAME = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILENAME = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILENAME = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILENAMES = (
    REPLICATION_OFFSET_CHECKPOINT_FILENAME,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILENAME,
    LOG_START_OFFSET_CHECKPOINT_FILENAME,
    CLEANER_OFFSET_CHECKPOINT_FILENAME,
)
META_PROPERTIES_FILENAME = "meta.properties"
CLEAN_SHUTDOWN_FILE_NAME = ".kafka_cleanshutdown"
LOCK_FILENAME = ".lock"
# Files of a partition directory (LeaderEpochCheckpointFile, PartitionMetadataFile, QuorumStateStore).
LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"
PARTITION_METADATA_FILENAME = "partition.metadata"
QUORUM_STATE_FILENAME = "quorum-state"
# OffsetCheckpointFile.CURRENT_VERSION, LeaderEpochCheckpointFile.CURRENT_VERSION,
# PartitionMetadataFile.CURRENT_VERSION.
OFFSET_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0


def int_bounds(bits: int) -> tuple[int, int]:
    """The range of a signed integer of `bits` bits (a bronze column's: a value outside it is no row)."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
