"""Login nodes, users and the shared home directory of a Slurm training fleet, as data: what the
Pulumi program builds (providers/aws/login.py) and what every machine's bootstrap creates
(bin/users.json, read by bin/bootstrap). Computed here from the resolved fleet; templates compute
nothing. The rules that check it are in fleetform/rules/login.py.

Login nodes submit jobs and run `srun`, `squeue` and `scancel`; they are not Slurm nodes: a
submission host needs slurm.conf (to find slurmctld) and munge with the cluster's key, and no
NodeName line (AWS ParallelCluster, "Launching a Login Node": the login node gets the head node's
slurm.conf and munge key, and joins no partition). tests/test_multihost.py proves it: a login host
with no slurmd and no NodeName line submits a job that runs as a blueprint user.

Home directories: on an FSx for Lustre file system the fleet already mounts on every node, under
<mount_path>/home. AWS documents Amazon EFS as the file system for home directories (EFS User Guide,
performance modes: General Purpose is "ideal for latency-sensitive use cases, like ... home
directories"); Lustre serves large sequential I/O best and small-file metadata work less well. A
fleet that already has FSx for Lustre on every node gets shared homes without a second file system,
its mount targets and security group rules; an `efs` storage type is the follow-up where home
traffic is heavy (docs/aws-training.md, "Login nodes, users and home directories").
"""

from __future__ import annotations

import posixpath
import re
from typing import Literal

from .records import frozen

DEFAULT_INSTANCE_TYPE = "m7i.xlarge"
"""A login node compiles, edits and submits; 4 vCPUs and 16 GiB (m7i.xlarge, EC2 instance types)."""

HOME_DIR = "home"
"""Home directories are <mount_path>/home/<user> on the home file system."""

POSIX_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
"""useradd(8) on Debian and Ubuntu: a name starts with a lower-case letter or underscore, followed
by lower-case letters, digits, underscores or dashes (NAME_REGEX of adduser.conf); at most 32
characters (useradd(8): "Usernames may only be up to 32 characters long")."""

FIRST_UID = 1000
"""login.defs(5) UID_MIN on Debian and Ubuntu: ids below are the system's (daemons: slurm, munge)."""

RESERVED_IDS = {65534: "nobody (the group: nogroup)", 65535: "16-bit (uid_t) -1"}
"""Ids at or above FIRST_UID that no user or group may have (systemd.io, "Users, Groups, UIDs and GIDs
on systemd Systems", Special Linux UIDs): 65534 is `nobody` (Debian's group `nogroup`), which every
machine has, where NFS, Lustre's root squash and user namespaces map unknown owners; 65535 is
"16-bit (uid_t) -1", not a valid user id. 4294967295 (32-bit -1) is above the schema's maximum."""

IMAGE_USER, IMAGE_UID = "ubuntu", 1000
"""The default user of fleetform's default image (AWS's Deep Learning Base AMI for Ubuntu 24.04,
whose cloud-init creates `ubuntu`, the first regular id, 1000): jobs should not run as it, and no
blueprint user can have its id."""

SYSTEM_USERS = ("root", "daemon", "bin", "sys", "nobody", "slurm", "munge", "ubuntu", "ssm-user")
"""Names that exist on the machines before the bootstrap (Debian base passwd, the Slurm and munge
packages, the image's default user, the SSM agent's `ssm-user`): a blueprint user cannot be one."""


@frozen
class User:
    name: str
    uid: int
    gid: int
    group: str  # the primary group's name
    groups: tuple[str, ...]  # supplementary groups, by name
    ssh_keys: tuple[str, ...]
    path: tuple


@frozen
class LoginConfig:
    """What a Slurm training fleet declares about its people: login nodes (nodes 0 when none),
    users, and the file system holding their homes."""

    nodes: int
    instance_type: str
    access: Literal["ssm", "ssh", "none"]  # none: the blueprint gave no access (the login-access rule)
    ssh_cidrs: tuple[str, ...]
    users: tuple[User, ...]
    home_storage: str | None  # storage name; None: each machine's own /home
    home_dir: str  # where the homes are on every machine: <mount_path>/home, or /home
    hosts: tuple[str, ...]  # the login nodes' host names, <fleet>-login-<n>
    path: tuple  # the fleet's `login` block, or the fleet
    declared: bool  # the blueprint wrote `login`

    @property
    def shared_home(self) -> bool:
        """The homes are on a shared file system (the bootstrap makes them once, there)."""
        return self.home_storage is not None

    @property
    def groups(self) -> tuple[tuple[str, int], ...]:
        """Every primary group (name, gid), first user that names it first; the bootstrap makes them
        with these ids before the users."""
        seen: dict[str, int] = {}
        for user in self.users:
            seen.setdefault(user.group, user.gid)
        return tuple(seen.items())


def build(fleet, data: dict, storage) -> LoginConfig | None:
    """The login config of a fleet item (its `login`, `users` and `home`); None when it has none of them."""
    login, users, home = data.get("login"), data.get("users"), data.get("home")
    if login is None and users is None and home is None:
        return None
    login = login or {}
    access = login.get("access")
    kind = "ssm" if access == "ssm" else "ssh" if isinstance(access, dict) else "none"
    home_storage = home.get("storage") if home else None
    fs = next((s for s in storage if s.name == home_storage), None)
    home_dir = posixpath.join(posixpath.normpath(fs.mount_path), HOME_DIR) \
        if fs is not None and fs.mount_path else "/home"
    nodes = login.get("nodes", 0)
    return LoginConfig(
        nodes=nodes, instance_type=login.get("instance_type", DEFAULT_INSTANCE_TYPE), access=kind,
        ssh_cidrs=tuple(access.get("ssh_cidrs", ())) if kind == "ssh" else (),
        users=tuple(User(u["name"], u["uid"], u.get("gid", u["uid"]), u.get("group", u["name"]),
                         tuple(u.get("groups", ())), tuple(u.get("ssh_keys", ())), fleet.path + ("users", i))
                    for i, u in enumerate(users or ())),
        home_storage=home_storage, home_dir=home_dir,
        hosts=tuple(f"{fleet.name}-login-{n}" for n in range(1, nodes + 1)),
        path=fleet.path + ("login",) if "login" in data else fleet.path, declared="login" in data)
