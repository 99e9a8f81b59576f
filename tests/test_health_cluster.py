"""bin/health in a real Slurm cluster (issue 20): Debian's slurmctld and one slurmd on 127.0.0.1 run
the rendered health check of an on-prem fleet (blueprints/onprem-ib.yaml: 8 GPUs a node, no EFA,
no file systems: the gpus and xid checks), with nvidia-smi and journalctl replaced by fakes that
print tests/data/health/ outputs.

- slurmd runs the check when it starts: with 7 of 8 GPUs the node is drained and `sinfo -R` shows
  the reason;
- with 8 of 8 the next check (HealthCheckInterval) returns the node to service (idle);
- a drain a person sets with another reason stays through later checks.

Test-only overrides of the rendered slurm.conf (one machine plays the controller and the node):
tests/slurmctld.py's (localhost controller, auth/none, state and logs in a temp dir, NodeAddr=127.0.0.1),
SlurmUser and DisableRootJobs for the user running the test, one free SlurmdPort, config_overrides
(this host has not 224 CPUs), proctrack/linuxproc and task/none without PrologFlags=Contain (no
cgroup delegation in a test container), gres.conf's /dev/nvidia[0-7] as links to /dev/null,
HealthCheckInterval=2 instead of 300, no Prolog or Epilog, and HealthCheckProgram a wrapper that sets PATH (the fakes
first), SLURM_CONF and FLEETFORM_ROOT and runs the rendered bin/health. Every daemon is stopped at
the end; every wait has a timeout. In CI (CI set) a missing slurmctld or slurmd fails the test.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import slurmctld
from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render
from test_health import DATA, FAKE

pytestmark = pytest.mark.cluster

NODE = "dgx-01"
PROGRAMS = ("slurmctld", "slurmd", "sinfo", "scontrol")
INTERVAL_S = 2


def _missing() -> str | None:
    gone = [p for p in PROGRAMS if not (shutil.which(p) or os.path.exists(f"/usr/sbin/{p}"))]
    return f"{', '.join(gone)} not installed (apt-get install slurmctld slurmd slurm-client)" if gone else None


@pytest.fixture(scope="module")
def cluster():
    yield from slurmctld.cluster_fixture("ffh-", "FLEETFORM_KEEP_HEALTH_CLUSTER", _missing(), _start)


def _start(tmp: Path, procs: list) -> dict:
    model = check(ROOT / "blueprints/onprem-ib.yaml").model
    etc = tmp / "etc"
    for name, data in render(model).items():
        if name.startswith("train/slurm/"):
            target = etc / name[len("train/slurm/"):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    health = etc / "bin/health"
    health.chmod(0o755)
    fakes = fake_gpu_host(tmp)
    conf = etc / "slurm.conf"
    check_program = wrapper(tmp / "health-check", health, tmp / "health.log", fakes, conf)
    localize(conf, tmp, ("Prolog", "Epilog"),  # the Prolog's check is tests/test_prolog_cluster.py's
             [f"HealthCheckProgram={check_program}", f"HealthCheckInterval={INTERVAL_S}"])
    assert "HealthCheckNodeState=ANY" in conf.read_text()  # the rendered value, kept
    return start_one_node(tmp, procs, conf, fakes)


def fake_gpu_host(tmp: Path) -> Path:
    """The test's folders, and a host with 8 GPUs as far as Slurm and the checks can see: /dev/nvidia[0-7]
    (links to /dev/null, which gres.conf is pointed at) and fakes of nvidia-smi and journalctl, first in
    the PATH the wrappers give, that print what answer() last chose. Returns the fakes' folder."""
    for folder in ("state", "spool", "root", "fakes", "dev", "out"):
        (tmp / folder).mkdir()
    fakes = tmp / "fakes"
    (fakes / "fake").write_text(FAKE)
    (fakes / "fake").chmod(0o755)
    for program in ("nvidia-smi", "journalctl"):
        (fakes / program).symlink_to("fake")
    for i in range(8):
        (tmp / "dev" / f"nvidia{i}").symlink_to("/dev/null")
    return fakes


def wrapper(path: Path, program: Path, log: Path, fakes: Path, conf: Path) -> Path:
    """A script slurmd runs instead of a rendered program: it sets PATH (the fakes first), SLURM_CONF and
    FLEETFORM_ROOT, then runs the program with its output appended to `log`."""
    path.write_text(f"#!/bin/sh\nexport PATH={fakes}:/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF={conf} "
                    f"FLEETFORM_ROOT={path.parent / 'root'}\nexec {program} >>{log} 2>&1\n")
    path.chmod(0o755)
    return path


