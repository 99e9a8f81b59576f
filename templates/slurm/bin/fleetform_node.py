"""Shared code of the programs in <fleet>/slurm/bin/ (bootstrap, resume, suspend, resume-fail,
keeper, topology, task-prolog). Python 3 standard library plus the `aws` CLI only.

Render-time facts (node names, Slurm version, paths) are in fleet.json beside this file; deploy-time
values (cluster id, region, launch template, secret, addresses) only in the environment file
(/etc/fleetform/cluster.env, or FLEETFORM_ENV_FILE), so one rendered folder serves every stack.
The design and the IAM these programs need: docs/aws-training.md.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BIN = Path(__file__).resolve().parent
FLEET = json.loads((BIN / "fleet.json").read_text())
RENDERED = BIN.parents[2]  # the folder manifest.json is in: <rendered>/<fleet>/slurm/bin
IMDS = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254").rstrip("/")
# slurmctld runs the Resume/Suspend programs with SLURM_CONF as their only variable (Slurm 22.05
# src/slurmctld/power_save.c: env_array_create(), then SLURM_CONF): no PATH, no HOME.
os.environ.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/slurm/bin")
_CONF_TAIL = "/etc/slurm/slurm.conf"
_conf = os.environ.get("SLURM_CONF", "")
ROOT = os.environ.get("FLEETFORM_ROOT", _conf[:-len(_CONF_TAIL)] if _conf.endswith(_CONF_TAIL) else "").rstrip("/")
"""Prefix of /etc, /var and /run; empty on a real node. Set, the programs run unprivileged in it
(tests): daemons are started directly instead of by systemd, and the machine is left alone. A
program slurmctld runs finds it from SLURM_CONF (<root>/etc/slurm/slurm.conf)."""
ENV_FILE = Path(os.environ.get("FLEETFORM_ENV_FILE") or f"{ROOT}/etc/fleetform/cluster.env")
ACTIVE = ("pending", "running")
PROGRAM = Path(sys.argv[0]).name


class Failure(Exception):
    """A step failed in a way the program reports and exits 1 on."""


def path(absolute: str) -> Path:
    return Path(ROOT + absolute)


def log_dir() -> Path:
    """Where this program's log goes: root's programs (bootstrap, keeper) into /var/log/fleetform,
    which only root may write; another user's (the Resume/Suspend programs slurmctld runs as
    SlurmUser) into its own folder below it. A root process never writes into a folder another user
    controls: there that user could put a symlink where the log goes and have root append to any
    file (issue 17, item 4)."""
    base = path("/var/log/fleetform")
    return base if os.geteuid() == 0 else base / pwd.getpwuid(os.geteuid()).pw_name


def log(message: str) -> None:
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} fleetform {PROGRAM}: {message}"
    print(line, file=sys.stderr, flush=True)
    try:
        target = log_dir()
        target.mkdir(parents=True, exist_ok=True)
        folder = os.lstat(target)
        if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != os.geteuid() or folder.st_mode & 0o022:
            return  # a folder someone else could change: stderr only (the journal keeps it)
        # no symlink followed, no FIFO waited on: the log is a plain file of this folder or nothing
        fd = os.open(target / f"{PROGRAM}.log",
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o640)
        with os.fdopen(fd, "a") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                f.write(line + "\n")
    except OSError:
        pass


def environment() -> dict[str, str]:
    """The KEY='value' lines of the environment file the user data wrote (shell-quoted). AWS_*
    lines, which only tests write (AWS_ENDPOINT_URL of moto, credentials), go to the aws CLI."""
    file = ENV_FILE
    values = {}
    for line in file.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        (word,) = shlex.split(line)
        key, _, value = word.partition("=")
        values[key] = value
    missing = [k for k in ("FLEETFORM_ROLE", "FLEETFORM_CLUSTER", "FLEETFORM_FLEET", "FLEETFORM_REGION")
               if not values.get(k)]
    if missing:
        raise Failure(f"{file} does not set {', '.join(missing)}")
    if values["FLEETFORM_FLEET"] != FLEET["fleet"]:
        raise Failure(f"{file} is for fleet {values['FLEETFORM_FLEET']!r}, these programs for {FLEET['fleet']!r}")
    return values


def run(*command: str, check: bool = True, input: str | None = None, extra: dict[str, str] | None = None,
        what: str | None = None) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(command, capture_output=True, text=True, input=input,
                                env={**os.environ, **extra} if extra else None)
    except OSError as error:  # the program is missing or cannot run: a failure that says which
        raise Failure(f"{what or shlex.join(command)}: {command[0]}: {error.strerror}") from None
    if check and result.returncode != 0:
        said = " ".join((result.stderr or result.stdout).split())
        raise Failure(f"{what or shlex.join(command)}: {said or f'exit {result.returncode}'}")
    return result


def aws(env: dict[str, str], *args: str) -> dict:
    """One AWS CLI call in the cluster's region, its JSON answer as data. FLEETFORM_AWS_CLI in the
    environment file may name the CLI where it is not on the default PATH (tests: the venv's)."""
    result = run(env.get("FLEETFORM_AWS_CLI") or "aws", "--region", env["FLEETFORM_REGION"], "--output", "json", *args,
                 extra={k: v for k, v in env.items() if k.startswith("AWS_")}, what=" ".join(args[:2]))
    return json.loads(result.stdout) if result.stdout.strip() else {}


def cluster_filters(env: dict[str, str]) -> list[str]:
    """This cluster's (blueprint + stack) compute instances of this fleet, and nothing else: never
    another blueprint's, another stack's, or the controller (role=controller)."""
    return [f"Name=tag:fleetform:cluster,Values={env['FLEETFORM_CLUSTER']}",
            f"Name=tag:fleetform:fleet,Values={env['FLEETFORM_FLEET']}",
            "Name=tag:fleetform:role,Values=compute"]


FILTER_VALUES_MAX = 200
"""EC2 refuses a Describe call with more than 200 filter values in all: `FilterLimitExceeded: The
maximum number of filter values specified on a single call is 200` (EC2's answer, quoted in
convox/rack#2205 and gjbae1212/gossm#31; the API Reference's Filter type states no limit). A longer
node list is asked in chunks that leave room for the call's other filter values."""


def instances(env: dict[str, str], states: tuple[str, ...], nodes: list[str] | None = None) -> list[dict]:
    """This cluster's and fleet's compute instances in these states; with `nodes`, only those tagged
    with one of these node names: one call per chunk of names, not one per name."""
    filters = cluster_filters(env) + [f"Name=instance-state-name,Values={','.join(states)}"]
    if nodes is None:
        chunks: list[list[str] | None] = [None]
    else:
        size = FILTER_VALUES_MAX - sum(f.count(",") + 1 for f in filters)
        chunks = [nodes[i:i + size] for i in range(0, len(nodes), size)]
    found = []
    for chunk in chunks:
        extra = [] if chunk is None else [f"Name=tag:fleetform:node,Values={','.join(chunk)}"]
        answer = aws(env, "ec2", "describe-instances", "--filters", *filters, *extra)
        found += [i for r in answer.get("Reservations", []) for i in r["Instances"]]
    return found


def tag(instance: dict, key: str) -> str | None:
    return next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == key), None)


