"""The multi-host test's harness (tests/multihost.py) cleans up after itself also when a host does
not start: no process of it outlives the failure. Needs no root: the command is a plain process."""

from __future__ import annotations

import os

import pytest

import multihost


def test_a_host_that_does_not_start_leaves_no_process(tmp_path):
    # never says "ready": the harness gives up after start_s
    with pytest.raises(RuntimeError, match="did not start"):
        multihost.Reaper(["sleep", "60"], tmp_path / "log", start_s=0.5)
    mine = [pid for pid in os.listdir("/proc") if pid.isdigit() and _is_our_sleep(pid)]
    assert mine == [], "the process of a host that did not start was left running"


def _is_our_sleep(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return False
    return argv[:2] == [b"sleep", b"60"] and ppid == os.getpid()
