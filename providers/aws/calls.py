"""The AWS calls the programs on a training fleet's instances make, in one place.

The user data (templates/cloud-init/), the bootstrap, and Slurm's resume and suspend programs and the
keeper (templates/slurm/) run on the controller (role `controller`), on the compute nodes (role
`compute`) or on the login nodes (role `login`) with the rights of that instance's role. The IAM policies the Pulumi program writes must
allow every call listed here, and nothing may depend on a condition the call cannot meet: the plan
check `iam-caller-actions` (fleetform/policies.py) compares the recorded policy documents with this
list, and tests compare this list with the `aws` commands the rendered programs contain.

Sources: EC2 resource-level permissions of RunInstances (every resource the launch creates or uses
is authorized: instance, volume, network-interface, launch-template, subnet, security-group, image,
placement-group, capacity-reservation) and tag-on-create (CreateTags with ec2:CreateAction):
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html#iam-example-runinstances;
ssm:GetParameters for a launch whose image is `resolve:ssm:`:
https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-ec2-aliases.html;
a customer managed KMS key of a secret needs kms:Decrypt to read and kms:GenerateDataKey to write:
https://docs.aws.amazon.com/secretsmanager/latest/userguide/security-encryption.html.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Call:
    program: str  # who calls: user-data, bootstrap, resume, suspend, keeper, update, prolog, jobs
    action: str  # the IAM action authorized
    resource: str = "*"  # the EC2 resource type it is authorized on (instance, volume, ...), or * for any
    sets_tags: bool = False  # the call tags this resource itself, so an aws:RequestTag condition can hold
    at_launch: bool = False  # a tag-on-create of RunInstances (an ec2:CreateAction condition holds)
    when: str = "always"  # always | ssm-image (the launch template's image is an SSM parameter) |
    # own-buckets (the blueprint has S3 buckets of its own)


LAUNCH_RESOURCES = ("launch-template", "subnet", "security-group", "image", "network-interface", "volume",
                    "placement-group", "capacity-reservation")
"""What a RunInstances call from the fleet's launch template uses or creates besides the instance: the
ResumeProgram tags only the instance, so none of these may sit under a request-tag condition (the
33 network interfaces of a p5 launch carry no tag of the call)."""

CONTROLLER: tuple[Call, ...] = (
    Call("user-data", "s3:GetObject"),
    Call("bootstrap", "secretsmanager:GetSecretValue"),
    Call("bootstrap", "secretsmanager:PutSecretValue"),  # the first boot stores the munge key it made
    Call("bootstrap", "kms:Decrypt"),
    Call("bootstrap", "kms:GenerateDataKey"),
    Call("resume", "ec2:RunInstances", "instance", sets_tags=True),
    *(Call("resume", "ec2:RunInstances", resource) for resource in LAUNCH_RESOURCES),
    Call("resume", "ec2:CreateTags", "instance", sets_tags=True, at_launch=True),
    Call("resume", "ec2:CreateTags", "volume", at_launch=True),  # the launch template's volume tags
    # one RunInstances call cannot give N instances N names: fleetform:node and Name come after it
    Call("resume", "ec2:CreateTags", "instance"),
    Call("resume", "ec2:DescribeInstances"),  # an instance of the node already pending or running
    Call("resume", "ec2:TerminateInstances", "instance"),  # all or nothing: a failed launch is undone
    Call("resume", "iam:PassRole"),  # the launch template's instance profile (the compute role)
    Call("resume", "ssm:GetParameters", when="ssm-image"),
    Call("suspend", "ec2:DescribeInstances"),
    Call("suspend", "ec2:TerminateInstances", "instance"),
    Call("keeper", "ec2:DescribeInstances"),
    Call("keeper", "ec2:TerminateInstances", "instance"),  # compute instances that never got a name
    Call("keeper", "ec2:DescribeCapacityReservations"),  # is the fleet's Capacity Block active yet
    # with accounting: the database's RDS-managed secret, which RDS rotates (bootstrap refresh_storage)
    Call("keeper", "secretsmanager:GetSecretValue"),
    Call("topology", "ec2:DescribeInstanceTopology"),  # topology.conf from EC2's network topology
    # node names in the fleet's Route 53 private zone (templates/slurm/bin/fleetform_dns.py)
    Call("resume", "route53:ChangeResourceRecordSets", "hostedzone"),  # UPSERT <node>.<zone> A
    Call("suspend", "route53:ListResourceRecordSets", "hostedzone"),  # a DELETE repeats the record
    Call("suspend", "route53:ChangeResourceRecordSets", "hostedzone"),
    Call("keeper", "route53:ListResourceRecordSets", "hostedzone"),  # records of nodes without an instance
    Call("keeper", "route53:ChangeResourceRecordSets", "hostedzone"),
    # day 2 (bin/update, from the keeper): HeadObject names the artifact's version (s3:GetObject,
    # https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html), GetObject with a versionId
    # downloads exactly it (s3:GetObjectVersion, API_GetObject.html "Permissions"); removed and rolled
    # nodes' instances are found (and terminated through bin/suspend --failed)
    Call("update", "s3:GetObject"),
    Call("update", "s3:GetObjectVersion"),
    Call("update", "ec2:DescribeInstances"),
)

COMPUTE: tuple[Call, ...] = (
    Call("user-data", "s3:GetObject"),
    Call("bootstrap", "secretsmanager:GetSecretValue"),  # the munge key (nodes never write it)
    Call("bootstrap", "kms:Decrypt"),
    # day 2: the node's timer installs a new version (as the controller's update); its Prolog lists the
    # artifact's versions to pin the one current at the job's start (ListObjectVersions needs
    # s3:ListBucketVersions on the bucket, https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html)
    Call("update", "s3:GetObject"),
    Call("update", "s3:GetObjectVersion"),
    Call("prolog", "s3:ListBucketVersions"),
    Call("jobs", "s3:GetObject", when="own-buckets"),  # checkpoints in the blueprint's own buckets
    Call("jobs", "s3:PutObject", when="own-buckets"),
    Call("jobs", "s3:ListBucket", when="own-buckets"),
)

LOGIN: tuple[Call, ...] = (
    # a login node (providers/aws/login.py) downloads the artifact and reads the munge key; its
    # users' jobs run on the compute nodes, with the compute role
    Call("user-data", "s3:GetObject"),
    Call("bootstrap", "secretsmanager:GetSecretValue"),
    Call("bootstrap", "kms:Decrypt"),
    # day 2: its update timer installs a new version (users added, slurm.conf), as a compute node's
    Call("update", "s3:GetObject"),
    Call("update", "s3:GetObjectVersion"),
)

CALLS = {"controller": CONTROLLER, "compute": COMPUTE, "login": LOGIN}

CLI_ACTIONS = {("s3", "cp"): "s3:GetObject", ("s3api", "get-object"): "s3:GetObject",
               ("s3api", "head-object"): "s3:GetObject", ("s3api", "list-object-versions"): "s3:ListBucketVersions",
               ("ec2", "wait"): "ec2:DescribeInstances"}
"""`aws` CLI commands whose IAM action is not their name in PascalCase (the downloads; `ec2 wait
instance-running` polls DescribeInstances)."""


def cli_action(service: str, command: str) -> str:
    """The IAM action of an `aws SERVICE COMMAND` call, e.g. ec2 run-instances -> ec2:RunInstances."""
    if (service, command) in CLI_ACTIONS:
        return CLI_ACTIONS[(service, command)]
    return f"{service}:{''.join(word.capitalize() for word in command.split('-'))}"
