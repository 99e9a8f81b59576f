"""The EKS cluster of a blueprint's inference fleets and what runs on it, in one Pulumi program.

Order of creation (each step depends on the one before, by `depends_on` or by its inputs):

1. the cluster, the EKS add-ons vpc-cni, kube-proxy and eks-pod-identity-agent, the untainted
   system node group, then the coredns add-on (it needs a node to become active);
2. a Kubernetes provider from the cluster's outputs (a kubeconfig that runs `aws eks get-token`),
   the namespaces of the Helm releases;
3. per fleet (providers/aws/inference.py): its tainted GPU node group, and its rendered objects
   that need no custom resource definition (Namespace, PriorityClass, ConfigMap);
4. the vendored CRD bundles where a fleet has a gateway (providers/aws/gateway.py), then the Helm releases,
   pinned in providers/aws/addons.yaml (GPU Operator with the fleets' rendered values, kube-prometheus-stack,
   KEDA or the Prometheus adapter, Cluster Autoscaler with its IAM role through EKS Pod Identity, kgateway's
   CRDs and kgateway after the bundles); their CRDs (ScaledObject, ServiceMonitor) exist once they are up;
5. per fleet: the rest of its rendered objects (Deployments, Services, ScaledObjects, ...).

Each rendered object is its own Pulumi resource, read from the rendered bytes: the plan lists it,
and an object that leaves the rendered files (a ScaledObject after autoscaler: keda -> hpa) is
deleted by the next `pulumi up`. A `kubernetes.yaml.v2.ConfigGroup` would do the same on a real
engine, but its work happens in the provider plugin: under the mocks of `fleetform plan` it is one
opaque resource and neither the objects nor their removal would show.
"""

from __future__ import annotations

import ipaddress
import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from fleetform.cluster import CAPACITY_TYPES, ROOT_GIB, Cluster, NodeGroup, Release, addons_data, deep_merge
from fleetform.health import KUBE_REPAIR_MAX_PARALLEL, KUBE_REPAIR_OVERRIDES
from fleetform.k8s import GPU_OPERATOR_NAMESPACE
from fleetform.model import Blueprint
from fleetform.cidrs import api_open_message, covers_internet

from .common import TAINT_EFFECTS, _opts, cluster_id
from .iam import POD_IDENTITY_TRUST, Iam, cluster_autoscaler_policy
from .network import Network, Security

VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
"""The vpc-cni add-on's configuration values that make it enforce NetworkPolicy objects (EKS User
Guide, "Restrict Pod network traffic with Kubernetes network policies": network policies are not
enforced until the add-on's `enableNetworkPolicy` is "true"; the network policy controller runs in
the EKS control plane of new clusters)."""
METADATA_HOP_LIMIT = 1
"""IMDSv2 answers only the node itself: a pod's packets take one more hop and never reach it, so no
pod can take the node role's credentials. Nothing on these nodes needs more: the servers and the
Cluster Autoscaler get their roles through EKS Pod Identity, and aws-node and kube-proxy run in the
host network (EKS Best Practices Guide, Security, "Restrict access to the instance profile assigned
to the worker node")."""
DESIRED_SIZE_OWNED_BY_AUTOSCALER = "scalingConfig.desiredSize"
"""A node group's desired size is the Cluster Autoscaler's once the group exists: a later `pulumi up`
that set it back to the minimum would terminate GPU nodes under load."""

AFTER_NODES = {"coredns", "aws-fsx-csi-driver", "aws-ebs-csi-driver", "aws-efs-csi-driver", "metrics-server"}
"""EKS add-ons that run a Deployment: EKS reports them active only once a node runs their pods, so they
are created after the system node group (an add-on a new cluster cannot schedule stays CREATING)."""

EARLY_KINDS = {"Namespace", "PriorityClass", "ConfigMap", "ServiceAccount", "StorageClass"}
"""Rendered kinds that need no CRD and that the Helm releases or the pods read (the GPU Operator
reads the fleets' device plugin and MIG ConfigMaps; a vLLM pod starts only once its service account
exists; a Slinky release's slurmctld claim names its fleet's StorageClass): applied before the releases."""


