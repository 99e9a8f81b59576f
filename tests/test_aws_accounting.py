"""Accounting on AWS (docs/accounting.md, "On AWS"), under Pulumi's mocks: the program makes slurmdbd's
database as RDS for MySQL in the fleet's private subnets, encrypted and private, with an RDS-managed
password, reachable on 3306 only from a security group that only the controller's interface joins;
the controller may read exactly that secret and gets where the database is in its user data. The
database-private plan check fails on a crafted graph for each thing it guards (negative controls).
What only an AWS account would prove: that RDS accepts these arguments (engine 8.4 in the region, the
db.m6g.large class, the parameter group family) and that the instance role reads the managed secret
under the aws/secretsmanager key; tests/test_slurm_programs.py runs the bootstrap's part against moto.
"""

from __future__ import annotations

import base64
import copy
import json

import pytest

from conftest import AWS_TRAINING_HEAD
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.policies import check as check_policies
from fleetform.render import render

BLUEPRINT = AWS_TRAINING_HEAD + """\
    instance_type: p5.48xlarge
    nodes: 2
    scheduler:
      type: slurm
      accounting: {keep_job_months: 12}
      teams:
        - {name: llm, users: [alice], gpu_hours_per_month: 1000, max_gpus_per_job: 16}
"""
RDS, SG, RULE = "aws:rds/instance:Instance", "aws:ec2/securityGroup:SecurityGroup", \
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    path = tmp_path_factory.mktemp("acct") / "bp.yaml"
    path.write_text(BLUEPRINT)
    model = check(path).model
    assert model is not None
    return model, record(model, render(model))


def _one(resources, type_, name):
    (found,) = [r for r in resources if r["type"] == type_ and r["name"] == name]
    return found["inputs"]


def test_the_database_is_private_encrypted_backed_up_with_an_rds_managed_password(planned):
    _, resources = planned
    db = _one(resources, RDS, "train-db")
    assert {k: db[k] for k in ("engine", "engineVersion", "storageEncrypted", "publiclyAccessible",
                               "manageMasterUserPassword", "skipFinalSnapshot", "backupRetentionPeriod", "dbName",
                               "port", "parameterGroupName", "dbSubnetGroupName", "vpcSecurityGroupIds")} == {
        "engine": "mysql", "engineVersion": "8.4", "storageEncrypted": True, "publiclyAccessible": False,
        "manageMasterUserPassword": True, "skipFinalSnapshot": False, "backupRetentionPeriod": 7,
        "dbName": "slurm_acct_db", "port": 3306, "parameterGroupName": "train-db", "dbSubnetGroupName": "train-db",
        "vpcSecurityGroupIds": ["train-db-id"]}
    assert "password" not in db and db["finalSnapshotIdentifier"] == "a-plan-train-slurmdbd-final"
    # two private subnets in two zones (an RDS DB subnet group needs two Availability Zones)
    assert _one(resources, "aws:rds/subnetGroup:SubnetGroup", "train-db")["subnetIds"] == [
        "network-private-id", "network-private-b-id"]
    group = _one(resources, "aws:rds/parameterGroup:ParameterGroup", "train-db")
    assert (group["family"], group["parameters"]) == ("mysql8.4", [{"name": "innodb_lock_wait_timeout", "value": "900"}])


def test_mysql_is_admitted_only_from_the_group_only_the_controller_joins(planned):
    _, resources = planned
    into_db = [r["inputs"] for r in resources if r["type"] == RULE and r["inputs"]["securityGroupId"] == "train-db-id"]
    assert into_db == [{**into_db[0], "ipProtocol": "tcp", "fromPort": 3306, "toPort": 3306,
                        "referencedSecurityGroupId": "train-db-clients-id"}]
    assert "cidrIpv4" not in into_db[0] and "cidrIpv6" not in into_db[0]
    joined = [r["name"] for r in resources if "train-db-clients-id" in json.dumps(r["inputs"].get("securityGroups"))
              or "train-db-clients-id" in json.dumps(r["inputs"].get("networkInterfaces"))
              or "train-db-clients-id" in json.dumps(r["inputs"].get("vpcSecurityGroupIds"))]
    assert joined == ["train-controller"]  # the controller's interface; not the compute nodes' template
    assert _one(resources, "aws:ec2/networkInterface:NetworkInterface", "train-controller")["securityGroups"] == [
        "security-nodes-id", "train-db-clients-id"]