def localize(conf: Path, tmp: Path, replaced: tuple[str, ...], lines: list[str]) -> None:
    """The module docstring's test-only overrides of the rendered slurm.conf, the keys in `replaced` dropped
    and `lines` added; gres.conf's devices pointed at the fake ones."""
    text = slurmctld._localize(conf.read_text(), tmp)
    dropped = ("ProctrackType", "TaskPlugin", "PrologFlags", "HealthCheckProgram", "HealthCheckInterval",
               "DisableRootJobs", "SlurmUser", *replaced)
    kept = [line for line in text.splitlines() if line.split("=", 1)[0] not in dropped]
    kept += ["ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", *lines, f"SlurmUser={getpass.getuser()}",
             "DisableRootJobs=NO", f"SlurmdPort={slurmctld._free_port()}", "SlurmdParameters=config_overrides",
             f"SlurmdLogFile={tmp}/slurmd.log"]
    conf.write_text("\n".join(kept) + "\n")
    gres = conf.parent / "gres.conf"
    gres.write_text(gres.read_text().replace("File=/dev/nvidia", f"File={tmp}/dev/nvidia"))


def start_one_node(tmp: Path, procs: list, conf: Path, fakes: Path) -> dict:
    """slurmctld, once it answers a ping, then one slurmd as NODE, both on `conf`; the GPUs answer 7 of 8
    until a test says otherwise. Returns the cluster the tests use."""
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = {"tmp": tmp, "conf": conf, "env": env, "fakes": fakes}
    answer(cluster, "nvidia-smi-7-of-8.csv")
    procs.append(subprocess.Popen([slurmctld.SLURMCTLD, "-D", "-i", "-f", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True, env=env))
    deadline = time.monotonic() + 60
    while b"is UP" not in subprocess.run(["scontrol", "ping"], capture_output=True, env=env, timeout=30).stdout:
        assert procs[0].poll() is None and time.monotonic() < deadline, _log(tmp / "slurmctld.log")
        time.sleep(0.3)
    slurmd = shutil.which("slurmd") or "/usr/sbin/slurmd"
    procs.append(subprocess.Popen([slurmd, "-D", "-N", NODE, "-f", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True, env=env))
    cluster["slurmd"] = procs[-1]
    return cluster


def _log(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else f"({path} missing)"


def answer(cluster: dict, gpus: str) -> None:
    (cluster["fakes"] / "answers.json").write_text(json.dumps({
        "nvidia-smi": [(DATA / gpus).read_text(), 0], "journalctl": [(DATA / "journal-quiet.txt").read_text(), 0]}))


def state(cluster: dict) -> tuple[str, str]:
    """The node's state and its whole reason, as sinfo shows them (one line a partition: the first)."""
    out = subprocess.run(["sinfo", "-h", "-N", "-n", NODE, "-o", "%T|%60E"], capture_output=True, text=True,
                         env=cluster["env"], timeout=30).stdout.strip()
    node_state, _, reason = out.partition("\n")[0].partition("|")
    return node_state, reason.strip()


def wait_for(cluster: dict, wanted, timeout: float = 60) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        now = state(cluster)
        if wanted(*now):
            return now
        if time.monotonic() > deadline or cluster["slurmd"].poll() is not None:
            raise AssertionError(f"{NODE} is {now}\n--- slurmd.log\n" + _log(cluster["tmp"] / "slurmd.log")
                                 + "\n--- slurmctld.log\n" + _log(cluster["tmp"] / "slurmctld.log"))
        time.sleep(0.5)


def checks_run(cluster: dict) -> int:
    """Checks that ended: bin/health prints one verdict line at its end."""
    log = cluster["tmp"] / "health.log"
    return sum(1 for line in log.read_text().splitlines() if re.match(rf"fleetform health: {NODE} (un)?healthy", line)) \
        if log.exists() else 0


def test_a_failing_check_drains_a_passing_one_resumes_and_a_persons_drain_stays(cluster):
    # slurmd ran the check at its start: 7 of 8 GPUs
    node_state, reason = wait_for(cluster, lambda s, r: s.startswith("drain") and r.startswith("fleetform-health:"))
    assert reason == "fleetform-health: 7 of 8 GPUs", reason
    listed = subprocess.run(["sinfo", "-R", "-h"], capture_output=True, text=True, env=cluster["env"], timeout=30)
    assert re.search(r"^fleetform-health: 7 .*\bdgx-01$", listed.stdout, re.M), listed.stdout  # its first 20 chars

    answer(cluster, "nvidia-smi-8-of-8.csv")  # the GPU is back: the next check resumes the node
    wait_for(cluster, lambda s, r: s == "idle")

    done = subprocess.run(["scontrol", "update", f"nodename={NODE}", "state=drain", "reason=bad DIMM ticket 4711"],
                          capture_output=True, text=True, env=cluster["env"], timeout=30)
    assert done.returncode == 0, done.stderr
    before = checks_run(cluster)
    deadline = time.monotonic() + 60
    while checks_run(cluster) < before + 2:  # two more passing checks ended
        assert time.monotonic() < deadline, _log(cluster["tmp"] / "slurmd.log")
        time.sleep(0.5)
    node_state, reason = state(cluster)
    assert node_state.startswith("drain") and reason == "bad DIMM ticket 4711", (node_state, reason,
                                                                                 _log(cluster["tmp"] / "health.log"))
