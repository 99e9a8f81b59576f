"""The one EKS cluster of a blueprint's inference fleets, as data: its node groups (an untainted
system group and one tainted GPU group per fleet) with what each node can allocate, the Helm
releases and EKS add-ons `pulumi up` installs, and every workload that must find a node.

Built by resolve from the blueprint and providers/aws/addons.yaml (the pinned charts, the
requests fleetform sets in their values); read by the cluster rules, which check that the cluster
as a whole admits and holds every workload, and by the Pulumi program, which builds it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from .records import frozen
from . import prepull

ROOT_GIB = 200
"""The root volume of every EKS node (gp3), where kubelet and containerd keep ephemeral storage
unless the instance-store NVMe drives are assembled for them."""
MAX_PODS = 110
"""Pods per node assumed for the kubelet's memory reserve: the kubelet's default max-pods. EKS
computes it per instance type from its ENIs; 110 errs on the side of a larger reserve."""
EVICTION_MEMORY_MIB = 100
"""kubelet's default hard eviction threshold memory.available<100Mi."""
EVICTION_NODEFS = 0.10
"""kubelet's default hard eviction threshold nodefs.available<10%."""
CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT", "reservation": "ON_DEMAND",
                  "capacity-block": "CAPACITY_BLOCK"}
"""The EKS node group capacity type of each blueprint capacity (a reservation is on-demand capacity
targeted by the launch template; Capacity Blocks have their own type: EKS CreateNodegroup API,
capacityType ON_DEMAND | SPOT | CAPACITY_BLOCK)."""


ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
"""The Cluster Autoscaler's AWS GPU label (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/
aws_cloud_provider.go: `GPULabel = "k8s.amazonaws.com/accelerator"`): a node that carries it counts as a
GPU node that is not ready until its GPUs are allocatable, so the autoscaler waits for the GPU Operator
instead of launching another node for the pods still pending on a fresh node that shows 0 GPUs."""


def accelerator(fleet) -> str:
    """The accelerator label's value: the GPU's name, lower case (nvidia-h100); any value marks a GPU node."""
    return "nvidia-" + "".join(c if c.isalnum() else "-" for c in fleet.shape.gpu.name.lower()).strip("-")


def _well_known(instance_type: str, capacity: str) -> tuple[tuple[str, str], ...]:
    """Labels the kubelet and EKS put on every node (Kubernetes "Well-Known Labels"; EKS managed
    node groups add eks.amazonaws.com/capacityType)."""
    return (("kubernetes.io/os", "linux"), ("kubernetes.io/arch", "amd64"),
            ("node.kubernetes.io/instance-type", instance_type),
            ("eks.amazonaws.com/capacityType", CAPACITY_TYPES[capacity]))


@lru_cache(maxsize=1)
def addons_data() -> dict:
    """The pinned charts and add-ons. Read on every validate of an inference blueprint, so with
    libyaml's parser where PyYAML has it: the pure-Python one took 14 ms of this 9 KB file, 1.5 ms."""
    text = resources.files("fleetform.providers.aws").joinpath("addons.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 (a safe loader)


def cpu_reserved_m(vcpus: int) -> int:
    """kube-reserved CPU in millicores as EKS's nodeadm computes it: 6% of the first core, 1% of
    the second, 0.5% of the third and fourth, 0.25% of the rest (awslabs/amazon-eks-ami,
    nodeadm/internal/kubelet/config.go getCPUMillicoresToReserve)."""
    total = vcpus * 1000
    reserved = 0.0
    for start, end, per_10000 in ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25)):
        if total > start:
            reserved += (min(total, end) - start) * per_10000 / 10000
    return math.ceil(reserved)


def memory_reserved_mib(max_pods: int = MAX_PODS) -> int:
    """kube-reserved memory as nodeadm computes it: 11 MiB per pod + 255 MiB (same file,
    getMemoryMebibytesToReserve), plus the hard eviction threshold."""
    return 11 * max_pods + 255 + EVICTION_MEMORY_MIB


