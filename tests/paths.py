"""Where the tests' committed data lives."""

from __future__ import annotations

from pathlib import Path

# Partition data written by real brokers, byte for byte from public repositories (PROVENANCE.md there):
# a copy of ../shared/fixtures/real, so that a clone alone runs the suite.
REAL_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real"
