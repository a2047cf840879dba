"""`replay-audit`: the command-line entry point (also the Databricks python_wheel_task entry).

Subcommands import what they need lazily, so `dump` starts in a fraction of a second without Spark.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replay-audit",
        description="Audit dumped Kafka partitions: producer sequences, loss, duplicates, ordering.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    dump = sub.add_parser(
        "dump",
        help="decode files or directories to JSON lines without Spark (a machine-readable kafka-dump-log.sh)",
    )
    dump.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="Kafka files (.log, .index, .snapshot, checkpoints, dump-log text) or directories",
    )
    dump.add_argument("--records", action="store_true", help="decode every record (all codecs)")
    dump.add_argument(
        "--summary", action="store_true", help="one summary object per file instead of one object per item"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "dump":
        from kafka_log_decoder.dump import run_dump
        from kafka_log_decoder.errors import NotAKafkaArtifact

        try:
            return run_dump(args.paths, records=args.records, summary=args.summary, out=sys.stdout)
        except NotAKafkaArtifact as exc:
            print(f"replay-audit: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            return 0
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
