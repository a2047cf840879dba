"""Decoders for the on-disk files of a Kafka partition (no Spark): log segments, indexes,
producer-state snapshots, checkpoints and `kafka-dump-log.sh` text."""

from kafka_log_decoder.errors import CorruptionKind, DecodeError, DecodeFailure, NotAKafkaArtifact

__all__ = ["CorruptionKind", "DecodeError", "DecodeFailure", "NotAKafkaArtifact"]