_QUANTITY = re.compile(r"^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
_FACTOR = {None: 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9,
           "T": 1e12}


def quantity(value: str | int | float) -> float:
    """A Kubernetes quantity as a plain number (cores, bytes)."""
    match = _QUANTITY.match(str(value))
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    return float(match.group(1)) * _FACTOR[match.group(2)]


@frozen
class Toleration:
    key: str | None  # None with Exists tolerates every taint
    operator: str
    effect: str | None  # None tolerates every effect

    def tolerates(self, key: str, effect: str) -> bool:
        return (self.key is None or self.key == key) and (self.effect is None or self.effect == effect)


@frozen
class NodeGroup:
    name: str  # the EKS node group's name suffix: "system" or the fleet's name
    fleet: str | None
    instance_type: str
    min: int
    max: int
    labels: tuple[tuple[str, str], ...]  # set on the nodes by the node group
    discovered: tuple[tuple[str, str], ...]  # published at run time (GPU Feature Discovery)
    taints: tuple[tuple[str, str, str], ...]  # key, value, effect (Kubernetes spelling)
    cpu_m: int  # allocatable per node
    memory_mib: int
    ephemeral_gib: int
    devices: tuple[tuple[str, int], ...]  # extended resources per node, e.g. (("nvidia.com/gpu", 8),)
    capacity_type: str  # on-demand | spot | reservation | capacity-block
    reservation_id: str | None
    local_nvme: bool  # ephemeral storage on the instance-store NVMe drives (RAID0)
    path: tuple
    repair: bool | None = None  # EKS node auto repair (inference GPU groups: fleetform/health.py); None: no config sent
    prepull: tuple[str, ...] = ()  # images each new node pulls as it joins (fleetform/prepull.py), as ctr names them
    prepull_skipped: tuple[str, ...] = ()  # images left to the kubelet (private ECR: ctr has no credentials)

    @property
    def gpu(self) -> bool:
        return self.fleet is not None


@frozen
class Workload:
    """Pods a deployment runs: the requests of one replica and where it may run."""

    name: str
    source: str  # "Helm release keda", "EKS add-on coredns", "fleet serve"
    kind: str  # Deployment | StatefulSet | DaemonSet
    min_replicas: int
    max_replicas: int
    cpu_m: int
    memory_mib: int
    ephemeral_gib: int
    devices: tuple[tuple[str, int], ...]
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]
    fleet: str | None
    path: tuple

    @property
    def daemon(self) -> bool:
        return self.kind == "DaemonSet"


@frozen
class Release:
    name: str
    chart: str
    repo: str
    version: str
    tagged: str
    source: str
    namespace: str
    values_json: str  # fleetform's values, JSON (sorted keys); the program merges rendered files into gpu-operator's

    @property
    def values(self) -> dict:
        return json.loads(self.values_json)


@frozen
class CrdBundle:
    """CustomResourceDefinitions the program applies from files vendored under providers/aws/crds/<name>/
    (providers/aws/addons.yaml `crd_bundles`): a pinned upstream release, each file by its git blob id."""

    name: str
    version: str
    source: str
    files: tuple[tuple[str, str], ...]  # file name, git blob id


@frozen
class PodIdentity:
    """An EKS Pod Identity association: the IAM role a service account's pods get."""

    name: str
    namespace: str
    service_account: str
    purpose: str  # cluster-autoscaler | s3-weights
    fleet: str | None
    s3_prefixes: tuple[str, ...] = ()


@frozen
class Cluster:
    name: str
    version: str
    node_groups: tuple[NodeGroup, ...]  # the system group first
    releases: tuple[Release, ...]
    addons: tuple[str, ...]
    workloads: tuple[Workload, ...]
    pod_identities: tuple[PodIdentity, ...]
    api_access_cidrs: tuple[str, ...] | None  # None: the address `pulumi up` runs from; (): private only
    fleets: tuple[str, ...]
    path: tuple
    subnet_ids: tuple[str, ...] = ()  # an existing network: the control plane's subnets (two zones or more)
    crd_bundles: tuple[CrdBundle, ...] = ()  # applied before the releases (providers/aws/gateway.py)

    @property
    def system(self) -> NodeGroup:
        return self.node_groups[0]

    def release(self, name: str) -> Release | None:
        return next((r for r in self.releases if r.name == name), None)


