"""Security policies: plain functions over the recorded resource graph of `fleetform plan`.

Each policy takes the resources ({type, name, parent, inputs}) and the blueprint, and returns
violations as (resource name, message). The plan reports every violation as an error finding.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
from typing import Callable

from .model import Blueprint

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
BUCKET = "aws:s3/bucket:Bucket"
AUTOSCALING_GROUP = "aws:autoscaling/group:Group"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
Violation = tuple[str, str]
Policy = Callable[[list[dict], Blueprint], list[Violation]]
POLICIES: dict[str, tuple[str, Policy]] = {}


def policy(id: str, summary: str):
    def register(fn: Policy) -> Policy:
        POLICIES[id] = (summary, fn)
        return fn
    return register


def _of(resources, type_):
    return [r for r in resources if r["type"] == type_]


@policy("imdsv2-required", "every launch template and instance requires IMDSv2 tokens")
def imdsv2(resources, bp):
    return [(r["name"], "does not require IMDSv2 (metadata_options.http_tokens must be 'required')")
            for r in _of(resources, LAUNCH_TEMPLATE) + _of(resources, INSTANCE)
            if (r["inputs"].get("metadataOptions") or {}).get("httpTokens") != "required"]


@policy("encrypted-storage", "volumes and buckets are encrypted")
def encrypted(resources, bp):
    out = []
    for r in _of(resources, LAUNCH_TEMPLATE):
        for device in r["inputs"].get("blockDeviceMappings", []):
            if str((device.get("ebs") or {}).get("encrypted")).lower() != "true":
                out.append((r["name"], f"volume {device.get('deviceName')} is not encrypted"))
    for r in _of(resources, INSTANCE):
        if not (r["inputs"].get("rootBlockDevice") or {}).get("encrypted"):
            out.append((r["name"], "root volume is not encrypted"))
    # an EFS file system (a fleet's shared cache, providers/aws/caches.py): encryption at rest is chosen at creation
    # only (EFS User Guide, "Encrypting data at rest": it "can't be disabled" or enabled later)
    out += [(r["name"], "EFS file system is not encrypted at rest") for r in _of(resources, EFS_FILE_SYSTEM)
            if r["inputs"].get("encrypted") is not True]
    encrypted_buckets = {r["inputs"].get("bucket") for r in
                         _of(resources, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")}
    out += [(b["name"], "bucket has no server-side encryption configuration") for b in _of(resources, BUCKET)
            if f"{b['name']}-id" not in encrypted_buckets]
    return out


EFS_FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
EFS_MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"


@policy("efs-nfs-from-nodes", "an EFS mount target admits NFS (TCP 2049) from security groups only, and some group at all")
def efs_nfs(resources, bp):
    """A mount target answers what its security groups admit (EFS User Guide, "Using VPC security groups for Amazon
    EFS": the mount target's groups "must allow inbound access ... on the NFS port (2049)" from the clients' groups):
    no rule on 2049 and no node mounts (the pods stay ContainerCreating); a rule from a range, or on other ports,
    opens the cache's file system to whatever the range holds."""
    rules = _of(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    out = []
    for target in _of(resources, EFS_MOUNT_TARGET):
        groups = set(target["inputs"].get("securityGroups") or ())
        mine = [r for r in rules if r["inputs"].get("securityGroupId") in groups]
        for r in mine:
            i = r["inputs"]
            if i.get("cidrIpv4") or i.get("cidrIpv6") or i.get("prefixListId") or not i.get("referencedSecurityGroupId"):
                out.append((r["name"], "admits a range, not the clients' security group, to an EFS mount target"))
            elif (i.get("ipProtocol"), i.get("fromPort"), i.get("toPort")) != ("tcp", 2049, 2049):
                out.append((r["name"], f"admits {i.get('ipProtocol')} {i.get('fromPort')}-{i.get('toPort')} to an "
                                       "EFS mount target, which serves NFS on TCP 2049 only"))
        if not any((r["inputs"].get("ipProtocol"), r["inputs"].get("fromPort")) == ("tcp", 2049) for r in mine):
            out.append((target["name"], "no security group of the EFS mount target admits NFS (TCP 2049): "
                                        "no node can mount the file system"))
    return out


@policy("public-access-blocked", "every bucket blocks public ACLs and policies")
def public_access(resources, bp):
    blocked = {r["inputs"].get("bucket") for r in _of(resources, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
               if all(r["inputs"].get(k) is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                                            "restrictPublicBuckets"))}
    return [(b["name"], "bucket does not block public access") for b in _of(resources, BUCKET)
            if f"{b['name']}-id" not in blocked]


@policy("no-open-ingress", "no ingress from 0.0.0.0/0 unless ssh_ingress_cidrs asks for it")
def open_ingress(resources, bp):
    allowed = {ipaddress.ip_network(c, strict=False) for c in bp.network.ssh_ingress_cidrs}
    # a login node's SSH ranges (login.access.ssh_cidrs) are the blueprint's asking too (rule login-ssh-open)
    allowed |= {ipaddress.ip_network(c, strict=False) for f in bp.fleets if f.login is not None for c in f.login.ssh_cidrs}
    out = []
    for r in _of(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        cidr = r["inputs"].get("cidrIpv4")
        # strict=False: a blueprint's range with host bits set (1.2.3.4/0) is the network it names
        if cidr and ipaddress.ip_network(cidr, strict=False).prefixlen == 0 \
                and ipaddress.ip_network(cidr, strict=False) not in allowed:
            out.append((r["name"], f"allows ingress from {cidr}"))
    return out


DB_INSTANCE = "aws:rds/instance:Instance"


@policy("database-private", "a database is encrypted, not public, keeps backups and a final snapshot, has an "
        "RDS-managed password, and admits connections only from security groups")
def database_private(resources, bp):
    """What slurmdbd's database (providers/aws/accounting.py) must be: storage_encrypted,
    publicly_accessible false (RDS User Guide, "Working with a DB instance in a VPC": a private instance
    has no public address), backups kept (backup_retention_period > 0) and a final snapshot on delete
    or deletion protection, the master password managed by RDS in Secrets Manager (never `password`,
    which Pulumi keeps in its state), and every ingress rule of its security groups from another
    security group, never an address range."""
    out = []
    rules = _of(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    for r in _of(resources, DB_INSTANCE):
        i = r["inputs"]
        if i.get("storageEncrypted") is not True:
            out.append((r["name"], "storage is not encrypted (storage_encrypted)"))
        if i.get("publiclyAccessible") is True:
            out.append((r["name"], "is publicly accessible"))
        if not i.get("backupRetentionPeriod"):
            out.append((r["name"], "keeps no automated backups (backup_retention_period 0)"))
        if i.get("skipFinalSnapshot", False) is not False and i.get("deletionProtection") is not True:
            out.append((r["name"], "is deleted without a final snapshot or deletion protection"))
        if i.get("manageMasterUserPassword") is not True or i.get("password"):
            out.append((r["name"], "its master password is not managed by RDS in Secrets Manager"))
        groups = set(i.get("vpcSecurityGroupIds") or [])
        if not groups:
            out.append((r["name"], "names no security group (it would get the VPC's default group)"))
        for rule in rules:
            if rule["inputs"].get("securityGroupId") in groups and not rule["inputs"].get("referencedSecurityGroupId"):
                out.append((rule["name"], f"admits an address range to database {r['name']}, not a security group"))
    return out


@policy("monitoring-ports-private", "exporter and Prometheus ports admit only the fleet's own security group")
def monitoring_ports(resources, bp):
    """The node exporter, dcgm-exporter and Prometheus answer anyone who reaches them, without
    authentication (fleetform/monitoring.py): the controller scrapes them through the fleet group's
    rule for its own members; a rule admitting an address range to those ports is a leak."""
    from .monitoring import DCGM_EXPORTER_PORT, NODE_EXPORTER_PORT, PROMETHEUS_PORT

    out = []
    for r in _of(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        i = r["inputs"]
        cidr = i.get("cidrIpv4") or i.get("cidrIpv6") or i.get("prefixListId")
        if not cidr:
            continue
        every = str(i.get("ipProtocol")) == "-1"
        low, high = int(i.get("fromPort") or 0), int(i.get("toPort") or 0)
        exposed = [p for p in (NODE_EXPORTER_PORT, DCGM_EXPORTER_PORT, PROMETHEUS_PORT)
                   if every or (str(i.get("ipProtocol")) in ("tcp", "6") and low <= p <= high)]
        if exposed:
            out.append((r["name"], f"admits {cidr} to port {', '.join(map(str, exposed))}"))
    return out


@policy("efa-security-groups", "every interface of a launch template carries the security groups, and only there")
def efa_groups(resources, bp):
    out = []
    for r in _of(resources, LAUNCH_TEMPLATE):
        interfaces = r["inputs"].get("networkInterfaces") or []
        if interfaces and r["inputs"].get("vpcSecurityGroupIds"):
            out.append((r["name"], "sets vpc_security_group_ids as well as network interfaces"))
        for i in interfaces:
            if not i.get("securityGroups"):
                out.append((r["name"], f"interface card {i.get('networkCardIndex', 0)} device {i.get('deviceIndex')} "
                                       "has no security group"))
    return out


@policy("asg-zones", "every Auto Scaling group names its subnets or availability zones")
def asg_zones(resources, bp):
    """AWS rejects CreateAutoScalingGroup without either ("At least one Availability Zone or VPC
    Subnet is required"); the mocks accept it. The provider documents one of `availability_zones` and
    `vpc_zone_identifiers` as required:
    https://www.pulumi.com/registry/packages/aws/api-docs/autoscaling/group/ and
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_CreateAutoScalingGroup.html
    (fleetform's training fleets have no Auto Scaling group; EKS makes its node groups' own, which
    the plan does not record: the check holds for any group a program adds)."""
    return [(r["name"], "names neither subnets (vpc_zone_identifiers) nor availability zones; "
                        "AWS rejects CreateAutoScalingGroup")
            for r in _of(resources, AUTOSCALING_GROUP)
            if not r["inputs"].get("vpcZoneIdentifiers") and not r["inputs"].get("availabilityZones")]


@policy("instance-image-id", "an instance with a root_block_device names its image by AMI id, not resolve:ssm:")
def instance_image_id(resources, bp):
    """The AWS provider looks the image up with DescribeImages to fill a root_block_device, which
    fails on `resolve:ssm:` (InvalidAMIID.Malformed,
    https://github.com/hashicorp/terraform-provider-aws/issues/43488); without the block the
    instance is replaced on every update (#43364). Resolve the id at deploy time instead."""
    return [(r["name"], f"ami {r['inputs']['ami']!r} with a root_block_device: the provider fails with "
                        "InvalidAMIID.Malformed (terraform-provider-aws #43488)")
            for r in _of(resources, INSTANCE)
            if str(r["inputs"].get("ami", "")).startswith("resolve:ssm:") and r["inputs"].get("rootBlockDevice")]


def _statements(document: str) -> list[dict]:
    statements = json.loads(document).get("Statement", [])
    return [statements] if isinstance(statements, dict) else statements


def _listed(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _allows(statement: dict, call) -> bool:
    """Whether an Allow statement authorizes a call on its resource type, with conditions the call
    can meet: a request-tag condition holds only where the call tags the resource itself, and an
    ec2:CreateAction condition only for the tags of a launch."""
    if statement.get("Effect") != "Allow":
        return False
    if not any(fnmatch.fnmatchcase(call.action, pattern) for pattern in _listed(statement.get("Action"))):
        return False
    resources = _listed(statement.get("Resource"))
    if call.resource != "*" and not any(r == "*" or f":{call.resource}/" in r for r in resources):
        return False
    keys = [key for operator in (statement.get("Condition") or {}).values() for key in operator]
    if "ec2:CreateAction" in keys and not call.at_launch:  # tag-on-create only, and this call tags later
        return False
    return call.sets_tags or not any(key.startswith("aws:RequestTag/") for key in keys)


@policy("iam-caller-actions", "each instance role allows every AWS call its programs make")
def iam_caller_actions(resources, bp):
    """The role of a controller or compute node (tag `fleetform:role`) must allow each call in
    providers/aws/calls.py, on the resource types the call touches, under conditions the call meets.
    EC2 authorizes RunInstances per resource it creates or uses and fails the whole launch for one
    denied (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html); a
    `resolve:ssm:` image needs ssm:GetParameters
    (https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-ec2-aliases.html)."""
    from .providers.aws.calls import CALLS

    ssm_fleets = {(r["inputs"].get("tags") or {}).get("fleetform:fleet") for r in _of(resources, LAUNCH_TEMPLATE)
                  if str(r["inputs"].get("imageId", "")).startswith("resolve:ssm:")}
    out = []
    for role in _of(resources, ROLE):
        tags = role["inputs"].get("tags") or {}
        calls = CALLS.get(tags.get("fleetform:role"))
        if calls is None:
            continue
        statements = [s for p in _of(resources, ROLE_POLICY) if p["inputs"].get("role") in (f"{role['name']}-id",
                                                                                               role["name"])
                      for s in _statements(p["inputs"].get("policy", "{}"))]
        for call in calls:
            if call.when == "ssm-image" and tags.get("fleetform:fleet") not in ssm_fleets:
                continue
            if call.when == "own-buckets" and not any(s.type == "s3" for s in bp.storage):
                continue
            if not any(_allows(s, call) for s in statements):
                where = f" on {call.resource}" if call.resource != "*" else ""
                out.append((role["name"], f"does not allow {call.action}{where}, which {call.program} calls "
                                          "(providers/aws/calls.py)"))
    return out


EKS_CLUSTER = "aws:eks/cluster:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def _id_of(name: str) -> str:
    """The id the mocks give a recorded resource (fleetform/plan.py mock_short)."""
    return f"{name.replace('/', '-')}-id"


@policy("eks-endpoint-reachable", "the run that creates an EKS cluster can reach its API endpoint")
def eks_endpoint(resources, bp):
    """The program's Kubernetes provider talks to the cluster's endpoint during the same `pulumi up`.
    A private-only endpoint answers only inside the cluster's VPC, through the cluster's security
    groups (EKS User Guide, "Cluster API server endpoint": with public access disabled, "all traffic to
    your cluster API server must come from within your cluster's VPC or a connected network", and the
    security groups must admit 443 from there); a VPC made by the same run has no runner inside it. So:
    public access with CIDRs to admit, or private access on a VPC that exists already plus an ingress
    rule for 443 on one of the cluster's security groups."""
    created_vpc = bool(_of(resources, "aws:ec2/vpc:Vpc"))
    out = []
    for r in _of(resources, EKS_CLUSTER):
        vpc = r["inputs"].get("vpcConfig") or {}
        if vpc.get("endpointPublicAccess"):
            if not vpc.get("publicAccessCidrs"):
                out.append((r["name"], "public endpoint access with no publicAccessCidrs: EKS opens it to 0.0.0.0/0"))
            continue
        if not vpc.get("endpointPrivateAccess"):
            out.append((r["name"], "neither public nor private endpoint access"))
        elif created_vpc:
            out.append((r["name"], "a private-only endpoint in a VPC this run creates: `pulumi up` cannot reach it"))
        elif not any(i["inputs"].get("securityGroupId") in vpc.get("securityGroupIds", ())
                     and i["inputs"].get("fromPort", 0) <= 443 <= i["inputs"].get("toPort", -1)
                     for i in _of(resources, INGRESS_RULE)):
            out.append((r["name"], "a private-only endpoint whose security groups admit no HTTPS (443)"))
    return out


@policy("eks-api-open", "an EKS API endpoint admits the whole Internet only where the blueprint's api_access_cidrs ask")
def eks_api_open(resources, bp):
    """The plan's publicAccessCidrs, however split (0.0.0.0/1 + 128.0.0.0/1, 1.2.3.4/0), may cover every IPv4
    address only when the blueprint lists such ranges in provider.eks.api_access_cidrs (then the rule
    eks-api-open warns at validate). Anything else that opened it (the stack's fleetform:deployer-cidr, a
    program change) would open the cluster's API to the Internet with no finding in the review."""
    from .cidrs import covers_internet

    asked = bp.cluster is not None and bool(bp.cluster.api_access_cidrs) and covers_internet(bp.cluster.api_access_cidrs)
    out = []
    for r in _of(resources, EKS_CLUSTER):
        vpc = r["inputs"].get("vpcConfig") or {}
        cidrs = vpc.get("publicAccessCidrs") or []
        if vpc.get("endpointPublicAccess") and cidrs and covers_internet(cidrs) and not asked:
            out.append((r["name"], f"publicAccessCidrs ({', '.join(cidrs)}) admit the whole Internet to the API "
                                   "endpoint, which the blueprint's api_access_cidrs do not ask for"))
    return out


@policy("eks-subnets", "an EKS cluster has subnets in at least two availability zones")
def eks_subnets(resources, bp):
    """CreateCluster needs "at least two subnets that are in different Availability Zones" (EKS User Guide,
    "View Amazon EKS networking requirements for VPC and subnets"). Subnets the plan creates are judged
    by their zones; a user's existing subnet by its id (its zone is known only to AWS)."""
    zones = {_id_of(s["name"]): s["inputs"].get("availabilityZone") for s in _of(resources, "aws:ec2/subnet:Subnet")}
    out = []
    for r in _of(resources, EKS_CLUSTER):
        subnets = list(dict.fromkeys((r["inputs"].get("vpcConfig") or {}).get("subnetIds") or []))
        known = {zones[s] for s in subnets if s in zones}
        distinct = len(known) + sum(1 for s in subnets if s not in zones)
        if len(subnets) < 2 or distinct < 2:
            out.append((r["name"], f"{len(subnets)} subnet(s) in {max(1, distinct) if subnets else 0} zone(s); "
                                   "EKS CreateCluster requires subnets in two availability zones"))
    return out


@policy("eks-node-metadata", "EKS nodes answer instance metadata to the node only (IMDSv2, hop limit 1)")
def eks_node_metadata(resources, bp):
    """A hop limit of 2 lets every pod reach the metadata service through the node and take the node
    role (EKS Best Practices Guide, Security: "Restrict access to the instance profile assigned to the
    worker node"); fleetform's pods get their roles through EKS Pod Identity and need no metadata."""
    templates = {_id_of(t["name"]): t for t in _of(resources, LAUNCH_TEMPLATE)}
    out = []
    for group in _of(resources, NODE_GROUP):
        template = templates.get((group["inputs"].get("launchTemplate") or {}).get("id"))
        if template is None:
            continue
        limit = (template["inputs"].get("metadataOptions") or {}).get("httpPutResponseHopLimit")
        if limit != 1:
            out.append((template["name"], f"hop limit {limit} on the nodes of {group['name']}: pods reach the node role"))
    return out


@policy("eks-node-group-size", "a later `pulumi up` leaves an EKS node group's desired size to the autoscaler")
def eks_node_group_size(resources, bp):
    """Without ignore_changes on scalingConfig.desiredSize every `pulumi up` sets a scaled-out group back
    to its minimum, and EKS terminates the nodes running the extra replicas."""
    return [(g["name"], "scalingConfig.desiredSize is not in ignore_changes: an update resets the group to its minimum")
            for g in _of(resources, NODE_GROUP)
            if "scalingConfig.desiredSize" not in (g.get("options") or {}).get("ignoreChanges", [])]


@policy("eks-network-policy-enforced", "the NetworkPolicy objects of a plan are enforced by its vpc-cni add-on")
def eks_network_policy(resources, bp):
    """The vpc-cni add-on enforces NetworkPolicy objects only with the configuration value
    enableNetworkPolicy "true" (EKS User Guide, "Restrict Pod network traffic with Kubernetes network
    policies"); otherwise the rendered policies are accepted and do nothing."""
    if not _of(resources, "kubernetes:networking.k8s.io/v1:NetworkPolicy"):
        return []
    out = []
    addons = [a for a in _of(resources, "aws:eks/addon:Addon") if a["inputs"].get("addonName") == "vpc-cni"]
    for addon in addons:
        values = json.loads(addon["inputs"].get("configurationValues") or "{}")
        if str(values.get("enableNetworkPolicy")).lower() != "true":
            out.append((addon["name"], "the vpc-cni add-on does not set enableNetworkPolicy: the NetworkPolicy "
                                       "objects are not enforced"))
    if not addons:
        out.append(("vpc-cni", "NetworkPolicy objects but no vpc-cni add-on to enforce them"))
    return out


POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}


def _pod_templates(resources):
    """(resource, namespace, pod spec) of every recorded Kubernetes workload that makes pods: a RayCluster's
    head and worker groups (KubeRay makes their pods from `headGroupSpec.template`, `workerGroupSpecs[].template`)
    as well as the built-in kinds."""
    for r in resources:
        inputs = r["inputs"]
        if not r["type"].startswith("kubernetes:"):
            continue
        namespace = (inputs.get("metadata") or {}).get("namespace")
        spec = inputs.get("spec") or {}
        if inputs.get("kind") in POD_KINDS:
            yield r, namespace, ((spec.get("template") or {}).get("spec")) or {}
        elif inputs.get("kind") == "RayCluster":
            for group in [spec.get("headGroupSpec") or {}] + list(spec.get("workerGroupSpecs") or []):
                yield r, namespace, ((group.get("template") or {}).get("spec")) or {}


def _pod_references(spec: dict) -> list[tuple[str, str]]:
    """(kind, name) of every Secret, ConfigMap, PersistentVolumeClaim and ServiceAccount a pod spec reads."""
    refs = [("ServiceAccount", spec.get("serviceAccountName") or "default")]
    for volume in spec.get("volumes") or []:
        if "secret" in volume:
            refs.append(("Secret", volume["secret"].get("secretName")))
        if "configMap" in volume:
            refs.append(("ConfigMap", volume["configMap"].get("name")))
        if "persistentVolumeClaim" in volume:
            refs.append(("PersistentVolumeClaim", volume["persistentVolumeClaim"].get("claimName")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in source:
                refs.append(("Secret", source["secret"].get("name")))
            if "configMap" in source:
                refs.append(("ConfigMap", source["configMap"].get("name")))
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if "secretKeyRef" in source and not source["secretKeyRef"].get("optional"):
                refs.append(("Secret", source["secretKeyRef"].get("name")))
            if "configMapKeyRef" in source and not source["configMapKeyRef"].get("optional"):
                refs.append(("ConfigMap", source["configMapKeyRef"].get("name")))
        for env in container.get("envFrom") or []:
            if "secretRef" in env and not env["secretRef"].get("optional"):
                refs.append(("Secret", env["secretRef"].get("name")))
            if "configMapRef" in env and not env["configMapRef"].get("optional"):
                refs.append(("ConfigMap", env["configMapRef"].get("name")))
    return refs


def declared_external(bp: Blueprint) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) the blueprint declares to exist already: the PersistentVolumeClaim of
    `weights: {source: volume, claim: ...}` ("name of an existing PersistentVolumeClaim"), and that of each
    FSx for Lustre storage a Ray fleet attaches (the README says how to create it)."""
    out = set()
    for fleet in bp.fleets:
        for model in fleet.models:
            weights = model.weights
            if weights is not None and weights.source == "volume" and weights.claim and fleet.kube is not None:
                out.add(("PersistentVolumeClaim", fleet.kube.namespace, weights.claim))
        ray = getattr(fleet, "ray", None)  # a Ray fleet's FSx claims, named after the storage (fleetform/ray.py)
        for mount in ray.mounts if ray is not None else ():
            out.add(("PersistentVolumeClaim", ray.namespace, mount.claim))
    return out


@policy("pod-references-exist", "every Secret, ConfigMap, PVC and ServiceAccount a pod reads is created or declared")
def pod_references(resources, bp):
    """A pod that mounts a Secret, ConfigMap or claim nobody creates never starts ("CreateContainerConfigError"
    / "FailedMount"), and its Deployment holds `pulumi up` until its timeout. Each one a recorded pod
    template names must be a Kubernetes object of the plan, declared external by the blueprint, or the
    `default` ServiceAccount Kubernetes makes in every namespace."""
    created = {(r["inputs"].get("kind"), (r["inputs"].get("metadata") or {}).get("namespace"),
                (r["inputs"].get("metadata") or {}).get("name"))
               for r in resources if r["type"].startswith("kubernetes:")}
    external = declared_external(bp)
    out = []
    for r, namespace, spec in _pod_templates(resources):
        for kind, name in _pod_references(spec):
            if kind == "ServiceAccount" and name == "default":
                continue
            if (kind, namespace, name) not in created and (kind, namespace, name) not in external:
                out.append((r["name"], f"reads {kind} {namespace}/{name}, which the program does not create "
                                       "and the blueprint does not declare"))
    return out


LUSTRE_FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"


@policy("eks-volume-claims-mount", "a weights claim has the FSx CSI driver on its cluster, and the EKS nodes reach the FSx")
def eks_volume_claims(resources, bp):
    """A pod that mounts the PersistentVolumeClaim of `weights: {source: volume}` stays ContainerCreating
    without a CSI driver for its volume: the claim's volume is the blueprint's FSx for Lustre (fsx.csi.aws.com,
    the EKS add-on aws-fsx-csi-driver: EKS User Guide, "Amazon FSx CSI driver"). Where the plan creates an FSx
    for Lustre file system, its security groups must admit Lustre (TCP 988 and 1018-1023: FSx for Lustre User
    Guide, "File system access control with Amazon VPC") from the EKS cluster's security group, which the
    managed nodes carry; the training nodes' own group is not theirs."""
    external = {(ns, name) for kind, ns, name in declared_external(bp) if kind == "PersistentVolumeClaim"}
    claims = []
    for r, namespace, spec in _pod_templates(resources):
        claims += [(r["name"], name) for kind, name in _pod_references(spec)
                   if kind == "PersistentVolumeClaim" and (namespace, name) in external]
    if not claims:
        return []
    # only now: the module imports pulumi, which an on-prem plan or one without the aws extra does not have
    # (resources that hold a claim were recorded by Pulumi's mocks, so it is there)
    from .providers.aws.common import LUSTRE_PORTS

    out = []
    drivers = [a for a in _of(resources, "aws:eks/addon:Addon") if a["inputs"].get("addonName") == "aws-fsx-csi-driver"]
    if not drivers:
        out += [(name, f"mounts the weights claim {claim}, but no EKS add-on aws-fsx-csi-driver serves its volume")
                for name, claim in claims]
    clusters = {f"{EKS_CLUSTER}::{c['name']}" for c in _of(resources, EKS_CLUSTER)}
    for fs in _of(resources, LUSTRE_FILE_SYSTEM):
        for group in fs["inputs"].get("securityGroupIds") or []:
            for low, high in LUSTRE_PORTS:
                if not any(i["inputs"].get("securityGroupId") == group and i["inputs"].get("ipProtocol") == "tcp"
                           and i["inputs"].get("fromPort", 1) <= low and high <= i["inputs"].get("toPort", 0)
                           and set((i.get("deps") or {}).get("referencedSecurityGroupId", ())) & clusters
                           for i in _of(resources, INGRESS_RULE)):
                    ports = str(low) if low == high else f"{low}-{high}"
                    out.append((fs["name"], f"its security group {group} admits no Lustre (TCP {ports}) from the "
                                            "EKS cluster's security group: the nodes cannot mount the weights claim"))
    return out


ZONE = "aws:route53/zone:Zone"
SUBNET = "aws:ec2/subnet:Subnet"


def _grants(statement: dict, action: str) -> bool:
    return statement.get("Effect") == "Allow" and any(
        fnmatch.fnmatchcase(action, pattern) for pattern in _listed(statement.get("Action")))


@policy("dns-zone-private", "each training fleet's node-name zone is private to its VPC; its controller changes only it")
def dns_zone_private(resources, bp):
    """A training fleet's Route 53 zone (templates/slurm/bin/fleetform_dns.py) must be private (a
    zone with a VPC association is a private hosted zone: Route 53 Developer Guide, "Working with
    private hosted zones"), associated with the VPC of the fleet's launch template's subnet, and the
    fleet's controller role may call route53:ChangeResourceRecordSets on that zone only: a role
    that may change any zone could redirect another cluster's names."""
    from .plan import computed, mock_short

    subnet_vpc = {f"{mock_short(r['name'])}-id": r["inputs"].get("vpcId") for r in _of(resources, SUBNET)}
    fleet_vpcs: dict[str, set] = {}
    for template in _of(resources, LAUNCH_TEMPLATE):
        fleet = (template["inputs"].get("tags") or {}).get("fleetform:fleet")
        for interface in template["inputs"].get("networkInterfaces") or []:
            subnet = interface.get("subnetId")
            fleet_vpcs.setdefault(fleet, set()).add(subnet_vpc.get(subnet) or bp.network.vpc_id)
    out, zone_arns = [], {}
    for zone in _of(resources, ZONE):
        fleet = (zone["inputs"].get("tags") or {}).get("fleetform:fleet")
        vpcs = {v.get("vpcId") for v in zone["inputs"].get("vpcs") or []}
        zone_id = computed(ZONE, mock_short(zone["name"]), bp)["zoneId"]
        zone_arns[fleet] = f"arn:aws:route53:::hostedzone/{zone_id}"
        if not vpcs:
            out.append((zone["name"], "is a public hosted zone: node names must be private to the fleet's VPC "
                                      "(vpcs = [the fleet's VPC])"))
        elif fleet in fleet_vpcs and not fleet_vpcs[fleet] <= vpcs:
            out.append((zone["name"], f"is associated with {sorted(vpcs)}, not with the fleet's VPC "
                                      f"{sorted(v for v in fleet_vpcs[fleet] if v)}: its nodes cannot resolve their names"))
    for role in _of(resources, ROLE):
        tags = role["inputs"].get("tags") or {}
        if tags.get("fleetform:role") != "controller" or tags.get("fleetform:fleet") not in zone_arns:
            continue
        own = zone_arns[tags["fleetform:fleet"]]
        for p in _of(resources, ROLE_POLICY):
            if p["inputs"].get("role") not in (f"{role['name']}-id", role["name"]):
                continue
            for statement in _statements(p["inputs"].get("policy", "{}")):
                if not _grants(statement, "route53:ChangeResourceRecordSets"):
                    continue
                others = [r for r in _listed(statement.get("Resource")) if r != own]
                if others:
                    out.append((p["name"], f"lets the controller change records of {', '.join(others)}; only its "
                                           f"fleet's zone {own}"))
    return out


def check(resources: list[dict], bp: Blueprint) -> list[tuple[str, str, str]]:
    """(policy id, resource name, message) for every violation."""
    return [(pid, name, message) for pid, (_, fn) in POLICIES.items() for name, message in fn(resources, bp)]


PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"


@policy("instance-tag-keys", "an instance whose tags are in instance metadata has only tag keys it can serve")
def instance_tag_keys(resources, bp):
    """With `instance_metadata_tags` enabled, EC2 refuses to launch an instance with a tag key that
    has `/` or a space (Amazon EC2 User Guide, "View tags for your EC2 instances using instance
    metadata"); moto's server and Pulumi's mocks launch it. The `tag-key-imds` rule stops such a
    label before the plan; this checks what the program actually puts on instances."""
    from .rules.blueprint import INSTANCE_TAG_KEY, INSTANCE_TAG_KEYS_REFUSED

    out = []
    for r in _of(resources, LAUNCH_TEMPLATE) + _of(resources, INSTANCE):
        inputs = r["inputs"]
        if (inputs.get("metadataOptions") or {}).get("instanceMetadataTags") != "enabled":
            continue
        keys = set(inputs.get("tags") or {})
        for spec in inputs.get("tagSpecifications") or []:
            if spec.get("resourceType") == "instance":
                keys |= set(spec.get("tags") or {})
        bad = sorted(k for k in keys if not INSTANCE_TAG_KEY.fullmatch(k) or k in INSTANCE_TAG_KEYS_REFUSED)
        if bad:
            out.append((r["name"], f"tags its instances with {', '.join(repr(k) for k in bad)} while their tags are "
                                   "in instance metadata: EC2 refuses the launch"))
    return out


@policy("spread-placement-size", "a spread placement group's launch template starts at most 7 nodes (one zone)")
def spread_placement_size(resources, bp):
    """A spread placement group runs at most 7 instances per availability zone (Amazon EC2 User
    Guide, "Placement strategies"); a fleet's nodes share one subnet, so one zone. moto's server and
    Pulumi's mocks launch an eighth; EC2 does not."""
    from .rules.fleets import SPREAD_MAX_PER_ZONE

    spread = {r["name"] for r in _of(resources, PLACEMENT_GROUP) if r["inputs"].get("strategy") == "spread"}
    sizes = {f.name: f.nodes.max for f in bp.fleets if f.nodes is not None}
    out = []
    for r in _of(resources, LAUNCH_TEMPLATE):
        group = (r["inputs"].get("placement") or {}).get("groupName")
        fleet = (r["inputs"].get("tags") or {}).get("fleetform:fleet")
        if group in spread and sizes.get(fleet, 0) > SPREAD_MAX_PER_ZONE:
            out.append((r["name"], f"launches up to {sizes[fleet]} nodes into spread placement group {group}, "
                                   f"which runs at most {SPREAD_MAX_PER_ZONE} in one availability zone"))
    return out
