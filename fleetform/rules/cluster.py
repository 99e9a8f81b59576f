"""The cluster as a whole, before anything is deployed: every workload `pulumi up` installs (the
vLLM servers, the Helm releases' pods, CoreDNS) has a node group whose labels, taints and
allocatable resources admit it, and the node groups' minimum and maximum sizes hold the
workloads' minimum and maximum replicas.

What is checked against what: the node groups' labels and taints are the ones the Pulumi program
sets (plus the product label GPU Feature Discovery publishes); allocatable is the instance's
vCPUs and memory less EKS's kubelet reserve (fleetform/cluster.py) and the node agents' requests;
the workloads' requests are those fleetform sets in the Helm values and the rendered manifests.

Ownership: how many GPUs the fleet's nodes have for the models' replicas is the inference rules'
(autoscaler-reach, and the minimum-replicas rule); these rules report what fits in GPUs but not
in CPU, memory or ephemeral storage, and everything about the system node group.
"""

from __future__ import annotations

from ..cluster import Cluster, NodeGroup, Workload, addons_data
from ..cidrs import api_open_message, covers_internet
from ..model import Blueprint
from . import Reporter, did_you_mean, rule


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def _overhead(cluster: Cluster, group: NodeGroup) -> tuple[int, int]:
    """CPU (m) and memory (MiB) the DaemonSets that run on every node of the group request."""
    cpu = mem = 0
    for w in cluster.workloads:
        if w.daemon and not _untolerated(w, group) and not _unmatched(w, group):
            cpu += w.cpu_m
            mem += w.memory_mib
    return cpu, mem


def _untolerated(w: Workload, group: NodeGroup) -> list[str]:
    return [f"{k}={v}:{e}" for k, v, e in group.taints
            if e in ("NoSchedule", "NoExecute") and not any(t.tolerates(k, e) for t in w.tolerations)]


def _unmatched(w: Workload, group: NodeGroup) -> list[str]:
    labels = dict(group.labels + group.discovered)
    return [f"{k}={v}" for k, v in w.node_selector if labels.get(k) != v]


def _short(w: Workload, group: NodeGroup, cluster: Cluster) -> list[str]:
    """What one node of the group lacks for one replica, after the node agents' requests."""
    cpu_o, mem_o = _overhead(cluster, group)
    cpu, mem = group.cpu_m - cpu_o, group.memory_mib - mem_o
    short = []
    if w.cpu_m > cpu:
        short.append(f"CPU {w.cpu_m}m > {cpu}m allocatable")
    if w.memory_mib > mem:
        short.append(f"memory {_gib(w.memory_mib)} > {_gib(mem)} allocatable")
    if w.ephemeral_gib > group.ephemeral_gib:
        where = "the instance-store NVMe" if group.local_nvme else "the root volume"
        short.append(f"ephemeral storage {w.ephemeral_gib} GiB > {group.ephemeral_gib} GiB on {where}")
    devices = dict(group.devices)
    for resource, count in w.devices:
        if count > devices.get(resource, 0):
            short.append(f"{count} x {resource} > {devices.get(resource, 0)} per node")
    return short


def _why_not(w: Workload, group: NodeGroup, cluster: Cluster) -> list[str]:
    return ([f"taint {t} not tolerated" for t in _untolerated(w, group)]
            + [f"label {lbl} missing" for lbl in _unmatched(w, group)]
            + _short(w, group, cluster))


def _home(w: Workload, cluster: Cluster) -> NodeGroup | None:
    """The node group the workload's pods land on: the first that admits them."""
    return next((g for g in cluster.node_groups if not _why_not(w, g, cluster)), None)


@rule("cluster-admission", "error",
      "every workload the cluster runs has a node group whose labels, taints and allocatable resources admit it",
      stage="cluster")
def cluster_admission(bp: Blueprint, report: Reporter) -> None:
    cluster = bp.cluster
    if cluster is None or not _system_known(cluster):
        return
    for w in cluster.workloads:
        if w.daemon or _home(w, cluster) is not None:
            continue
        groups = [g for g in cluster.node_groups if w.fleet in (None, g.fleet)] or list(cluster.node_groups)
        reasons = "; ".join(f"{g.name} ({g.instance_type}): {', '.join(_why_not(w, g, cluster))}" for g in groups)
        if w.fleet is None:
            hint = "give provider.eks.system_nodes a larger instance_type"
        else:
            hint = "pick an instance type with more CPU, memory or local NVMe, or lower tensor_parallel"
        report(cluster.system.path if w.fleet is None else w.path,
               f"no node group admits {w.name} ({w.source}): {reasons}", hint)


