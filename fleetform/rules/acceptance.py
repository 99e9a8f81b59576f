"""Rules over the acceptance job of Slurm training fleets (fleetform/acceptance.py, bin/acceptance)."""

from __future__ import annotations

from ..acceptance import FLOOR_FRACTION, published_runs
from ..model import Blueprint
from . import Reporter, rule


@rule("acceptance-scope", "error", "an `acceptance` block is on a training fleet scheduled by Slurm, the only kind it runs on")
def acceptance_scope(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if not fleet.acceptance_declared or (fleet.training and fleet.scheduler is not None
                                             and fleet.scheduler.type == "slurm"):
            continue
        what = "an inference fleet" if not fleet.training else "a training fleet not scheduled by Slurm"
        report(fleet.path + ("acceptance",), f"`acceptance` has no effect on {what}: only Slurm training fleets "
               "get bin/acceptance.sbatch", "remove the block")


@rule("acceptance-multi-node", "error", "a multi-node all-reduce acceptance test is asked of a fleet of more than one node")
def acceptance_multi_node(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        a = fleet.acceptance
        if a is None or a.all_reduce not in ("multi-node", "pairs") or a.nodes > 1:
            continue
        report(a.path + ("all_reduce",),
               f"all_reduce: {a.all_reduce} on a fleet of {a.nodes} node: the all-reduce would run within one node, "
               "over NVLink, and say nothing about the network between nodes",
               "all_reduce: single-node, or more nodes")


@rule("acceptance-floor", "warning", "the multi-node all-reduce of an AWS fleet's acceptance job has a bus bandwidth floor to reach")
def acceptance_floor(bp: Blueprint, report: Reporter) -> None:
    known = ", ".join(sorted(published_runs()))
    for fleet in bp.fleets:
        a = fleet.acceptance
        # on-prem fleets have no instance type to look a published run up by: their floor is the site's
        # (nccl_min_busbw_gbps), and the job reports the bandwidth without one
        if a is None or a.all_reduce not in ("multi-node", "pairs") or a.nodes < 2 or a.floor_gbps is not None \
                or a.pair_floor_gbps is not None or not fleet.instance_type or bp.cloud != "aws":
            continue
        what = f"instance type {fleet.instance_type}"
        run = published_runs().get(fleet.instance_type)
        if run is not None and run.nodes != 2:
            # a figure of an unstated node count judges no 2-node pair and no fleet (providers/aws/nccl-allreduce.json)
            what += f" of a known node count (the published {run.instance_type} figure does not state its nodes)"
        where = ("all_reduce",) if "all_reduce" in a.declared else () if a.declared else ("instance_type",)
        report(a.path + where,
               f"no published nccl-tests all-reduce result for {what} (fleetform knows {known}): the acceptance "
               "job measures the bus bandwidth but cannot fail a slow network",
               f"set acceptance.nccl_min_busbw_gbps (for example {FLOOR_FRACTION:g} x the '# Avg bus bandwidth' of "
               "a run on healthy nodes), or all_reduce: off")
