"""Rules over storage: FSx for Lustre sizes AWS accepts, and where checkpoints go."""

from __future__ import annotations

import posixpath

from ..model import Blueprint
from . import Reporter, rule


@rule("fsx-capacity", "error", "FSx for Lustre PERSISTENT_2 capacity is 1200, 2400 or a multiple of 2400 GiB")
def fsx_capacity(bp: Blueprint, report: Reporter) -> None:
    for storage in bp.storage:
        size = storage.capacity_gib
        if storage.type != "fsx-lustre" or size is None:
            continue
        if size not in (1200, 2400) and size % 2400:
            lower = max(2400, size // 2400 * 2400)
            report(storage.path + ("capacity_gib",),
                   f"FSx for Lustre PERSISTENT_2 does not accept {size} GiB",
                   f"use 1200, 2400 or a multiple of 2400, e.g. {lower} or {lower + 2400}")


@rule("storage-cloud", "error", "FSx for Lustre and S3 storage are created on AWS blueprints only")
def storage_cloud(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud == "aws":
        return
    for storage in bp.storage:
        report(storage.path + ("type",), f"storage '{storage.name}' is an AWS {storage.type}, "
               "but the blueprint is on-prem", "mount on-prem file systems outside fleetform; remove it")


def _under(path: str, mount: str) -> bool:
    path, mount = posixpath.normpath(path), posixpath.normpath(mount)
    return path == mount or path.startswith(mount.rstrip("/") + "/")


@rule("checkpoint-location", "warning", "training checkpoints go to attached storage")
def checkpoint_location(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        ckpt = fleet.checkpoint
        if not fleet.training or ckpt is None or ckpt.location is None:
            continue
        attached = [bp.storage_named(n) for n in fleet.storage]
        mounts = [s.mount_path for s in attached if s is not None and s.mount_path]
        if ckpt.location.startswith("s3://"):
            if not any(s is not None and s.type == "s3" for s in attached):
                report(ckpt.path + ("path",), f"checkpoints go to {ckpt.location}, but fleet '{fleet.name}' "
                       "attaches no S3 bucket", "attach the checkpoint bucket in the fleet's storage list")
        elif not any(_under(ckpt.location, m) for m in mounts):
            where = ", ".join(mounts) if mounts else "no file system"
            report(ckpt.path + ("path",), f"checkpoint path {ckpt.location} is not on an attached file system "
                   f"(mounted: {where})", "a node's local disk is lost with the node; write under a shared mount")
