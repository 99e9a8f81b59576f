"""bin/pool-edge on the real Slurm test cluster of tests/test_cluster.py (munged, slurmctld and slurmd of Debian's
slurm-wlm 22.05, the rendered resume and suspend programs against moto's server on 127.0.0.1): the lend's
reservation is made with the real scontrol, a job whose time limit would run past the lend's start is not started
on the lent node while one that ends before it really runs there (resumed through moto), the lent node powers
down at the edge (slurmctld runs the rendered SuspendProgram, which terminates its instance in moto), stays lent at
the hour the window closes (the release lag) and comes back for a job after the reservation.

The clock is the test's: the lend starts at the next whole Berlin hour at least 20 minutes away, and pool-edge is
given `--now` (first the test's start, then the lend's start): nothing waits for a window to open. The one thing
the test does in Slurm's stead is the reservation's end, which slurmctld would reach at its EndTime, hours away:
the test deletes the reservation, which leaves the node as the end does (no longer reserved)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from conftest import ROOT
from test_cluster import _logs, cluster, need_components, short_tmp, slurm, wait_idle  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cluster

PROGRAM = ROOT / "templates/slurm/bin/pool-edge"
UTC = timezone.utc
LENT = "train-003"  # the test cluster's elastic node ({min: 2, max: 3}): a pool lends elastic nodes only


def _job(cluster, job: str) -> dict[str, str]:
    out = slurm(cluster, "scontrol", "-o", "show", "job", job).stdout
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


def _wait(what: str, cluster, probe, timeout: float = 240):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {timeout:.0f} s\n" + _logs(cluster["machines"]))
        time.sleep(1)


def _instances(cluster, states: tuple[str, ...]) -> list[dict]:
    found = cluster["ec2"].describe_instances(Filters=[
        {"Name": "tag:fleetform:node", "Values": [LENT]},
        {"Name": "instance-state-name", "Values": list(states)}])["Reservations"]
    return [i for r in found for i in r["Instances"]]


def _edge(cluster, config_path, now: datetime) -> subprocess.CompletedProcess:
    # pool-edge runs in Berlin time here: it must hand scontrol UTC itself
    return slurm(cluster, "env", "TZ=Europe/Berlin", sys.executable, str(PROGRAM), "--config", str(config_path),
                 "--now", now.isoformat())


def test_lend_on_the_real_cluster(cluster, tmp_path):
    wait_idle(cluster, {"train-001", "train-002"})
    tz = ZoneInfo("Europe/Berlin")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    soon = (now + timedelta(minutes=20)).astimezone(tz)
    begin_local = (soon + timedelta(hours=1)).replace(minute=0) if soon.minute else soon
    begin = begin_local.astimezone(UTC)
    until = int((begin - now).total_seconds() // 60)
    lag = 10  # the release lag (hybrid-pool's: EKS's 5-minute drain cut and the Capacity Block's clean-up)
    config = {"pool": "p5-block", "time_zone": "Europe/Berlin", "lead_minutes": until + 60, "on_window": "finish",
              "release_minutes": lag,
              "lends": [{"days": [begin_local.weekday()], "start": begin_local.hour, "hours": 2, "nodes": LENT}]}
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(config))

    made = _edge(cluster, path, now)
    assert made.returncode == 0, made.stderr
    name = f"pool-p5-block-{begin.strftime('%Y%m%dT%H%MZ')}"
    shown = slurm(cluster, "env", "TZ=UTC", "scontrol", "show", "reservation", name).stdout
    assert f"StartTime={begin.strftime('%Y-%m-%dT%H:%M:%S')}" in shown, shown
    closes = begin + timedelta(hours=2)  # the inference window's end; its nodes are gone `lag` minutes later
    assert f"EndTime={(closes + timedelta(minutes=lag)).strftime('%Y-%m-%dT%H:%M:%S')}" in shown, shown
    assert f"Nodes={LENT}" in shown and "Users=root" in shown, shown

    # a job that ends 10 minutes before the lend starts runs on the lent node (slurmctld resumes it through moto)
    fits = slurm(cluster, "sbatch", "--parsable", "-N1", "-w", LENT, f"--time={until - 10}", "--wrap", "hostname")
    assert fits.returncode == 0, fits.stderr
    fits_id = fits.stdout.strip().split(";")[0]
    # one that would run 10 minutes into the lend is accepted by sbatch but never started there
    crosses = slurm(cluster, "sbatch", "--parsable", "-N1", "-w", LENT, f"--time={until + 10}", "--wrap", "hostname")
    assert crosses.returncode == 0, crosses.stderr
    crosses_id = crosses.stdout.strip().split(";")[0]
    done = _wait("the fitting job completed", cluster, lambda: (s := _job(cluster, fits_id)).get("JobState") in
                 ("COMPLETED", "FAILED", "NODE_FAIL", "TIMEOUT", "CANCELLED") and s)
    assert done["JobState"] == "COMPLETED" and done["NodeList"] == LENT, done
    assert len(_instances(cluster, ("running",))) == 1
    # the node is up and idle now, and still the long job waits: not before the reservation's end
    wait_idle(cluster, {LENT})
    time.sleep(3)  # a scheduling pass with the node idle (SchedulerParameters of the rendered slurm.conf)
    waiting = _job(cluster, crosses_id)
    assert waiting["JobState"] == "PENDING", waiting
    assert slurm(cluster, "scancel", crosses_id).returncode == 0

    # the edge: the test's clock at the lend's start. The reservation is already made; the node is powered down,
    # the rendered SuspendProgram terminates its instance in moto
    edge = _edge(cluster, path, begin)
    assert edge.returncode == 0 and edge.stderr == "", edge.stderr
    _wait("the lent node's instance terminated", cluster,
          lambda: not _instances(cluster, ("pending", "running")) and _instances(cluster, ("shutting-down", "terminated")))
    node = _wait("the lent node powered down", cluster,
                 lambda: "POWERED_DOWN" in (o := slurm(cluster, "scontrol", "show", "node", LENT).stdout) and o)
    assert "Reason=pool-p5-block" in node or "DRAIN" not in node, node
    # a later round at the same clock changes nothing
    again = _edge(cluster, path, begin + timedelta(minutes=1))
    assert again.returncode == 0 and again.stderr == "", again.stderr

    # the hour the window closes: the inference fleet's nodes still drain and terminate, so the lend runs on (the
    # round keeps the reservation and the node stays powered down: no resume into capacity still held)
    closing = _edge(cluster, path, closes)
    assert closing.returncode == 0 and closing.stderr == "", closing.stderr
    assert name in slurm(cluster, "scontrol", "show", "reservation", name).stdout
    assert "POWERED_DOWN" in slurm(cluster, "scontrol", "show", "node", LENT).stdout
    # after the lend, the lag past the hour: the reservation's end (see the module docstring); no round makes it
    # again, the node is a CLOUD node again and a job powers it up through moto
    assert slurm(cluster, "scontrol", "delete", f"ReservationName={name}").returncode == 0
    after = _edge(cluster, path, closes + timedelta(minutes=lag))
    assert after.returncode == 0 and after.stderr == "", after.stderr
    assert "pool-p5-block" not in slurm(cluster, "scontrol", "show", "reservation").stdout
    back = slurm(cluster, "sbatch", "--parsable", "-N1", "-w", LENT, "--time=5", "--wrap", "hostname")
    assert back.returncode == 0, back.stderr
    back_id = back.stdout.strip().split(";")[0]
    done = _wait("the job after the lend completed", cluster, lambda: (s := _job(cluster, back_id)).get("JobState") in
                 ("COMPLETED", "FAILED", "NODE_FAIL", "TIMEOUT", "CANCELLED") and s)
    assert done["JobState"] == "COMPLETED" and done["NodeList"] == LENT, str(done) + _logs(cluster["machines"])
    assert len(_instances(cluster, ("running",))) == 1
