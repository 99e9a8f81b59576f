"""Start the real slurmctld (Debian's slurm-wlm) on a rendered Slurm folder, offline.

A copy of the folder is pointed at this machine: the controller is localhost on a free port,
runs as the current user, keeps its state in a temp dir, and needs no munge (auth/none), no
slurmdbd and no DNS (NodeAddr=127.0.0.1). What it still parses is fleetform's output as
rendered: nodes, GRES, partitions, topology, cgroup and plugins. It passes when slurmctld says
`Running as primary controller`; when it exits first, its `fatal:`/`error:` lines say why.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SLURMCTLD = shutil.which("slurmctld") or "/usr/sbin/slurmctld"
READY = "Running as primary controller"

OVERRIDES = {
    "SlurmctldHost": "localhost",
    "AuthType": "auth/none",
    "CredType": "cred/none",
    "AccountingStorageType": "accounting_storage/none",
}

ACCOUNTING = ("AccountingStorageHost", "AccountingStoragePort", "AccountingStorageTRES", "AccountingStorageEnforce")
"""Dropped with AccountingStorageType=accounting_storage/none (no slurmdbd here): slurmctld 22.05 stops with
"fatal: slurmdbd is required to run with TRES gres/gpu" and refuses AccountingStorageEnforce without
storage. tests/test_accounting_cluster.py runs those lines against a real slurmdbd."""


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group, SIGKILL after 10 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@dataclass
class Outcome:
    ok: bool
    output: str
    seconds: float


def available() -> bool:
    return os.path.exists(SLURMCTLD)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _localize(conf: str, tmp: Path) -> str:
    out = []
    for line in conf.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else None
        if key in OVERRIDES:
            line = f"{key}={OVERRIDES[key]}"
        elif key in ACCOUNTING:
            continue
        elif key in ("ResumeProgram", "SuspendProgram", "ResumeFailProgram"):
            line = f"{key}=/bin/true"
        elif key in ("SlurmUser", "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile",
                     "SlurmctldLogFile", "SlurmdLogFile", "SlurmctldPort"):
            continue
        elif key == "NodeName" and "NodeAddr=" not in line:
            line = f"{line} NodeAddr=127.0.0.1"
        out.append(line)
    out += [
        f"SlurmUser={getpass.getuser()}",
        f"StateSaveLocation={tmp}/state",
        f"SlurmdSpoolDir={tmp}/spool",
        f"SlurmctldPidFile={tmp}/slurmctld.pid",
        f"SlurmdPidFile={tmp}/slurmd.pid",
        f"SlurmctldLogFile={tmp}/slurmctld.log",
        f"SlurmctldPort={_free_port()}",
    ]
    return "\n".join(out) + "\n"


def check(folder: Path, timeout: float = 60.0) -> Outcome:
    """Run slurmctld on a copy of a rendered <fleet>/slurm folder until it is ready or fails."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="slurmctld-") as tmpdir:
        tmp = Path(tmpdir)
        copy = tmp / "etc"
        shutil.copytree(folder, copy)
        (tmp / "state").mkdir()
        (tmp / "spool").mkdir()
        conf = copy / "slurm.conf"
        conf.write_text(_localize(conf.read_text(), tmp))
        proc = subprocess.Popen([SLURMCTLD, "-D", "-c", "-i", "-vv", "-f", str(conf)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True,
                                env={**os.environ, "SLURM_CONF": str(conf)})
        lines: list[str] = []
        ok = False
        try:
            deadline = time.monotonic() + timeout
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if READY in line:
                    ok = True
                    break
                if time.monotonic() > deadline:
                    lines.append(f"(no `{READY}` within {timeout:.0f} s)")
                    break
        finally:
            stop(proc)
        log = tmp / "slurmctld.log"
        if log.exists():
            lines += log.read_text(errors="replace").splitlines()
    return Outcome(ok, "\n".join(lines), time.monotonic() - start)


def problems(outcome: Outcome) -> list[str]:
    return [line for line in outcome.output.splitlines() if re.search(r"\b(fatal|error):", line)]


@contextlib.contextmanager
def running(folder: Path, tmp: Path, timeout: float = 60.0, extra: str = ""):
    """A slurmctld on a localized copy of a rendered <fleet>/slurm folder that keeps running for
    the block (for `scontrol` against it); yields the copy's slurm.conf. `extra` lines are appended
    to slurm.conf. Stopped with SIGTERM (then SIGKILL) when the block ends."""
    copy = tmp / "etc"
    shutil.copytree(folder, copy)
    (tmp / "state").mkdir()
    (tmp / "spool").mkdir()
    conf = copy / "slurm.conf"
    conf.write_text(_localize(conf.read_text(), tmp) + extra)
    proc = subprocess.Popen([SLURMCTLD, "-D", "-c", "-i", "-f", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env={**os.environ, "SLURM_CONF": str(conf)})
    try:
        deadline = time.monotonic() + timeout
        env = {**os.environ, "SLURM_CONF": str(conf)}
        while b"is UP" not in subprocess.run(["scontrol", "ping"], capture_output=True, env=env, timeout=30).stdout:
            if proc.poll() is not None or time.monotonic() > deadline:
                log = tmp / "slurmctld.log"
                raise RuntimeError("slurmctld did not come up:\n" + (log.read_text()[-3000:] if log.exists() else ""))
            time.sleep(0.3)
        yield conf
    finally:
        stop(proc)


def cluster_fixture(prefix: str, keep_variable: str, missing: str | None, start):
    """The body of a cluster test's module fixture (`yield from` it): skips, or fails under CI, when a
    program is missing; else yields `start(tmp, procs)`, and afterwards stops every process it started
    (last first) and removes its folder unless `keep_variable` is set in the environment."""
    import pytest

    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # slurmd's socket paths must stay short
    procs: list[subprocess.Popen] = []
    try:
        yield start(tmp, procs)
    finally:
        for proc in reversed(procs):
            stop(proc)
        if os.environ.get(keep_variable):
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