class KubeObject(pulumi.CustomResource):
    """One Kubernetes object of a rendered file, registered as the kubernetes provider's resource of
    its kind (`kubernetes:apps/v1:Deployment`), with the object's fields as inputs, as the
    provider's own typed classes do."""

    def __init__(self, name: str, obj: dict, opts: pulumi.ResourceOptions):
        api_version = obj["apiVersion"]
        group_version = api_version if "/" in api_version else f"core/{api_version}"
        super().__init__(f"kubernetes:{group_version}:{obj['kind']}", name, dict(obj), opts)


def objects_of(files: dict[str, bytes], fleet: str) -> list[dict]:
    """The Kubernetes objects of a fleet's rendered k8s/ folder, in the kustomization's order. Read with
    libyaml's parser where PyYAML has it, as fleetform/cluster.py reads the add-ons (same events, same
    safe constructor): the pure-Python one took 0.3 s of the reference plan's 0.6 s under the mocks."""
    prefix = f"{fleet}/k8s/"
    kustomization = yaml.load(files[prefix + "kustomization.yaml"], Loader=_SAFE_LOADER)  # noqa: S506 (safe)
    out = []
    for name in kustomization["resources"]:
        out += [doc for doc in yaml.load_all(files[prefix + name], Loader=_SAFE_LOADER) if doc]  # noqa: S506
    return out


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _kubeconfig(cluster: aws.eks.Cluster, region: str) -> pulumi.Output:
    def document(args) -> str:
        name, endpoint, authority = args
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                         "args": ["--region", region, "eks", "get-token", "--cluster-name", name, "--output", "json"]}}
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": {"server": endpoint,
                                                    "certificate-authority-data": (authority or {}).get("data")}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "users": [{"name": name, "user": user}]}, sort_keys=True)

    return pulumi.Output.all(cluster.name, cluster.endpoint, cluster.certificate_authority).apply(document)


def launch_template(name: str, group: NodeGroup, user_data: str | None, tags: dict,
                    parent: pulumi.Resource, root_gib: int, **more) -> aws.ec2.LaunchTemplate:
    """IMDSv2 with a hop limit of 1 (METADATA_HOP_LIMIT: pods never reach the metadata service), an
    encrypted root volume, and for Capacity Blocks and reservations the targeting EKS requires: a Capacity
    Block node group needs a launch template with InstanceMarketOptions.MarketType capacity-block and
    CapacityReservationSpecification targeting the block (EKS User Guide, "Create a managed node
    group with Capacity Blocks for ML"); a reservation is targeted the same way, on-demand market."""
    extra: dict = {}
    if group.reservation_id:
        extra["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": group.reservation_id}}
    if group.capacity_type == "capacity-block":
        extra["instance_market_options"] = {"market_type": "capacity-block"}
    extra.update(more)  # a training group's EFA interfaces and placement group (providers/aws/kueue.py)
    return aws.ec2.LaunchTemplate(
        name, metadata_options={"http_tokens": "required", "http_endpoint": "enabled", "http_put_response_hop_limit": METADATA_HOP_LIMIT},
        user_data=user_data,
        block_device_mappings=[{"device_name": "/dev/xvda", "ebs": {
            "volume_size": root_gib, "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true"}}],
        # the instances' tags are launch template data: a new value is a new template version, and
        # EKS replaces every node of the group (tags_of keeps the rendered files' digest out of them)
        tag_specifications=[{"resource_type": "instance", "tags": tags}], tags=tags, opts=_opts(parent), **extra)


