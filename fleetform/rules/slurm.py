"""Rules over Slurm schedulers: partitions, topology and controller."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


def _slurm_fleets(bp: Blueprint):
    return [f for f in bp.fleets if f.scheduler is not None and f.scheduler.type == "slurm"]


@rule("default-partition", "error", "exactly one Slurm partition is the default")
def default_partition(bp: Blueprint, report: Reporter) -> None:
    for fleet in _slurm_fleets(bp):
        parts = fleet.scheduler.partitions
        defaults = [p for p in parts if p.default]
        if len(parts) > 1 and not defaults:
            report(fleet.scheduler.path + ("partitions",), "no partition is the default",
                   f"mark one with `default: true`, e.g. '{parts[0].name}'")
        for extra in defaults[1:]:
            report(extra.path + ("default",), f"partition '{extra.name}' is a second default "
                   f"(after '{defaults[0].name}'); slurmctld would silently pick one", "keep one default partition")


@rule("slurm-topology", "error", "a Slurm topology gives nodes_per_switch or explicit switches, not both")
def slurm_topology(bp: Blueprint, report: Reporter) -> None:
    for fleet in _slurm_fleets(bp):
        topology = fleet.scheduler.topology
        if topology is None:
            continue
        if topology.nodes_per_switch is not None and topology.switches:
            report(topology.path, "topology gives both nodes_per_switch and switches",
                   "keep nodes_per_switch for evenly filled leaves, or switches to name each leaf's hosts")
        elif topology.nodes_per_switch is None and not topology.switches:
            report(topology.path, "topology is empty", "add nodes_per_switch: N, or switches")
        elif fleet.nodes is not None and topology.nodes_per_switch and topology.nodes_per_switch > fleet.nodes.max:
            report(topology.path + ("nodes_per_switch",),
                   f"{topology.nodes_per_switch} nodes per switch, but the fleet has at most "
                   f"{fleet.nodes.max} node{'s' if fleet.nodes.max != 1 else ''}",
                   "one switch holds the whole fleet: drop the topology, or lower nodes_per_switch")


@rule("slurm-controller", "error", "an on-prem Slurm fleet names its controller host; an AWS one its instance type")
def slurm_controller(bp: Blueprint, report: Reporter) -> None:
    for fleet in _slurm_fleets(bp):
        scheduler = fleet.scheduler
        if bp.cloud == "onprem":
            if scheduler.controller_host is None:
                report(scheduler.path, f"on-prem Slurm fleet '{fleet.name}' names no controller host",
                       "add controller: {host: <slurmctld host>}")
            if scheduler.controller_instance_type is not None:
                report(scheduler.path + ("controller", "instance_type"), "instance_type applies to cloud: aws",
                       "on-prem: give controller.host")
        elif scheduler.controller_host is not None:
            report(scheduler.path + ("controller", "host"), "AWS fleets get a controller instance fleetform creates",
                   "remove host; set controller.instance_type")