def _pack(items: list[tuple[int, int, int, dict]], nodes: int, capacity: tuple[int, int, int, dict]) -> bool:
    """First-fit decreasing of replicas (cpu, memory, ephemeral, devices) into `nodes` nodes."""
    free = [[capacity[0], capacity[1], capacity[2], dict(capacity[3])] for _ in range(nodes)]
    for cpu, mem, eph, devs in sorted(items, key=lambda i: (sum(i[3].values()), i[0], i[1]), reverse=True):
        for node in free:
            if cpu <= node[0] and mem <= node[1] and eph <= node[2] and all(c <= node[3].get(r, 0)
                                                                            for r, c in devs.items()):
                node[0] -= cpu
                node[1] -= mem
                node[2] -= eph
                for r, c in devs.items():
                    node[3][r] -= c
                break
        else:
            return False
    return True


def _capacity(bp: Blueprint, report: Reporter, which: str) -> None:
    cluster = bp.cluster
    if cluster is None or not _system_known(cluster):
        return
    homes: dict[str, list[Workload]] = {}
    for w in cluster.workloads:
        home = None if w.daemon else _home(w, cluster)
        if home is not None:
            homes.setdefault(home.name, []).append(w)
    for group in cluster.node_groups:
        placed = homes.get(group.name, [])
        nodes = group.min if which == "min" else group.max
        if not placed:
            continue
        if which == "max" and group.min == group.max and all(w.min_replicas == w.max_replicas for w in placed):
            continue  # nothing scales: the minimum's check is this one
        replicas = [(w, w.min_replicas if which == "min" else w.max_replicas) for w in placed]
        cpu_o, mem_o = _overhead(cluster, group)
        capacity = (group.cpu_m - cpu_o, group.memory_mib - mem_o, group.ephemeral_gib, dict(group.devices))
        items = [(w.cpu_m, w.memory_mib, w.ephemeral_gib, dict(w.devices)) for w, n in replicas for _ in range(n)]
        if _pack(items, nodes, capacity):
            continue
        devices = dict(group.devices)
        wanted = {r: sum(dict(w.devices).get(r, 0) * n for w, n in replicas) for r in devices}
        if any(wanted[r] > devices[r] * nodes for r in devices):
            continue  # short of GPUs: the inference rules report that
        need = next(n for n in range(nodes + 1, nodes + 1000) if _pack(items, n, capacity))
        cpu = sum(w.cpu_m * n for w, n in replicas)
        mem = sum(w.memory_mib * n for w, n in replicas)
        detail = ", ".join(f"{n} x {w.name}" for w, n in replicas if n)
        size = "minimum" if which == "min" else "maximum"
        field = "nodes.min" if group.min != group.max else "nodes"
        report(group.path + ("nodes",) if group.gpu else group.path,
               f"node group {group.name} at its {size} of {nodes} x {group.instance_type} "
               f"({group.cpu_m - cpu_o}m CPU, {_gib(group.memory_mib - mem_o)} allocatable each, after node agents) "
               f"cannot hold the {size} replicas: {detail} ({cpu}m CPU, {_gib(mem)} in all)",
               f"{'raise ' + field if which == 'min' else 'raise nodes.max'} to {need}, or use a larger instance type")


@rule("cluster-min-capacity", "error",
      "each node group's minimum nodes hold the minimum replicas of the workloads that land on it", stage="cluster")
def cluster_min_capacity(bp: Blueprint, report: Reporter) -> None:
    _capacity(bp, report, "min")


@rule("cluster-max-capacity", "error",
      "each node group's maximum nodes hold the maximum replicas of the workloads that land on it", stage="cluster")
def cluster_max_capacity(bp: Blueprint, report: Reporter) -> None:
    _capacity(bp, report, "max")


def _system_known(cluster: Cluster) -> bool:
    return cluster.system.instance_type in addons_data()["system_instances"]


@rule("cluster-system-nodes", "error",
      "the system node group uses a known general-purpose instance type and keeps at least one node", stage="cluster")
def cluster_system_nodes(bp: Blueprint, report: Reporter) -> None:
    cluster = bp.cluster
    if cluster is None:
        return
    system = cluster.system
    known = addons_data()["system_instances"]
    if system.instance_type not in known:
        report(system.path + ("instance_type",) if system.path[-1] == "system_nodes" else system.path,
               f"'{system.instance_type}' is not an instance type fleetform knows for system nodes",
               did_you_mean(system.instance_type, known, "system instance types"))
    if system.min < 1:
        report(system.path + ("nodes",), "the system node group may scale to 0 nodes: CoreDNS and the Cluster "
               "Autoscaler itself would have nowhere to run", "keep nodes.min at 1 or more (2 keeps DNS up "
               "while a node is replaced)")


@rule("cluster-version", "error", "inference fleets sharing a cluster name the same Kubernetes version", stage="cluster")
def cluster_version(bp: Blueprint, report: Reporter) -> None:
    cluster = bp.cluster
    if cluster is None:
        return
    first = None
    for fleet in bp.fleets:
        if fleet.name not in cluster.fleets:
            continue
        if first is None:
            first = fleet
        elif fleet.scheduler.version != first.scheduler.version:
            report(fleet.scheduler.path + ("version",),
                   f"fleet '{fleet.name}' asks for Kubernetes {fleet.scheduler.version}, but it shares the "
                   f"blueprint's EKS cluster with '{first.name}' at {first.scheduler.version}",
                   f"inference fleets of a blueprint share one cluster: use version \"{first.scheduler.version}\"")


