"""Slurm accounting in a real cluster (issue 20): Debian's MariaDB, slurmdbd, slurmctld and one slurmd
on 127.0.0.1 run with the rendered slurmdbd.conf, the rendered accounting lines of slurm.conf and
the rendered accounts.cfg of an on-prem fleet with teams (blueprints/onprem-ib.yaml with an
`accounting` block and three teams; the fleet's nodes have 8 GPUs each).

- `sacctmgr -i load` takes the rendered accounts.cfg, and `sacctmgr show assoc` then lists every
  team's account with the budget (GrpTRESMins=gres/gpu=<hours x 60>) and limits the blueprint set;
- a job of a team within its budget runs, and `sacct` shows it COMPLETED, charged to the team's
  account, with its GPU in AllocTRES;
- a job of a team whose budget of 1 GPU-hour (60 GPU-minutes) it would pass (8 GPUs for 10 minutes:
  80) waits with the reason Slurm gives, AssocGrpGRESMinutes (AccountingStorageEnforce=safe: it would
  not finish within the budget);
- a job asking for more GPUs than its team's max_gpus_per_job waits with AssocMaxGRESPerJob;
- a job naming no team's account is refused at submission (enforce=associations).

Test-only overrides (one machine plays the database server, the controller and the node):
tests/slurmctld.py's for slurm.conf (localhost controller, auth/none, state and logs in a temp dir,
NodeAddr=127.0.0.1) but with the rendered accounting lines kept, AccountingStorageHost=localhost and
AccountingStoragePort a free port; as tests/test_health_cluster.py: SlurmUser and DisableRootJobs
for the user running the test, one free SlurmdPort, config_overrides (this host has not 224 CPUs),
proctrack/linuxproc, task/none and jobacct_gather/linux instead of the cgroup plugins (no cgroup
delegation in a test container), gres.conf's /dev/nvidia[0-7] as links to /dev/null, no
HealthCheckProgram, Prolog or Epilog (their GPU checks: no GPUs here). In slurmdbd.conf: AuthType=auth/none, DbdHost=localhost and DbdPort
the same free port, SlurmUser, LogFile and PidFile into the temp dir, and the Include'd storage file
in the temp dir with the test's MariaDB (StorageHost 127.0.0.1, StoragePort a free port, StorageUser,
StoragePass), written by the AWS controller's bootstrap code (storage_lines, as from an RDS secret)
with a password holding `#` and `\\`, which Slurm's parser must read back whole. The blueprint's teams list the user running the test, who submits the
jobs. Every daemon is stopped at the end; every wait has a timeout. In CI (CI set) a missing program
fails the test.
"""

from __future__ import annotations

import getpass
import importlib.machinery
import importlib.util
import json
import os
import sys
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import slurmctld
from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render

pytestmark = pytest.mark.cluster

NODE = "dgx-01"
PROGRAMS = ("slurmctld", "slurmd", "slurmdbd", "sacctmgr", "sacct", "sbatch", "squeue", "scontrol",
            "mariadbd", "mariadb-install-db", "mariadb")
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
USER = getpass.getuser()

TEAMS = f"""\
      accounting:
        host: db.example
        keep_job_months: 24
      teams:
        - name: nlp
          users: [{USER}, alice]
          gpu_hours_per_month: 20000
          max_gpus_per_job: 4
          fair_share: 60
          priority: 100
        - name: vision
          users: [carol, {USER}]
          gpu_hours_per_month: 1
          fair_share: 40
        - name: infra
          users: [{USER}]
"""


def blueprint() -> str:
    """blueprints/onprem-ib.yaml with accounting and teams in its Slurm scheduler."""
    text = (ROOT / "blueprints/onprem-ib.yaml").read_text()
    anchor = "        nodes_per_switch: 2         # 3 leaf switches under one spine\n"
    assert anchor in text
    return text.replace(anchor, anchor + TEAMS)


def _which(program: str) -> str | None:
    return shutil.which(program) or next((f"{p}/{program}" for p in SBIN if os.access(f"{p}/{program}", os.X_OK)),
                                         None)


