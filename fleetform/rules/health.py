"""Rules over the node health check of Slurm training fleets (fleetform/health.py, bin/health)."""

from __future__ import annotations

from ..health import SLURMD_KILL_S, TIMEOUT_S
from ..model import Blueprint
from . import Reporter, rule


@rule("health-scope", "error", "a `health` block is on a training fleet scheduled by Slurm, the only kind it checks")
def health_scope(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if not fleet.health_declared or (fleet.training and fleet.scheduler is not None
                                         and fleet.scheduler.type == "slurm"):
            continue
        what = "an inference fleet" if not fleet.training else "a training fleet not scheduled by Slurm"
        report(fleet.path + ("health",), f"`health` has no effect on {what}: only Slurm training fleets run "
               "bin/health as their HealthCheckProgram", "remove the block")


@rule("health-time", "error", "the health check's suite ends within the 60 s slurmd gives a HealthCheckProgram")
def health_time(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        h = fleet.health
        if h is None or h.worst_case_s <= SLURMD_KILL_S:
            continue
        report(h.path + (("suite",) if h.declared else ()),
               f"the {h.suite} suite can take {h.worst_case_s} s on this fleet's nodes ({_parts(h)}), and slurmd "
               f"kills a HealthCheckProgram after {SLURMD_KILL_S} s (slurm.conf(5)), before it can drain the node",
               "a lighter suite, or fewer health.mounts")


@rule("health-interval", "error", "the health check's interval is longer than the longest its suite can take")
def health_interval(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        h = fleet.health
        if h is None or h.interval_s == 0 or h.interval_s >= h.worst_case_s:
            continue
        report(h.path + ("interval_s",),
               f"interval_s {h.interval_s} is shorter than the {h.worst_case_s} s the {h.suite} suite can take "
               f"({_parts(h)}): the next check would start while the last still runs",
               f"interval_s: {max(h.worst_case_s, 60)} or more, or a lighter suite")


@rule("health-action", "error", "a health failure action has what it needs: `replace` a cloud that replaces instances")
def health_action(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        h = fleet.health
        if h is None or h.on_failure != "replace" or h.aws:
            continue
        report(h.path + ("on_failure",),
               "on_failure: replace needs a program that replaces a machine: on AWS the controller's keeper "
               "launches a new instance for a DOWN node; an on-prem fleet has none, so the node would stay down",
               "on_failure: drain (a person replaces the machine and resumes the node) or reboot")


def _parts(h) -> str:
    parts = []
    for check in h.checks:
        if check == "mounts":
            parts.append(f"{len(h.mounts)} mounts x {TIMEOUT_S['mount']} s")
        elif check == "nvlink" and h.nvswitch:
            parts.append(f"nvlink {TIMEOUT_S['nvlink']} s + fabric manager {TIMEOUT_S['fabric']} s")
        else:
            parts.append(f"{check} {TIMEOUT_S[check]} s")
    return ", ".join(parts)
