"""A Slurm training fleet on EC2: placement group, EFA launch template, the static nodes and the
Slurm controller, with the rights Slurm's resume and suspend programs need."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from fleetform.catalog import InstanceType
from fleetform.model import Blueprint, Fleet

from .common import DLAMI_SSM, ROOT_GIB, UBUNTU_SSM, _opts, _policy, _user_data
from .iam import Iam
from .network import Network, Security
from .storage import RenderedFiles


@dataclass(frozen=True)
class NetworkInterface:
    card: int
    device: int
    kind: str  # interface | efa-only | efa


def efa_layout(instance: InstanceType) -> list[NetworkInterface]:
    """Network interfaces of an EFA launch template: card 0 gets the ENA interface (device 0) and an
    EFA-only interface (device 1); every other card one EFA-only interface (device 0)."""
    layout = [NetworkInterface(0, 0, "interface"), NetworkInterface(0, 1, "efa-only")]
    layout += [NetworkInterface(card, 0, "efa-only") for card in range(1, instance.network_cards)]
    return layout


def _launch_template_args(fleet: Fleet, group_id, subnet_id, profile_arn, user_data, tags: dict) -> dict:
    """What a GPU launch template of a fleet holds: EFA interfaces, IMDSv2, an encrypted gp3 root,
    capacity targeting and the user data."""
    instance = fleet.instance
    efa = fleet.interconnect is not None and fleet.interconnect.fabric == "efa"
    if efa:
        interfaces = [{"network_card_index": i.card, "device_index": i.device, "interface_type": i.kind,
                       "subnet_id": subnet_id, "security_groups": [group_id], "delete_on_termination": True}
                      for i in efa_layout(instance)]
    else:
        interfaces = [{"device_index": 0, "subnet_id": subnet_id, "security_groups": [group_id],
                       "delete_on_termination": True}]
    args = {
        "image_id": DLAMI_SSM,
        "instance_type": instance.name,
        "network_interfaces": interfaces,
        "metadata_options": {"http_tokens": "required", "http_endpoint": "enabled", "http_put_response_hop_limit": 2},
        "block_device_mappings": [{"device_name": "/dev/sda1", "ebs": {
            "volume_size": ROOT_GIB, "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true"}}],
        "iam_instance_profile": {"arn": profile_arn},
        "user_data": user_data,
        "tag_specifications": [{"resource_type": "instance", "tags": tags}, {"resource_type": "volume", "tags": tags}],
        "tags": tags,
    }
    if fleet.capacity_type == "reservation":
        args["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": fleet.reservation_id}}
    elif fleet.capacity_type == "capacity-block":
        args["instance_market_options"] = {"market_type": "capacity-block"}
        args["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": fleet.reservation_id}}
    elif fleet.capacity_type == "spot":
        args["instance_market_options"] = {"market_type": "spot",
                                           "spot_options": {"instance_interruption_behavior": "terminate"}}
    return args


def _cloud_init(bp: Blueprint, fleet: Fleet, role: str, bucket, prefix: str, slurm: bool, start: str | None):
    from fleetform.render.jinja import render

    return bucket.apply(lambda name: _user_data(render(
        "cloud-init/node.yaml.j2", role=role, fleet=fleet.name, blueprint=bp.name, bucket=name, prefix=prefix,
        slurm=slurm, start=start)))


def resume_policy(fleet: str, template_arn: str, node_role_arn: str) -> str:
    """What Slurm's resume and suspend programs may do: launch instances of this fleet's template
    tagged as this fleet, tag them at launch, terminate only this fleet's instances."""
    tagged = {"StringEquals": {"aws:RequestTag/fleetform:fleet": fleet}}
    return _policy({"Version": "2012-10-17", "Statement": [
        {"Sid": "LaunchTaggedInstances", "Effect": "Allow", "Action": "ec2:RunInstances",
         "Resource": ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:volume/*", "arn:aws:ec2:*:*:network-interface/*"],
         "Condition": tagged},
        {"Sid": "LaunchFrom", "Effect": "Allow", "Action": "ec2:RunInstances",
         "Resource": [template_arn, "arn:aws:ec2:*:*:subnet/*", "arn:aws:ec2:*:*:security-group/*",
                      "arn:aws:ec2:*::image/*", "arn:aws:ec2:*:*:placement-group/*",
                      "arn:aws:ec2:*:*:capacity-reservation/*"]},
        {"Sid": "TagAtLaunch", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*",
         "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}}},
        {"Sid": "TerminateOwn", "Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "*",
         "Condition": {"StringEquals": {"aws:ResourceTag/fleetform:fleet": fleet}}},
        {"Sid": "Describe", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
        {"Sid": "PassNodeRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": node_role_arn},
    ]})


class TrainingFleet(pulumi.ComponentResource):
    """A Slurm training fleet: cluster placement group, EFA launch template, Auto Scaling group of
    the static nodes (Slurm's resume program starts the rest), and the Slurm controller."""

    def __init__(self, name: str, bp: Blueprint, fleet: Fleet, net: Network, security: Security, iam: Iam,
                 files: RenderedFiles, tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:TrainingFleet", name, None, opts)
        tags = {**tags, "fleetform:fleet": fleet.name}
        placement = None
        if fleet.placement in ("cluster", "spread") and fleet.capacity_type != "capacity-block":
            placement = aws.ec2.PlacementGroup(f"{name}-placement", strategy=fleet.placement, tags=tags,
                                               opts=_opts(self))
        user_data = _cloud_init(bp, fleet, "compute node", files.bucket.bucket, files.prefix, True, "slurmd")
        template_args = _launch_template_args(fleet, security.group_id, net.subnet_id, iam.node_profile.arn,
                                              user_data, tags)
        if placement is not None:
            template_args["placement"] = {"group_name": placement.name}
        template = aws.ec2.LaunchTemplate(f"{name}-nodes", name=f"{bp.name}-{fleet.name}",
                                          update_default_version=True, **template_args, opts=_opts(self))
        static = fleet.nodes.min if fleet.nodes.elastic else fleet.nodes.max
        aws.autoscaling.Group(
            f"{name}-static", min_size=static, max_size=static, desired_capacity=static,
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            placement_group=placement.id if placement is not None else None,
            tags=[{"key": k, "value": v, "propagate_at_launch": True} for k, v in sorted(tags.items())],
            opts=_opts(self))
        # the controller has a role of its own: SSM, the blueprint's buckets and, for an elastic fleet,
        # starting and stopping this fleet's instances (the compute nodes get none of that)
        role = aws.iam.Role(f"{name}-controller", assume_role_policy=iam.ec2_trust, tags=tags, opts=_opts(self))
        aws.iam.RolePolicyAttachment(f"{name}-controller-ssm", role=role.name,
                                     policy_arn="arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
                                     opts=_opts(self))
        aws.iam.RolePolicy(f"{name}-controller-s3", role=role.id, policy=iam.s3_policy, opts=_opts(self))
        if fleet.slurm is not None and fleet.slurm.power is not None:
            aws.iam.RolePolicy(f"{name}-resume", role=role.id, policy=pulumi.Output.all(
                template.arn, iam.node_role.arn).apply(lambda arns: resume_policy(fleet.name, *arns)),
                opts=_opts(self))
        profile = aws.iam.InstanceProfile(f"{name}-controller", role=role.name, tags=tags, opts=_opts(self))
        controller_data = _cloud_init(bp, fleet, "Slurm controller", files.bucket.bucket, files.prefix, True,
                                      "slurmctld")
        aws.ec2.Instance(
            f"{name}-controller", ami=UBUNTU_SSM, instance_type=fleet.scheduler.controller_instance_type or "m7i.2xlarge",
            subnet_id=net.subnet_id, vpc_security_group_ids=[security.group_id],
            iam_instance_profile=profile.name, user_data_base64=controller_data,
            metadata_options={"http_tokens": "required", "http_endpoint": "enabled"},
            root_block_device={"volume_size": 100, "volume_type": "gp3", "encrypted": True},
            tags={**tags, "Name": fleet.slurm.controller_host if fleet.slurm else f"{fleet.name}-controller"},
            opts=_opts(self))
        self.launch_template = template
        self.register_outputs({"launch_template": template.name})


