"""The audit bench's CPU per line, from a real process tree whose processes start and end during it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from bench.audit_throughput import CpuWatch, tree_cpu

# Burns `s` seconds of its own CPU, then waits for a line on stdin, then burns `s` more and ends.
BURN = """
import sys, time
def burn(s):
    t = time.process_time()
    while time.process_time() - t < s:
        pass
burn(float(sys.argv[1])); sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline(); burn(float(sys.argv[1]))
"""

# Like pyspark's daemon: ignores SIGCHLD (its children are reaped by the kernel, and their CPU is not
# added to its own children's time) and forks a worker that burns 0.4 s and ends.
DAEMON = """
import os, signal, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
sys.stdin.readline()
if os.fork() == 0:
    t = time.process_time()
    while time.process_time() - t < 0.4:
        pass
    os._exit(0)
sys.stdin.readline()
"""


def spawn(code: str, *args: str) -> subprocess.Popen[bytes]:
    pipe = subprocess.PIPE
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=pipe, stdout=pipe)


def test_each_process_counts_what_it_used_between_start_and_stop() -> None:
    child = spawn(BURN, "0.3")
    try:
        assert child.stdout is not None and child.stdin is not None
        child.stdout.readline()  # its first 0.3 s are behind it
        before = tree_cpu(os.getpid())
        assert before[child.pid][0] == "python workers"
        assert before[os.getpid()][0] == "python driver"
        watch = CpuWatch(os.getpid(), interval=0.05).start()
        child.stdin.write(b"\n")
        child.stdin.flush()
        # It burns its second 0.3 s and ends (not yet reaped: sampled as a zombie). Its output closes
        # when it ends, however long a busy machine takes to give it that CPU time.
        assert child.stdout.read() == b""
        time.sleep(0.3)  # the watch samples the zombie
        totals = watch.stop()
    finally:
        child.kill()
        child.wait()
    # Only the second 0.3 s, though the child had used 0.3 s before the watch started.
    assert 0.25 <= totals["python workers"] <= 0.45


def test_a_worker_of_a_daemon_that_ignores_sigchld_is_counted_though_it_leaves_no_trace() -> None:
    daemon = spawn(DAEMON)
    try:
        assert daemon.stdin is not None
        watch = CpuWatch(os.getpid(), interval=0.05).start()
        daemon.stdin.write(b"\n")
        daemon.stdin.flush()
        seen: set[int] = set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the worker has come and gone
            time.sleep(0.02)
            workers = {p for p, (kind, _) in tree_cpu(os.getpid()).items() if kind == "python workers"}
            seen |= workers - {daemon.pid}
            if seen and not workers & seen:
                break
        assert seen, "the daemon forked no worker"
        totals = watch.stop()
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
    # The worker's 0.4 s, less what it used after its last sample (under 0.05 s), never below zero.
    assert 0.3 <= totals["python workers"] <= 0.6
    assert min(totals.values()) >= 0