def _tolerations(items) -> tuple[Toleration, ...]:
    return tuple(Toleration(t.get("key"), "Exists" if t.get("key") is None else t.get("operator", "Exists"),
                            t.get("effect")) for t in items or ())


def _set_path(values: dict, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        values = values.setdefault(key, {})
    values[keys[-1]] = value


def _chart_workload(item: dict, source: str, path: tuple) -> Workload:
    return Workload(item["name"], source, item["kind"], item["replicas"], item["replicas"],
                    round(quantity(item["cpu"]) * 1000), round(quantity(item["memory"]) / 2**20), 0, (),
                    tuple(sorted((item.get("node_selector") or {}).items())), _tolerations(item.get("tolerations")),
                    None, path)


def gfd_product(fleet) -> str:
    """The nvidia.com/gpu.product label GPU Feature Discovery publishes on the fleet's nodes: the
    GPU's product name, `-SHARED` when time-slicing or MPS share it, `-MIG-<profile>` under the
    single MIG strategy (NVIDIA k8s-device-plugin README, "Shared Access to GPUs" and GFD labels)."""
    sharing = fleet.gpu_sharing
    product = fleet.shape.gpu.gfd_product
    if sharing.strategy in ("time-slicing", "mps") and sharing.replicas:
        return product + "-SHARED"
    if sharing.strategy == "mig" and sharing.profile and sharing.mig_strategy == "single":
        return product + f"-MIG-{sharing.profile}"
    return product


def _gpu_group(bp, fleet) -> NodeGroup | None:
    kube, instance = fleet.kube, fleet.instance
    per_node = fleet.devices()
    if kube is None or instance is None or fleet.nodes is None or per_node is None:
        return None
    resource = kube.servers[0].gpu_resource if kube.servers else "nvidia.com/gpu"
    # a fleet with replicas spanning nodes gets EFA interfaces on its nodes (providers/aws/lws.py)
    efa = max((s.group.efa for s in kube.servers if s.group is not None), default=0)
    group = gpu_node_group(fleet, kube.node_labels, kube.node_taints, (resource, per_node[0]),
                           (("vpc.amazonaws.com/efa", efa),) if efa else ())
    if kube.mig is not None and kube.mig.whole_devices:
        # a split node under the mixed strategy: the device plugin advertises the slices as
        # nvidia.com/mig-<profile> and the GPUs left whole as nvidia.com/gpu (NVIDIA k8s-device-plugin README,
        # MIG strategies: mixed)
        group = replace(group, devices=group.devices + (("nvidia.com/gpu", len(kube.mig.whole_devices)),))
    pulled, skipped = prepull.images(kube.servers)  # the node group pre-pulls its models' images
    return replace(group, prepull=pulled, prepull_skipped=skipped)


def gpu_node_group(fleet, labels, taints, device: tuple[str, int], more: tuple = ()) -> NodeGroup:
    """A GPU fleet's own node group (an inference fleet's, a Ray fleet's): the fleet's labels and taints, the
    labels GPU Feature Discovery and the kubelet publish, and what a node offers pods once the kubelet's
    reserve and eviction threshold are taken (device: the extended resource and its count per node)."""
    instance = fleet.instance
    local = bool(instance.local_nvme_gb)
    disk_gib = instance.local_nvme_gb * 1e9 / 2**30 if local else ROOT_GIB
    return NodeGroup(
        fleet.name, fleet.name, instance.name, fleet.nodes.min, fleet.nodes.max,
        tuple(labels) + ((ACCELERATOR_LABEL, accelerator(fleet)),),
        (("nvidia.com/gpu.product", gfd_product(fleet)),) + _well_known(instance.name, fleet.capacity_type),
        tuple(taints),
        instance.vcpus * 1000 - cpu_reserved_m(instance.vcpus),
        instance.mem_gib * 1024 - memory_reserved_mib(),
        math.floor(disk_gib * (1 - EVICTION_NODEFS)),
        (device,) + tuple(more), fleet.capacity_type, fleet.reservation_id, local, fleet.path,
        repair=fleet.auto_repair if fleet.kube is not None else None)  # Ray's group: no repair config, as Kueue's


def _system_group(data: dict, eks: dict, path: tuple) -> NodeGroup:
    spec = {**data["system_default"], **(eks.get("system_nodes") or {})}
    nodes = spec["nodes"]
    low, high = (nodes, nodes) if isinstance(nodes, int) else (nodes["min"], nodes["max"])
    shape = data["system_instances"].get(spec["instance_type"])
    vcpus, mem = (shape["vcpus"], shape["mem_gib"]) if shape else (0, 0)  # unknown: a rule reports it
    return NodeGroup("system", None, spec["instance_type"], low, high, (("fleetform.dev/node-group", "system"),),
                     _well_known(spec["instance_type"], "on-demand"),
                     (), max(0, vcpus * 1000 - cpu_reserved_m(vcpus)) if shape else 0,
                     max(0, mem * 1024 - memory_reserved_mib()) if shape else 0,
                     math.floor(ROOT_GIB * (1 - EVICTION_NODEFS)), (), "on-demand", None, False,
                     path + ("system_nodes",) if "system_nodes" in eks else path)


def _servers(fleet) -> list[Workload]:
    out = []
    for server, model in zip(fleet.kube.servers, fleet.models, strict=True):
        autoscaling = server.autoscaling
        low = autoscaling.min_replicas if autoscaling else (server.replicas or model.replicas.min)
        high = autoscaling.max_replicas if autoscaling else low
        group = server.group  # a LeaderWorkerSet: each replica is `size` pods alike, one per node
        pods = group.size if group is not None else 1
        devices = ((server.gpu_resource, server.gpu_count),)
        if group is not None and group.efa:
            devices += (("vpc.amazonaws.com/efa", group.efa),)
        out.append(Workload(
            f"{fleet.name}/{server.name}", f"fleet {fleet.name}", server.kind, low * pods, high * pods,
            round(quantity(server.cpu_request) * 1000), round(quantity(server.memory) / 2**20),
            math.ceil(quantity(server.ephemeral_storage) / 2**30), devices,
            tuple(server.node_selector),
            tuple(Toleration(t.key, t.operator, t.effect) for t in server.tolerations),
            fleet.name, model.path))
    return out


def _gateway(fleet) -> list[Workload]:
    """The pods of a fleet's gateway (fleetform/gateway.py): each model's endpoint picker, the body-based
    router and the semantic router where asked. They tolerate no taint and select no node: they run on the
    system node group, and are checked as its other pods are (fleet None: the system group's reasons and hint)."""
    g = fleet.inference_gateway
    if g is None:
        return []
    path = fleet.gateway.path
    pods = [(p.name, 1, g.cpu, g.memory, "0") for p in g.pickers]
    pods.append((g.router.name, g.router.replicas, g.router.cpu, g.router.memory, "0"))
    if g.semantic_router is not None:  # fleetform/semrouter.py: its requests, the chart's (limits above them)
        s = g.semantic_router
        pods.append((s.name, s.replicas, s.cpu_request, s.memory_request, s.ephemeral_request))
    return [Workload(f"{fleet.name}/{name}", f"fleet {fleet.name}", "Deployment", replicas, replicas,
                     round(quantity(cpu) * 1000), round(quantity(memory) / 2**20), math.ceil(quantity(eph) / 2**30),
                     (), (), (), None, path)
            for name, replicas, cpu, memory, eph in pods]


def deep_merge(base: dict, extra: dict) -> dict:
    """Helm's way of layering values: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def build(bp, eks: dict | None) -> Cluster | None:
    """The cluster of the blueprint's inference fleets, training fleets scheduled by Kubernetes and Ray training
    fleets on AWS; None when it has none."""
    from . import kueue, mig, ray, slinky

    fleets = [f for f in bp.fleets if f.kube is not None]
    training = [f for f in bp.fleets if f.kueue is not None]
    rays = [f for f in bp.fleets if f.ray is not None]
    slurms = [f for f in bp.fleets if f.slinky is not None]  # Slurm on EKS (fleetform/slinky.py)
    if bp.cloud != "aws" or not (fleets or training or rays or slurms):
        return None
    data = addons_data()
    eks = eks or {}
    first = (fleets or training or rays or slurms)[0]
    path = ("provider", "eks") if eks else first.path
    groups = [_system_group(data, eks, path)]
    groups += [g for g in (_gpu_group(bp, f) for f in fleets) if g is not None]
    groups += [kueue.cluster_node_group(f, f.kueue) for f in training]
    groups += [g for g in (ray.node_group(f) for f in rays) if g is not None]
    groups += [slinky.node_group(f) for f in slurms]
    autoscalers = {f.scheduler.autoscaler for f in fleets}
    wanted = ["gpu-operator", "kube-prometheus-stack"]
    wanted += ["keda"] if "keda" in autoscalers else []
    wanted += ["prometheus-adapter"] if "hpa" in autoscalers else []
    wanted += ["kuberay-operator"] if rays else []
    gateways = any(f.gateway is not None for f in fleets)
    # a fleet's gateway (fleetform/gateway.py): kgateway's CRDs, then kgateway, after the CRD bundles below
    wanted += ["kgateway-crds", "kgateway"] if gateways else []
    # replicas spanning nodes (fleetform/lws.py): the LeaderWorkerSet controller, whose chart installs the CRD
    # from its crds/ folder; their pods' vpc.amazonaws.com/efa comes from the EFA device plugin
    spanning = [s for f in fleets for s in f.kube.servers if s.group is not None]
    wanted += ["lws"] if spanning else []
    wanted += ["cluster-autoscaler"]
    # training: JobSet's CRD before Kueue, whose JobSet integration watches it; the EFA device plugin
    splits = [f for f in fleets if f.split is not None]  # Kueue on the whole GPUs of a node split by GPU
    wanted += ["jobset", "kueue"] if training or splits else []
    # Slinky's operator brings the slinky.slurm.net CRDs (crds.enabled) its fleets' `slurm` releases use
    wanted += ["slurm-operator"] if slurms else []
    # the EFA device plugin where a Kueue job, a Ray worker, a slurmd pod or a replica spanning nodes asks for
    # vpc.amazonaws.com/efa
    wanted += ["aws-efa-k8s-device-plugin"] if (training or any(f.ray.efa for f in rays) or any(f.slinky.efa for f in slurms)
                                                or any(s.group.efa for s in spanning)) else []
    releases, workloads = [], []
    for name in wanted:
        chart = data["charts"][name]
        values = json.loads(json.dumps(chart.get("values") or {}))
        for item in chart["workloads"]:
            _set_path(values, item["resources_at"], {"requests": {"cpu": item["cpu"], "memory": item["memory"]}})
            workloads.append(_chart_workload(item, f"Helm release {name}", path))
        if name == "cluster-autoscaler":
            version = first.scheduler.version
            # autoDiscovery.clusterName is the EKS name, which carries the Pulumi stack: the program sets it
            values = deep_merge(values, {"awsRegion": bp.region,
                                         "image": {"repository": chart["image"],
                                                   "tag": chart["image_tags"].get(version, "")}})
        if name == "gpu-operator":
            values = deep_merge(values, _gpu_operator_defaults(fleets + training + rays + slurms))
        if name == "kueue":
            values = deep_merge(values, {"managerConfig": {"controllerManagerConfigYaml": kueue.manager_config(
                [ns for f in training for ns, _ in f.kueue.local_queues]
                + [ns for f in splits for ns, _ in f.split.kueue.local_queues])}})
        releases.append(Release(name, chart["chart"], chart["repo"], str(chart["version"]), str(chart["tagged"]),
                                chart["source"], chart["namespace"], json.dumps(values, sort_keys=True)))
    workloads.append(_chart_workload(data["coredns"], "EKS add-on coredns", path))
    addons = list(data["addons"]) + optional_addons(data, fleets, training, any(f.ray.mounts for f in rays)
                                                    or any(f.slinky.mounts for f in slurms), bool(slurms))
    for name in addons:
        for item in (data["optional_addons"].get(name) or {}).get("workloads", ()):
            workloads.append(_chart_workload(item, f"EKS add-on {name}", path))
    workloads += [_chart_workload(a, f"EKS add-on {a['name']}", path) for a in data["node_agents"]]
    for fleet in fleets:
        if any(g.fleet == fleet.name for g in groups):
            workloads += _servers(fleet) + _gateway(fleet)
    workloads += [kueue.cluster_workload(f, f.kueue) for f in training if f.kueue.job is not None]
    workloads += [mig.cluster_workload(f, f.split) for f in splits if f.split.job is not None]
    for fleet in rays:
        if any(g.fleet == fleet.name for g in groups):
            workloads += ray.workloads(fleet)
    workloads += [w for f in slurms for w in slinky.workloads(f)]
    ca = data["charts"]["cluster-autoscaler"]
    identities = [PodIdentity("cluster-autoscaler", ca["namespace"], ca["service_account"], "cluster-autoscaler", None)]
    for fleet in fleets:  # models reading weights or adapters from S3 read them as their own service account
        for server in fleet.kube.servers:
            access = server.weights_access
            if access is not None:
                identities.append(PodIdentity(f"{fleet.name}-{server.name}-weights", access.namespace,
                                              access.service_account, "s3-weights", fleet.name, access.uris))
    return Cluster(bp.name, first.scheduler.version, tuple(groups), tuple(releases), tuple(addons),
                   tuple(workloads), tuple(identities),
                   tuple(eks["api_access_cidrs"]) if "api_access_cidrs" in eks else None,
                   tuple(f.name for f in fleets + training + rays + slurms), path, tuple(eks.get("subnet_ids", ())),
                   tuple(CrdBundle(name, str(b["version"]), b["source"], tuple(b["files"].items()))
                         for name, b in data["crd_bundles"].items() if b["when"] == "gateway" and gateways))


def volume_weights(fleets) -> bool:
    """Whether a model of the cluster mounts its weights from a PersistentVolumeClaim (weights: {source: volume})."""
    return any(m.weights is not None and m.weights.source == "volume" for f in fleets for m in f.models)


def optional_addons(data: dict, fleets, training=(), ray_mounts: bool = False, slinky: bool = False) -> list[str]:
    """The add-ons of providers/aws/addons.yaml `optional_addons` the cluster's fleets need: the FSx CSI driver
    where a model reads its weights from a claim, a training job mounts a file system or a Ray fleet mounts an
    FSx for Lustre claim; the EBS CSI driver where a Slinky fleet's slurmctld keeps its state on a claim; the EFS
    CSI driver where a fleet's shared cache is fleetform's EFS file system;
    metrics-server and the node monitoring agent on every cluster (each has GPU nodes)."""
    mounts = any(f.kueue.job is not None and f.kueue.job.volumes for f in training)
    wanted = {"inference": True, "volume-weights": volume_weights(fleets) or mounts or ray_mounts, "slinky": slinky,
              # a fleet whose shared cache is fleetform's EFS file system (fleetform/k8s.py SharedCache.efs)
              "shared-cache": any(f.kube is not None and f.kube.shared_cache is not None and f.kube.shared_cache.efs
                                  for f in fleets)}
    return [name for name, spec in data["optional_addons"].items() if wanted[spec["when"]]]


def _gpu_operator_defaults(fleets) -> dict:
    """One GPU Operator serves every fleet of the cluster. The chart's `default` config applies to
    nodes without a selecting label: when not every fleet uses the same MIG layout, the default is
    `all-disabled` (in every rendered mig-parted ConfigMap) and each MIG fleet's nodes select their
    layout by the nvidia.com/mig.config label their node group sets."""
    migs = {f.kube.mig.name if f.kube is not None and f.kube.mig else None for f in fleets}  # training, Ray: no MIG
    out: dict = {}
    if len(migs) > 1 and any(migs):
        out["migManager"] = {"config": {"default": "all-disabled"}}
    if any(migs):
        # With the host's driver (the EKS NVIDIA AMI) an A100 may need a GPU reset the running system blocks
        # to turn MIG mode on; the MIG manager then reboots the node when allowed, else it leaves the node
        # labelled mig.config.state=failed and the replicas Pending (NVIDIA/gpu-operator #1606). The chart
        # defaults WITH_REBOOT to "false" (deployments/gpu-operator/values.yaml, migManager.env); NVIDIA's
        # GPU Operator MIG guide says to set it "true" where GPU reset is unavailable, as on cloud instances.
        out = deep_merge(out, {"migManager": {"env": [{"name": "WITH_REBOOT", "value": "true"}]}})
    return out