def test_the_controller_reads_exactly_the_database_secret_and_learns_where_the_database_is(planned):
    _, resources = planned
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!db-train-db-id-AbCdEf"
    statements = json.loads(_one(resources, "aws:iam/rolePolicy:RolePolicy", "train-controller")["policy"])["Statement"]
    reading = [s for s in statements if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])]
    assert [(s["Sid"], s["Resource"]) for s in reading] == [
        ("MungeKey", "arn:aws:mock:::secret/train-munge"), ("AccountingDatabaseSecret", secret)]
    assert next(s for s in reading if s["Sid"] == "AccountingDatabaseSecret") == {
        "Sid": "AccountingDatabaseSecret", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
        "Resource": secret}
    user_data = base64.b64decode(_one(resources, "aws:ec2/instance:Instance", "train-controller")
                                 ["userDataBase64"]).decode()
    assert [line for line in user_data.splitlines() if line.startswith("FLEETFORM_DB_")] == [
        "FLEETFORM_DB_HOST=train-db.abcdefghijkl.us-east-1.rds.amazonaws.com", "FLEETFORM_DB_PORT=3306",
        f"FLEETFORM_DB_SECRET='{secret}'"]


def test_the_plan_passes_its_checks(planned):
    model, resources = planned
    assert check_policies(resources, model) == []


def _broken(resources, type_, name, fn):
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["type"] == type_ and r["name"] == name:
            fn(r["inputs"])
    return broken


@pytest.mark.parametrize("type_, name, fn, message", [
    (RDS, "train-db", lambda i: i.update(publiclyAccessible=True), "is publicly accessible"),
    (RDS, "train-db", lambda i: i.update(storageEncrypted=False), "storage is not encrypted (storage_encrypted)"),
    (RDS, "train-db", lambda i: i.update(backupRetentionPeriod=0),
     "keeps no automated backups (backup_retention_period 0)"),
    (RDS, "train-db", lambda i: i.update(skipFinalSnapshot=True),
     "is deleted without a final snapshot or deletion protection"),
    (RDS, "train-db", lambda i: (i.pop("manageMasterUserPassword"), i.update(password="hunter2")),
     "its master password is not managed by RDS in Secrets Manager"),
    (RULE, "train-db-in", lambda i: (i.pop("referencedSecurityGroupId"), i.update(cidrIpv4="0.0.0.0/0")),
     "admits an address range to database train-db, not a security group"),
])
def test_database_private_fails_on_a_crafted_graph(planned, type_, name, fn, message):
    model, resources = planned
    violations = check_policies(_broken(resources, type_, name, fn), model)
    assert [(v[0], v[2]) for v in violations if v[0] == "database-private"] == [("database-private", message)], \
        violations


def test_a_stack_made_again_after_a_destroy_takes_its_final_snapshot_under_a_new_name():
    """RDS refuses a final snapshot whose name exists (DBSnapshotAlreadyExists): the name carries the random
    suffix Pulumi's auto-naming gave the stack's DB subnet group, new with each stack; a name without one (the
    plan's mocks) leaves it out."""
    from providers.aws.accounting import final_snapshot_name

    first = final_snapshot_name("a-plan", "train", "train-db-3f9a0c1")
    again = final_snapshot_name("a-plan", "train", "train-db-b7e21d4")
    assert (first, again) == ("a-plan-train-slurmdbd-final-3f9a0c1", "a-plan-train-slurmdbd-final-b7e21d4")
    assert final_snapshot_name("a-plan", "train", "train-db") == "a-plan-train-slurmdbd-final"
    assert final_snapshot_name("9x_dev", "train", "") == "s-9x-dev-train-slurmdbd-final"
