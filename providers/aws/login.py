"""The login nodes of a Slurm training fleet (fleetform/login.py): EC2 instances outside the compute
partitions, made by `pulumi up` (not by the controller's ResumeProgram: no Slurm node is behind them),
booting the fleet's image and bootstrap with FLEETFORM_ROLE=login, which installs the client tools and
munge with the cluster's key and starts no slurmd (docs/aws-training.md, "Login nodes, users and home
directories").

Network: each login node is in the fleets' security group (Slurm's RPCs both ways: sbatch and srun to
slurmctld, the nodes' slurmd back to srun; FSx for Lustre) and, with `access: {ssh_cidrs}`, in a
group of its own whose only rules are SSH from those ranges. With `access: ssm` it has no group of
its own and no inbound port: Session Manager's agent connects out (AWS Systems Manager User Guide,
"Session Manager": no inbound ports, no SSH keys), which AmazonSSMManagedInstanceCore allows.

IAM: a role of their own (fleetform:role login): SSM's managed policy, the rendered artifact (read
by the user data, then by the update timer for each new version: users added reach the login nodes) and the read of the fleet's munge key (providers/aws/calls.py LOGIN); none of
the controller's EC2 or Route 53 rights, none of the nodes' buckets. Users' jobs run on the compute
nodes with the compute role.
"""

from __future__ import annotations

import ipaddress

import pulumi
import pulumi_aws as aws

from fleetform.model import Blueprint, Fleet

from .common import _opts, _policy

LOGIN_ROOT_GIB = 100
SSM_CORE = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def artifact_policy(artifact_arn: str) -> str:
    """What a login node reads in S3: the rendered artifact, at boot and, for day 2, each new version
    its update timer installs (HeadObject, then that exact version: s3:GetObjectVersion, as the
    compute nodes' role; providers/aws/calls.py LOGIN)."""
    return _policy({"Version": "2012-10-17", "Statement": [
        {"Sid": "RenderedArtifact", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": artifact_arn}]})


def login_role(name: str, parent: pulumi.Resource, iam, tags: dict) -> tuple:
    """The login nodes' role and instance profile; the fleet adds the read of its munge key (and lists
    the role among the secret's readers)."""
    role = aws.iam.Role(f"{name}-login", assume_role_policy=iam.ec2_trust, tags=tags, opts=_opts(parent))
    aws.iam.RolePolicyAttachment(f"{name}-login-ssm", role=role.name, policy_arn=SSM_CORE, opts=_opts(parent))
    aws.iam.RolePolicy(f"{name}-login-s3", role=role.id, policy=iam.artifact_arn.apply(artifact_policy),
                       opts=_opts(parent))
    profile = aws.iam.InstanceProfile(f"{name}-login", role=role.name, tags=tags, opts=_opts(parent))
    return role, profile


class LoginNodes(pulumi.ComponentResource):
    """login.nodes instances named <fleet>-login-<n> (resource name, Name and `fleetform:node` tag: the
    bootstrap's host name), in the fleet's subnet, on the controller's image, IMDSv2 only, encrypted root volume."""

    def __init__(self, name: str, bp: Blueprint, fleet: Fleet, subnet_id, vpc_id, nodes_group_id, profile, ami,
                 user_data, tags: dict, depends_on: list, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:LoginNodes", name, None, opts)
        login = fleet.login
        groups = [nodes_group_id]
        if login.access == "ssh":
            group = aws.ec2.SecurityGroup(name, vpc_id=vpc_id,
                                          description=f"fleetform {bp.name} {fleet.name} login nodes: SSH",
                                          tags={**tags, "Name": f"{bp.name}-{fleet.name}-login"}, opts=_opts(self))
            for index, cidr in enumerate(login.ssh_cidrs):
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-ssh-{index}", security_group_id=group.id, ip_protocol="tcp", from_port=22,
                    to_port=22, cidr_ipv4=str(ipaddress.ip_network(cidr, strict=False)),
                    description="SSH to the login nodes from login.access.ssh_cidrs", tags=tags, opts=_opts(self))
            groups.append(group.id)
        self.instances = []
        for host in login.hosts:
            self.instances.append(aws.ec2.Instance(
                host, ami=ami, instance_type=login.instance_type,
                subnet_id=subnet_id, vpc_security_group_ids=groups, iam_instance_profile=profile.name,
                user_data_base64=user_data,
                # IMDSv2 only; one hop (no container on a login node reaches the role); its tags
                # readable: the bootstrap learns its name from `fleetform:node`
                metadata_options={"http_tokens": "required", "http_endpoint": "enabled",
                                  "http_put_response_hop_limit": 1, "instance_metadata_tags": "enabled"},
                root_block_device={"volume_size": LOGIN_ROOT_GIB, "volume_type": "gp3", "encrypted": True},
                tags={**tags, "fleetform:node": host, "Name": host},
                # a newer image of the SSM parameter does not replace a login node people are logged in on
                opts=_opts(self, ignore_changes=["ami"], depends_on=depends_on)))
        self.register_outputs({"login_nodes": [i.private_ip for i in self.instances]})
