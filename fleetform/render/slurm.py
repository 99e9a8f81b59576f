"""<fleet>/slurm/: slurm.conf, gres.conf, cgroup.conf, topology.conf and, for elastic fleets on
EC2, the resume and suspend programs."""

from __future__ import annotations

from ..model import Blueprint, Fleet
from .jinja import render


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    config = fleet.slurm
    if config is None:
        return {}
    common = {"fleet": fleet.name, "blueprint": bp.name, "version": bp.version, "c": config}
    base = f"{fleet.name}/slurm"
    out = {
        f"{base}/slurm.conf": render("slurm/slurm.conf.j2", **common),
        f"{base}/gres.conf": render("slurm/gres.conf.j2", **common),
        f"{base}/cgroup.conf": render("slurm/cgroup.conf.j2", **common),
    }
    if config.switches:
        out[f"{base}/topology.conf"] = render("slurm/topology.conf.j2", **common)
    if config.power is not None and config.ec2 is not None:
        out[f"{base}/bin/resume"] = render("slurm/resume.j2", fleet=fleet.name, ec2=config.ec2)
        out[f"{base}/bin/suspend"] = render("slurm/suspend.j2", fleet=fleet.name, ec2=config.ec2)
        out[f"{base}/bin/resume-fail"] = render("slurm/resume-fail.j2", fleet=fleet.name,
                                                suspend_program=config.power.suspend_program)
    return out
