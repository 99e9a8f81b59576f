"""A Slurm training fleet on EC2, the ParallelCluster way without an Auto Scaling group: a placement
group and an EFA launch template from which the controller's ResumeProgram launches (and names)
every node, static ones too; the Slurm controller on a persistent network interface (a stable
address) with its StateSaveLocation on a persistent encrypted volume; the munge key's secret; and
the controller's rights, scoped to this cluster, this fleet and compute nodes.

`pulumi up` starts no GPU instance, so it never waits for GPU capacity: the controller's bootstrap
powers the static nodes up through Slurm, and the keeper powers up again any that fail
(README, "Training fleets on AWS").
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi_command import local

from fleetform.catalog import InstanceType
from fleetform.model import Blueprint, Fleet

from .accounting import AccountingDatabase
from .common import ROOT_GIB, _opts, _policy, _user_data, cluster_id
from . import login
from .iam import Iam
from .network import Network, Security
from .storage import RenderedFiles, Storage

CONTROLLER_TYPE = "m7i.2xlarge"
CONTROLLER_ROOT_GIB = 100
STATE_GIB = 50
"""The controller's StateSaveLocation volume: job and node state, small but kept across replacement."""
STATE_DEVICE = "/dev/sdf"


TERMINATE_NODES = """set -euo pipefail
# `pulumi destroy` of a training fleet: its compute instances were launched by the controller's
# ResumeProgram, not by Pulumi, so Pulumi does not know them. They are terminated here, and waited
# for, before the launch template, placement group, security group and subnet go: those cannot be
# deleted while instances (and their up to 33 network interfaces each) still use them.
ids=$(aws ec2 describe-instances --region "$FLEETFORM_REGION" --output text \
  --query 'Reservations[].Instances[].InstanceId' --filters \
  "Name=tag:fleetform:cluster,Values=$FLEETFORM_CLUSTER" "Name=tag:fleetform:fleet,Values=$FLEETFORM_FLEET" \
  "Name=tag:fleetform:role,Values=compute" "Name=instance-state-name,Values=pending,running,stopping,stopped")
if [ -n "$ids" ]; then
  echo "fleetform: terminating the compute instances of $FLEETFORM_CLUSTER/$FLEETFORM_FLEET: $ids" >&2
  # shellcheck disable=SC2086  # ids: whitespace-separated instance ids, one argument each
  aws ec2 terminate-instances --region "$FLEETFORM_REGION" --output text --instance-ids $ids >/dev/null
  # shellcheck disable=SC2086
  aws ec2 wait instance-terminated --region "$FLEETFORM_REGION" --instance-ids $ids
fi
"""
"""The delete command of the fleet's node reaper (pulumi-command `local.Command`). It runs where
`pulumi destroy` runs, with that shell's AWS credentials and the `aws` CLI; values come from the
environment, never spliced into the script."""


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


def own_placement_group(fleet: Fleet) -> bool:
    """Whether the fleet's nodes get a placement group of their own (TrainingFleet says why reserved capacity
    gets none)."""
    return fleet.placement in ("cluster", "spread") and fleet.capacity_type not in ("capacity-block", "reservation")


def _launch_template_args(fleet: Fleet, group_id, subnet_id, profile_arn, user_data, tags: dict) -> dict:
    """What a GPU launch template of a fleet holds: its image, EFA interfaces, IMDSv2 with the
    instance's tags readable (a node learns its Slurm name from its `fleetform:node` tag), an
    encrypted gp3 root, capacity targeting and the user data."""
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
        "image_id": fleet.image.launch_id,
        "instance_type": instance.name,
        "network_interfaces": interfaces,
        "metadata_options": {"http_tokens": "required", "http_endpoint": "enabled", "http_put_response_hop_limit": 2,
                             "instance_metadata_tags": "enabled"},
        "block_device_mappings": [{"device_name": "/dev/sda1", "ebs": {
            "volume_size": ROOT_GIB, "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true"}}],
        "iam_instance_profile": {"arn": profile_arn},
        # a node that gives up (no name, a wrong Slurm) powers off and is gone, not left stopped
        "instance_initiated_shutdown_behavior": "terminate",
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


