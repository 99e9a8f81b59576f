"""Rules of training fleets scheduled by Ray (KubeRay on the blueprint's EKS cluster): the Ray release has an
image fleetform pins, the fleet runs where KubeRay does, and the RayCluster fleetform derives (fleetform/ray.py)
asks of each node exactly what the node has."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


def _ray_fleets(bp: Blueprint):
    return [f for f in bp.fleets if f.scheduler is not None and f.scheduler.type == "ray"]


@rule("ray-version", "error", "a Ray fleet's Ray release is one fleetform pins a CUDA image of, for its KubeRay")
def ray_version(bp: Blueprint, report: Reporter) -> None:
    from ..ray import KUBERAY_VERSION, RAY_IMAGES

    for fleet in _ray_fleets(bp):
        version = fleet.scheduler.ray_version
        if version not in RAY_IMAGES:
            report(fleet.scheduler.path + ("ray_version",),
                   f"Ray {version} has no image fleetform pins for KubeRay {KUBERAY_VERSION}",
                   "use ray_version " + " or ".join(f'"{v}"' for v in sorted(RAY_IMAGES)))


@rule("ray-placement", "error", "a Ray fleet runs on the blueprint's EKS cluster, on AWS")
def ray_placement(bp: Blueprint, report: Reporter) -> None:
    for fleet in _ray_fleets(bp):  # an inference fleet scheduled by ray: role-scheduler says so
        if bp.cloud != "aws":
            report(fleet.scheduler.path + ("type",), "Ray fleets run through KubeRay on the blueprint's EKS "
                   "cluster, which on-premises blueprints do not have", "schedule on-prem training with slurm")


@rule("ray-efa", "error", "a Ray fleet on EFA gives each worker every EFA interface of its node", stage="config")
def ray_efa(bp: Blueprint, report: Reporter) -> None:
    """A guard on fleetform's own derivation (fleetform/ray.py): on EFA each worker pod asks for the node's EFA
    interfaces (vpc.amazonaws.com/efa, one per interface the EFA device plugin finds) and the node group's
    launch template has them (providers/aws/ray.py). A worker asking for none would get no EFA device in its
    pod, and aws-ofi-nccl, finding none, would leave NCCL on sockets without a word; asking for fewer strands
    the rest of the node's network bandwidth; asking for more never schedules."""
    for fleet in _ray_fleets(bp):
        net, r, instance = fleet.interconnect, fleet.ray, fleet.instance
        if net is None or net.fabric != "efa" or r is None or instance is None or not instance.max_efa:
            continue  # EFA on an instance without it: the interconnect rules say so
        from ..ray import efa_count

        if r.efa != efa_count(fleet) or (r.hugepages is None) != (r.efa == 0):
            report(fleet.scheduler.path, f"the Ray workers of fleet '{fleet.name}' ask for {r.efa} EFA interfaces "
                   f"(huge pages {r.hugepages}), but a {instance.name} node has {instance.max_efa}",
                   "report this: fleetform gives each worker every EFA interface of its node")


@rule("ray-workers", "error", "each Ray worker asks for a whole node of the fleet: all its GPUs, its share of the "
      "node, the fleet's node count", stage="config")
def ray_workers(bp: Blueprint, report: Reporter) -> None:
    """A guard on fleetform's own derivation: a worker asking for fewer GPUs than a node has strands the rest
    (Ray Train's workers would share nodes unevenly); more never schedules; a worker group larger than the node
    group leaves pods Pending the Cluster Autoscaler cannot place; num-gpus differing from the GPU request
    makes Ray schedule GPUs the pod does not have."""
    from ..cluster import quantity

    for fleet in _ray_fleets(bp):
        r, shape, nodes = fleet.ray, fleet.shape, fleet.nodes
        if r is None or shape is None or nodes is None or nodes.min > nodes.max:  # size-range reports the last
            continue
        path = fleet.scheduler.path
        if r.gpus != shape.gpu_count:
            report(path, f"the Ray worker asks for {r.gpus} GPUs, but a {fleet.instance_type} node has "
                   f"{shape.gpu_count}", "report this: fleetform derives one worker per node with every GPU")
        if (r.min_replicas, r.max_replicas) != (nodes.min, nodes.max) or not r.min_replicas <= r.replicas <= r.max_replicas:
            report(path, f"the Ray worker group runs {r.min_replicas}-{r.max_replicas} pods (replicas {r.replicas}), "
                   f"but the fleet has {nodes.min}-{nodes.max} nodes", "report this: one worker per node")
        if r.object_store_bytes > quantity(r.shm) * 0.95 or quantity(r.shm) > quantity(r.memory):
            report(path, f"the Ray worker's object store ({r.object_store_bytes} bytes) does not fit 95% of its "
                   f"/dev/shm ({r.shm}) within its memory limit ({r.memory})",
                   "report this: the object store is 30% of the memory limit")


