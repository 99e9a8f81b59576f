"""<fleet>/slurm/: slurm.conf, gres.conf, cgroup.conf, topology.conf and, for AWS fleets, the
programs in bin/ that boot the controller and the nodes and start and stop instances
(docs/aws-training.md)."""

from __future__ import annotations

from importlib import resources

from ..model import Blueprint, Fleet
from .jinja import render

PROGRAMS = ("fleetform_node.py", "fleetform_dns.py", "bootstrap", "resume", "suspend", "resume-fail", "keeper",
            "topology", "task-prolog", "imds-access", "update", "prolog", "epilog")
"""templates/slurm/bin/: Python 3 programs with no render-time values in them (those are in
bin/fleet.json), copied as they are."""
HEALTH_FILES = ("health", "xid.json")
"""Every Slurm training fleet's node health check (fleetform/health.py), on-prem too: the program
and NVIDIA's Xid table it reads, copied as they are; its values are in bin/health.json."""


def _program(name: str) -> bytes:
    return (resources.files("fleetform.templates") / "slurm" / "bin" / name).read_bytes()


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    config = fleet.slurm
    if config is None:
        return {}
    common = {"fleet": fleet.name, "blueprint": bp.name, "version": bp.version, "c": config, "h": fleet.health,
              "a": fleet.accounting}
    base = f"{fleet.name}/slurm"
    out = {
        f"{base}/slurm.conf": render("slurm/slurm.conf.j2", **common),
        f"{base}/gres.conf": render("slurm/gres.conf.j2", **common),
        f"{base}/cgroup.conf": render("slurm/cgroup.conf.j2", **common),
    }
    if config.switches:
        out[f"{base}/topology.conf"] = render("slurm/topology.conf.j2", **common)
    if fleet.accounting is not None:
        out[f"{base}/slurmdbd.conf"] = render("slurm/slurmdbd.conf.j2", **common)
        out[f"{base}/accounts.cfg"] = render("slurm/accounts.cfg.j2", **common)
    if fleet.health is not None:
        out[f"{base}/bin/health.json"] = render("slurm/health.json.j2", **common)
        out.update({f"{base}/bin/{name}": _program(name) for name in HEALTH_FILES})
    if config.ec2 is not None:
        out[f"{base}/bin/fleet.json"] = render("slurm/fleet.json.j2", **common)
        out.update({f"{base}/bin/{name}": _program(name) for name in PROGRAMS})
    return out
