"""What the pytest-xdist workers of one test run share (`make test` runs two; alone, nothing)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def parallel() -> bool:
    """True in a pytest-xdist worker."""
    return os.environ.get("PYTEST_XDIST_WORKER") is not None


@contextmanager
def run_lock(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """An exclusive lock shared by every pytest-xdist worker of this run (a no-op alone): yields the
    directory the workers share (the parent of their basetemps), or this process's basetemp alone."""
    if not parallel():
        yield tmp_path_factory.getbasetemp()
        return
    shared = tmp_path_factory.getbasetemp().parent
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        yield shared