def hostnames(expression: str) -> list[str]:
    """A Slurm hostlist expression expanded, by Slurm itself."""
    return run("scontrol", "show", "hostnames", expression).stdout.split()


def hostlist(names: list[str]) -> str:
    return run("scontrol", "show", "hostlist", ",".join(names)).stdout.strip() if names else ""


INSUFFICIENT_CAPACITY = ("InsufficientInstanceCapacity", "InsufficientHostCapacity",
                         "InsufficientReservedInstanceCapacity", "MaxSpotInstanceCountExceeded", "Unsupported",
                         "SpotMaxPriceTooLow")
"""EC2 error codes that mean "no capacity now, try later": AWS ParallelCluster's EC2_ICE_ERROR_CODES
(aws-parallelcluster-node src/slurm_plugin/slurm_resources.py). A node whose launch failed with one is
kept DOWN for the keeper's back-off instead of being launched again at once."""


def error_code(message: str) -> str | None:
    """The EC2 error code in an aws CLI error (`An error occurred (CODE) when calling ...`)."""
    head, sep, tail = message.partition("An error occurred (")
    return tail.partition(")")[0] or None if sep else None


def mark_down(names: list[str], reason: str) -> None:
    """ParallelCluster's answer to a failed launch (resume.py, _handle_failed_nodes): the nodes go
    DOWN at once with the reason `sinfo -R` shows, so their jobs are requeued now, not after
    ResumeTimeout, and slurmctld does not power them up again; the keeper brings them back (after
    the capacity back-off when the reason carries an INSUFFICIENT_CAPACITY code). POWER_DOWN_FORCE
    instead would end IDLE+POWERED_DOWN with no reason, and be launched again on the next job."""
    if names:
        code = error_code(reason)
        if code and f"(Code:{code})" not in reason:  # ParallelCluster's form: (Code:...) first, then AWS's words
            reason = reason.replace(f"An error occurred ({code}) when calling the ", "", 1)
            head, sep, rest = reason.partition(": ")
            reason = f"{head}{sep}(Code:{code}) {rest}" if sep else f"(Code:{code}) {reason}"
        reason = " ".join(reason.split())[:200]
        run("scontrol", "update", f"nodename={hostlist(names)}", "state=down", f"reason={reason}")
        log(f"marked {hostlist(names)} down: {reason}")


def imds(item: str, timeout: float = 2.0) -> str | None:
    """An instance metadata item through IMDSv2; None when it does not exist (404)."""
    request = urllib.request.Request(f"{IMDS}/latest/api/token", method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        token = answer.read().decode()
    request = urllib.request.Request(f"{IMDS}/latest/meta-data/{item}", headers={"X-aws-ec2-metadata-token": token})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read().decode()
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def slurm_conf() -> Path:
    return path("/etc/slurm/slurm.conf")


def conf_value(key: str, conf: Path | None = None) -> str | None:
    for line in (conf or slurm_conf()).read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip().lower() == key.lower():
            return value.split("#")[0].strip()
    return None
