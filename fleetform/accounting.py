"""Slurm accounting of a training fleet, as data: slurmdbd on the controller with its database, the
accounting and priority lines of slurm.conf, and the teams (accounts, users, budgets, limits,
shares) as the file `sacctmgr load` reads. Everything slurmdbd.conf, slurm.conf and accounts.cfg
print is computed here (templates compute nothing).

Facts, from the man pages of Debian 12's Slurm (slurm-wlm 22.05.8: slurm.conf(5), slurmdbd.conf(5),
sacctmgr(1)); the `safe` text also from current Slurm's slurm.conf.html, which says the same for
"TRES-minutes" limits:
- AccountingStorageType=accounting_storage/slurmdbd with AccountingStorageHost/Port names slurmdbd;
  slurmdbd.conf's DbdHost/DbdPort where it listens (default port 6819), StorageType
  accounting_storage/mysql with StorageHost/StoragePort/StorageUser/StorageLoc/StoragePass the
  database. slurmdbd.conf supports `Include` (Slurm's config parser, measured with 22.05): the
  password is in an included file no render holds.
- AccountingStorageTRES: billing, cpu, energy, memory, node, fs/disk, pages and vmem are tracked
  always; a GRES only when named, so `gres/gpu` is named for GPU limits and GPU-hours. "The TRES are
  automatically set up in the database on the start of the slurmctld": sacctmgr refuses
  GrpTRESMins=gres/gpu before that (seen with 22.05), so accounts.cfg is loaded after slurmctld starts.
- AccountingStorageEnforce: `associations` (a job needs an association: no account, no job),
  `limits` (association and QOS limits are enforced), `qos`, `safe` ("a job will only be launched
  against an association or qos that has a GrpTRESMins limit set, if the job will be able to run to
  completion"; without it jobs start while the usage is below the limit and are killed when it
  is reached).
- GrpTRESMins is the usage of the association and its children, decayed by PriorityDecayHalfLife and
  reset by PriorityUsageResetPeriod, and only with PriorityType=priority/multifactor (sacctmgr(1),
  GrpTRESMins). A monthly budget is therefore PriorityDecayHalfLife=0 (no decay: the usage counts
  in full) and PriorityUsageResetPeriod=MONTHLY (reset at the start of each month). Fair share then
  compares the month's usage.
- slurmctld 22.05 stops with "fatal: slurmdbd is required to run with TRES gres/gpu" when
  AccountingStorageTRES names gres/gpu without accounting_storage/slurmdbd, and refuses
  AccountingStorageEnforce without storage (measured): both lines are written only with slurmdbd,
  from this one record.
- A job of an association whose GrpTRESMins=gres/gpu would be passed waits with reason
  AssocGrpGRESMinutes (squeue %r; slurm.h WAIT_ASSOC_GRP_GRES_MIN), seen in tests/test_accounting_cluster.py.
"""

from __future__ import annotations

from .records import frozen

DBD_PORT = 6819
"""slurmdbd's default port (slurmdbd.conf(5) DbdPort, slurm.conf(5) AccountingStoragePort)."""
DEFAULT_DATABASE = "slurm_acct_db"  # slurmdbd.conf(5) StorageLoc's default
DEFAULT_USER = "slurm"
DEFAULT_PORT = 3306
PASSWORD_FILE = "/etc/slurm/slurmdbd-storage.conf"
"""slurmdbd.conf ends with `Include` of this file: `StoragePass=...`, written on the controller by the
site (mode 600, owned by the slurm user), never rendered."""
ONPREM_KEYS = ("host", "port", "user", "password_file")
"""The named database server's settings: on AWS the program makes the database and these come from it."""
STORAGE_TYPE = "accounting_storage/slurmdbd"
TRES = ("gres/gpu",)
ENFORCE = ("associations", "limits", "qos", "safe")
PRIORITY_WEIGHTS = {"PriorityWeightFairshare": 10000, "PriorityWeightAssoc": 1000, "PriorityWeightAge": 1000,
                    "PriorityWeightJobSize": 0, "PriorityWeightPartition": 0, "PriorityWeightQOS": 0}
"""PriorityWeight<Factor>: fair share first, a team's own priority next, then time waiting."""
PRIORITY_MAX_AGE = "7-0"
SLURMDBD_LOG = "/var/log/slurm/slurmdbd.log"
SLURMDBD_PID = "/run/slurmdbd.pid"


