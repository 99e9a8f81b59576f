"""The database of a Slurm training fleet's accounting on AWS (docs/accounting.md): an RDS for MySQL
instance in the fleet's VPC that slurmdbd on the controller keeps its records in.

Choices, and where they come from:
- RDS for MySQL, not Aurora MySQL: Slurm supports MySQL or MariaDB (slurm accounting.html, "MySQL
  Configuration"); one small single-AZ instance is all a slurmdbd needs, and an Aurora cluster adds
  a cluster and instances to pay for and manage without giving slurmdbd anything it uses.
- MySQL 8.4 (parameter group family mysql8.4): RDS for MySQL's supported major versions are 8.0 and
  8.4, and 8.0 reaches the end of RDS standard support on 2026-07-31 (Amazon RDS User Guide, "MySQL on
  Amazon RDS versions"), after which RDS charges Extended Support. The major version is pinned; RDS
  applies minor versions in the maintenance window (auto_minor_version_upgrade).
- The master password is managed by RDS in Secrets Manager (`manage_master_user_password`: pulumi-aws
  rds.Instance; "Can't manage the master user password with AWS Secrets Manager if MasterUserPassword
  is specified", RDS API CreateDBInstance): no password in the program, its state or a rendered file.
  The secret (JSON with `username` and `password`) is `master_user_secrets[0].secret_arn`, encrypted
  with the AWS managed key aws/secretsmanager. The controller reads it at boot.
- A DB subnet group needs subnets in at least two Availability Zones (RDS User Guide, "Working with a
  DB instance in a VPC"): the program's VPC has two private subnets in two zones
  (providers/aws/network.py); a user's VPC with one subnet is refused by rule accounting-cloud.
- Slurm's accounting.html recommends innodb_lock_wait_timeout=900 and a large
  innodb_buffer_pool_size (at least 4 GB is its example, "5-50% of the memory"): the parameter group
  sets the timeout; RDS's default buffer pool is already {DBInstanceClassMemory*3/4} (6 GB of the 8 GiB
  class below). RDS sizes the redo log itself; the timeout is the setting slurmdbd checks at start
  ("Database settings not recommended values").
"""

from __future__ import annotations

import re

import pulumi
import pulumi_aws as aws

from fleetform.model import Blueprint, Fleet

from .common import _opts

ENGINE = "mysql"
ENGINE_VERSION = "8.4"
PARAMETER_FAMILY = "mysql8.4"
INSTANCE_CLASS = "db.m6g.large"  # 2 vCPU, 8 GiB: Graviton, general purpose, offered for RDS for MySQL 8.4
STORAGE_GIB = 20  # gp3's smallest (RDS User Guide, "Amazon RDS DB instance storage")
MAX_STORAGE_GIB = 200  # storage autoscaling's ceiling: job records grow with the fleet's life
BACKUP_DAYS = 7
MYSQL_PORT = 3306
MASTER_USER = "slurm"
PARAMETERS = {"innodb_lock_wait_timeout": "900"}
"""The parameter group's settings (slurm accounting.html, "MySQL Configuration")."""


def final_snapshot_name(cluster: str, fleet: str, subnet_group: str = "") -> str:
    """The snapshot RDS takes when `pulumi destroy` deletes the database: a letter first, letters,
    digits and single hyphens, no final hyphen (pulumi-aws rds.Instance final_snapshot_identifier).
    It ends with the random suffix Pulumi gave the stack's DB subnet group (auto-naming: 7 hex digits),
    so a stack made again after a destroy takes its final snapshot under a new name: RDS refuses a
    snapshot name that exists (DBSnapshotAlreadyExists), and the first destroy's snapshot stays."""
    suffix = re.search(r"-([0-9a-f]{7})$", subnet_group)
    raw = f"{cluster}-{fleet}-slurmdbd-final" + (f"-{suffix.group(1)}" if suffix else "")
    name = "".join(c if c.isalnum() else "-" for c in raw.lower())
    while "--" in name:
        name = name.replace("--", "-")
    name = name.strip("-")
    return name if name[:1].isalpha() else f"s-{name}"


class AccountingDatabase(pulumi.ComponentResource):
    """slurmdbd's database: a security group the controller's interface joins (`clients_group_id`),
    the database's own security group admitting MySQL only from it, the DB subnet group over the
    VPC's private subnets, a parameter group, and the encrypted, private RDS for MySQL instance with
    its RDS-managed secret (`secret_arn`), `address` and `port`."""

    def __init__(self, name: str, bp: Blueprint, fleet: Fleet, cluster: str, vpc_id, subnet_ids: list, tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:AccountingDatabase", name, None, opts)
        a = fleet.accounting
        clients = aws.ec2.SecurityGroup(
            f"{name}-db-clients", vpc_id=vpc_id, description=f"fleetform {bp.name} {fleet.name}: slurmdbd (controller)",
            tags={**tags, "Name": f"{bp.name}-{fleet.name}-db-clients"}, opts=_opts(self))
        group = aws.ec2.SecurityGroup(
            f"{name}-db", vpc_id=vpc_id, description=f"fleetform {bp.name} {fleet.name}: slurmdbd database",
            tags={**tags, "Name": f"{bp.name}-{fleet.name}-db"}, opts=_opts(self))
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-db-in", security_group_id=group.id, ip_protocol="tcp", from_port=MYSQL_PORT, to_port=MYSQL_PORT,
            referenced_security_group_id=clients.id, description="MySQL from the Slurm controller (slurmdbd) only",
            tags=tags, opts=_opts(self))
        subnets = aws.rds.SubnetGroup(
            f"{name}-db", subnet_ids=subnet_ids, description=f"fleetform {bp.name} {fleet.name}: slurmdbd database",
            tags=tags, opts=_opts(self))
        parameters = aws.rds.ParameterGroup(
            f"{name}-db", family=PARAMETER_FAMILY, description=f"fleetform {bp.name} {fleet.name}: Slurm's settings",
            parameters=[{"name": k, "value": v} for k, v in PARAMETERS.items()], tags=tags, opts=_opts(self))
        self.instance = aws.rds.Instance(
            f"{name}-db", engine=ENGINE, engine_version=ENGINE_VERSION, auto_minor_version_upgrade=True,
            instance_class=INSTANCE_CLASS, allocated_storage=STORAGE_GIB, max_allocated_storage=MAX_STORAGE_GIB,
            storage_type="gp3", storage_encrypted=True, publicly_accessible=False, multi_az=False,
            db_name=a.database, username=MASTER_USER, manage_master_user_password=True, port=MYSQL_PORT,
            db_subnet_group_name=subnets.name, vpc_security_group_ids=[group.id],
            parameter_group_name=parameters.name, backup_retention_period=BACKUP_DAYS, copy_tags_to_snapshot=True,
            # `pulumi destroy` keeps the job records: RDS snapshots the database before deleting it
            skip_final_snapshot=False, final_snapshot_identifier=subnets.name.apply(
                lambda n: final_snapshot_name(cluster, fleet.cloud_name, n)),
            tags={**tags, "Name": f"{bp.name}-{fleet.name}-slurmdbd"}, opts=_opts(self))
        self.clients_group_id = clients.id
        self.secret_arn = self.instance.master_user_secrets.apply(lambda s: s[0].secret_arn if s else "")
        self.address = self.instance.address
        self.port = self.instance.port
        self.register_outputs({"address": self.address, "secret_arn": self.secret_arn})
