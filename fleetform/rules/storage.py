"""Rules over storage: FSx for Lustre sizes AWS accepts, and where checkpoints go."""

from __future__ import annotations

import posixpath

from ..model import IMPORT_DIR, Blueprint, under
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


SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run",
               "/sbin", "/snap", "/sys", "/tmp", "/usr", "/var")
"""Folders of the operating system (the Filesystem Hierarchy Standard's, and Ubuntu's /snap and
/lib32, /libx32): a file system mounted on one of them, or inside, hides what the node runs from
(programs, libraries, /etc/slurm and munge's key, /var/log and Slurm's spool)."""
SYSTEM_MOUNT_POINTS = ("/", "/home", "/opt")
"""Mount points refused themselves, not what is below them: /home hides every user's home (the image
user's ssh keys among them), /opt the image's EFA, NVIDIA and fleetform programs (/opt/amazon,
/opt/nvidia, /opt/fleetform); `/opt/data` or `/home/shared` are fine."""


def system_mount(mount: str) -> str | None:
    """The system folder a mount path would cover, or None."""
    normal = posixpath.normpath(mount)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    if normal in SYSTEM_MOUNT_POINTS:
        return normal
    return next((d for d in SYSTEM_DIRS if normal == d or normal.startswith(d + "/")), None)


@rule("mount-path", "error", "FSx for Lustre is not mounted on / or on a system folder (/etc, /usr, /var, /home, ...)")
def mount_path(bp: Blueprint, report: Reporter) -> None:
    """The bootstrap mounts each FSx for Lustre file system as root on every node and the controller;
    at a system folder it would hide that folder's files (or, writable by every job's user, replace
    them)."""
    for storage in bp.storage:
        if storage.type != "fsx-lustre" or not storage.mount_path:
            continue
        covered = system_mount(storage.mount_path)
        if covered is not None:
            what = "the root of the file system" if covered == "/" else f"the system folder {covered}"
            report(storage.path + ("mount_path",), f"mount path {storage.mount_path} is {what}: mounted there, "
                   f"'{storage.name}' hides what every node runs from", "mount it at its own folder, e.g. /fsx")


@rule("checkpoint-location", "error", "training checkpoints go to durable storage: an attached bucket, or an "
      "attached FSx for Lustre directory exported to an attached bucket")
def checkpoint_location(bp: Blueprint, report: Reporter) -> None:
    """A checkpoint on a node's root volume is lost with the node, and one on FSx for Lustre alone with
    the file system: durable is an S3 bucket, written directly or through an FSx export association
    (resolve makes it: the directory, exported to the fleet's first attached bucket). On-prem, file
    systems are mounted outside fleetform: it cannot tell, and says nothing."""
    if bp.cloud != "aws":
        return
    for fleet in bp.fleets:
        ckpt = fleet.checkpoint
        if not fleet.training or ckpt is None or ckpt.location is None or ckpt.export is not None:
            continue
        attached = [s for s in (bp.storage_named(n) for n in fleet.storage) if s is not None]
        buckets = [s for s in attached if s.type == "s3"]
        at = ckpt.path + ("path",)
        if ckpt.location.startswith("s3://"):
            # s3://BUCKET/PREFIX/: BUCKET is the storage name of a bucket the fleet attaches (its real
            # name is made by Pulumi from the prefix <blueprint>-<storage>-); a bucket fleetform does
            # not make is one the fleet's role may not write, and the checkpoints would go nowhere.
            named = ckpt.location[len("s3://"):].split("/", 1)[0]
            defined = sorted(s.name for s in bp.storage if s.type == "s3")
            prefix = ckpt.location[len("s3://") + len(named):]
            if named in {s.name for s in buckets}:
                continue
            if named in defined:
                report(at, f"checkpoints go to bucket '{named}', which fleet '{fleet.name}' does not attach",
                       f"attach '{named}' in the fleet's storage list")
            elif buckets:
                names = ", ".join(f"'{s.name}' (s3://{s.name}{prefix})" for s in buckets)
                report(at, f"checkpoints go to bucket '{named}', which is no bucket of fleet '{fleet.name}'",
                       f"name a bucket the fleet attaches, by its storage name: {names}")
            elif defined:
                report(at, f"checkpoints go to bucket '{named}', but fleet '{fleet.name}' attaches no S3 bucket",
                       f"attach one of the blueprint's buckets ({', '.join(defined)}) in the fleet's storage list "
                       "and name it in the URI")
            else:
                report(at, f"checkpoints go to bucket '{named}', which the blueprint does not define",
                       f"add `{{name: {named}, type: s3, versioning: true}}` under storage and attach it to "
                       f"fleet '{fleet.name}'")
            continue
        fs = next((s for s in attached if s.type == "fsx-lustre" and s.mount_path
                   and under(ckpt.location, s.mount_path)), None)
        if fs is None:
            mounts = ", ".join(s.mount_path for s in attached if s.mount_path) or "no file system"
            report(at, f"checkpoint path {ckpt.location} is not on an attached file system (mounted: {mounts}); "
                   "a node's local disk is lost with the node", "write under a mounted FSx for Lustre directory")
        elif not buckets:
            report(at, f"checkpoint path {ckpt.location} is on FSx for Lustre '{fs.name}' but fleet '{fleet.name}' "
                   "attaches no S3 bucket to export it to; the checkpoints would live on the file system alone",
                   "attach an S3 bucket (storage type s3) in the fleet's storage list")
        elif posixpath.normpath(ckpt.location) == posixpath.normpath(fs.mount_path):
            report(at, f"checkpoint path {ckpt.location} is the root of '{fs.name}'; an export association of the "
                   "root would leave no room for the import association", f"use a directory, e.g. {fs.mount_path}/checkpoints")
        else:
            report(at, f"checkpoint path {ckpt.location} is under {fs.mount_path}{IMPORT_DIR}, where '{fs.name}' "
                   f"imports {fs.import_path} (import only): checkpoints there never reach a bucket",
                   f"use another directory, e.g. {fs.mount_path}/checkpoints")


@rule("allow-replace-part", "error", "update_safety.allow_replace names a stateful part the blueprint has: "
      "a Slurm training fleet's controller or state-volume, or a file system or bucket of storage")
def allow_replace_part(bp: Blueprint, report: Reporter) -> None:
    parts = {f"{f.name}/{kind}" for f in bp.fleets
             if f.role == "training" and f.scheduler is not None and f.scheduler.type == "slurm"
             for kind in ("controller", "state-volume")}
    parts |= {f"storage/{s.name}" for s in bp.storage if s.type in ("fsx-lustre", "s3")}
    seen: set[str] = set()
    for allowed in bp.allow_replace:
        if allowed.part not in parts:
            from . import did_you_mean

            report(allowed.path + ("part",), f"'{allowed.part}' is no stateful part of this blueprint",
                   did_you_mean(allowed.part, parts, "parts"))
        elif allowed.part in seen:
            report(allowed.path + ("part",), f"'{allowed.part}' is allowed twice", "keep one entry")
        seen.add(allowed.part)
