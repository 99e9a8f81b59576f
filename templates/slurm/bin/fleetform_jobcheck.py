"""The health checks at a job's edges, for bin/prolog and bin/epilog (issue 20).

It imports bin/health (shipped beside it, a program without .py) as a module and runs its own
check functions with the tighter budgets of health.json `job_timeouts_s`: a Prolog holds the job's
start, and slurm.conf(5) of 22.05 asks that it "complete execution quickly (in less time than
MessageTimeout)" (10 s by default).

- before a job (Prolog): health.json `prolog_checks` (gpus, xid): all GPUs present and clean, no
  new fatal Xid. On a failure the node is drained first with `fleetform-prolog: <reason>` (read in
  `sinfo -R`), then the Prolog exits non-zero: slurm.conf(5), Prolog: "If the prolog fails (returns
  a non-zero exit code), this will result in the node being set to a DRAIN state and the job being
  requeued in a held state, unless nohold_on_prolog_fail is configured in SchedulerParameters".
- after a job (Epilog): health.json `epilog_checks` (apps, xid): no compute process left on a GPU
  (nvidia-smi --query-compute-apps, polled for `epilog_settle_s` while the job's processes exit),
  no new fatal Xid. On a failure the node is drained with `fleetform-epilog: <reason>`; the Epilog
  still exits 0, so that the drain keeps fleetform's reason (slurm.conf(5), PrologEpilogTimeout: an
  Epilog that fails drains the node; our own drain already has).

A node drained here stays drained until a person resumes it: bin/health resumes only its own
`fleetform-health:` drains.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import time
from pathlib import Path

BIN = Path(__file__).resolve().parent


def load_health():
    """bin/health as a module (its file has no .py suffix, so it is loaded by path)."""
    loader = importlib.machinery.SourceFileLoader("fleetform_health", str(BIN / "health"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


health = load_health()


def check_apps(config: dict) -> None:
    """No compute process left on any GPU after the job. nvidia-smi --query-compute-apps prints one
    CSV line per process (`pid, process_name, used_gpu_memory`, nvidia-smi(1), "--query-compute-apps")
    and nothing when there is none; the job's processes may still be exiting, so it is asked again
    each second for `epilog_settle_s`."""
    deadline = time.monotonic() + config.get("epilog_settle_s", 0)
    while True:
        out = health.command(config, "apps", "nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                             "--format=csv,noheader").stdout
        rows = [line.strip() for line in out.splitlines()
                if line.strip() and not line.strip().startswith("No running")]
        if not rows:
            return
        if time.monotonic() >= deadline:
            pid, _, rest = rows[0].partition(",")
            name = rest.split(",")[0].strip().rsplit("/", 1)[-1]
            raise health.Unhealthy(f"{len(rows)} GPU process(es) left: {pid.strip()} {name}")
        time.sleep(1)


CHECKS = {**health.CHECKS, "apps": check_apps}


def run(phase: str) -> int:
    """`prolog` or `epilog`: 0 to go on, 1 when the prolog found the node unfit (drained), 2 when
    the prolog could not run its checks (Slurm then drains the node and holds the job itself)."""
    try:
        config = health.load("health.json", health.os.environ.get("FLEETFORM_HEALTH_CONFIG", ""))
    except health.Broken as err:
        print(f"fleetform {phase}: cannot check: {err}", file=sys.stderr)
        return 2 if phase == "prolog" else 0
    if not config.get("prolog", True):
        return 0
    health.CONFIG.update(config)
    job = {**config, "timeouts_s": {**config["timeouts_s"], **config["job_timeouts_s"]}}
    reason = None
    try:
        for name in config[f"{phase}_checks"]:
            try:
                CHECKS[name](job)
            except health.Unhealthy as failed:
                reason = str(failed)
                break
        if reason is None:
            return 0
        node = health.node_name()
        full = (f"fleetform-{phase}: {reason}")[:config["reason_max"]]
        print(f"fleetform {phase}: {node} unhealthy: {reason}", file=sys.stderr)
        health.scontrol("update", f"nodename={node}", "state=drain", f"reason={full}")
    except (health.Broken, health.subprocess.SubprocessError, OSError) as err:
        print(f"fleetform {phase}: cannot check: {err}", file=sys.stderr)
        return 2 if phase == "prolog" else 0
    return 1 if phase == "prolog" else 0