def node_group(name: str, cluster: "EksCluster", group: NodeGroup, ami_type: str, template: aws.ec2.LaunchTemplate,
               tags: dict, parent: pulumi.Resource, depends_on: list,
               ignore_changes: tuple = (DESIRED_SIZE_OWNED_BY_AUTOSCALER,)) -> aws.eks.NodeGroup:
    """A managed node group. EKS tags its Auto Scaling group k8s.io/cluster-autoscaler/enabled and
    k8s.io/cluster-autoscaler/<cluster> itself (EKS User Guide, managed node groups: "Amazon EKS
    tags managed node group resources so that they are configured to use the Kubernetes Cluster
    Autoscaler"), which the Cluster Autoscaler's auto-discovery looks for; the node group's own tags
    do not reach the Auto Scaling group (eksctl #1571, aws/containers-roadmap #608), so a group at
    zero nodes tells the autoscaler its labels and taints through eks:DescribeNodegroup instead
    (cluster-autoscaler AWS README). The EKS name is Pulumi's auto-name of the resource: a fleet
    renamed with `renamed_from` keeps its node group through the alias (an explicit name would
    force a replacement). A pool's inference fleet leaves its whole scaling_config to its scheduled actions
    (providers/aws/pool.py)."""
    return aws.eks.NodeGroup(
        name, cluster_name=cluster.cluster.name, node_role_arn=cluster.iam.eks_node_role.arn,
        subnet_ids=[cluster.net.subnet_id], ami_type=ami_type, instance_types=[group.instance_type],
        capacity_type=CAPACITY_TYPES[group.capacity_type],
        scaling_config={"min_size": group.min, "max_size": group.max, "desired_size": group.min},
        labels=dict(group.labels),
        taints=[{"key": k, "value": v, "effect": TAINT_EFFECTS[e]} for k, v, e in group.taints],
        launch_template={"id": template.id, "version": template.latest_version.apply(str)}, tags=tags,
        **({"node_repair_config": node_repair_config(group.repair)} if group.repair is not None else {}),
        opts=_opts(parent, depends_on=depends_on, ignore_changes=list(ignore_changes)))


def node_repair_config(enabled: bool) -> dict:
    """EKS node auto repair on a GPU node group (pulumi-aws eks.NodeGroup node_repair_config): the
    node monitoring agent's conditions, AcceleratedHardwareReady first, reboot or replace a node 10
    minutes after they turn false (EKS User Guide, "Automatically repair nodes in EKS clusters"), one
    node of the group at a time (KUBE_REPAIR_MAX_PARALLEL), with fleetform.health.KUBE_REPAIR_OVERRIDES
    (EKS API NodeRepairConfigOverrides: all four values). Off is `enabled: false`, never a missing
    block: terraform-provider-aws's aws_eks_node_group, which pulumi-aws wraps, declares
    node_repair_config Optional and Computed (internal/service/eks/node_group.go), so without the block
    the provider keeps what the running node group has, repair on included."""
    if not enabled:
        return {"enabled": False}
    return {"enabled": True, "max_parallel_nodes_repaired_count": KUBE_REPAIR_MAX_PARALLEL,
            "node_repair_config_overrides": [
        {"node_monitoring_condition": condition, "node_unhealthy_reason": reason, "repair_action": action,
         "min_repair_wait_time_mins": minutes} for condition, reason, action, minutes in KUBE_REPAIR_OVERRIDES]}