def user_data(bp: Blueprint, fleet: Fleet, role: str, env: dict) -> pulumi.Output:
    """The user data of a controller or compute node: the environment file of the contract
    (README, "Training fleets on AWS"), then download, check and bootstrap. `env` maps each key to a
    value or an Output; the keys keep their order."""
    from fleetform.render.jinja import render

    keys = list(env)
    return pulumi.Output.all(*env.values()).apply(lambda values: _user_data(render(
        "cloud-init/user-data.sh.j2", role=role, fleet=fleet.name, blueprint=bp.name,
        env=[(key, "" if value is None else str(value)) for key, value in zip(keys, values, strict=True)])))


def dns_zone_name(cluster: str, fleet: str) -> str:
    """The fleet's private hosted zone: `<fleet>.<cluster>.fleetform.internal`, unique per Slurm
    cluster (one per training fleet and stack); `fleet` is its cloud name (its first name), so a
    rename with `renamed_from` keeps the zone. ParallelCluster's is `<cluster>.pcluster.`; `.internal`
    is the top-level domain ICANN reserved for private use (2024), so it never shadows a public name.
    Lower case: Route 53 compares record names in IAM conditions lower case (below), and a stack
    name may have capitals."""
    return f"{fleet}.{cluster}.fleetform.internal".lower()


def zone_arn(zone_id: str) -> str:
    """IAM's ARN of a hosted zone (Route 53 API Reference, "Actions, resources, and condition keys
    for Amazon Route 53": `arn:${Partition}:route53:::hostedzone/${Id}`)."""
    return f"arn:aws:route53:::hostedzone/{zone_id}"


def dns_statements(zone_id: str, zone: str) -> list[dict]:
    """The controller's rights on node names: list and change A records of this fleet's zone and
    no other; a change batch holding anything else (another type, a name outside the zone) is
    refused as a whole (Route 53 Developer Guide, "Using IAM policy conditions for fine-grained
    access control", https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/specifying-rrset-conditions.html:
    route53:ChangeResourceRecordSetsRecordTypes, upper case, and
    route53:ChangeResourceRecordSetsNormalizedRecordNames, lower case, without the final dot)."""
    return [
        {"Sid": "NodeNames", "Effect": "Allow", "Action": "route53:ChangeResourceRecordSets",
         "Resource": zone_arn(zone_id),
         "Condition": {"ForAllValues:StringEquals": {"route53:ChangeResourceRecordSetsRecordTypes": ["A"]},
                       "ForAllValues:StringLike": {
                           "route53:ChangeResourceRecordSetsNormalizedRecordNames": [f"*.{zone}"]}}},
        {"Sid": "ReadNodeNames", "Effect": "Allow", "Action": "route53:ListResourceRecordSets",
         "Resource": zone_arn(zone_id)},
    ]