@rule("cluster-gpu-operator", "error",
      "the fleets of a cluster agree on one GPU Operator configuration (one device plugin config for all of them)",
      stage="cluster")
def cluster_gpu_operator(bp: Blueprint, report: Reporter) -> None:
    cluster = bp.cluster
    if cluster is None:
        return
    fleets = [f for f in bp.fleets if f.name in cluster.fleets and f.kube is not None]
    migs = [f for f in fleets if f.kube.mig is not None]
    for fleet in migs[1:]:
        if fleet.kube.mig.configmap != migs[0].kube.mig.configmap:
            report(fleet.gpu_sharing.path, f"fleets '{migs[0].name}' and '{fleet.name}' need different MIG "
                   f"ConfigMaps ({migs[0].kube.mig.configmap}, {fleet.kube.mig.configmap}), but the cluster's one "
                   "GPU Operator's MIG manager reads one", "put MIG fleets with different layouts in separate blueprints")
    sharing = [f for f in fleets if f.kube.device_plugin is not None]
    if not sharing:
        return
    first = sharing[0]
    for fleet in fleets:
        if fleet is first:
            continue
        other = fleet.kube.device_plugin
        if other is None:
            report(fleet.gpu_sharing.path, f"fleet '{fleet.name}' shares the cluster's GPU Operator with "
                   f"'{first.name}', whose {first.gpu_sharing.strategy} config the device plugin applies as the "
                   "default to every node without a config label: this fleet's GPUs would be shared too",
                   "put fleets with and without time-slicing/MPS in separate blueprints, or share this fleet's GPUs "
                   "the same way")
        elif other.configmap != first.kube.device_plugin.configmap:
            report(fleet.gpu_sharing.path, f"fleets '{first.name}' and '{fleet.name}' need different device plugin "
                   f"ConfigMaps ({first.kube.device_plugin.configmap}, {other.configmap}), but the cluster's one GPU "
                   "Operator reads one", "put them in separate blueprints")


@rule("eks-api-access", "error",
      "the run that creates the EKS cluster can reach its API endpoint (api_access_cidrs, or a private endpoint "
      "in an existing VPC)", stage="cluster")
def eks_api_access(bp: Blueprint, report: Reporter) -> None:
    cluster = bp.cluster
    if cluster is None or cluster.api_access_cidrs is None or cluster.api_access_cidrs:
        return  # absent: the address `pulumi up` runs from; listed: those networks
    if bp.network.vpc_id is None:
        report(("provider", "eks", "api_access_cidrs"),
               "api_access_cidrs is empty, so the EKS endpoint is private, but this run creates the VPC it lives in: "
               "`pulumi up` cannot reach the cluster to install what the fleets need",
               "remove api_access_cidrs (the endpoint then answers the address `pulumi up` runs from), list your "
               "networks, or use an existing network (vpc_id) and run `pulumi up` inside it")


@rule("eks-subnets", "error", "an existing network gives the EKS control plane subnets in two availability zones",
      stage="cluster")
def eks_subnets(bp: Blueprint, report: Reporter) -> None:
    cluster = bp.cluster
    net = bp.network
    if cluster is None:
        return
    if net.vpc_id is None:
        if cluster.subnet_ids:
            report(("provider", "eks", "subnet_ids"), "subnet_ids applies to an existing network (vpc_id)",
                   "remove it: fleetform makes the control plane's second subnet in the VPC it creates")
        return
    others = [s for s in cluster.subnet_ids if s != net.subnet_id]
    if not others:
        # EKS User Guide, "View Amazon EKS networking requirements for VPC and subnets": "When you create a
        # cluster, you specify a VPC and at least two subnets that are in different Availability Zones."
        report(("provider", "eks", "subnet_ids") if cluster.subnet_ids else net.path + ("subnet_id",),
               "the EKS cluster would get the single subnet subnet_id; CreateCluster requires subnets in at least "
               "two availability zones",
               "add provider.eks.subnet_ids: [<a subnet of the VPC in another zone>]")


@rule("eks-api-open", "warning", "the EKS API endpoint is not open to the whole Internet, however the ranges are split",
      stage="cluster")
def eks_api_open(bp: Blueprint, report: Reporter) -> None:
    cluster = bp.cluster
    if cluster is None or not cluster.api_access_cidrs:
        return
    if covers_internet(cluster.api_access_cidrs):
        report(("provider", "eks", "api_access_cidrs"),
               api_open_message(f"api_access_cidrs ({', '.join(cluster.api_access_cidrs)})"), "list only the networks `pulumi up` and kubectl run from, or remove "
               "api_access_cidrs (then the endpoint answers the address `pulumi up` runs from)")