@rule("ray-head", "error", "the Ray head is a CPU pod: it runs no tasks and asks for no GPU", stage="config")
def ray_head(bp: Blueprint, report: Reporter) -> None:
    """A head on a GPU node would hold a whole GPU node for the GCS and dashboard: fleetform puts it on the
    untainted system node group with num-cpus 0, so Ray schedules no task there."""
    for fleet in _ray_fleets(bp):
        cluster = bp.cluster
        if fleet.ray is None or cluster is None:
            continue
        head = next((w for w in cluster.workloads if w.name == f"{fleet.name}/{fleet.ray.cluster_name}-head"), None)
        if head is not None and (head.devices or dict(head.node_selector).get("fleetform.dev/node-group") != "system"):
            report(fleet.scheduler.path, f"fleet '{fleet.name}''s Ray head would run on a GPU node",
                   "report this: the head belongs on the system node group")


@rule("ray-node-image", "error", "a Ray fleet's nodes boot EKS's NVIDIA AMI: a fleet `image` does not apply")
def ray_node_image(bp: Blueprint, report: Reporter) -> None:
    """The fleet's EKS managed node group runs ami_type AL2023_x86_64_NVIDIA (providers/aws/ray.py), which brings
    the driver and the container toolkit; the image the Slurm nodes boot would be ignored without a word."""
    for fleet in _ray_fleets(bp):
        if fleet.image is not None and not fleet.image.default:
            report(fleet.image.path, "image does not apply to a Ray fleet: its EKS node group boots EKS's "
                   "NVIDIA AMI (AL2023_x86_64_NVIDIA), and the Ray image is set by ray_version",
                   "remove image")


POD_INTERFACE = "eth0"
"""The one interface of a pod's network namespace: containerd (EKS's runtime) asks the CNI plugin for `eth0`
(containerd internal/cri/server/helpers.go defaultIfName), whatever the node's own interfaces are named."""


@rule("ray-socket-ifname", "error", "a Ray fleet's NCCL socket interface is one its worker pods have")
def ray_socket_ifname(bp: Blueprint, report: Reporter) -> None:
    """The fleet's NCCL environment goes into the Ray workers' pods (fleetform/ray.py), where the only interface
    besides lo is eth0: NCCL_SOCKET_IFNAME naming a node's interface (ens5, ib0) leaves NCCL no interface to
    bootstrap on, and a multi-node Ray Train job fails at its first collective. NCCL finds eth0 by itself."""
    for fleet in _ray_fleets(bp):
        net, nccl = fleet.interconnect, fleet.nccl
        if net is not None and net.socket_ifname and net.socket_ifname != POD_INTERFACE:
            report(net.path + ("socket_ifname",), f"the Ray workers of fleet '{fleet.name}' run in pods, whose "
                   f"network interface is {POD_INTERFACE}, not '{net.socket_ifname}': NCCL would find no interface",
                   "remove socket_ifname: NCCL uses the pod's eth0 by itself")
        value = dict(nccl.env).get("NCCL_SOCKET_IFNAME") if nccl is not None else None
        if value is not None and not _admits_pod_interface(value):
            report(nccl.path + ("env", "NCCL_SOCKET_IFNAME"), f"the Ray workers of fleet '{fleet.name}' run in pods, "
                   f"whose network interface is {POD_INTERFACE}: NCCL_SOCKET_IFNAME={value} leaves NCCL none",
                   "remove NCCL_SOCKET_IFNAME from nccl.env: NCCL uses the pod's eth0 by itself")


def _admits_pod_interface(value: str) -> bool:
    """Whether NCCL_SOCKET_IFNAME lets NCCL use eth0: a comma list of name prefixes, `=` for exact names, `^` to
    exclude those listed instead (NCCL docs, Environment Variables, NCCL_SOCKET_IFNAME)."""
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    names = [n for n in (rest[1:] if exact else rest).split(",") if n]
    listed = any(n == POD_INTERFACE if exact else POD_INTERFACE.startswith(n) for n in names)
    return not listed if exclude else listed