def controller_policy(cluster: str, fleet: str, template_arn: str, node_role_arn: str,
                      secret_arn: str, key_arn: str, artifact_arn: str, region: str, zone_id: str = "",
                      zone: str = "", db_secret_arn: str = "") -> str:
    """What the controller's programs may do (providers/aws/calls.py lists their calls): launch from
    this fleet's launch template only, instances that the call itself tags as compute nodes of this
    cluster and fleet; tag them at launch; terminate only those (never the controller, never another
    blueprint's or stack's nodes); read and write the munge key; read the rendered artifact.

    Request-tag conditions sit only on the instance, the one resource the ResumeProgram tags: the
    volumes and the (up to 33) network interfaces of a launch are authorized by the launch template
    they come from instead."""
    own = {f"aws:RequestTag/fleetform:{k}": v for k, v in (("cluster", cluster), ("fleet", fleet), ("role", "compute"))}
    statements = [
        {"Sid": "LaunchComputeNodes", "Effect": "Allow", "Action": "ec2:RunInstances",
         "Resource": "arn:aws:ec2:*:*:instance/*", "Condition": {"StringEquals": own}},
        {"Sid": "LaunchFromTheFleetTemplate", "Effect": "Allow", "Action": "ec2:RunInstances",
         "Resource": [template_arn, "arn:aws:ec2:*:*:subnet/*", "arn:aws:ec2:*:*:security-group/*",
                      "arn:aws:ec2:*:*:network-interface/*", "arn:aws:ec2:*:*:volume/*", "arn:aws:ec2:*::image/*",
                      "arn:aws:ec2:*:*:placement-group/*", "arn:aws:ec2:*:*:capacity-reservation/*"],
         "Condition": {"ArnLike": {"ec2:LaunchTemplate": template_arn}}},
        {"Sid": "TagAtLaunch", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:volume/*", "arn:aws:ec2:*:*:network-interface/*"],
         "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}}},
        # after the launch, the node names: only on this cluster's compute nodes, only those two keys
        # (a node can never be re-tagged into another cluster, fleet or role)
        {"Sid": "NameComputeNodes", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": "arn:aws:ec2:*:*:instance/*",
         "Condition": {"StringEquals": {k.replace("RequestTag", "ResourceTag"): v for k, v in own.items()},
                       "ForAllValues:StringEquals": {"aws:TagKeys": ["Name", "fleetform:node"]}}},
        {"Sid": "Describe", "Effect": "Allow", "Action": ["ec2:DescribeCapacityReservations", "ec2:DescribeInstances",
                                                          "ec2:DescribeInstanceTopology"],
         "Resource": "*"},
        {"Sid": "TerminateComputeNodes", "Effect": "Allow", "Action": "ec2:TerminateInstances",
         "Resource": "arn:aws:ec2:*:*:instance/*",
         "Condition": {"StringEquals": {k.replace("RequestTag", "ResourceTag"): v for k, v in own.items()}}},
        {"Sid": "PassComputeRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": node_role_arn,
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
        {"Sid": "MungeKey", "Effect": "Allow", "Action": ["secretsmanager:GetSecretValue",
                                                          "secretsmanager:PutSecretValue"], "Resource": secret_arn},
        {"Sid": "MungeKeyEncryption", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": key_arn, "Condition": {"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}}},
        # the artifact, and on day 2 each of its versions (bin/update)
        {"Sid": "RenderedArtifact", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": artifact_arn},
    ]
    if zone_id and zone:
        statements += dns_statements(zone_id, zone)
    if db_secret_arn:
        # slurmdbd's database password: the RDS-managed secret of this fleet's database, read at boot
        # (bin/bootstrap). RDS encrypts it with the AWS managed key aws/secretsmanager when no
        # MasterUserSecretKmsKeyId is given (RDS API CreateDBInstance), and GetSecretValue needs
        # kms:Decrypt only "if the secret is encrypted using a customer-managed key instead of the
        # Amazon Web Services managed key aws/secretsmanager" (Secrets Manager API Reference,
        # GetSecretValue, required permissions): no kms statement.
        statements.append({"Sid": "AccountingDatabaseSecret", "Effect": "Allow",
                           "Action": "secretsmanager:GetSecretValue", "Resource": db_secret_arn})
    return _policy({"Version": "2012-10-17", "Statement": statements})


def munge_reader_policy(secret_arn: str, key_arn: str, region: str) -> str:
    """What compute nodes may do with the munge key: read it."""
    return _policy({"Version": "2012-10-17", "Statement": [
        {"Sid": "MungeKey", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secret_arn},
        {"Sid": "MungeKeyEncryption", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": key_arn,
         "Condition": {"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}}}]})


def secret_policy(secret_arn: str, reader_arns: list[str]) -> str:
    """The munge secret's resource policy: nobody but this cluster's controller and compute roles
    reads or writes its value (administrators keep managing the secret itself)."""
    return _policy({"Version": "2012-10-17", "Statement": [
        {"Sid": "OnlyThisCluster", "Effect": "Deny", "Principal": "*",
         "Action": ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"], "Resource": secret_arn,
         "Condition": {"StringNotEquals": {"aws:PrincipalArn": sorted(reader_arns)}}}]})


def lustre_mounts(bp: Blueprint, fleet: Fleet, storage: Storage) -> pulumi.Output:
    """FLEETFORM_LUSTRE_MOUNTS: `DNS_NAME@tcp:/MOUNT_NAME=MOUNT_PATH` for each attached FSx for Lustre."""
    entries = []
    for name in fleet.storage:
        item = bp.storage_named(name)
        if item is not None and item.type == "fsx-lustre" and name in storage.file_systems:
            fs = storage.file_systems[name]
            entries.append(pulumi.Output.concat(fs.dns_name, "@tcp:/", fs.mount_name, "=", item.mount_path))
    return pulumi.Output.all(*entries).apply(lambda parts: " ".join(parts))


class TrainingFleet(pulumi.ComponentResource):
    """A Slurm training fleet: placement group, EFA launch template (no Auto Scaling group: the
    controller's ResumeProgram launches every node), munge secret, and the Slurm controller."""

    def __init__(self, name: str, bp: Blueprint, fleet: Fleet, net: Network, security: Security, iam: Iam,
                 storage: Storage, files: RenderedFiles, tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:TrainingFleet", name, None, opts)
        cluster = cluster_id(bp)
        tags = {**tags, "fleetform:fleet": fleet.name}
        compute_tags = {**tags, "fleetform:role": "compute"}
        controller_tags = {**tags, "fleetform:role": "controller"}
        controller_name = fleet.slurm.controller_host if fleet.slurm else f"{fleet.name}-controller"

        # the munge key: an empty secret the controller's first boot fills; only this cluster reads it
        key = aws.kms.Key(f"{name}-munge", description=f"fleetform {cluster} {fleet.name}: munge key secret",
                          enable_key_rotation=True, deletion_window_in_days=7, tags=tags, opts=_opts(self))
        secret = aws.secretsmanager.Secret(f"{name}-munge", kms_key_id=key.arn, recovery_window_in_days=0,
                                           description=f"munge.key of Slurm fleet {fleet.name} ({cluster})",
                                           tags=tags, opts=_opts(self))
        role = aws.iam.Role(f"{name}-controller", assume_role_policy=iam.ec2_trust, tags=controller_tags,
                            opts=_opts(self))
        node_role, node_profile = iam.compute_role(name, self, tags)
        # login nodes (providers/aws/login.py): a role of their own, a reader of the munge key
        logins = fleet.login is not None and fleet.login.nodes > 0
        login_tags = {**tags, "fleetform:role": "login"}
        login_role, login_profile = login.login_role(name, self, iam, login_tags) if logins else (None, None)
        readers = [role.arn, node_role.arn] + ([login_role.arn] if logins else [])
        aws.secretsmanager.SecretPolicy(
            f"{name}-munge", secret_arn=secret.arn, block_public_policy=True,
            policy=pulumi.Output.all(secret.arn, *readers).apply(
                lambda a: secret_policy(a[0], list(a[1:]))), opts=_opts(self))
        aws.iam.RolePolicy(f"{name}-node-munge", role=node_role.id, policy=pulumi.Output.all(
            secret.arn, key.arn).apply(lambda a: munge_reader_policy(a[0], a[1], bp.region)), opts=_opts(self))
        if logins:
            aws.iam.RolePolicy(f"{name}-login-munge", role=login_role.id, policy=pulumi.Output.all(
                secret.arn, key.arn).apply(lambda a: munge_reader_policy(a[0], a[1], bp.region)), opts=_opts(self))

        # slurmdbd's database (docs/accounting.md): only the controller's interface is in its clients' group
        database = None
        if fleet.accounting is not None:
            database = AccountingDatabase(name, bp, fleet, cluster, net.vpc_id, net.subnet_ids, tags,
                                          opts=_opts(self))
        # the controller's address and state outlive the instance
        eni = aws.ec2.NetworkInterface(f"{name}-controller", subnet_id=net.subnet_id,
                                       security_groups=[security.group_id] + (
                                           [database.clients_group_id] if database is not None else []),
                                       description=f"Slurm controller {controller_name} ({cluster})",
                                       tags={**controller_tags, "Name": controller_name}, opts=_opts(self))
        state = aws.ebs.Volume(f"{name}-controller-state", availability_zone=net.zone, size=STATE_GIB, type="gp3",
                               encrypted=True, tags={**controller_tags, "Name": f"{controller_name}-state"},
                               opts=_opts(self))
        mounts = lustre_mounts(bp, fleet, storage)
        # node names: a private hosted zone per Slurm cluster, in the fleet's VPC only; the records
        # the ResumeProgram writes are not Pulumi's, so force_destroy lets `pulumi destroy` remove them
        # (the controller's name is in every machine's /etc/hosts: no record for it)
        zone_name = dns_zone_name(cluster, fleet.cloud_name)
        zone = aws.route53.Zone(f"{name}-names", name=zone_name, vpcs=[{"vpc_id": net.vpc_id}], force_destroy=True,
                                comment=f"fleetform {cluster} {fleet.cloud_name}: Slurm node names", tags=tags,
                                opts=_opts(self))
        env = {
            "FLEETFORM_CLUSTER": cluster, "FLEETFORM_BLUEPRINT": bp.name, "FLEETFORM_FLEET": fleet.name,
            "FLEETFORM_REGION": bp.region, "FLEETFORM_CONFIG_BUCKET": files.bucket.bucket,
            "FLEETFORM_CONFIG_KEY": files.key, "FLEETFORM_MUNGE_SECRET": secret.arn,
            "FLEETFORM_CONTROLLER_ADDR": eni.private_ip, "FLEETFORM_LUSTRE_MOUNTS": mounts,
            "FLEETFORM_DNS_ZONE": zone_name, "FLEETFORM_DNS_ZONE_ID": zone.zone_id,
        }

        placement = None
        # Reserved capacity brings its own placement: a Capacity Block sits in its UltraCluster, and
        # an On-Demand Capacity Reservation is targeted by id. A new placement group beside an ODCR
        # is refused by ParallelCluster when the ODCR is bound to another group, and warned about
        # otherwise ("insufficient capacity errors may occur due to placement constraints outside of
        # the reservation ... consider not using a placement group": aws-parallelcluster
        # cli/src/pcluster/validators/ec2_validators.py, PlacementGroupCapacityReservationValidator).
        if own_placement_group(fleet):
            placement = aws.ec2.PlacementGroup(f"{name}-placement", strategy=fleet.placement, tags=tags,
                                               opts=_opts(self))
        template_args = _launch_template_args(fleet, security.group_id, net.subnet_id, node_profile.arn,
                                              user_data(bp, fleet, "compute nodes",
                                                        {"FLEETFORM_ROLE": "compute", **env}),
                                              compute_tags)
        # The nodes' image is pinned at deploy time, like the controller's: an SSM parameter is
        # resolved by this `pulumi up`, not by EC2 at every launch (`resolve:ssm:`), so every node
        # launched until the next `pulumi up` runs the same image (and the same kernel, which the
        # FSx Lustre client modules are installed for). A newer image shows in `pulumi preview` as
        # a new launch template version; nodes launched after `pulumi up` get it (a node roll).
        if fleet.image.ssm_parameter and not fleet.image.ami:
            template_args["image_id"] = aws.ssm.get_parameter_output(name=fleet.image.ssm_parameter).value
        if placement is not None:
            template_args["placement"] = {"group_name": placement.name}
        template = aws.ec2.LaunchTemplate(f"{name}-nodes", update_default_version=True, **template_args,
                                          opts=_opts(self))

        # Destroy order: the controller goes first (no keeper or slurmctld relaunches a node), then
        # this command's delete terminates every compute instance of the fleet and waits, then the
        # launch template, placement group, security group and subnet it depends on.
        reaper = local.Command(
            f"{name}-node-reaper", create="true", delete=TERMINATE_NODES, interpreter=["/bin/bash", "-c"],
            environment={"FLEETFORM_CLUSTER": cluster, "FLEETFORM_FLEET": fleet.name, "FLEETFORM_REGION": bp.region},
            opts=_opts(self, depends_on=[template, *([placement] if placement is not None else [])]))

        aws.iam.RolePolicyAttachment(f"{name}-controller-ssm", role=role.name,
                                     policy_arn="arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
                                     opts=_opts(self))
        image = fleet.scheduler.controller_image or fleet.image
        rights = aws.iam.RolePolicy(f"{name}-controller", role=role.id, policy=pulumi.Output.all(
            template.arn, node_role.arn, secret.arn, key.arn, iam.artifact_arn, zone.zone_id,
            database.secret_arn if database is not None else "").apply(
                lambda a: controller_policy(cluster, fleet.name, *a[:5], bp.region, a[5], zone_name, a[6])),
            opts=_opts(self))
        profile = aws.iam.InstanceProfile(f"{name}-controller", role=role.name, tags=controller_tags,
                                          opts=_opts(self))
        # The image id is resolved now, at deploy time, and then kept: an instance whose ami is
        # `resolve:ssm:` fails with a root_block_device (terraform-provider-aws #43488) and is
        # replaced on every update without one (#43364), taking StateSaveLocation's node with it.
        # ignore_changes keeps a newer image from replacing the controller; roll it on purpose with
        # `pulumi up --replace <controller URN>` (README, "Training fleets on AWS").
        ami = image.ami or aws.ssm.get_parameter_output(name=image.ssm_parameter).value
        controller = aws.ec2.Instance(
            f"{name}-controller", ami=ami,
            instance_type=fleet.scheduler.controller_instance_type or CONTROLLER_TYPE,
            primary_network_interface={"network_interface_id": eni.id},
            iam_instance_profile=profile.name,
            user_data_base64=user_data(bp, fleet, "Slurm controller", {
                "FLEETFORM_ROLE": "controller", **env, "FLEETFORM_LAUNCH_TEMPLATE": template.id,
                "FLEETFORM_STATE_VOLUME": state.id,
                # slurmdbd's database: where it is and the secret with its user and password (bin/bootstrap)
                **({"FLEETFORM_DB_HOST": database.address, "FLEETFORM_DB_PORT": database.port,
                    "FLEETFORM_DB_SECRET": database.secret_arn} if database is not None else {}),
                # the keeper powers static nodes up only once the Capacity Block is active
                **({"FLEETFORM_CAPACITY_BLOCK": fleet.reservation_id}
                   if fleet.capacity_type == "capacity-block" else {})}),
            metadata_options={"http_tokens": "required", "http_endpoint": "enabled",
                              "instance_metadata_tags": "enabled"},
            root_block_device={"volume_size": CONTROLLER_ROOT_GIB, "volume_type": "gp3", "encrypted": True},
            tags={**controller_tags, "Name": controller_name},
            # one network interface cannot be on two instances: the old controller goes first
            # its rights exist before it boots (its first download still retries while IAM
            # propagates them: templates/cloud-init/user-data.sh.j2)
            opts=_opts(self, ignore_changes=["ami"], delete_before_replace=True, depends_on=[files.object, rights, reaper]))
        # a replaced controller is stopped before its state volume is detached: never detached from
        # a running slurmctld mid-write (terraform-provider-aws aws_volume_attachment,
        # stop_instance_before_detaching)
        aws.ec2.VolumeAttachment(f"{name}-controller-state", device_name=STATE_DEVICE, volume_id=state.id,
                                 instance_id=controller.id, stop_instance_before_detaching=True, opts=_opts(self))
        if logins:  # the controller's image and bootstrap; started once the controller is
            login.LoginNodes(f"{name}-login", bp, fleet, net.subnet_id, net.vpc_id, security.group_id,
                             login_profile, ami, user_data(bp, fleet, "login nodes", {"FLEETFORM_ROLE": "login", **env}),
                             login_tags, [files.object, controller], opts=_opts(self))
        self.launch_template = template
        self.register_outputs({"launch_template": template.id, "controller_address": eni.private_ip})
