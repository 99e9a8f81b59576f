"""bin/prolog's node check in a real Slurm cluster (issue 20): Debian's slurmctld and one slurmd on
127.0.0.1, the rendered slurm.conf of blueprints/onprem-ib.yaml (8 GPUs a node) with test-only
overrides as in tests/test_health_cluster.py, no HealthCheckProgram (only the Prolog is under test), and
Prolog= a wrapper that runs the rendered AWS bin/prolog (reference blueprint, train fleet) with
nvidia-smi and journalctl faked and its bin/update replaced by a recorder.

- 7 of 8 GPUs: a batch job is not run on the node; the node drains with `fleetform-prolog: 7 of 8 GPUs`
  (slurmctld's drain after the failed Prolog keeps that reason) and the job goes back to pending
  (slurm.conf(5), Prolog: requeued);
- 8 of 8 (the node resumed, the job released): the job runs to completion.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

import slurmctld
from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render
from test_health_cluster import NODE, _missing, answer, fake_gpu_host, localize, start_one_node, state, wrapper

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster():
    yield from slurmctld.cluster_fixture("ffp-", "FLEETFORM_KEEP_PROLOG_CLUSTER", _missing(), _start)


def _start(tmp: Path, procs: list) -> dict:
    etc = tmp / "etc"
    for name, data in render(check(ROOT / "blueprints/onprem-ib.yaml").model).items():
        if name.startswith("train/slurm/") and "/bin/" not in name:
            target = etc / name[len("train/slurm/"):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, data in render(check(ROOT / "blueprints/reference.yaml").model).items():
        if name.startswith("train/slurm/bin/"):
            (bin_dir / Path(name).name).write_bytes(data)
    (bin_dir / "update").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp}/update.log\n")
    for program in ("update", "prolog", "health"):
        (bin_dir / program).chmod(0o755)
    fakes = fake_gpu_host(tmp)
    conf = etc / "slurm.conf"
    prolog = wrapper(tmp / "prolog", bin_dir / "prolog", tmp / "prolog.log", fakes, conf)
    localize(conf, tmp, ("HealthCheckNodeState", "Prolog", "Epilog"), ["PrologFlags=Alloc", f"Prolog={prolog}"])
    return start_one_node(tmp, procs, conf, fakes)


def scontrol(cluster: dict, *args: str) -> str:
    done = subprocess.run(["scontrol", *args], capture_output=True, text=True, env=cluster["env"], timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def job_state(cluster: dict, job: str) -> str:
    return scontrol(cluster, "show", "job", job, "--oneliner").split("JobState=")[1].split()[0]


def wait(what, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < deadline, what.__name__
        time.sleep(0.5)


def test_a_node_missing_a_gpu_does_not_run_the_job_and_with_all_gpus_it_does(cluster):
    wait(lambda: state(cluster)[0] == "idle")
    out = cluster["tmp"] / "out" / "ran"
    sbatch = subprocess.run(["sbatch", "--parsable", "-N1", "-o", "/dev/null", "--wrap", f"touch {out}"],
                            capture_output=True, text=True, env=cluster["env"], timeout=30)
    assert sbatch.returncode == 0, sbatch.stderr
    job = sbatch.stdout.strip().split(";")[0]
    node_state, reason = wait(lambda: (lambda s: s if s[0].startswith("drain") else None)(state(cluster)))
    # slurmctld's own drain after the failed Prolog keeps the reason the prolog set first
    assert reason == "fleetform-prolog: 7 of 8 GPUs", reason
    assert wait(lambda: job_state(cluster, job) == "PENDING")
    assert not out.exists() and not (cluster["tmp"] / "update.log").exists()
    prolog_log = (cluster["tmp"] / "prolog.log").read_text()
    assert "fleetform prolog: dgx-01 unhealthy: 7 of 8 GPUs" in prolog_log, prolog_log

    answer(cluster, "nvidia-smi-8-of-8.csv")
    scontrol(cluster, "update", f"nodename={NODE}", "state=resume")
    scontrol(cluster, "release", job)
    # Slurm 22.05 makes a requeued batch job eligible only some time later (EligibleTime two minutes
    # on, as seen here); the test moves it to now rather than wait
    scontrol(cluster, "update", f"jobid={job}", "StartTime=now")
    assert wait(lambda: out.exists(), timeout=60), _log(cluster["tmp"] / "slurmd.log")
    assert (cluster["tmp"] / "update.log").read_text() == f"--job {job}\n"
