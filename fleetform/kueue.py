"""Training on Kubernetes, as data: what a training fleet scheduled by `scheduler.type: kubernetes` puts on
the blueprint's EKS cluster. Kueue queues its jobs (a ResourceFlavor for the fleet's instance type, a
ClusterQueue whose quota is the fleet's GPUs, a LocalQueue per namespace, a Topology of EKS's network
layers), JobSet runs them (the template users copy: one pod per node running torchrun), and the fleet's
NCCL environment reaches the pods as a ConfigMap holding what nccl.env holds.

Other orchestrators of training fleets on Kubernetes (Ray, Slurm on Kubernetes) are other families
beside this one; `scheduler.type` picks the family.

Pinned releases (every object's apiVersion is their storage version; tests/crd holds their schemas):
Kueue v0.19.2 (kueue.x-k8s.io/v1beta2) and JobSet v0.12.0 (jobset.x-k8s.io/v1alpha2).
"""

from __future__ import annotations

import math

from .records import frozen

KUEUE_VERSION = "v0.19.2"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
"""The storage version of every Kueue CRD fleetform emits at v0.19.2
(kubernetes-sigs/kueue config/components/crd/bases/kueue.x-k8s.io_*.yaml at tag v0.19.2)."""
JOBSET_VERSION = "v0.12.0"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
"""JobSet's only version at v0.12.0 (kubernetes-sigs/jobset charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml)."""

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The labels a job names its LocalQueue and WorkloadPriorityClass by (kueue v0.19.2
pkg/controller/constants/constants.go: QueueLabel, WorkloadPriorityClassLabel)."""
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
"""The pod template annotation asking Kueue's topology-aware scheduling to place every pod of the pod set in
one domain of that level if one has room, else in as few domains of the next level up as it can (kueue v0.19.2
apis/kueue/v1beta2/topology_types.go). Preferred, not required (podset-required-topology): a job larger than
one layer-3 network node would never be admitted under a required level."""

TOPOLOGY_LEVELS = ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                   "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname")
"""EKS labels each node with its place in the EC2 network hierarchy, layer 1 the broadest and layer 3 the
closest for most instance types (EKS User Guide, "Place distributed AI/ML workloads with network topology
labels", https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html). Kueue's Topology lists
levels from the broadest to the narrowest, kubernetes.io/hostname only last (its CRD's validation rule)."""

TOPOLOGY_INSTANCE_TYPES = frozenset((
    "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge",
    "g6e.48xlarge", "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge",
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6e-gb200.36xlarge", "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
    "p6-b200.48xlarge", "p6-b300.48xlarge"))
"""The accelerated instance types EC2 describes a network topology for (EC2 User Guide, "Prerequisites for
Amazon EC2 topology", Instance types, read 2026-11-24; the HPC types left out): only their nodes get EKS's
network-node-layer labels, and Kueue's topology-aware flavor matches only nodes with every level's label
(kueue v0.19.2 pkg/util/tas/node.go NodeMatchesFlavor). On any other type no node matches and no job is admitted."""

EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""The extended resource aws-efa-k8s-device-plugin advertises, one per EFA interface of the node
(EKS User Guide, "Run machine learning training on Amazon EKS with Elastic Fabric Adapter")."""
GPU_RESOURCE = "nvidia.com/gpu"
HUGEPAGES_RESOURCE = "hugepages-2Mi"
EFA_HUGEPAGES = "5120Mi"
"""What a pod using EFA asks of the 2 MiB huge pages the EFA driver pre-allocates on every EFA node (EKS User
Guide, "Run machine learning training on Amazon EKS with Elastic Fabric Adapter": "configuring and managing
Huge Pages as a resource in the cluster" is "an important consideration", the instances "pre-allocate 5128 2MiB
Huge Pages", and its p5.48xlarge worker asks for hugepages-2Mi: 5120Mi). A pod that asks for none gets a hugetlb
limit of 0, and libfabric's EFA provider, which maps huge pages where the node has them, can then fault (SIGBUS)."""

TRAINING_PRIORITY = 1000
"""The PriorityClass of training pods and the value of their WorkloadPriorityClass: below the serving
fleets' PriorityClass (100000, templates/k8s/priorityclass.yaml.j2), and with preemptionPolicy Never, so a
training pod never evicts a model server; Kueue orders and preempts training workloads among themselves."""

JOB_SHARE = 0.9
"""The share of a node's allocatable CPU and memory a training pod requests: the rest stays for the node's
DaemonSets (VPC CNI, kube-proxy, EFA and NVIDIA device plugins, GPU Operator, FSx CSI node)."""

REPLICATED_JOB = "workers"
MASTER_PORT = 29500
"""torchrun's default --master-port (torch/distributed/run.py)."""
MAX_RESTARTS = 3
"""Restarts of a whole JobSet after a pod fails, each resuming from the last checkpoint."""

SCHEDULER_SPECIFIC = ("NCCL_SOCKET_IFNAME",)
"""nccl.env variables that do not carry over into a pod: NCCL_SOCKET_IFNAME names a host interface, and a
pod's network namespace has its own (the VPC CNI's eth0)."""


def manager_config(namespaces) -> str:
    """Kueue's manager configuration (the chart's managerConfig.controllerManagerConfigYaml): the chart's default
    (kueue v0.19.2 charts/kueue/values.yaml) with two changes. Its webhooks for Jobs, JobSets, Pods, Deployments
    and StatefulSets have failurePolicy Fail for every framework it integrates and match every namespace but
    kube-system and kueue-system (charts/kueue/templates/webhook/manifests.yaml): with the chart's defaults, one
    Kueue pod down and no serving pod, Prometheus or GPU Operator pod could be created anywhere on the cluster.
    So it manages jobs in the training namespaces only (managedJobsNamespaceSelector, which those webhooks take
    as their namespaceSelector), and integrates only what fleetform's jobs are (JobSet and its Jobs)."""
    values = ", ".join(sorted(set(namespaces)))
    return f"""apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
managedJobsNamespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: In
      values: [{values}]
integrations:
  frameworks:
  - "batch/job"
  - "jobset.x-k8s.io/jobset"
"""


@frozen
class Flavor:
    name: str
    node_labels: tuple[tuple[str, str], ...]
    tolerations: tuple[tuple[str, str, str], ...]  # key, value, effect of the node group's taint
    topology: str


@frozen
class Quota:
    resource: str
    nominal: str  # a Kubernetes quantity


@frozen
class JobTemplate:
    """The JobSet users copy: one replicated Job of `nodes` pods, one per node, each running torchrun."""

    name: str
    nodes: int
    gpus: int  # per pod: the node's GPUs
    efa: int  # per pod: the node's EFA interfaces
    hugepages: str | None  # per pod: EFA_HUGEPAGES where it uses EFA
    cpu: str
    memory: str
    image: str
    nproc_per_node: int
    topology_level: str  # every pod in one domain of this level
    volumes: tuple[tuple[str, str], ...]  # claim name, mount path (FSx for Lustre storage)
    namespace: str
    replicated_job: str
    master_addr: str  # the first pod's DNS name: <jobset>-<replicated job>-0-0.<subdomain = jobset name>
    master_port: int
    script: str  # what torchrun runs; users replace it with their training script
    max_restarts: int  # JobSet failurePolicy.maxRestarts: a failed pod restarts the whole job from its checkpoint


@frozen
class KueueFleet:
    version: str  # the cluster's Kubernetes version
    namespace: str
    flavor: Flavor
    cluster_queue: str
    quotas: tuple[Quota, ...]
    local_queues: tuple[tuple[str, str], ...]  # namespace, LocalQueue name
    topology_name: str
    topology_levels: tuple[str, ...]
    priority_class: str
    priority: int
    nccl_config_map: str
    nccl_env: tuple[tuple[str, str], ...]  # name, value: the fleet's nccl.env without SCHEDULER_SPECIFIC
    node_labels: tuple[tuple[str, str], ...]
    node_taints: tuple[tuple[str, str, str], ...]
    job: JobTemplate | None  # None without a job_image (the kueue-job-image rule says so)


def node_labels(fleet) -> tuple[tuple[str, str], ...]:
    """The labels the fleet's EKS node group sets on its nodes."""
    return (("fleetform.dev/fleet", fleet.cloud_name), ("fleetform.dev/role", "training"))


def node_taints(fleet) -> tuple[tuple[str, str, str], ...]:
    """The node group's taint, the GPU taint every GPU node group of the cluster has: the GPU Operator's
    DaemonSets tolerate it (a taint of fleetform's own would keep its device plugin off, and the nodes would
    show no nvidia.com/gpu); serving pods stay off by their fleet's node selector."""
    from .k8s import GPU_TAINT

    return (GPU_TAINT,)


def build(fleet, blueprint_name: str, nccl_env, storage=()) -> KueueFleet | None:
    """The Kubernetes side of a training fleet scheduled by Kubernetes; None when its scheduler is not
    Kubernetes, or its instance (GPUs, EFA interfaces) or size is unknown (rules report why).
    nccl_env: what the fleet's nccl.env sets (fleetform/nccl.py); storage: the blueprint's storage."""
    from .cluster import cpu_reserved_m, memory_reserved_mib

    scheduler, instance, size = fleet.scheduler, fleet.instance, fleet.nodes
    if scheduler is None or scheduler.type != "kubernetes" or instance is None or size is None or size.max < 1:
        return None
    ident = fleet.cloud_name
    gpus, efa = instance.gpu_count, instance.max_efa
    cpu_m = instance.vcpus * 1000 - cpu_reserved_m(instance.vcpus)
    memory_mib = instance.mem_gib * 1024 - memory_reserved_mib()
    # the Topology is named as the flavor: a flavor's topologyName is immutable once set (Kueue's CEL rule), so
    # it may change only with the flavor's name (providers/aws/replacements.json)
    topology = f"{ident}-{instance.name.replace('.', '-')}"
    flavor = Flavor(topology,
                    (("node.kubernetes.io/instance-type", instance.name),) + node_labels(fleet),
                    node_taints(fleet), topology)
    quotas = (Quota("cpu", f"{math.floor(cpu_m * JOB_SHARE) * size.max}m"),
              Quota("memory", f"{math.floor(memory_mib * JOB_SHARE) * size.max}Mi"),
              Quota(GPU_RESOURCE, str(gpus * size.max)))
    if efa:
        quotas += (Quota(EFA_RESOURCE, str(efa * size.max)),
                   # Kueue refuses a workload asking for a resource its ClusterQueue does not cover
                   Quota(HUGEPAGES_RESOURCE, f"{int(EFA_HUGEPAGES.removesuffix('Mi')) * size.max}Mi"))
    namespaces = scheduler.queue_namespaces or (scheduler.namespace,)
    queue = f"{ident}-training"
    # the fleet's FSx for Lustre file systems, each through the claim of its static PersistentVolume
    mounts = tuple((s.name, s.mount_path) for name in fleet.storage for s in storage
                   if s.name == name and s.type == "fsx-lustre" and s.mount_path)
    job = None
    if scheduler.job_image:
        name = f"{ident}-torchrun"
        job = JobTemplate(name, size.max, gpus, efa, EFA_HUGEPAGES if efa else None, f"{math.floor(cpu_m * JOB_SHARE)}m",
                          f"{math.floor(memory_mib * JOB_SHARE)}Mi", scheduler.job_image, gpus,
                          # a job's nodes under one layer-3 network node where they fit: the fewest hops between ranks
                          TOPOLOGY_LEVELS[2], mounts, scheduler.namespace, REPLICATED_JOB,
                          # JobSet names pods <jobset>-<replicated job>-<job index>-<pod index> and, with
                          # enableDNSHostnames, gives them that host name under the subdomain <jobset>
                          # (kubernetes-sigs/jobset v0.12.0 pkg/util/placement/placement.go GenPodName)
                          f"{name}-{REPLICATED_JOB}-0-0.{name}", MASTER_PORT, "train.py", MAX_RESTARTS)
    return KueueFleet(
        scheduler.version, scheduler.namespace, flavor, queue, quotas,
        tuple((ns, queue) for ns in namespaces), topology, TOPOLOGY_LEVELS,
        f"{blueprint_name}-{ident}-training", TRAINING_PRIORITY, f"{ident}-nccl",
        tuple((v.name, v.value) for v in nccl_env if v.name not in SCHEDULER_SPECIFIC),
        node_labels(fleet), node_taints(fleet), job)


def cluster_node_group(fleet, k: KueueFleet):
    """The fleet's EKS node group as the cluster rules see it (fleetform/cluster.py NodeGroup): its labels,
    taint and what one node can allocate, GPUs and EFA interfaces included."""
    from .cluster import (ACCELERATOR_LABEL, EVICTION_NODEFS, ROOT_GIB, NodeGroup, _well_known, accelerator,
                          cpu_reserved_m, gfd_product, memory_reserved_mib)

    instance = fleet.instance
    devices = ((GPU_RESOURCE, instance.gpu_count),) + (((EFA_RESOURCE, instance.max_efa),) if instance.max_efa else ())
    return NodeGroup(
        fleet.name, fleet.name, instance.name, fleet.nodes.min, fleet.nodes.max,
        k.node_labels + ((ACCELERATOR_LABEL, accelerator(fleet)),),
        (("nvidia.com/gpu.product", gfd_product(fleet)),) + _well_known(instance.name, fleet.capacity_type),
        k.node_taints, instance.vcpus * 1000 - cpu_reserved_m(instance.vcpus),
        instance.mem_gib * 1024 - memory_reserved_mib(), math.floor(ROOT_GIB * (1 - EVICTION_NODEFS)),
        devices, fleet.capacity_type, fleet.reservation_id, False, fleet.path)


def cluster_workload(fleet, k: KueueFleet):
    """The JobSet template's pods as a workload of the cluster: the cluster-admission rule checks that a node
    of the fleet's group admits one (taint, labels, CPU, memory, GPUs, EFA interfaces). One replica: each pod
    takes a node of its own, so one pod that fits a node is the whole check, and the capacity rules' packing
    (quadratic in replicas) stays as fast for a 10,000-node fleet as for a 4-node one."""
    from .cluster import Toleration, Workload, quantity

    job = k.job
    devices = ((GPU_RESOURCE, job.gpus),) + (((EFA_RESOURCE, job.efa),) if job.efa else ())
    return Workload(f"{fleet.name}/{job.name}", f"fleet {fleet.name}", "JobSet", 1, 1,
                    round(quantity(job.cpu) * 1000), round(quantity(job.memory) / 2**20), 0, devices,
                    k.node_labels, tuple(Toleration(key, "Equal", effect) for key, _, effect in k.node_taints),
                    fleet.name, fleet.scheduler.path + ("job_image",))