@frozen
class Team:
    """One team: a Slurm account under root with its users and limits, as sacctmgr load takes them."""
    name: str
    users: tuple[str, ...]
    gpu_hours_per_month: int | None
    max_gpus_per_job: int | None
    fair_share: int
    priority: int
    path: tuple

    @property
    def limits(self) -> str:
        """The Account line's options after its name (sacctmgr(1) option names)."""
        parts = [f"Fairshare={self.fair_share}"]
        if self.gpu_hours_per_month is not None:
            parts.append(f"GrpTRESMins=gres/gpu={self.gpu_hours_per_month * 60}")
        if self.max_gpus_per_job is not None:
            parts.append(f"MaxTRES=gres/gpu={self.max_gpus_per_job}")
        parts.append(f"Priority={self.priority}")
        return ":".join(parts)


@frozen
class Member:
    """A User line: a user under a team's account, with the default account it gets."""
    name: str
    default_account: str


@frozen
class AccountingConfig:
    cluster_name: str
    dbd_host: str  # slurmdbd runs on the controller
    dbd_port: int
    storage_host: str  # the named database server, default localhost; "" on AWS (the bootstrap writes the RDS address)
    storage_port: int | None  # None on AWS: the bootstrap writes it
    database: str
    user: str  # "" on AWS: the RDS master user, from its secret, written by the bootstrap
    password_file: str
    purge_after_months: int | None
    storage_type: str  # AccountingStorageType of slurm.conf
    tres: tuple[str, ...]
    enforce: tuple[str, ...]
    priority_weights: tuple[tuple[str, int], ...]
    priority_max_age: str
    teams: tuple[Team, ...]
    aws: bool  # the AWS program creates the database (providers/aws/accounting.py); the bootstrap writes where
    path: tuple
    declared_onprem: tuple[str, ...] = ()  # the on-prem server's keys the blueprint names (rule accounting-cloud)
    log_file: str = SLURMDBD_LOG
    pid_file: str = SLURMDBD_PID

    @property
    def members(self) -> tuple[tuple[Team, tuple[Member, ...]], ...]:
        """Each team with its users; a user's default account is the first team that lists them."""
        first: dict[str, str] = {}
        for team in self.teams:
            for user in team.users:
                first.setdefault(user, team.name)
        return tuple((team, tuple(Member(u, first[u]) for u in team.users)) for team in self.teams)


def teams(scheduler_data: dict | None, path: tuple) -> tuple[Team, ...]:
    data = (scheduler_data or {}).get("teams", ())
    return tuple(Team(t["name"], tuple(t["users"]), t.get("gpu_hours_per_month"), t.get("max_gpus_per_job"),
                      t.get("fair_share", 1), t.get("priority", 0), path + ("teams", i))
                 for i, t in enumerate(data))


def build(fleet, scheduler_data: dict | None, path: tuple, cloud: str) -> AccountingConfig | None:
    """The accounting of a Slurm training fleet whose scheduler has an `accounting` block, else None."""
    config = fleet.slurm
    data = (scheduler_data or {}).get("accounting")
    if config is None or data is None:
        return None
    aws = cloud == "aws"
    months = data.get("keep_job_months")
    # On AWS the database's address, port, user and password are known only once RDS made it: the
    # controller's bootstrap writes them, from the RDS-managed secret, into the included file
    # (StorageHost/StoragePort/StorageUser/StoragePass), so slurmdbd.conf names none of them.
    return AccountingConfig(
        cluster_name=config.cluster_name, dbd_host=config.controller_host, dbd_port=DBD_PORT,
        storage_host="" if aws else data.get("host", "localhost"),
        storage_port=None if aws else data.get("port", DEFAULT_PORT),
        database=data.get("database", DEFAULT_DATABASE), user="" if aws else data.get("user", DEFAULT_USER),
        password_file=PASSWORD_FILE if aws else data.get("password_file", PASSWORD_FILE), purge_after_months=months,
        storage_type=STORAGE_TYPE, tres=TRES, enforce=ENFORCE, priority_weights=tuple(PRIORITY_WEIGHTS.items()),
        priority_max_age=PRIORITY_MAX_AGE, teams=teams(scheduler_data, path), aws=aws,
        path=path + ("accounting",), declared_onprem=tuple(k for k in ONPREM_KEYS if k in data))
