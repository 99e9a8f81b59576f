"""Rules over the node health check of Slurm training fleets (fleetform/health.py, bin/health)."""

from __future__ import annotations

from ..health import DEFAULT_INTERVAL_S, KUBE_SCOPE_KEYS, SCONTROL_CALLS, SLURMD_KILL_S, TIMEOUT_S
from ..model import Blueprint
from . import Reporter, rule


@rule("health-scope", "error", "a `health` block sets only what applies to its fleet: the check's keys on a Slurm "
      "training fleet, auto_repair on an inference fleet on AWS")
def health_scope(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if not fleet.health_declared:
            continue
        here = fleet.path + ("health",)
        if fleet.training and fleet.scheduler is not None and fleet.scheduler.type == "slurm":
            for key in (k for k in fleet.health_keys if k in KUBE_SCOPE_KEYS):
                report(here + (key,), f"`health.{key}` is EKS node auto repair of an inference fleet's GPU node "
                       "group; a Slurm fleet's nodes are repaired by bin/health's on_failure",
                       "remove it (on_failure: drain | reboot | replace says what a failed check does)")
            continue
        if fleet.training:
            report(here, "`health` has no effect on a training fleet not scheduled by Slurm: only Slurm training "
                   "fleets run bin/health as their HealthCheckProgram", "remove the block")
            continue
        for key in (k for k in fleet.health_keys if k not in KUBE_SCOPE_KEYS):
            report(here + (key,), f"`health.{key}` has no effect on an inference fleet: it configures bin/health, "
                   "which only Slurm training fleets run; an inference fleet's GPU nodes on EKS are checked by the "
                   "node monitoring agent", f"remove it (an inference fleet may set {', '.join(KUBE_SCOPE_KEYS)})")
        if "auto_repair" in fleet.health_keys and bp.cloud != "aws":
            report(here + ("auto_repair",), "`health.auto_repair` is EKS node auto repair: off AWS fleetform makes "
                   "no node group, so nothing repairs the fleet's nodes either way", "remove it")


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


@rule("health-resume", "warning", "a node the health check drains is checked again, so a later pass can return it to service")
def health_resume(bp: Blueprint, report: Reporter) -> None:
    """slurmctld sends the check only to nodes that are not powered down (ping_nodes.c
    run_health_check), and with node states named only to those it counts as idle, mixed or
    allocated by their CPUs in use; power saving suspends idle nodes, drained ones too, after
    SuspendTime (power_save.c, Slurm 22.05). A drained node out of both reach is never checked again,
    so a passing check (a driver that was still loading at boot) never resumes it."""
    for fleet in bp.fleets:
        h = fleet.health
        if h is None or h.interval_s == 0:
            continue
        states = set(h.node_state) - {"CYCLE"}
        if states and not states & {"ANY", "IDLE"}:
            report(h.path + ("node_state",),
                   f"node_state {', '.join(s.lower() for s in h.node_state)} leaves out idle nodes: a node the check "
                   "drains is idle once its jobs end, slurmctld sends it no further check, and it stays drained "
                   "whatever its fault was", "add idle (or use any)")
        power = fleet.slurm.power if fleet.slurm is not None else None
        elastic = fleet.slurm.ec2.elastic_nodes if fleet.slurm is not None and fleet.slurm.ec2 is not None else None
        if power is not None and elastic and h.interval_s >= power.suspend_time_s \
                and h.interval_s != DEFAULT_INTERVAL_S:
            report(h.path + ("interval_s",),
                   f"interval_s {h.interval_s} is not shorter than SuspendTime {power.suspend_time_s}: an elastic "
                   "node the check drains is powered down idle before the next check, is not checked while "
                   "powered down, and stays drained even when its fault passed",
                   f"interval_s below {power.suspend_time_s}")


def _parts(h) -> str:
    parts = []
    for check in h.checks:
        if check == "mounts":
            parts.append(f"{len(h.mounts)} mounts x {TIMEOUT_S['mount'] + TIMEOUT_S['probe']} s")
        elif check == "nvlink" and h.nvswitch:
            parts.append(f"nvlink {TIMEOUT_S['nvlink']} s + fabric manager {TIMEOUT_S['fabric']} s")
        else:
            parts.append(f"{check} {TIMEOUT_S[check]} s")
    calls = SCONTROL_CALLS[h.on_failure]
    parts.append(f"{calls} scontrol calls x {TIMEOUT_S['scontrol']} s")
    return ", ".join(parts)


@rule("health-kube-agent", "warning", "an inference fleet's GPU nodes have an agent that takes a bad node out of service")
def health_kube_agent(bp: Blueprint, report: Reporter) -> None:
    """On AWS every inference cluster gets the EKS node monitoring agent and node auto repair on its
    GPU node groups (fleetform/health.py, docs/health.md). Elsewhere fleetform renders the fleet's
    manifests only: NVIDIA's device plugin withholds a GPU after a critical Xid (k8s-device-plugin
    internal/rm/health.go) but nothing takes the node out, so a GPU that fell off the bus or lost
    NVLink keeps receiving the fleet's other pods."""
    if bp.cloud == "aws":
        return
    for fleet in bp.fleets:
        if fleet.kube is None:
            continue
        report(fleet.path + ("scheduler",),
               f"fleet {fleet.name} runs on Kubernetes off AWS, where fleetform installs no GPU node health agent: "
               "a node with a fatal Xid or a lost GPU stays schedulable (only the device plugin withholds the "
               "failed GPU); on EKS the node monitoring agent and node auto repair do this",
               "run a node health agent on the cluster (Node Problem Detector with a GPU plugin and a controller "
               "that cordons and drains, or NVIDIA's DCGM health checks with one), and say so in a waiver")
