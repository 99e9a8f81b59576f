"""Pulumi components that build a blueprint's fleets on AWS from the resolved model.

Raw pulumi_aws resources only (no remote components), so the program runs unchanged under Pulumi's
mocks for `fleetform plan` and the tests. Every child's logical name starts with its component's
name: when a blueprint renames a fleet and lists the old name in `renamed_from`, the component's
alias carries over to every child, and nothing is replaced silently.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from fleetform.catalog import InstanceType
from fleetform.model import Blueprint, Fleet

DLAMI_SSM = "resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
"""The AWS Deep Learning Base AMI (NVIDIA driver, EFA, aws-ofi-nccl), resolved by EC2 at launch."""
UBUNTU_SSM = "resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"
ROOT_GIB = 200
TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
"""Kubernetes taint effects as the EKS API spells them."""
LUSTRE_VERSION = "2.15"
LUSTRE_PORTS = ((988, 988), (1018, 1023))
"""FSx for Lustre: LNET (988) and the ports 1018-1023 its clients and servers use."""


def tags_of(bp: Blueprint, manifest_sha256: str, **extra: str) -> dict[str, str]:
    tags = dict(bp.labels)
    tags.update({"fleetform:blueprint": bp.name, "fleetform:version": bp.version,
                 "fleetform:manifest-sha256": manifest_sha256})
    tags.update(extra)
    return tags


def _opts(parent: pulumi.Resource, **kwargs) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, **kwargs)


class Network(pulumi.ComponentResource):
    """A VPC with a private subnet in the blueprint's zone, egress through a NAT gateway, and an S3
    gateway endpoint (S3 traffic stays off the NAT); or the existing vpc_id and subnet_id."""

    def __init__(self, name: str, bp: Blueprint, tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Network", name, None, opts)
        net = bp.network
        zone = bp.availability_zone or f"{bp.region}a"
        second = zone[:-1] + ("b" if zone[-1] != "b" else "a")
        if net.vpc_id:
            self.vpc_id = pulumi.Output.from_input(net.vpc_id)
            self.subnet_id = pulumi.Output.from_input(net.subnet_id)
            self.subnet_ids = [self.subnet_id]
            self.register_outputs({"vpc_id": self.vpc_id, "subnet_id": self.subnet_id})
            return
        import ipaddress

        block = ipaddress.ip_network(net.cidr)
        quarters = list(block.subnets(prefixlen_diff=2))
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=net.cidr, enable_dns_hostnames=True, enable_dns_support=True,
                          tags={**tags, "Name": f"{bp.name}"}, opts=_opts(self))
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=_opts(self))
        public = aws.ec2.Subnet(f"{name}-public", vpc_id=vpc.id, cidr_block=str(quarters[3]), availability_zone=zone,
                                map_public_ip_on_launch=False, tags={**tags, "Name": f"{bp.name}-public"},
                                opts=_opts(self))
        private = aws.ec2.Subnet(f"{name}-private", vpc_id=vpc.id, cidr_block=str(quarters[0]), availability_zone=zone,
                                 tags={**tags, "Name": f"{bp.name}-private"}, opts=_opts(self))
        # a second private subnet in another zone: EKS control planes need two zones (nodes stay in one)
        private_b = aws.ec2.Subnet(f"{name}-private-b", vpc_id=vpc.id, cidr_block=str(quarters[1]),
                                   availability_zone=second, tags={**tags, "Name": f"{bp.name}-private-b"},
                                   opts=_opts(self))
        eip = aws.ec2.Eip(f"{name}-nat-ip", domain="vpc", tags=tags, opts=_opts(self, depends_on=[igw]))
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=eip.id, subnet_id=public.id, tags=tags, opts=_opts(self))
        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=vpc.id,
                                       routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}], tags=tags,
                                       opts=_opts(self))
        private_rt = aws.ec2.RouteTable(f"{name}-private-rt", vpc_id=vpc.id,
                                        routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}], tags=tags,
                                        opts=_opts(self))
        aws.ec2.RouteTableAssociation(f"{name}-public-rta", subnet_id=public.id, route_table_id=public_rt.id,
                                      opts=_opts(self))
        for key, subnet in (("private-rta", private), ("private-b-rta", private_b)):
            aws.ec2.RouteTableAssociation(f"{name}-{key}", subnet_id=subnet.id, route_table_id=private_rt.id,
                                          opts=_opts(self))
        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, service_name=f"com.amazonaws.{bp.region}.s3",
                            vpc_endpoint_type="Gateway", route_table_ids=[private_rt.id], tags=tags, opts=_opts(self))
        self.vpc_id = vpc.id
        self.subnet_id = private.id
        self.subnet_ids = [private.id, private_b.id]
        self.register_outputs({"vpc_id": self.vpc_id, "subnet_id": self.subnet_id})


class Security(pulumi.ComponentResource):
    """The fleets' security group: all traffic between its members (EFA needs it), FSx for Lustre
    ports within it, SSH only from the blueprint's ssh_ingress_cidrs, egress open."""

    def __init__(self, name: str, bp: Blueprint, vpc_id, tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Security", name, None, opts)
        group = aws.ec2.SecurityGroup(f"{name}-nodes", vpc_id=vpc_id, description=f"fleetform {bp.name} nodes",
                                      tags={**tags, "Name": f"{bp.name}-nodes"}, opts=_opts(self))
        aws.vpc.SecurityGroupIngressRule(f"{name}-self-in", security_group_id=group.id, ip_protocol="-1",
                                         referenced_security_group_id=group.id,
                                         description="all traffic between fleet members (EFA, NCCL, Slurm)",
                                         tags=tags, opts=_opts(self))
        aws.vpc.SecurityGroupEgressRule(f"{name}-self-out", security_group_id=group.id, ip_protocol="-1",
                                        referenced_security_group_id=group.id,
                                        description="all traffic between fleet members (EFA requires it)",
                                        tags=tags, opts=_opts(self))
        aws.vpc.SecurityGroupEgressRule(f"{name}-egress", security_group_id=group.id, ip_protocol="-1",
                                        cidr_ipv4="0.0.0.0/0", description="outbound (packages, images, AWS APIs)",
                                        tags=tags, opts=_opts(self))
        for low, high in LUSTRE_PORTS:
            aws.vpc.SecurityGroupIngressRule(f"{name}-lustre-{low}", security_group_id=group.id, ip_protocol="tcp",
                                             from_port=low, to_port=high, referenced_security_group_id=group.id,
                                             description="FSx for Lustre", tags=tags, opts=_opts(self))
        for index, cidr in enumerate(bp.network.ssh_ingress_cidrs):
            aws.vpc.SecurityGroupIngressRule(f"{name}-ssh-{index}", security_group_id=group.id, ip_protocol="tcp",
                                             from_port=22, to_port=22, cidr_ipv4=cidr,
                                             description="SSH from ssh_ingress_cidrs", tags=tags, opts=_opts(self))
        self.group_id = group.id
        self.register_outputs({"group_id": self.group_id})


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


def _user_data(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _protect_bucket(name: str, bucket: aws.s3.Bucket, parent: pulumi.Resource, versioning: bool = True,
                    noncurrent_days: int | None = None) -> None:
    """Encryption, public access blocked, ownership enforced, versioning, expiry of old versions."""
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{name}-sse", bucket=bucket.id,
        rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"}, "bucket_key_enabled": True}],
        opts=_opts(parent))
    aws.s3.BucketPublicAccessBlock(f"{name}-public-access", bucket=bucket.id, block_public_acls=True,
                                   block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
                                   opts=_opts(parent))
    aws.s3.BucketOwnershipControls(f"{name}-ownership", bucket=bucket.id,
                                   rule={"object_ownership": "BucketOwnerEnforced"}, opts=_opts(parent))
    aws.s3.BucketVersioning(f"{name}-versioning", bucket=bucket.id,
                            versioning_configuration={"status": "Enabled" if versioning else "Suspended"},
                            opts=_opts(parent))
    if noncurrent_days:
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle", bucket=bucket.id,
            rules=[{"id": "expire-noncurrent", "status": "Enabled", "filter": {},
                    "noncurrent_version_expiration": {"noncurrent_days": noncurrent_days}}],
            opts=_opts(parent))


