"""Rules over the login nodes, users and home directories of Slurm training fleets (fleetform/login.py)."""

from __future__ import annotations

import ipaddress

from ..login import FIRST_UID, IMAGE_UID, IMAGE_USER, POSIX_NAME, RESERVED_IDS, SYSTEM_USERS
from ..model import Blueprint
from . import Reporter, rule


def _in_scope(bp: Blueprint, fleet) -> bool:
    return bp.cloud == "aws" and fleet.training and fleet.scheduler is not None and fleet.scheduler.type == "slurm"


def _configs(bp: Blueprint):
    """The fleets whose login config the bootstrap applies (login-scope reports the others, once)."""
    for fleet in bp.fleets:
        if fleet.login is not None and _in_scope(bp, fleet):
            yield fleet, fleet.login


@rule("login-scope", "error", "login nodes, users and home are on an AWS training fleet scheduled by Slurm, whose machines fleetform boots")
def login_scope(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        login = fleet.login
        if login is None or _in_scope(bp, fleet):
            continue
        slurm = fleet.training and fleet.scheduler is not None and fleet.scheduler.type == "slurm"
        what = "an on-premises fleet, whose machines fleetform does not boot" if slurm else \
            "an inference fleet" if not fleet.training else "a training fleet not scheduled by Slurm"
        for key in ("login", "users", "home"):
            path = fleet.path + (key,)
            if key == "login" and login.declared or key == "users" and login.users or \
                    key == "home" and login.home_storage is not None:
                report(path, f"`{key}` has no effect on {what}: only the bootstrap of an AWS Slurm training "
                       "fleet makes login nodes, users and home directories", "remove it")


@rule("login-user-name", "error", "a user's name is a valid POSIX user name that the machines do not already have")
def login_user_name(bp: Blueprint, report: Reporter) -> None:
    for _fleet, login in _configs(bp):
        for user in login.users:  # a name listed twice is unique-names' finding
            if not POSIX_NAME.fullmatch(user.name):
                report(user.path + ("name",), f"{user.name!r} is not a user name useradd accepts",
                       "a lower-case letter or '_' first, then lower-case letters, digits, '_' or '-', "
                       "at most 32 characters")
            elif user.name in SYSTEM_USERS:
                report(user.path + ("name",), f"user {user.name!r} already exists on the machines (system, "
                       "Slurm, munge or the image's default user)", "choose another name")
            for index, group in enumerate((user.group, *user.groups)):
                if index == 0 and group == user.name:
                    continue  # the default, the user's own name: reported above when it is wrong
                if not POSIX_NAME.fullmatch(group):
                    report(user.path + (("group",) if index == 0 else ("groups", index - 1)),
                           f"{group!r} is not a group name groupadd accepts",
                           "a lower-case letter or '_' first, then lower-case letters, digits, '_' or '-'")


@rule("login-uid", "error", "user and group ids are unique, 1000 or more, not nobody's 65534 (or 65535), and not the image's default user's")
def login_uid(bp: Blueprint, report: Reporter) -> None:
    for fleet, login in _configs(bp):
        uids: dict[int, str] = {}
        gids: dict[int, str] = {}
        names: dict[str, int] = {}
        default_image = fleet.image is not None and fleet.image.default
        for user in login.users:
            if user.uid < FIRST_UID:
                report(user.path + ("uid",), f"uid {user.uid} is below {FIRST_UID}, the system's range "
                       "(login.defs UID_MIN): it may be a daemon's on some machine", f"a uid of {FIRST_UID + 1} or more")
            elif user.uid in RESERVED_IDS:
                report(user.path + ("uid",), f"uid {user.uid} is reserved: {RESERVED_IDS[user.uid]}; useradd would "
                       "stop every machine's bootstrap", "another uid of 1001 or more, below 65534")
            elif user.uid == IMAGE_UID and default_image:
                report(user.path + ("uid",), f"uid {IMAGE_UID} is the image's default user {IMAGE_USER!r} "
                       "(Ubuntu's first user): useradd would refuse it", f"a uid of {IMAGE_UID + 1} or more")
            elif user.uid in uids:
                report(user.path + ("uid",), f"uid {user.uid} is also {uids[user.uid]!r}'s: both would be one "
                       "user to Slurm and the file systems", "give each user its own uid")
                if user.gid == user.uid:
                    continue  # its implied gid collides too: one finding says it
            uids.setdefault(user.uid, user.name)
            # a gid left out is the uid (fleetform/login.py): reported at the uid, once
            gid_path = user.path + ("gid",) if user.gid != user.uid else user.path + ("uid",)
            if user.gid != user.uid and user.gid < FIRST_UID:
                report(gid_path, f"gid {user.gid} is below {FIRST_UID}, the system's groups",
                       f"a gid of {FIRST_UID + 1} or more")
            elif user.gid != user.uid and user.gid in RESERVED_IDS:
                report(gid_path, f"gid {user.gid} is reserved: {RESERVED_IDS[user.gid]}; groupadd would stop "
                       "every machine's bootstrap", "another gid of 1001 or more, below 65534")
            elif user.gid != user.uid and user.gid == IMAGE_UID and default_image:
                report(gid_path, f"gid {IMAGE_UID} is the image's default group {IMAGE_USER!r}",
                       f"a gid of {IMAGE_UID + 1} or more")
            if gids.get(user.gid, user.group) != user.group:
                report(gid_path, f"gid {user.gid} is group {gids[user.gid]!r} already, and this user "
                       f"names it {user.group!r}", "one name per group id")
            elif names.get(user.group, user.gid) != user.gid:
                report(user.path + ("group",), f"group {user.group!r} has gid {names[user.group]} already, not "
                       f"{user.gid}", "one id per group name")
            gids.setdefault(user.gid, user.group)
            names.setdefault(user.group, user.gid)
        for user in login.users:
            for index, group in enumerate(user.groups):
                if group not in names:
                    report(user.path + ("groups", index), f"group {group!r} is no user's primary group here, so "
                           "it has no fixed id on every machine", "name a group that a user of this fleet has as "
                           "its `group` (or its name)")


@rule("login-access", "error", "login nodes have a way in: SSM or SSH from named ranges")
def login_access(bp: Blueprint, report: Reporter) -> None:
    for _fleet, login in _configs(bp):
        if login.nodes and login.access == "none":
            report(login.path, f"{login.nodes} login node(s) and no `access`: nobody could reach them",
                   "access: ssm (Session Manager, no open port), or access: {ssh_cidrs: [your networks]}")


@rule("login-ssh-open", "warning", "SSH to login nodes from the whole internet (0.0.0.0/0, however it is split) is deliberate")
def login_ssh_open(bp: Blueprint, report: Reporter) -> None:
    for _fleet, login in _configs(bp):
        cidrs = login.ssh_cidrs
        path = login.path + ("access", "ssh_cidrs")
        merged = list(ipaddress.collapse_addresses(ipaddress.ip_network(c, strict=False) for c in cidrs))
        if any(n.prefixlen == 0 for n in merged):
            report(path, f"SSH to the login nodes is open to the whole internet ({', '.join(cidrs)})",
                   "access: ssm, or list your own networks' CIDRs")


@rule("login-home", "error", "home directories are on an FSx for Lustre file system the fleet mounts")
def login_home(bp: Blueprint, report: Reporter) -> None:
    for fleet, login in _configs(bp):
        name = login.home_storage
        if name is None:
            continue
        path = fleet.path + ("home", "storage")
        storage = bp.storage_named(name)
        if storage is None:
            report(path, f"no storage entry is named {name!r}", "name an fsx-lustre entry of `storage`")
        elif storage.type != "fsx-lustre":
            report(path, f"storage {name!r} is {storage.type}, not a file system the nodes mount",
                   "name an fsx-lustre entry of `storage`")
        elif name not in fleet.storage:
            report(path, f"storage {name!r} is not in this fleet's storage: its nodes do not mount it",
                   f"add {name!r} to the fleet's storage")


@rule("login-default-user", "warning", "a fleet with login nodes names the users jobs run as")
def login_default_user(bp: Blueprint, report: Reporter) -> None:
    for _fleet, login in _configs(bp):
        if login.nodes and not login.users:
            report(login.path, "login nodes and no `users`: every job would run as the image's default user "
                   f"({IMAGE_USER!r} on Ubuntu images), one account shared by everyone, whose files anyone can change",
                   "list the people who submit jobs in `users` (name, uid) and submit as them")
        elif login.users and login.home_storage is None:
            report(login.path if login.declared else login.users[0].path,
                   "`users` and no `home`: each machine keeps its own /home/<user>, so what a job writes in its "
                   "home on one node is missing on the others and on the login nodes",
                   "home: {storage: <an fsx-lustre entry the fleet mounts>}")
