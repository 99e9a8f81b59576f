"""Rules over Slurm accounting and teams (fleetform/accounting.py, docs/accounting.md)."""

from __future__ import annotations

from ..accounting import STORAGE_TYPE
from ..model import Blueprint
from . import Reporter, rule


def _slurm(fleet) -> bool:
    return fleet.scheduler is not None and fleet.scheduler.type == "slurm"


@rule("accounting-scope", "error", "`accounting` and `teams` are on a Slurm scheduler, the only kind that has them")
def accounting_scope(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        scheduler = fleet.scheduler
        if scheduler is None or _slurm(fleet):
            continue
        if fleet.accounting_declared:
            report(scheduler.path + ("accounting",), "`accounting` is Slurm's (slurmdbd): a fleet scheduled by "
                   "Kubernetes has none", "remove the block, or schedule the fleet with Slurm")
        for team in fleet.teams[:1]:
            report(team.path[:-1], "`teams` are Slurm accounts (sacctmgr): a fleet scheduled by Kubernetes has none",
                   "remove the block, or schedule the fleet with Slurm")


@rule("teams-need-accounting", "error", "teams (accounts, budgets, limits) come with `accounting`: without slurmdbd "
      "there is no account to charge and nothing enforces a budget")
def teams_need_accounting(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if not fleet.teams or not _slurm(fleet) or fleet.accounting is not None or fleet.slurm is None:
            continue
        report(fleet.teams[0].path[:-1],
               "teams are accounts in slurmdbd's database and their budgets and limits are enforced by slurmctld "
               "against it (AccountingStorageEnforce); without `accounting` slurm.conf keeps "
               "AccountingStorageType=accounting_storage/none and no team, budget or limit exists",
               "add `accounting: {}` to the scheduler (on-prem with `host:` the database server)")


@rule("team-max-gpus", "error", "a team's max_gpus_per_job is at most the GPUs of the fleet")
def team_max_gpus(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if fleet.shape is None or fleet.nodes is None:
            continue
        total = fleet.shape.gpu_count * fleet.nodes.max
        for team in fleet.teams:
            if team.max_gpus_per_job is not None and team.max_gpus_per_job > total:
                report(team.path + ("max_gpus_per_job",),
                       f"max_gpus_per_job {team.max_gpus_per_job} is more than the fleet's {total} GPUs "
                       f"({fleet.nodes.max} nodes x {fleet.shape.gpu_count}): the limit never applies",
                       f"max_gpus_per_job: {total} or less")


@rule("team-budget", "warning", "a team's monthly GPU-hour budget fits one of its largest jobs for an hour")
def team_budget(bp: Blueprint, report: Reporter) -> None:
    """With AccountingStorageEnforce=safe a job starts only when its GPUs x its time limit fit in
    what is left of the budget (slurm.conf(5)): a budget below one largest job's GPUs for an hour
    keeps every such job waiting (AssocGrpGRESMinutes) from the first day of the month."""
    for fleet in bp.fleets:
        for team in fleet.teams:
            if team.gpu_hours_per_month is None or team.max_gpus_per_job is None:
                continue
            if team.gpu_hours_per_month < team.max_gpus_per_job:
                report(team.path + ("gpu_hours_per_month",),
                       f"gpu_hours_per_month {team.gpu_hours_per_month} is less than one hour of a "
                       f"{team.max_gpus_per_job}-GPU job (max_gpus_per_job): Slurm starts a job only when it can finish "
                       "within what is left of the budget, so such a job always waits (AssocGrpGRESMinutes)",
                       f"gpu_hours_per_month: {team.max_gpus_per_job} or more, or a smaller max_gpus_per_job")


@rule("team-time-limit", "warning", "a fleet whose teams have GPU-hour budgets gives every partition a max_time")
def team_time_limit(bp: Blueprint, report: Reporter) -> None:
    """A job without --time gets its partition's MaxTime as its limit (UNLIMITED when the partition
    has no max_time), and with AccountingStorageEnforce=safe a job of an account with GrpTRESMins
    starts only when GPUs x its limit fit in what is left: an unlimited job never fits, so it waits
    (AssocGrpGRESMinutes) for ever, however large the budget (measured with Slurm 22.05:
    tests/test_accounting_cluster.py)."""
    for fleet in bp.fleets:
        if fleet.slurm is None or fleet.accounting is None:
            continue
        budgeted = [t for t in fleet.teams if t.gpu_hours_per_month is not None]
        open_ended = [p.name for p in fleet.slurm.partitions if p.max_time == "UNLIMITED"]
        if budgeted and open_ended:
            report(budgeted[0].path + ("gpu_hours_per_month",),
                   f"partition {', '.join(open_ended)} has no max_time, so a job without --time runs UNLIMITED, "
                   f"and Slurm (AccountingStorageEnforce=safe) never starts an unlimited job of a team with a "
                   f"GPU-hour budget: it waits with AssocGrpGRESMinutes for ever",
                   "give the partitions a max_time (a job without --time gets it as its limit), or have every "
                   "job ask --time")


@rule("accounting-cloud", "error", "accounting on AWS: the program makes the database (no `host`), in a VPC "
      "with private subnets in two Availability Zones")
def accounting_cloud(bp: Blueprint, report: Reporter) -> None:
    """On AWS the program creates slurmdbd's database (providers/aws/accounting.py: RDS for MySQL), so a
    `host`, `port`, `user` or `password_file` (the on-prem server's) has no meaning there; and an RDS DB
    subnet group needs subnets in at least two Availability Zones (RDS User Guide, "Working with a DB
    instance in a VPC"): the VPC fleetform makes has two, a user's own VPC (network.vpc_id) has the
    one network.subnet_id plus any provider.eks.subnet_ids."""
    for fleet in bp.fleets:
        a = fleet.accounting
        if a is None or not a.aws:
            continue
        for key in a.declared_onprem:
            report(a.path + (key,), f"`{key}` is the on-prem database server's setting; on AWS the program creates "
                   "the database (RDS for MySQL) and the controller reads its address, user and password at boot",
                   f"remove `{key}` (docs/accounting.md, \"On AWS\")")
        net = bp.network
        if net is not None and net.vpc_id:
            extra = bp.cluster.subnet_ids if bp.cluster is not None else ()
            if len({net.subnet_id, *extra}) < 2:
                report(a.path, "the database's DB subnet group needs subnets in two Availability Zones, and this "
                       "VPC (network.vpc_id) gives one subnet: RDS refuses the subnet group",
                       "leave out network.vpc_id so fleetform makes the VPC (two private subnets in two zones); "
                       "with an EKS cluster in the blueprint, a subnet in another zone in provider.eks.subnet_ids "
                       "counts too")


@rule("accounting-tres", "error", "AccountingStorageTRES names GRES that slurmdbd stores and GresTypes declares",
      stage="config")
def accounting_tres(bp: Blueprint, report: Reporter) -> None:
    """slurmctld 22.05 stops with "fatal: slurmdbd is required to run with TRES gres/gpu" when
    AccountingStorageTRES names a GRES without accounting_storage/slurmdbd (measured), and a GRES TRES
    whose type GresTypes does not declare is never counted, so its budget (GrpTRESMins) is never reached."""
    for fleet in bp.fleets:
        a, config = fleet.accounting, fleet.slurm
        if a is None or config is None:
            continue
        for tres in a.tres:
            kind, _, name = tres.partition("/")
            if kind != "gres":
                continue
            if a.storage_type != STORAGE_TYPE:
                report(a.path, f"AccountingStorageTRES names {tres} but AccountingStorageType is {a.storage_type}: "
                       "slurmctld stops (\"slurmdbd is required to run with TRES gres/gpu\")",
                       "a fleetform bug: report it")
            if name.split(":")[0] not in config.gres_types:
                report(a.path, f"AccountingStorageTRES names {tres} but GresTypes does not declare "
                       f"{name.split(':')[0]!r}: the TRES is never counted and its budgets never reached",
                       "a fleetform bug: report it")