class EksCluster(pulumi.ComponentResource):
    """The cluster, its system node group and add-ons, the Kubernetes provider, and (install) the
    Helm releases."""

    def __init__(self, name: str, bp: Blueprint, net: Network, security: Security, iam: Iam, files: dict[str, bytes],
                 tags: dict, deployer_cidr: str | None = None, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:EksCluster", name, None, opts)
        model: Cluster = bp.cluster
        self.model, self.net, self.iam, self.files, self.tags, self.name = model, net, iam, files, tags, name
        self.security_group = security.group_id  # the blueprint's: its nodes' EFA traffic (providers/aws/kueue.py)
        # the EKS name carries the stack: `dev` and `prod` stacks of one blueprint are two clusters
        self.cluster_name = cluster_id(bp)
        access = api_access(model, deployer_cidr)
        public = bool(access)
        self.cluster = aws.eks.Cluster(
            f"{name}-cluster", name=self.cluster_name, version=model.version, role_arn=iam.eks_cluster_role.arn,
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            vpc_config={"subnet_ids": net.subnet_ids, "security_group_ids": [security.group_id],
                        "endpoint_private_access": True, "endpoint_public_access": public,
                        **({"public_access_cidrs": list(access)} if public else {})},
            tags=tags, opts=_opts(self))
        if not public:
            # private only (api_access_cidrs: [], an existing VPC, the rule eks-api-access): the endpoint's
            # network interfaces carry the cluster's security group, which must admit HTTPS from the VPC
            # where `pulumi up` and kubectl then run
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-vpc", security_group_id=security.group_id, ip_protocol="tcp", from_port=443,
                to_port=443, cidr_ipv4=aws.ec2.get_vpc_output(id=net.vpc_id).cidr_block,
                description="the EKS API endpoint from inside the VPC", tags=tags, opts=_opts(self))
        self.addons = {a: self._addon(a, []) for a in model.addons if a not in AFTER_NODES}
        template = launch_template(f"{name}-system-nodes", model.system, None,
                                   {**tags, "fleetform:node-group": "system"}, self, ROOT_GIB)
        self.system = node_group(f"{name}-system", self, model.system, "AL2023_x86_64_STANDARD", template,
                                 tags, self, [self.addons["vpc-cni"]])
        self.addons["coredns"] = self._addon("coredns", [self.system])  # active only once a node runs it
        for addon in (a for a in model.addons if a in AFTER_NODES - {"coredns"}):  # Deployments too
            required = addons_data()["optional_addons"][addon]["requires"]
            self.addons[addon] = self._addon(addon, [self.system, *(self.addons[r] for r in required)])
        # ConfigMaps updated in place (the GPU Operator watches the fleets' device plugin and MIG
        # configs), not deleted and created again as the provider does by default
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=_kubeconfig(self.cluster, bp.region),
                                     enable_config_map_mutable=True, opts=_opts(self))
        self._claimed: set[tuple] = set()
        self.namespaces = {}
        rendered = {(o["kind"], o["metadata"]["name"]) for f in model.fleets if f"{f}/k8s/kustomization.yaml" in files
                    for o in objects_of(files, f)}
        for release in model.releases:
            ns = release.namespace
            if ns in self.namespaces or ns == "kube-system":
                continue
            if ("Namespace", ns) in rendered:  # a fleet renders it; the fleet's object is the one applied
                continue
            self.namespaces[ns] = k8s.core.v1.Namespace(
                f"{name}-namespace-{ns}", metadata={"name": ns, "labels": {"app.kubernetes.io/managed-by": "fleetform"}},
                opts=self.k8s_opts(self, depends_on=[self.system]))
            self._claimed.add(("Namespace", None, ns))
        self.identities = self._pod_identities(name, tags)
        self.releases: dict[str, k8s.helm.v3.Release] = {}
        self.crds: list[KubeObject] = []  # install() applies them
        self.register_outputs({"cluster": self.cluster.name})

    def _addon(self, addon: str, depends_on: list) -> aws.eks.Addon:
        configuration = VPC_CNI_CONFIGURATION if addon == "vpc-cni" else \
            (addons_data()["optional_addons"].get(addon) or {}).get("configuration")
        extra = {"configuration_values": json.dumps(configuration, sort_keys=True)} if configuration else {}
        identity = (addons_data()["optional_addons"].get(addon) or {}).get("pod_identity")
        if identity:
            # the add-on's own Pod Identity association (EKS User Guide, "Use Pod Identities to assign an IAM role
            # to an Amazon EKS add-on"): EKS creates it with the add-on, so the controller's first pods already
            # get the role; the AWS managed policy the add-on's page names, attached, nothing more
            role = aws.iam.Role(f"{self.name}-{addon}", assume_role_policy=POD_IDENTITY_TRUST, tags=self.tags,
                                opts=_opts(self))
            attached = aws.iam.RolePolicyAttachment(f"{self.name}-{addon}", role=role.name,
                                                    policy_arn=identity["managed_policy"], opts=_opts(self))
            extra["pod_identity_associations"] = [aws.eks.AddonPodIdentityAssociationArgs(
                role_arn=role.arn, service_account=identity["service_account"])]
            depends_on = [*depends_on, attached]
        return aws.eks.Addon(f"{self.name}-{addon}", cluster_name=self.cluster.name, addon_name=addon,
                             resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
                             tags=self.tags, opts=_opts(self, depends_on=depends_on), **extra)

    def k8s_opts(self, parent: pulumi.Resource, depends_on: list | None = None) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=parent, provider=self.provider, depends_on=depends_on or [])

    def claim(self, obj: dict) -> bool:
        """Two fleets in one namespace both render it: the first fleet's object is applied. Each fleet renders
        a ServiceMonitor of the GPU Operator's one DCGM exporter (for a cluster of its own, `kubectl apply -k`);
        on the shared cluster the first one is applied, else Prometheus scrapes every GPU twice."""
        key = (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if obj["kind"] == "ServiceMonitor" and obj["metadata"].get("namespace") == GPU_OPERATOR_NAMESPACE:
            key = (obj["kind"], GPU_OPERATOR_NAMESPACE, json.dumps(obj["spec"]["selector"], sort_keys=True))
        if key in self._claimed:
            return False
        self._claimed.add(key)
        return True

    def _pod_identities(self, name: str, tags: dict) -> list:
        out = []
        for identity in self.model.pod_identities:
            role = aws.iam.Role(f"{name}-{identity.name}", assume_role_policy=POD_IDENTITY_TRUST, tags=tags,
                                opts=_opts(self))
            if identity.purpose == "cluster-autoscaler":
                policy = cluster_autoscaler_policy(self.cluster_name)
            else:  # s3-weights: read the model's weights prefix, nothing else
                policy = _weights_policy(identity.s3_prefixes)
            aws.iam.RolePolicy(f"{name}-{identity.name}", role=role.id, policy=policy, opts=_opts(self))
            out.append(aws.eks.PodIdentityAssociation(
                f"{name}-{identity.name}", cluster_name=self.cluster.name, namespace=identity.namespace,
                service_account=identity.service_account, role_arn=role.arn, tags=tags,
                opts=_opts(self, depends_on=[self.addons["eks-pod-identity-agent"]])))
        return out

    def install(self, after: list) -> None:
        """The Helm releases, once the system nodes, CoreDNS and the fleets' early objects are up."""
        from .gateway import install_crds  # it builds on this module

        base = [self.system, self.addons["coredns"], *self.namespaces.values(), *after]
        # the vendored CRD bundles (a gateway's Gateway API and Inference Extension CRDs): before the releases
        # that watch them and the objects of their kinds (providers/aws/gateway.py)
        self.crds = install_crds(self)
        for release in self.model.releases:
            extra = self.identities if release.name == "cluster-autoscaler" else []
            if release.name == "kueue" and "jobset" in self.releases:
                extra = [self.releases["jobset"]]  # Kueue's JobSet integration needs JobSet's CRD
            if release.name in ("kgateway-crds", "kgateway"):
                # kgateway watches Gateway API and InferencePool kinds; its controller needs its own CRDs
                # (kgateway.dev TrafficPolicy, GatewayParameters, ...) from the kgateway-crds release first
                extra = [*self.crds, *([self.releases["kgateway-crds"]] if release.name == "kgateway" else [])]
            # a chart in an OCI registry is named by its full reference and has no repository (Helm: `helm
            # install NAME oci://REGISTRY/PATH/CHART --version V`)
            chart = dict(chart=f"{release.repo}/{release.chart}") if release.repo.startswith("oci://") else dict(
                chart=release.chart, repository_opts={"repo": release.repo})
            self.releases[release.name] = k8s.helm.v3.Release(
                f"{self.name}-{release.name}", name=release.name, version=release.version, **chart,
                namespace=release.namespace, create_namespace=False,
                values=self._values(release), timeout=900,
                opts=self.k8s_opts(self, depends_on=base + extra))

    def _values(self, release: Release) -> dict:
        """fleetform's values for the chart, over the fleets' rendered values files for it
        (`<fleet>/gpu-operator-values.yaml`, `<fleet>/prometheus-adapter-values.yaml`), which one
        release per cluster serves together."""
        merged: dict = {}
        for fleet in self.model.fleets:
            path = f"{fleet}/{release.name}-values.yaml"
            if path in self.files:
                merged = _merge(merged, yaml.safe_load(self.files[path]) or {}, path)
        values = deep_merge(merged, release.values)
        if release.name == "cluster-autoscaler":  # it discovers the node groups tagged with the cluster's EKS name
            values = deep_merge(values, {"autoDiscovery": {"clusterName": self.cluster_name}})
        return values


def api_access(model: Cluster, deployer_cidr: str | None) -> tuple[str, ...]:
    """The networks the API endpoint answers outside the VPC: the blueprint's api_access_cidrs, or when it
    has none, the public address `pulumi up` runs from (fleetform/pulumi_program.py looks it up), so the run's own
    Kubernetes provider reaches the cluster it has just made. () keeps the endpoint private."""
    if model.api_access_cidrs is not None:  # as networks: 1.2.3.4/0 is 0.0.0.0/0
        return tuple(str(ipaddress.ip_network(c, strict=False)) for c in model.api_access_cidrs)
    if not deployer_cidr:
        raise ValueError("provider.eks.api_access_cidrs is absent and no deployer address was given: the run "
                         "could not reach the cluster's API endpoint")
    # fleetform:deployer-cidr is typed by hand: `203.0.113.10` is the /32 it means (EKS takes CIDR notation
    # only), a range with host bits the network it names
    network = str(ipaddress.ip_network(deployer_cidr.strip(), strict=False))
    if covers_internet([network]):
        # the stack's config would open what the blueprint's review never saw; only api_access_cidrs may ask
        raise ValueError(deployer_open_message(deployer_cidr.strip()))
    return (network,)


def deployer_open_message(deployer_cidr: str) -> str:
    """Why fleetform:deployer-cidr may not cover the Internet: the eks-api-open finding, and where to ask for it."""
    return (api_open_message(f"fleetform:deployer-cidr ({deployer_cidr})") + " [eks-api-open]; set it to the "
            "address `pulumi up` runs from (a /32), or, to open the endpoint on purpose, list the ranges in the "
            "blueprint's provider.eks.api_access_cidrs, where review and `fleetform validate` see them")


def _weights_policy(uris: tuple[str, ...]) -> str:
    """Read the objects under the weights prefixes, and list only those prefixes (the Run:ai
    streamer lists the prefix to find the safetensors files, then gets them)."""
    statements = []
    for n, uri in enumerate(sorted(uris)):
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        if not uri.startswith("s3://") or not uri.endswith("/") or "*" in uri or "?" in uri or not bucket:
            # `key*` of `llama` would reach `llama-secret/`; the schema's s3Prefix refuses such a uri
            raise ValueError(f"weights uri {uri!r} is not an S3 folder (s3://bucket/prefix/) without wildcards")
        statements += [
            {"Sid": f"Read{n}", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/{key}*"},
            {"Sid": f"List{n}", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}",
             "Condition": {"StringLike": {"s3:prefix": [f"{key}*"]}}}]
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def _merge(base: dict, extra: dict, where: str) -> dict:
    """The fleets' values for one chart merged: lists (the adapter's rules) joined without
    repeats; a scalar two fleets set differently is a bug the cluster rules should have caught."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value, f"{where}:{key}")
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = out[key] + [v for v in value if v not in out[key]]
        elif key in out and out[key] != value and key != "default":
            raise ValueError(f"GPU Operator values disagree at {where}:{key}: {out[key]!r} != {value!r}")
        else:
            out[key] = value
    return out
