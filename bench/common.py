"""What both benchmarks share: where the repository is, which revision ran, how to run replay-audit."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Decimal units, so that MB/s and time per GB read directly.
MB = 1_000_000
GB = 1000 * MB


def git_revision() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=REPO)
    return done.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def parse_size(text: str) -> int:
    """`64M`, `1G`, `4G`: decimal (10^6, 10^9) so that MB/s and time per GB read directly."""
    text = text.strip().upper()
    units = {"K": 1000, "M": MB, "G": GB}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def size_label(n: int) -> str:
    """`250 MB`, `4 GB`: a size in decimal units."""
    return f"{n / GB:g} GB" if n >= GB else f"{n / MB:g} MB"


def target(name: str, passed: bool | None, measured: str) -> dict[str, Any]:
    """One target of an issue: its name, PASS (True), MISS (False) or n/a (None), and the figure."""
    return {"name": name, "passed": passed, "measured": measured}


def format_targets(targets: list[dict[str, Any]], width: int) -> str:
    """`PASS  <name>  <figure>` lines, one per target."""
    verdicts = {True: "PASS", False: "MISS", None: "n/a "}
    return "\n".join(f"{verdicts[t['passed']]}  {t['name']:<{width}} {t['measured']}" for t in targets)


def replay_audit_cmd() -> tuple[list[str], str]:
    """The `replay-audit` console script of this venv (or `python -m jobs.cli`), and how to show it."""
    script = Path(sys.executable).with_name("replay-audit")
    if script.is_file():
        return [str(script)], str(script.relative_to(REPO)) if script.is_relative_to(REPO) else str(script)
    return [sys.executable, "-m", "jobs.cli"], "python -m jobs.cli (console script not installed; make setup)"


def write_report(out: Path, fields: dict[str, Any]) -> None:
    """Write a results JSON: when and where it ran (revision, machine), then the benchmark's own fields."""
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git": git_revision(),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        **fields,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"results: {out}")
