"""<fleet>/nccl.env: the NCCL environment of a training fleet, one commented variable at a time."""

from __future__ import annotations

from ..model import Blueprint, Fleet
from ..nccl import fabric_note
from .jinja import render


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    if not fleet.training:
        return {}
    ray = fleet.ray.cluster_name if fleet.ray is not None else None  # its workers get the variables from the RayCluster
    # a Slinky fleet's login pod (the LoginSet's Deployment <release>-login-<nodeset>) carries them
    slinky = f"{fleet.slinky.release}-login-{fleet.slinky.nodeset}" if fleet.slinky is not None else None
    return {f"{fleet.name}/nccl.env": render("nccl/nccl.env.j2", fleet=fleet.name, blueprint=bp.name,
                                             version=bp.version, note=fabric_note(fleet), env=fleet.nccl_env,
                                             ray=ray, slinky=slinky)}
