"""bin/pool-edge, the training side of a pool (templates/slurm/bin/pool-edge): its occurrences are the model's
ledger (every week of a year, Berlin's clock changes included), its scontrol commands at a fixed clock, and the
reservations it makes in the real slurmctld (Debian's slurm-wlm 22.05, tests/slurmctld.py): a job whose time limit
would run past the lend's start is not started on the lent nodes, one that ends before it is. The clock is the
test's: the lend's start is computed from it, nothing waits for a window to open."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import slurmctld
from conftest import ROOT, require
from fleetform import pool as pools
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.render.output import write

PROGRAM = ROOT / "templates/slurm/bin/pool-edge"
HYBRID = ROOT / "blueprints/hybrid-pool.yaml"
UTC = timezone.utc


def _program():
    loader = importlib.machinery.SourceFileLoader("pool_edge", str(PROGRAM))
    spec = importlib.util.spec_from_loader("pool_edge", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _rendered():
    model = check(HYBRID).model
    files = render(model)
    return model, json.loads(files["train/slurm/bin/pool.json"])


def test_the_program_lends_exactly_when_the_ledger_says():
    """For each week of 2026, the program's lend occurrences are the stretches in which the model's ledger gives
    training fewer than its peak nodes: in UTC, across both clock changes."""
    model, config = _rendered()
    edge = _program()
    (pool,) = model.pools
    tz = ZoneInfo(config["time_zone"])
    week = date(2026, 1, 5)
    checked = 0
    while week.year == 2026:
        start, end = pools.week_bounds(week, tz)
        ledger = pools.ledger(pool, 8, week)
        lent = [(h.start, h.start + pools.HOUR) for h in ledger.hours if h.nodes["train"] < ledger.peak("train")]
        merged: list[tuple[datetime, datetime]] = []
        for b, f in lent:
            if merged and merged[-1][1] == b:
                merged[-1] = (merged[-1][0], f)
            else:
                merged.append((b, f))
        occurrences = sorted(o for lend in config["lends"] for o in edge.occurrences(lend, tz, start, end))
        assert occurrences == merged, week
        # with the lend's start and the release lag: each lend starts exactly 32 real minutes before the ledger's
        # hour, in every week (a window opening at 08:00 never meets Berlin's change at 02:00/03:00), and ends 10 real
        # minutes after the ledger's hour, when serve's nodes have drained and their instances are cleaned up
        lead = timedelta(minutes=config["warmup_minutes"])
        lag = timedelta(minutes=config["release_minutes"])
        early = sorted(o for lend in config["lends"]
                       for o in edge.occurrences(lend, tz, start, end + lead, config["warmup_minutes"],
                                                 config["release_minutes"]))
        assert early == [(b - lead, f + lag) for b, f in merged], week
        checked += 1
        week += timedelta(days=7)
    assert checked == 52
    # spring: Monday 30 March 08:00 CEST is 06:00 UTC; the Friday before, 08:00 CET was 07:00 UTC
    spring = list(edge.occurrences(config["lends"][0], tz, datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC)))
    assert [b.hour for b, _ in spring] == [7, 6]


def test_dry_run_at_a_fixed_clock(tmp_path):
    _, config = _rendered()
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(config))

    def run(now: str) -> list[str]:
        result = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", now, "--dry-run"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    # the lend's start: the lead (node ready 8 min + the image's pull 288 s - the 2 min of it pre-pulled while the node
    # joins + the startup probe budget 760 s) + a keeper round 60 s + the Capacity Block's clean-up of the lent
    # instances 300 s, rounded up; the lag: the drain, EKS's 5-minute cut (serve's PodDisruptionBudget lets its 40 pods
    # on the 5 nodes go one at a time) + the clean-up 300 s
    assert (config["warmup_minutes"], config["release_minutes"]) == (30, 10)
    # Thursday 26 March 20:30 CET: Friday's lend (08:00 CET = 07:00 UTC, 30 min earlier, to 20:10 CET = 19:10 UTC,
    # 10 min after serve's window closes) is within the 720-minute lead
    assert run("2026-03-26T19:30:00Z") == [
        "scontrol create reservation ReservationName=pool-p5-block-20260327T0630Z StartTime=2026-03-27T06:30:00 "
        "Duration=760 Nodes=train-[003-007] Users=root Flags=IGNORE_JOBS"]
    # Friday 20:05 CET: serve's window closed at 20:00, its nodes are still draining and terminating: the lend runs on
    # (the reservation holds the nodes to 19:10 UTC, so Slurm resumes none of them into capacity still held)
    assert run("2026-03-27T19:05:00Z") == [
        "scontrol create reservation ReservationName=pool-p5-block-20260327T0630Z StartTime=2026-03-27T19:06:00 "
        "Duration=4 Nodes=train-[003-007] Users=root Flags=IGNORE_JOBS",
        "scontrol update NodeName=train-[003-007] State=POWER_DOWN_ASAP Reason=pool-p5-block"]
    # Friday 20:10 CET: the lend is over and nothing starts within 12 h (the next lend is Monday's)
    assert run("2026-03-27T19:10:00Z") == []
    assert run("2026-03-27T19:30:00Z") == []
    # the first Monday of summer time (08:00 CEST = 06:00 UTC): at 05:29 UTC the lend is a minute away, at 05:30 it is
    # under way and its nodes are powered down, 30 minutes before the window opens
    assert not [c for c in run("2026-03-30T05:29:00Z") if "POWER_DOWN" in c]
    assert run("2026-03-30T05:30:00Z") == [
        "scontrol create reservation ReservationName=pool-p5-block-20260330T0530Z StartTime=2026-03-30T05:31:00 "
        "Duration=759 Nodes=train-[003-007] Users=root Flags=IGNORE_JOBS",
        "scontrol update NodeName=train-[003-007] State=POWER_DOWN_ASAP Reason=pool-p5-block"]
    # a clock without an offset is refused, not read as local time
    bad = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", "2026-03-30T06:00:00", "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "needs an offset" in bad.stderr


def test_the_rendered_keeper_runs_it():
    keeper = (ROOT / "templates/slurm/bin/keeper").read_text()
    assert 'if (here / "pool.json").exists():' in keeper and '[sys.executable, str(here / "pool-edge")]' in keeper
    files = render(check(HYBRID).model)
    assert files["train/slurm/bin/pool-edge"] == PROGRAM.read_bytes()
    assert not any(name.endswith("pool-edge") for name in render(check(ROOT / "blueprints/reference.yaml").model))


def test_shellcheck_free_python_compiles():
    compile(PROGRAM.read_text(), str(PROGRAM), "exec")


def _real_slurmctld_lend(tmp_path: Path) -> tuple[dict, datetime, datetime]:
    """For a test against the real slurmctld: the programs it needs (CI fails without them), the hybrid pool
    rendered into tmp_path/rendered, pool.json's config, the test's clock (UTC, whole minutes) and the first whole
    Berlin hour at least 20 minutes away, where a lend may start with time to make its reservation."""
    require("scontrol", "slurm-client")
    if not slurmctld.available():
        require("slurmctld", "slurmctld")
    model, config = _rendered()
    write(render(model), tmp_path / "rendered")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    soon = (now + timedelta(minutes=20)).astimezone(ZoneInfo("Europe/Berlin"))
    return config, now, (soon + timedelta(hours=1)).replace(minute=0) if soon.minute else soon


def test_real_slurmctld_keeps_crossing_jobs_off_lent_nodes(tmp_path):
    """The rendered hybrid-pool Slurm files under the real slurmctld; pool-edge makes the reservation with the
    real scontrol for a lend starting at the next whole hour at least 20 minutes away (Berlin time, from the
    test's clock). `sbatch --test-only` asks slurmctld where and when a job would start: a job on a lent node
    that ends before the lend starts is placed at once, one that would run past it is refused on those nodes; a
    node that is not lent takes the long job."""
    config, now, begin_local = _real_slurmctld_lend(tmp_path)
    begin = begin_local.astimezone(UTC)
    until = int((begin - now).total_seconds() // 60)
    config = {**config, "lead_minutes": until + 60, "warmup_minutes": 0,
              "lends": [{"days": [begin_local.weekday()], "start": begin_local.hour, "hours": 2,
                         "nodes": "train-[003-005]"}]}
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(config))
    extra = "DisableRootJobs=NO\n"  # the test submits as its own user, root in CI
    with slurmctld.running(tmp_path / "rendered/train/slurm", tmp_path / "ctld", extra=extra) as conf:
        env = {**os.environ, "SLURM_CONF": str(conf), "TZ": "UTC"}
        # the program runs in another zone than the reservation is read back in: it must hand scontrol UTC itself
        berlin = {**env, "TZ": "Europe/Berlin"}
        made = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", now.isoformat()],
                              env=berlin, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        name = f"pool-p5-block-{begin.strftime('%Y%m%dT%H%MZ')}"
        shown = subprocess.run(["scontrol", "show", "reservation", name], env=env, capture_output=True, text=True,
                               timeout=60).stdout
        assert f"StartTime={begin.strftime('%Y-%m-%dT%H:%M:%S')}" in shown, shown
        # the lend ends the release lag (10 min) after its two hours: the inference fleet's nodes drain and terminate
        lag = timedelta(minutes=config["release_minutes"])
        assert config["release_minutes"] == 10
        assert f"EndTime={(begin + timedelta(hours=2) + lag).strftime('%Y-%m-%dT%H:%M:%S')}" in shown, shown
        assert "Nodes=train-[003-005]" in shown and "Users=root" in shown, shown
        # a second round finds it made and changes nothing
        again = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", now.isoformat()],
                               env=berlin, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0 and again.stderr == "", again.stderr

        def test_only(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(["sbatch", "--test-only", "-N1", *args, "--wrap", "true"], env=env,
                                  capture_output=True, text=True, timeout=60)

        fits = test_only("-w", "train-003", f"--time={until - 10}")
        assert fits.returncode == 0 and re.search(r"to start at \S+ using \d+ processors on nodes train-003", fits.stderr), fits.stderr
        crosses = test_only("-w", "train-003", f"--time={until + 10}")
        assert crosses.returncode != 0 and "Requested node configuration is not available" in crosses.stderr, crosses.stderr
        elsewhere = test_only("-w", "train-001", f"--time={until + 10}")
        assert elsewhere.returncode == 0 and "on nodes train-001" in elsewhere.stderr, elsewhere.stderr
        # at the hour the window closes the lent node takes no job yet (the inference fleet's instance still holds
        # its capacity); at the end of the lag it does
        closes = begin + timedelta(hours=2)
        early = test_only("-w", "train-003", "--time=5", f"--begin={closes.strftime('%Y-%m-%dT%H:%M:%S')}")
        assert early.returncode != 0 and "Requested node configuration is not available" in early.stderr, early.stderr
        back = test_only("-w", "train-003", "--time=5", f"--begin={(closes + lag).strftime('%Y-%m-%dT%H:%M:%S')}")
        assert back.returncode == 0 and re.search(
            rf"to start at {closes + lag:%Y-%m-%dT%H:%M:%S} using \d+ processors on nodes train-003", back.stderr), back.stderr

        # the edge: a lend that began an hour ago is reserved from now on and its nodes are powered down
        started = (now - timedelta(hours=1)).astimezone(begin_local.tzinfo).replace(minute=0)
        under_way = {**config, "lends": [{"days": [started.weekday()], "start": started.hour, "hours": 3,
                                          "nodes": "train-[006-007]"}]}
        path.write_text(json.dumps(under_way))
        edge = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", now.isoformat()],
                              env=berlin, capture_output=True, text=True, timeout=120)
        assert edge.returncode == 0, edge.stderr
        nodes = subprocess.run(["scontrol", "show", "node", "train-006"], env=env, capture_output=True, text=True,
                               timeout=60).stdout
        assert "POWER" in nodes and "Reason=pool-p5-block" in nodes, nodes


def test_hostlists_expand_and_collect():
    edge = _program()
    assert edge.expand("train-[003-005,007]") == ["train-003", "train-004", "train-005", "train-007"]
    assert edge.expand("train-007") == ["train-007"]
    assert edge.expand("a-[1-2],b-09") == ["a-1", "a-2", "b-09"]
    assert edge.collect(["train-007", "train-003", "train-004", "train-005"]) == "train-[003-005,007]"
    assert edge.collect(["train-006"]) == "train-006"
    assert edge.collect(["train-009", "train-010"]) == "train-[009-010]"


def _dry(tmp_path, config: dict, now: str) -> list[str]:
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(config))
    result = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", now, "--dry-run"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_touching_and_overlapping_lends_are_one_reservation_per_node_stretch(tmp_path):
    """Slurm refuses a second reservation of a node in a time another one holds, touching ends included: a lend of
    five nodes from 08:00 to 12:00 and one of three of them from 12:00 to 20:00 (Monday 5 January 2026, CET) are
    two reservations that do not share a node: 005-007 08:00-20:00 and 003-004 08:00-12:00."""
    base = {"pool": "p", "time_zone": "Europe/Berlin", "lead_minutes": 720, "on_window": "finish"}
    touching = {**base, "lends": [{"days": [0], "start": 8, "hours": 4, "nodes": "train-[003-007]"},
                                  {"days": [0], "start": 12, "hours": 8, "nodes": "train-[005-007]"}]}
    assert _dry(tmp_path, touching, "2026-01-04T23:00:00Z") == [
        "scontrol create reservation ReservationName=pool-p-20260105T0700Z StartTime=2026-01-05T07:00:00 "
        "Duration=240 Nodes=train-[003-004] Users=root Flags=IGNORE_JOBS",
        "scontrol create reservation ReservationName=pool-p-20260105T0700Z-2 StartTime=2026-01-05T07:00:00 "
        "Duration=720 Nodes=train-[005-007] Users=root Flags=IGNORE_JOBS"]
    # at 12:00 the second lend has begun: the reservation of 005-007 is the one made at 07:00 ahead, the program
    # powers 005-007 down (003-004 came back at 11:00 UTC)
    assert _dry(tmp_path, touching, "2026-01-05T11:00:00Z")[-1] == \
        "scontrol update NodeName=train-[005-007] State=POWER_DOWN_ASAP Reason=pool-p"
    # a lend seen only later (Monday evening's, beyond a short lead) still extends the stretch it touches: the
    # stretch is computed a week around the clock, so every round names and sizes it alike
    short = {**touching, "lead_minutes": 60}
    assert _dry(tmp_path, short, "2026-01-05T06:30:00Z")[1].endswith("Duration=720 Nodes=train-[005-007] Users=root Flags=IGNORE_JOBS")
    # overlapping lends (one inside another) of nodes they share: one reservation of all, the longer span
    overlapping = {**base, "lends": [{"days": [0], "start": 8, "hours": 3, "nodes": "train-[003-007]"},
                                     {"days": [0], "start": 9, "hours": 4, "nodes": "train-[006-007]"}]}
    assert _dry(tmp_path, overlapping, "2026-01-04T23:00:00Z") == [
        "scontrol create reservation ReservationName=pool-p-20260105T0700Z StartTime=2026-01-05T07:00:00 "
        "Duration=180 Nodes=train-[003-005] Users=root Flags=IGNORE_JOBS",
        "scontrol create reservation ReservationName=pool-p-20260105T0700Z-2 StartTime=2026-01-05T07:00:00 "
        "Duration=300 Nodes=train-[006-007] Users=root Flags=IGNORE_JOBS"]
    # a lend over midnight (Sunday 22:00 - Monday 02:00) touching Monday's from 02:00: one stretch
    night = {**base, "lends": [{"days": [6], "start": 22, "hours": 4, "nodes": "train-007"},
                               {"days": [0], "start": 2, "hours": 6, "nodes": "train-007"}]}
    assert _dry(tmp_path, night, "2026-01-04T20:00:00Z") == [
        "scontrol create reservation ReservationName=pool-p-20260104T2100Z StartTime=2026-01-04T21:00:00 "
        "Duration=600 Nodes=train-007 Users=root Flags=IGNORE_JOBS"]


def test_real_slurmctld_takes_overlapping_lends_of_different_node_sets(tmp_path):
    """Two lends with the real scontrol: five nodes for two hours and three of them from an hour in for two hours.
    Each lend its own reservation, Slurm refused the second ("Requested reservation overlaps with another
    reservation"); merged per node, every reservation is made. (Touching ones, one ending the second the next
    starts, Slurm 22.05 takes as they are: seen here; they are merged all the same, one stretch per node.)"""
    config, now, first = _real_slurmctld_lend(tmp_path)
    second = (first.astimezone(UTC) + timedelta(hours=1)).astimezone(first.tzinfo)
    config = {**config, "lead_minutes": 240, "warmup_minutes": 0, "release_minutes": 0,
              "lends": [{"days": [first.weekday()], "start": first.hour, "hours": 2, "nodes": "train-[003-007]"},
                        {"days": [second.weekday()], "start": second.hour, "hours": 2, "nodes": "train-[005-007]"}]}
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(config))
    with slurmctld.running(tmp_path / "rendered/train/slurm", tmp_path / "ctld") as conf:
        env = {**os.environ, "SLURM_CONF": str(conf), "TZ": "UTC"}
        made = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", now.isoformat()],
                              env=env, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        shown = subprocess.run(["scontrol", "show", "reservation"], env=env, capture_output=True, text=True,
                               timeout=60).stdout
        begin = first.astimezone(UTC)
        assert re.search(rf"StartTime={begin:%Y-%m-%dT%H:%M:%S} EndTime={begin + timedelta(hours=2):%Y-%m-%dT%H:%M:%S}"
                         r".*\n.*Nodes=train-\[003-004\]", shown), shown
        assert re.search(rf"StartTime={begin:%Y-%m-%dT%H:%M:%S} EndTime={begin + timedelta(hours=3):%Y-%m-%dT%H:%M:%S}"
                         r".*\n.*Nodes=train-\[005-007\]", shown), shown


def _with_fake_scontrol(tmp_path, lends: list[dict], answers: str):
    """pool.json with these lends, and a fake scontrol first on PATH that records its arguments in `calls` and
    prints what the `case` branches of answers say. Returns (the fake, the calls file, a run(now) -> its calls)."""
    _, config = _rendered()
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({**config, "lends": lends, "warmup_minutes": 0, "release_minutes": 0}))  # hours as written
    log = tmp_path / "calls"
    fake = tmp_path / "bin/scontrol"
    fake.parent.mkdir()
    fake.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$*" in
{answers}esac
exit 0
""")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}

    def run(now: str) -> list[str]:
        log.unlink(missing_ok=True)
        result = subprocess.run([sys.executable, str(PROGRAM), "--config", str(path), "--now", now],
                                env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return log.read_text().splitlines() if log.exists() else []
    return fake, run


def test_a_lend_under_way_powers_down_only_nodes_not_yet_powered_down(tmp_path):
    """The keeper runs pool-edge every minute of a lend. Slurm's update_node (node_mgr.c, 22.05) does not treat
    POWER_DOWN_ASAP on a node already POWERED_DOWN as a no-op: it logs "power down request repeating", clears
    POWERED_DOWN, drains the node again, and power_save.c runs the SuspendProgram once more and keeps the node
    unavailable for SuspendTimeout. So each round asks for the nodes' state and powers down only the others.
    A fake scontrol on PATH stands in for slurmctld: it records its arguments and shows train-003 and train-004
    powered down (or powering down), train-005 idle."""
    fake, run = _with_fake_scontrol(tmp_path, [{"days": [0], "start": 8, "hours": 12, "nodes": "train-[003-005]"}], """\
  "-o show node "*)
    echo "NodeName=train-003 Arch=x86_64 CoresPerSocket=48 State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=2"
    echo "NodeName=train-004 Arch=x86_64 CoresPerSocket=48 State=IDLE+DRAIN+CLOUD+POWERING_DOWN ThreadsPerCore=2"
    echo "NodeName=train-005 Arch=x86_64 CoresPerSocket=48 State=IDLE+CLOUD ThreadsPerCore=2"
    exit 0;;
  "show reservation "*) exit 0;;
""")
    # Monday 5 January 2026, 10:00 CET: the lend is two hours under way
    updates = [c for c in run("2026-01-05T09:00:00Z") if c.startswith("update ")]
    assert updates == ["update NodeName=train-005 State=POWER_DOWN_ASAP Reason=pool-p5-block"], updates
    # all powered down: the round changes nothing
    fake.write_text(fake.read_text().replace("State=IDLE+CLOUD ThreadsPerCore", "State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore"))
    assert not [c for c in run("2026-01-05T09:00:00Z") if c.startswith("update ")]


def test_a_schedule_change_deletes_the_reservations_made_under_the_old_one(tmp_path):
    """Reservations are made up to lead_minutes ahead. After a change of the pool's schedule (other hours or other
    nodes), those of the old schedule must go: kept, they hold the old nodes for root, and the new lend's
    reservation over the same nodes at an overlapping time is refused (ESLURM_RESERVATION_OVERLAP) every round.
    A fake scontrol shows one reservation as this round wants it, one of the old schedule and one of another
    pool; only the old one is deleted, and only the missing one is created."""
    fake, run = _with_fake_scontrol(tmp_path, [{"days": [0], "start": 9, "hours": 10, "nodes": "train-[004-007]"}], """\
  "-o show reservation")
    echo "ReservationName=pool-p5-block-20260105T0700Z StartTime=2026-01-05T07:00:00 EndTime=2026-01-05T19:00:00 Duration=12:00:00 Nodes=train-[003-007] NodeCnt=5 Users=root"
    echo "ReservationName=pool-other-20260105T0700Z StartTime=2026-01-05T07:00:00 EndTime=2026-01-05T19:00:00 Duration=12:00:00 Nodes=train-[001-002] NodeCnt=2 Users=root"
    exit 0;;
""")
    # Sunday 4 January 2026, 22:00 CET: Monday's 09:00 lend is within the lead
    calls = run("2026-01-04T21:00:00Z")
    assert [c for c in calls if c.startswith(("delete", "create"))] == [
        "delete ReservationName=pool-p5-block-20260105T0700Z",
        "create reservation ReservationName=pool-p5-block-20260105T0800Z StartTime=2026-01-05T08:00:00 Duration=600 "
        "Nodes=train-[004-007] Users=root Flags=IGNORE_JOBS"], calls
    # the next round: slurmctld holds the new one as wanted; nothing is deleted or made
    fake.write_text(fake.read_text().replace("20260105T0700Z StartTime=2026-01-05T07:00:00 EndTime=2026-01-05T19:00:00 "
                                             "Duration=12:00:00 Nodes=train-[003-007]",
                                             "20260105T0800Z StartTime=2026-01-05T08:00:00 EndTime=2026-01-05T18:00:00 "
                                             "Duration=10:00:00 Nodes=train-[004-007]"))
    assert not [c for c in run("2026-01-04T21:00:00Z") if c.startswith(("delete", "create"))]