class Storage(pulumi.ComponentResource):
    """FSx for Lustre PERSISTENT_2 file systems with their S3 data repository association, and S3
    buckets (checkpoints), each encrypted and closed to the public."""

    def __init__(self, name: str, bp: Blueprint, subnet_id, group_id, tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Storage", name, None, opts)
        self.file_systems: dict[str, aws.fsx.LustreFileSystem] = {}
        self.buckets: dict[str, aws.s3.Bucket] = {}
        for item in bp.storage:
            base = f"{name}-{item.name}"
            if item.type == "fsx-lustre":
                fs = aws.fsx.LustreFileSystem(
                    base, deployment_type="PERSISTENT_2", storage_capacity=item.capacity_gib,
                    per_unit_storage_throughput=item.throughput_mb_per_tib, subnet_ids=subnet_id,
                    security_group_ids=[group_id], file_system_type_version=LUSTRE_VERSION,
                    data_compression_type="LZ4", tags={**tags, "Name": f"{bp.name}-{item.name}"}, opts=_opts(self))
                if item.import_path:
                    aws.fsx.DataRepositoryAssociation(
                        f"{base}-dra", file_system_id=fs.id, file_system_path="/",
                        data_repository_path=item.import_path, batch_import_meta_data_on_create=True,
                        s3={"auto_import_policy": {"events": ["NEW", "CHANGED", "DELETED"]}},
                        tags=tags, opts=_opts(self))
                self.file_systems[item.name] = fs
            else:
                bucket = aws.s3.Bucket(base, bucket_prefix=f"{bp.name}-{item.name}-"[:37], force_destroy=False,
                                       tags=tags, opts=_opts(self))
                _protect_bucket(base, bucket, self, item.versioning, item.noncurrent_expiry_days)
                self.buckets[item.name] = bucket
        self.register_outputs({"buckets": {k: b.bucket for k, b in self.buckets.items()}})


class RenderedFiles(pulumi.ComponentResource):
    """The rendered files in a bucket of their own, byte for byte what `fleetform render` wrote and
    reviewers read; nodes install them from here after checking their sha256."""

    def __init__(self, name: str, bp: Blueprint, files: dict[str, bytes], tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:RenderedFiles", name, None, opts)
        bucket = aws.s3.Bucket(f"{name}-bucket", bucket_prefix=f"{bp.name}-config-"[:37], tags=tags, opts=_opts(self))
        _protect_bucket(f"{name}-bucket", bucket, self, True, 90)
        self.prefix = f"{bp.version}/"
        for path, data in sorted(files.items()):
            aws.s3.BucketObjectv2(f"{name}-{path}", bucket=bucket.id, key=f"{self.prefix}{path}",
                                  content=data.decode("utf-8"), content_type="text/plain; charset=utf-8",
                                  server_side_encryption="aws:kms", tags=tags, opts=_opts(self))
        self.bucket = bucket
        self.register_outputs({"bucket": bucket.bucket, "prefix": self.prefix})


def _policy(document: dict) -> str:
    return json.dumps(document, sort_keys=True)


class Iam(pulumi.ComponentResource):
    """Instance roles: SSM access for every node, S3 access limited to the blueprint's own buckets;
    the EKS cluster and node roles for inference fleets."""

    def __init__(self, name: str, bp: Blueprint, bucket_arns: list, tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Iam", name, None, opts)
        ec2_trust = _policy({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
        self.node_role = aws.iam.Role(f"{name}-node", assume_role_policy=ec2_trust, tags=tags, opts=_opts(self))
        aws.iam.RolePolicyAttachment(f"{name}-node-ssm", role=self.node_role.name,
                                     policy_arn="arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
                                     opts=_opts(self))
        document = pulumi.Output.all(*bucket_arns).apply(lambda arns: _policy({"Version": "2012-10-17", "Statement": [
            {"Sid": "OwnBuckets", "Effect": "Allow",
             "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket", "s3:GetBucketLocation"],
             "Resource": sorted([a for a in arns] + [f"{a}/*" for a in arns])}]}))
        aws.iam.RolePolicy(f"{name}-node-s3", role=self.node_role.id, policy=document, opts=_opts(self))
        self.s3_policy = document
        self.ec2_trust = ec2_trust
        self.node_profile = aws.iam.InstanceProfile(f"{name}-node", role=self.node_role.name, tags=tags,
                                                    opts=_opts(self))
        self.eks_cluster_role = self.eks_node_role = None
        if any(f.kube is not None for f in bp.fleets):
            eks_trust = _policy({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"},
                 "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
            self.eks_cluster_role = aws.iam.Role(f"{name}-eks-cluster", assume_role_policy=eks_trust, tags=tags,
                                                 opts=_opts(self))
            aws.iam.RolePolicyAttachment(f"{name}-eks-cluster-policy", role=self.eks_cluster_role.name,
                                         policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy", opts=_opts(self))
            self.eks_node_role = aws.iam.Role(f"{name}-eks-node", assume_role_policy=ec2_trust, tags=tags,
                                              opts=_opts(self))
            for policy in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly",
                           "AmazonSSMManagedInstanceCore"):
                aws.iam.RolePolicyAttachment(f"{name}-eks-node-{policy}", role=self.eks_node_role.name,
                                             policy_arn=f"arn:aws:iam::aws:policy/{policy}", opts=_opts(self))
        self.register_outputs({})


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


LOCAL_NVME_NODECONFIG = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="FLEETFORM"

--FLEETFORM
Content-Type: application/node.eks.aws

# nodeadm: the instance-store NVMe drives as one RAID0 volume under kubelet and containerd, so
# the model caches (emptyDir, ephemeral-storage) of the vLLM pods land on local NVMe.
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0

--FLEETFORM--
"""


class InferenceFleet(pulumi.ComponentResource):
    """An EKS cluster (API authentication mode) and a managed GPU node group with the NVIDIA AMI, the
    nvidia.com/gpu taint and the labels the rendered manifests select on."""

    def __init__(self, name: str, bp: Blueprint, fleet: Fleet, net: Network, security: Security, iam: Iam,
                 tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:InferenceFleet", name, None, opts)
        kube = fleet.kube
        tags = {**tags, "fleetform:fleet": fleet.name}
        cluster = aws.eks.Cluster(
            f"{name}-cluster", name=f"{bp.name}-{fleet.name}", version=kube.version, role_arn=iam.eks_cluster_role.arn,
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            vpc_config={"subnet_ids": net.subnet_ids, "security_group_ids": [security.group_id],
                        "endpoint_private_access": True, "endpoint_public_access": False},
            tags=tags, opts=_opts(self))
        template = aws.ec2.LaunchTemplate(
            f"{name}-nodes", metadata_options={"http_tokens": "required", "http_endpoint": "enabled",
                                               "http_put_response_hop_limit": 2},
            user_data=_user_data(LOCAL_NVME_NODECONFIG) if fleet.instance.local_nvme_gb else None,
            block_device_mappings=[{"device_name": "/dev/xvda", "ebs": {
                "volume_size": ROOT_GIB, "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true"}}],
            tag_specifications=[{"resource_type": "instance", "tags": tags}], tags=tags, opts=_opts(self))
        aws.eks.NodeGroup(
            f"{name}-gpu", cluster_name=cluster.name, node_role_arn=iam.eks_node_role.arn, subnet_ids=[net.subnet_id],
            ami_type="AL2023_x86_64_NVIDIA", instance_types=[fleet.instance.name],
            capacity_type="SPOT" if fleet.capacity_type == "spot" else "ON_DEMAND",
            scaling_config={"min_size": fleet.nodes.min, "max_size": fleet.nodes.max, "desired_size": fleet.nodes.min},
            labels=dict(kube.node_labels),
            taints=[{"key": key, "value": value, "effect": TAINT_EFFECTS[effect]} for key, value, effect in kube.node_taints],
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            tags=tags, opts=_opts(self))
        self.cluster = cluster
        self.register_outputs({"cluster": cluster.name})