def _missing() -> str | None:
    gone = [p for p in PROGRAMS if not _which(p)]
    return (f"{', '.join(gone)} not installed (apt-get install slurmctld slurmd slurmdbd slurm-client mariadb-server)"
            if gone else None)


def _log(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else f"({path} missing)"


def _wait(what: str, done, timeout: float, *logs: Path, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while True:
        result = done()
        if result:
            return result
        if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
            raise AssertionError(f"{what}\n" + "\n".join(f"--- {log}\n{_log(log)}" for log in logs))
        time.sleep(0.3)


@pytest.fixture(scope="module")
def cluster():
    yield from slurmctld.cluster_fixture("ffa-", "FLEETFORM_KEEP_ACCOUNTING_CLUSTER", _missing(), _start)


def _start_mariadb(tmp: Path, procs: list) -> tuple[int, str]:
    """A MariaDB of its own on 127.0.0.1 and a free port, with the user slurmdbd logs in as; returns
    (port, that user's password)."""
    data, sock = tmp / "mysql", tmp / "mysql.sock"
    as_root = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--skip-test-db",
                    "--auth-root-authentication-method=normal", *as_root], check=True, capture_output=True, timeout=120)
    port = slurmctld._free_port()
    procs.append(subprocess.Popen([_which("mariadbd"), "--no-defaults", f"--datadir={data}", f"--socket={sock}",
                                   f"--port={port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                                   f"--log-error={tmp / 'mysql.err'}", f"--pid-file={tmp / 'mysql.pid'}", *as_root],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    client = [_which("mariadb"), "--no-defaults", f"--socket={sock}", "-u", "root"]
    _wait("MariaDB did not come up", lambda: subprocess.run(client + ["-e", "select 1"], capture_output=True,
                                                            timeout=30).returncode == 0,
          60, tmp / "mysql.err", proc=procs[-1])
    # `#` and `\` as an RDS-generated password may have them: the storage file must escape them for
    # Slurm's parser (bin/bootstrap slurm_value), or slurmdbd logs in with a cut password
    password = secrets.token_hex(8) + "#x\\y" + secrets.token_hex(8)
    literal = password.replace("\\", "\\\\")
    subprocess.run(client + ["-e", f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{literal}'; "
                                   "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"],
                   check=True, capture_output=True, timeout=30)
    return port, password


def _slurmdbd_conf(rendered: str, tmp: Path, db_port: int, dbd_port: int) -> str:
    out = []
    for line in rendered.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else None
        if key in ("AuthType", "DbdHost", "DbdPort", "SlurmUser", "LogFile", "PidFile", "StorageHost", "StoragePort",
                   "StorageUser"):
            continue
        if line.startswith("Include "):
            line = f"Include {tmp / 'slurmdbd-storage.conf'}"
        out.append(line)
    return "\n".join(out + ["AuthType=auth/none", "DbdHost=localhost", f"DbdPort={dbd_port}", f"SlurmUser={USER}",
                            f"LogFile={tmp}/slurmdbd.log", f"PidFile={tmp}/slurmdbd.pid"]) + "\n"


def _storage_lines(tmp: Path, password: str, db_port: int) -> str:
    """The included storage file as the AWS controller's bootstrap writes it from an RDS secret: the
    rendered bootstrap of an AWS blueprint with accounting, its storage_lines()."""
    import awslocal

    slurm = awslocal.render_fleet(tmp / "aws", awslocal.blueprint("2").replace(
        "partitions: [{name: gpu, default: true}]}", "partitions: [{name: gpu, default: true}], accounting: {}}"))
    sys.path.insert(0, str(slurm / "bin"))
    try:
        loader = importlib.machinery.SourceFileLoader("fleetform_bootstrap", str(slurm / "bin" / "bootstrap"))
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
        loader.exec_module(module)
    finally:
        sys.path.remove(str(slurm / "bin"))
    return module.storage_lines(json.dumps({"username": "slurm", "password": password}), "127.0.0.1", str(db_port))


def _slurm_conf(rendered: str, tmp: Path, dbd_port: int) -> str:
    text = slurmctld._localize(rendered, tmp)
    out = []
    for line in text.splitlines():
        key = line.split("=", 1)[0]
        if key in ("ProctrackType", "TaskPlugin", "PrologFlags", "HealthCheckProgram", "HealthCheckInterval",
                   "HealthCheckNodeState", "DisableRootJobs", "SlurmUser", "AccountingStorageType",
                   "AccountingStorageHost", "AccountingStoragePort", "JobAcctGatherType", "Prolog", "Epilog"):
            continue
        out.append(line)
    # slurmctld._localize drops the accounting lines (it has no slurmdbd): the rendered TRES and
    # enforcement come back as rendered
    out += [line for line in rendered.splitlines()
            if line.split("=", 1)[0] in ("AccountingStorageTRES", "AccountingStorageEnforce")]
    out += ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={dbd_port}", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/linux", f"SlurmUser={USER}", "DisableRootJobs=NO",
            f"SlurmdPort={slurmctld._free_port()}", "SlurmdParameters=config_overrides",
            f"SlurmdLogFile={tmp}/slurmd.log"]
    return "\n".join(out) + "\n"


def _start(tmp: Path, procs: list) -> dict:
    (tmp / "blueprint.yaml").write_text(blueprint())
    result = check(tmp / "blueprint.yaml")
    assert result.model is not None, result
    etc = tmp / "etc"
    rendered = {}
    for name, data in render(result.model).items():
        if name.startswith("train/slurm/"):
            rendered[name[len("train/slurm/"):]] = data.decode()
            target = etc / name[len("train/slurm/"):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    for folder in ("state", "spool", "dev"):
        (tmp / folder).mkdir()
    for i in range(8):
        (tmp / "dev" / f"nvidia{i}").symlink_to("/dev/null")
    gres = etc / "gres.conf"
    gres.write_text(gres.read_text().replace("File=/dev/nvidia", f"File={tmp}/dev/nvidia"))

    db_port, password = _start_mariadb(tmp, procs)
    dbd_port = slurmctld._free_port()
    conf = etc / "slurm.conf"
    conf.write_text(_slurm_conf(rendered["slurm.conf"], tmp, dbd_port))
    for line in ("AccountingStorageTRES=gres/gpu", "AccountingStorageEnforce=associations,limits,qos,safe",
                 "PriorityType=priority/multifactor", "PriorityUsageResetPeriod=MONTHLY"):
        assert line in conf.read_text().splitlines(), line  # the rendered values, kept
    dbd_conf = etc / "slurmdbd.conf"
    dbd_conf.write_text(_slurmdbd_conf(rendered["slurmdbd.conf"], tmp, db_port, dbd_port))
    secret = tmp / "slurmdbd-storage.conf"
    (tmp / "aws").mkdir()
    secret.write_text(_storage_lines(tmp, password, db_port))
    for file in (dbd_conf, secret):
        file.chmod(0o600)  # slurmdbd refuses a slurmdbd.conf others can read
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = {"tmp": tmp, "conf": conf, "env": env, "rendered": rendered}

    procs.append(subprocess.Popen([_which("slurmdbd"), "-D"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True, env=env))
    _wait("slurmdbd did not come up", lambda: run(cluster, "sacctmgr", "-n", "list", "cluster").returncode == 0,
          90, tmp / "slurmdbd.log", proc=procs[-1])
    procs.append(subprocess.Popen([slurmctld.SLURMCTLD, "-D", "-i", "-f", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True, env=env))
    _wait("slurmctld did not come up", lambda: b"is UP" in subprocess.run(
        ["scontrol", "ping"], capture_output=True, env=env, timeout=30).stdout, 60, tmp / "slurmctld.log",
        proc=procs[-1])
    # the accounts after slurmctld: it registers the cluster and its TRES (gres/gpu, from
    # AccountingStorageTRES) with slurmdbd, and sacctmgr refuses GrpTRESMins=gres/gpu before
    # ("slurmdb_format_tres_str: no TRES known by type gres/gpu", seen with 22.05)
    _wait("slurmctld did not register gres/gpu", lambda: "gres/gpu" in run(
        cluster, "sacctmgr", "-n", "-P", "show", "tres", "format=Type,Name").stdout.replace("|", "/"), 60,
          tmp / "slurmctld.log", tmp / "slurmdbd.log")
    loaded = run(cluster, "sacctmgr", "-i", "load", f"file={etc / 'accounts.cfg'}")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    procs.append(subprocess.Popen([_which("slurmd"), "-D", "-N", NODE, "-f", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True, env=env))
    _wait(f"{NODE} did not come up idle", lambda: run(cluster, "sinfo", "-h", "-N", "-n", NODE, "-o", "%T")
          .stdout.strip().startswith("idle"), 60, tmp / "slurmd.log", tmp / "slurmctld.log", proc=procs[-1])
    return cluster


def run(cluster: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, env=cluster["env"], timeout=60)


def submit(cluster: dict, *options: str) -> subprocess.CompletedProcess:
    return run(cluster, "sbatch", "--parsable", "-w", NODE, "-o", "/dev/null", *options, "--wrap", "true")


def reason(cluster: dict, job: str) -> tuple[str, str]:
    """(state, reason) of a job as squeue prints them (%T, %r)."""
    out = run(cluster, "squeue", "-h", "-j", job, "-o", "%T|%r").stdout.strip()
    state, _, why = out.partition("|")
    return state, why


def wait_reason(cluster: dict, job: str) -> tuple[str, str]:
    """(state, reason) of a job once slurmctld has given it a reason."""
    return _wait(f"job {job} has no reason", lambda: (lambda s: s if s[1] not in ("", "None") else None)(
        reason(cluster, job)), 30, cluster["tmp"] / "slurmctld.log")


def test_the_rendered_accounts_are_loaded_with_their_budgets_and_limits(cluster):
    shown = run(cluster, "sacctmgr", "-n", "-P", "show", "assoc", "format=Cluster,Account,User,GrpTRESMins,MaxTRES,"
                "Fairshare,Priority")
    rows = {tuple(line.split("|")[1:3]): line.split("|") for line in shown.stdout.splitlines()}
    assert rows[("nlp", "")][0] == "dgx"
    assert rows[("nlp", "")][3:] == ["gres/gpu=1200000", "gres/gpu=4", "60", "100"], shown.stdout
    assert rows[("vision", "")][3:] == ["gres/gpu=60", "", "40", "0"], shown.stdout
    assert rows[("infra", "")][3:] == ["", "", "1", "0"], shown.stdout
    for account, user in (("nlp", USER), ("nlp", "alice"), ("vision", "carol"), ("vision", USER), ("infra", USER)):
        assert (account, user) in rows, (account, user, shown.stdout)
    users = run(cluster, "sacctmgr", "-n", "-P", "show", "user", "format=User,DefaultAccount")
    defaults = dict(line.split("|") for line in users.stdout.splitlines())
    assert defaults.get(USER) == "nlp" and defaults.get("carol") == "vision", users.stdout  # the first team that lists them


def test_a_job_within_its_budget_runs_and_sacct_shows_it_finished(cluster):
    done = submit(cluster, "-A", "infra", "--gres=gpu:1", "-t", "1")
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]

    def finished():
        out = run(cluster, "sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,Account,State,AllocTRES").stdout.strip()
        return out if out and out.split("|")[2] not in ("PENDING", "RUNNING") else None

    row = _wait(f"job {job} not in sacct as finished", finished, 60, cluster["tmp"] / "slurmctld.log",
                cluster["tmp"] / "slurmdbd.log").split("|")
    assert row[:3] == [job, "infra", "COMPLETED"], row
    assert "gres/gpu=1" in row[3].split(","), row


def test_a_job_over_its_teams_gpu_hour_budget_waits_with_slurms_reason(cluster):
    # vision: 1 GPU-hour a month = GrpTRESMins=gres/gpu=60; 8 GPUs for 10 minutes would use 80
    done = submit(cluster, "-A", "vision", "--gres=gpu:8", "-t", "10")
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    try:
        now = wait_reason(cluster, job)
        assert now == ("PENDING", "AssocGrpGRESMinutes"), now
        # the same job within the budget (8 GPUs for 5 minutes: 40) runs
        within = submit(cluster, "-A", "vision", "--gres=gpu:8", "-t", "5")
        job2 = within.stdout.strip().split(";")[0]
        _wait(f"job {job2} did not end", lambda: run(cluster, "sacct", "-X", "-n", "-P", "-j", job2, "-o", "State")
              .stdout.strip() == "COMPLETED", 60, cluster["tmp"] / "slurmctld.log")
    finally:
        run(cluster, "scancel", job)


def test_an_unlimited_job_of_a_team_with_a_budget_never_starts(cluster):
    """Rule team-time-limit's fact: a job without --time in a partition without MaxTime runs
    UNLIMITED, and with `safe` an account with GrpTRESMins never starts it, however large the budget
    (nlp: 20,000 GPU-hours); a team without a budget (infra) runs the same job."""
    assert run(cluster, "scontrol", "update", "partitionname=gpu", "maxtime=unlimited").returncode == 0
    job = None
    try:
        done = submit(cluster, "-A", "nlp", "--gres=gpu:1")
        assert done.returncode == 0, done.stderr
        job = done.stdout.strip().split(";")[0]
        now = wait_reason(cluster, job)
        assert now == ("PENDING", "AssocGrpGRESMinutes"), now
        free = submit(cluster, "-A", "infra", "--gres=gpu:1").stdout.strip().split(";")[0]
        _wait(f"job {free} did not end", lambda: run(cluster, "sacct", "-X", "-n", "-P", "-j", free, "-o", "State")
              .stdout.strip() == "COMPLETED", 60, cluster["tmp"] / "slurmctld.log")
    finally:
        if job:
            run(cluster, "scancel", job)
        run(cluster, "scontrol", "update", "partitionname=gpu", "maxtime=3-00:00:00")


def test_a_job_over_its_teams_max_gpus_waits_and_one_without_a_team_is_refused(cluster):
    done = submit(cluster, "-A", "nlp", "--gres=gpu:8", "-t", "1")  # nlp: max_gpus_per_job 4
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    try:
        now = wait_reason(cluster, job)
        assert now == ("PENDING", "AssocMaxGRESPerJob"), now
    finally:
        run(cluster, "scancel", job)
    refused = submit(cluster, "-A", "no-such-team", "-t", "1")
    assert refused.returncode != 0
    assert "Invalid account or account/partition combination specified" in refused.stderr, refused.stderr


def test_a_changed_blueprints_accounts_load_over_the_old_ones(cluster, tmp_path):
    """Day 2 (docs/accounting.md): the accounts.cfg of a changed blueprint, loaded again, changes the
    limits in the database; a running cluster needs no restart for it. A team it drops stays."""
    source = tmp_path / "changed.yaml"
    dropped = f"        - name: infra\n          users: [{USER}]\n"
    assert dropped in blueprint()
    source.write_text(blueprint().replace("max_gpus_per_job: 4", "max_gpus_per_job: 8").replace(dropped, ""))
    result = check(source)
    assert result.model is not None, result
    changed = tmp_path / "accounts.cfg"
    changed.write_bytes(render(result.model)["train/slurm/accounts.cfg"])
    loaded = run(cluster, "sacctmgr", "-i", "load", f"file={changed}")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    shown = run(cluster, "sacctmgr", "-n", "-P", "show", "assoc", "account=nlp", "format=User,MaxTRES")
    assert "|gres/gpu=8" in shown.stdout.splitlines(), shown.stdout
    # a team the blueprint no longer lists stays (sacctmgr load adds and changes, never deletes):
    # `diff` says so (fleetform/changes.py file_disruption)
    kept = run(cluster, "sacctmgr", "-n", "-P", "show", "account", "infra", "format=Account")
    assert kept.stdout.split() == ["infra"], kept.stdout
