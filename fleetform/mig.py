"""A node split by GPU (issue 22, "partition by GPU inside one node"), as data: an inference fleet whose
`gpu_sharing.mig_gpus` splits some GPUs of each node into MIG slices for its models and leaves the others whole,
and whose `gpu_sharing.whole_gpus` queues training jobs on those whole GPUs through Kueue.

The GPU Operator's mixed MIG strategy makes this one node group: its device plugin advertises the slices as
`nvidia.com/mig-<profile>` and the GPUs with MIG off as `nvidia.com/gpu` (NVIDIA k8s-device-plugin README, "MIG
strategies": mixed), and the MIG manager applies a mig-parted config whose entries name GPU indices (NVIDIA/mig-parted
examples/config.yaml `custom-config`; api/spec/v1/spec.go `devices: all | [int]`). So the two workloads never ask for
the same resource: the model servers request `nvidia.com/mig-<profile>` (fleetform/k8s.py), and the Kueue
ClusterQueue built here has a quota of `nvidia.com/gpu` equal to the whole GPUs only (whole GPUs per node x the
fleet's nodes.max), with the CPU and memory the servers leave (the servers request the MIG GPUs' share of the
node, the training pods the whole GPUs' share).

Objects use the pinned Kueue (fleetform/kueue.py KUEUE_API); the job template is a batch/v1 Job, which Kueue's
`batch/job` integration suspends until admitted (kueue.manager_config integrates it).
"""

from __future__ import annotations

import math

from .kueue import GPU_RESOURCE, JOB_SHARE, TRAINING_PRIORITY, Flavor, KueueFleet, Quota
from .records import frozen

JOB_SCRIPT = ("python", "-c", "import torch; print(torch.cuda.device_count(), 'whole GPUs')")
"""What the rendered Job runs until a user puts their training command there: it prints the GPUs the pod sees."""


@frozen
class WholeGpuJob:
    """The Job users copy to train on the whole GPUs of a split node: one pod, `gpus` whole GPUs."""

    name: str
    namespace: str
    gpus: int
    cpu: str
    memory: str
    image: str
    command: tuple[str, ...]


@frozen
class SplitQueue:
    kueue: KueueFleet  # ResourceFlavor, ClusterQueue, LocalQueues, priorities; no Topology, no NCCL ConfigMap
    whole_per_node: int
    mig_per_node: int  # GPUs of a node in MIG slices
    job: WholeGpuJob | None  # None without whole_gpus.job_image


def build(fleet, blueprint_name: str) -> SplitQueue | None:
    """The Kueue side of an inference fleet's split node; None without whole_gpus, or when its shape, size or MIG
    layout is unknown or leaves no GPU whole (the mig-split rule says why)."""
    kube, sharing, instance, size = fleet.kube, fleet.gpu_sharing, fleet.instance, fleet.nodes
    whole = sharing.whole_gpus
    if (whole is None or kube is None or kube.mig is None or not kube.mig.whole_devices or instance is None
            or size is None or size.max < 1 or fleet.shape is None):
        return None
    from .cluster import cpu_reserved_m, memory_reserved_mib

    ident = fleet.cloud_name
    count = fleet.shape.gpu_count
    per_node = len(kube.mig.whole_devices)
    gpus = min(whole.gpus_per_job or per_node, per_node)  # more: the mig-split rule's error
    cpu_m = instance.vcpus * 1000 - cpu_reserved_m(instance.vcpus)
    memory_mib = instance.mem_gib * 1024 - memory_reserved_mib()

    def cpu_of(n: int) -> int:  # the CPUs of n whole GPUs' share of the node, as a Kueue job pod's JOB_SHARE
        return math.floor(cpu_m * JOB_SHARE * n / count)

    def memory_of(n: int) -> int:
        return math.floor(memory_mib * JOB_SHARE * n / count)

    labels = kube.node_labels
    flavor = Flavor(f"{ident}-whole-gpus", (("node.kubernetes.io/instance-type", instance.name),) + labels,
                    kube.node_taints, "")
    # the quota holds every whole GPU of the fleet at its largest, with the CPU and memory the pods on them
    # ask for; Kueue refuses a workload asking for a resource its ClusterQueue does not cover
    quotas = (Quota("cpu", f"{cpu_of(per_node) * size.max}m"), Quota("memory", f"{memory_of(per_node) * size.max}Mi"),
              Quota(GPU_RESOURCE, str(per_node * size.max)))
    queue = f"{ident}-whole-gpus"
    namespaces = whole.namespaces
    k = KueueFleet(kube.version, namespaces[0], flavor, queue, quotas, tuple((ns, queue) for ns in namespaces),
                   "", (), f"{blueprint_name}-{ident}-training", TRAINING_PRIORITY, "", (), labels, kube.node_taints,
                   None)
    job = None
    if whole.job_image:
        job = WholeGpuJob(f"{ident}-whole-gpus", namespaces[0], gpus, f"{cpu_of(gpus)}m", f"{memory_of(gpus)}Mi",
                          whole.job_image, JOB_SCRIPT)
    return SplitQueue(k, per_node, len(kube.mig.mig_devices), job)


def cluster_workload(fleet, split: SplitQueue):
    """The Job template's pod as the cluster rules see it: it must fit a node of the fleet's group beside nothing
    else (cluster-admission), asking for whole GPUs the group advertises as nvidia.com/gpu."""
    from .cluster import Toleration, Workload, quantity

    job = split.job
    return Workload(f"{fleet.name}/{job.name}", f"fleet {fleet.name}", "Job", 1, 1,
                    round(quantity(job.cpu) * 1000), round(quantity(job.memory) / 2**20), 0,
                    ((GPU_RESOURCE, job.gpus),), split.kueue.node_labels,
                    tuple(Toleration(key, "Equal", effect) for key, _, effect in split.kueue.node_taints),
                    fleet.name, fleet.gpu_sharing.path + ("whole_gpus",))
