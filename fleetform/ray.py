"""Ray: a training fleet scheduled by Ray through KubeRay on the blueprint's EKS cluster, as data.

A RayCluster with a CPU head on the untainted system nodes and one GPU worker group on the fleet's own
node group (one worker pod per node, every GPU of the node), autoscaled by KubeRay's in-tree autoscaler
between the fleet's nodes.min and nodes.max; and a RayJob that submits a Ray Train script to it.
Every number the templates (templates/ray/) print is computed here.

Sources, read at the pinned tags:
- KubeRay v1.7.0 (github.com/ray-project/kuberay): the CRDs helm-chart/kuberay-operator/crds/ray.io_rayclusters.yaml
  and ray.io_rayjobs.yaml (their schemas are in tests/crd/), ray-operator/apis/ray/v1/raycluster_types.go
  (`enableInTreeAutoscaling`, worker groups' `replicas`/`minReplicas`/`maxReplicas`, `rayStartParams` values
  are strings) and rayjob_types.go (`clusterSelector` submits a RayJob to a running RayCluster).
- Ray's object store: python/ray/_private/ray_constants.py DEFAULT_OBJECT_STORE_MEMORY_PROPORTION = 0.3 of
  the memory Ray sees (in a pod: the container's memory limit), DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES = 200e9;
  the object store lives in /dev/shm, of which Ray uses at most 95% (python/ray/_private/utils.py
  resolve_object_store_memory: `shm_avail = get_shared_memory_bytes() * 0.95`, ray-project/ray#23034), and a container's /dev/shm is 64 MiB unless a Memory-backed emptyDir is mounted there.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .kueue import EFA_HUGEPAGES, EFA_RESOURCE
from .records import frozen

KUBERAY_VERSION = "1.7.0"
"""The KubeRay operator chart (kuberay/kuberay-operator, https://ray-project.github.io/kuberay-helm/) and the
CRD version the rendered objects are checked against; tagged v1.7.0 on 2026-08-19 (ray-project/kuberay)."""

RAY_IMAGES = {
    "2.52.0": "rayproject/ray-llm:2.52.0-py311-cu128",
    "2.56.0": "rayproject/ray-llm:2.56.0-py312-cu130",
}
"""Ray release -> the CUDA image of it that KubeRay v1.7.0's own samples run (ray-operator/config/samples/
ray-service.llm-serve.yaml: ray-llm:2.52.0-py311-cu128; ray-service.high-throughput-llm.yaml:
ray-llm:2.56.0-py312-cu130), so the tags are known to exist; the ray-llm images carry PyTorch for Ray Train."""

DEFAULT_RAY_VERSION = "2.52.0"
AUTOSCALER_V2_SINCE = (2, 47, 0)
"""KubeRay docs/reference/api.md (v1.7.0), AutoscalerOptions.version: in Ray 2.47.0 and later the default
autoscaler is v2."""

OBJECT_STORE_PROPORTION = 0.3  # ray_constants.DEFAULT_OBJECT_STORE_MEMORY_PROPORTION
OBJECT_STORE_MAX_BYTES = 200 * 10**9  # ray_constants.DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES
SHM_USABLE = 0.95  # Ray sizes the object store to at most 95% of /dev/shm
HEAD_CPU = "1"
HEAD_MEMORY = "4Gi"
"""The head runs the GCS, the dashboard and the autoscaler's drivers, no tasks (`num-cpus: "0"`): small
enough for fleetform's default system node (m7i.large); the cluster rules check it fits there."""
HEAD_OBJECT_STORE_BYTES = 10**9
AUTOSCALER_CPU = "500m"
AUTOSCALER_MEMORY = "512Mi"
"""The autoscaler sidecar's requests (KubeRay's default for it: ray-operator/controllers/ray/common/pod.go,
500m CPU and 512Mi)."""
GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")  # as fleetform/k8s.py: the GPU Operator tolerates it
DASHBOARD_PORT = 8265
UPGRADE_STRATEGY = "Recreate"
"""Without it KubeRay applies a changed RayCluster spec (image, Ray version, env, resources) to new pods only
(ray-operator/controllers/ray/raycluster_controller.go shouldRecreatePodsForUpgrade, v1.7.0): an autoscaled worker
would join a head of another Ray version. With Recreate the change reaches every pod, ending the running jobs."""
OPERATOR_NAMESPACE = "kuberay-operator"
"""Where providers/aws/addons.yaml installs the operator. It reaches the head's dashboard (8265) to submit and
follow RayJobs (kuberay v1.7.0 ray-operator/controllers/ray/utils/dashboardclient); the fleet's NetworkPolicy lets
it and the fleet's own pods in, nothing else: whoever reaches a Ray head runs code on every worker."""
JOB_ENTRYPOINT = "python -c 'import ray; ray.init(); print(ray.cluster_resources())'"
"""The rendered RayJob's command: it runs as it is (it prints the GPUs and memory the job sees) and is where a
user puts their Ray Train script."""


JOB_ENTRYPOINT_CPUS = 1
"""The RayJob's entrypointNumCpus: Ray runs a job's entrypoint (the user's driver script) on the head unless it asks
for resources (ray-project/ray#42436), and this head is a 4Gi pod on a system node with num-cpus 0; one CPU puts the
driver on a GPU worker (kuberay v1.7.0 common/job.go passes it as --entrypoint-num-cpus)."""


def ray_image(version: str) -> str | None:
    return RAY_IMAGES.get(version)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


@frozen
class RayMount:
    name: str  # the volume's name in the pod
    claim: str  # the PersistentVolumeClaim, named after the blueprint's storage entry
    mount_path: str


@frozen
class RayEnv:
    name: str
    value: str


@frozen
class RayConfig:
    cluster_name: str  # the RayCluster's name: the fleet's first name
    namespace: str
    kuberay_version: str
    ray_version: str
    image: str | None  # None: no pinned image for ray_version (the ray-version rule says so)
    autoscaling: bool
    autoscaler_version: str  # v1 | v2
    upgrade_strategy: str  # Recreate: a spec change reaches every pod (KubeRay 1.7.0 RayClusterUpgradeStrategy)
    head_cpu: str
    head_memory: str
    head_object_store_bytes: int
    head_shm: str
    autoscaler_cpu: str
    autoscaler_memory: str
    group: str  # the worker group's name
    replicas: int
    min_replicas: int
    max_replicas: int
    gpus: int  # per worker pod: every GPU of a node
    cpu: str  # per worker pod, request and limit
    cpu_m: int
    memory: str  # per worker pod, request and limit
    memory_mib: int
    object_store_bytes: int
    shm: str  # the /dev/shm emptyDir's sizeLimit
    node_labels: tuple[tuple[str, str], ...]  # the fleet's node group sets them; the workers select them
    node_taints: tuple[tuple[str, str, str], ...]
    env: tuple[RayEnv, ...]  # the fleet's NCCL environment (fleetform/nccl.py), as in its nccl.env
    mounts: tuple[RayMount, ...]
    max_train_workers: int  # Ray Train workers of one GPU each the fleet holds at nodes.max
    operator_namespace: str  # the KubeRay operator's namespace: the only one outside the fleet's that reaches it
    job_name: str  # the RayJob's name (a copy for another job changes it: a RayJob name is used once)
    job_entrypoint: str  # what the RayJob template runs until the user puts their script there
    dashboard_port: int = DASHBOARD_PORT
    job_entrypoint_cpus: int = JOB_ENTRYPOINT_CPUS  # the RayJob's entrypointNumCpus: the driver runs on a worker
    efa: int = 0  # per worker pod: every EFA interface of the node (vpc.amazonaws.com/efa), 0 without EFA
    hugepages: str | None = None  # per worker pod: the 2 MiB huge pages a pod using EFA asks for (kueue.EFA_HUGEPAGES)


def _gib_floor(value: float) -> int:
    return max(1, math.floor(value))


def efa_count(fleet) -> int:
    """The EFA interfaces each worker asks for: every one of its node's on an EFA fabric when the fleet can have two
    nodes, else 0. One node's NCCL stays on NVLink and never uses EFA; and a single-node Ray fleet on an EFA instance
    was valid before workers got EFA (ray-efa refused only multi-node ones), so giving it interfaces now would be a
    new launch template version, rolling its running node on a fleetform upgrade, for nothing (as a TCP fleet gets no
    placement group, providers/aws/ray.py)."""
    net, instance, size = fleet.interconnect, fleet.instance, fleet.nodes
    if net is None or net.fabric != "efa" or instance is None or size is None or size.max < 2:
        return 0
    return instance.max_efa


def build(fleet, storage=()) -> RayConfig | None:
    """The RayCluster of a training fleet scheduled by Ray; None when its scheduler, size or node shape is
    unknown (a rule says why). storage: the blueprint's storage entries (FSx for Lustre ones are mounted)."""
    scheduler, shape, size = fleet.scheduler, fleet.shape, fleet.nodes
    if scheduler is None or scheduler.type != "ray" or shape is None or size is None:
        return None
    ident = fleet.cloud_name
    # one worker pod per node, with every GPU: the same 90% of a node's CPUs and memory an inference
    # server with all of a node's GPUs requests (fleetform/k8s.py), leaving the kubelet's reserve and the
    # DaemonSets their share; the cluster-admission rule checks that the pod fits a node of the group
    cpu = max(1, math.floor(shape.vcpus * 0.9))
    memory_gib = _gib_floor(shape.memory_gib * 0.9)
    memory_bytes = memory_gib * 2**30
    object_store = min(math.floor(memory_bytes * OBJECT_STORE_PROPORTION), OBJECT_STORE_MAX_BYTES)
    shm_gib = math.ceil(object_store / SHM_USABLE / 2**30)
    version = scheduler.ray_version
    # EFA: each worker asks for every EFA interface of its node, the count the catalog gives the instance (as a
    # Kueue job's pod does, fleetform/kueue.py); the EFA device plugin advertises one vpc.amazonaws.com/efa per
    # interface of the launch template (providers/aws/ray.py gives it the Slurm nodes' layout)
    efa = efa_count(fleet)  # 0 for a fleet of one node
    mounts = []
    for name in fleet.storage:
        entry = next((s for s in storage if s.name == name), None)
        if entry is not None and entry.type == "fsx-lustre" and entry.mount_path:
            mounts.append(RayMount(f"fsx-{entry.name}", entry.name, entry.mount_path))
    return RayConfig(
        cluster_name=ident, namespace=scheduler.namespace, kuberay_version=KUBERAY_VERSION,
        ray_version=version, image=ray_image(version),
        autoscaling=size.elastic,
        autoscaler_version="v2" if _version(version) >= AUTOSCALER_V2_SINCE else "v1",
        upgrade_strategy=UPGRADE_STRATEGY,
        head_cpu=HEAD_CPU, head_memory=HEAD_MEMORY, head_object_store_bytes=HEAD_OBJECT_STORE_BYTES,
        head_shm=f"{math.ceil(HEAD_OBJECT_STORE_BYTES / SHM_USABLE / 2**30)}Gi",
        autoscaler_cpu=AUTOSCALER_CPU, autoscaler_memory=AUTOSCALER_MEMORY,
        group="gpu", replicas=size.min, min_replicas=size.min, max_replicas=size.max,
        gpus=shape.gpu_count, cpu=str(cpu), cpu_m=cpu * 1000, memory=f"{memory_gib}Gi", memory_mib=memory_gib * 1024,
        object_store_bytes=object_store, shm=f"{shm_gib}Gi",
        node_labels=(("fleetform.dev/fleet", ident),), node_taints=(GPU_TAINT,),
        env=tuple(RayEnv(v.name, v.value) for v in fleet.nccl_env),
        mounts=tuple(mounts),
        max_train_workers=size.max * shape.gpu_count, operator_namespace=OPERATOR_NAMESPACE,
        job_name=f"{ident}-train", job_entrypoint=JOB_ENTRYPOINT,
        efa=efa, hugepages=EFA_HUGEPAGES if efa else None,
    )


def node_group(fleet):
    """The fleet's GPU node group on the blueprint's EKS cluster: tainted like every GPU group (only pods that
    tolerate nvidia.com/gpu land there), labelled with the fleet, sized between nodes.min and nodes.max."""
    from .cluster import gpu_node_group

    config, instance = fleet.ray, fleet.instance
    if config is None or instance is None or fleet.nodes is None:
        return None
    group = gpu_node_group(fleet, config.node_labels, config.node_taints, ("nvidia.com/gpu", fleet.shape.gpu_count))
    if config.efa:  # the launch template's EFA interfaces, which the EFA device plugin advertises
        group = replace(group, devices=group.devices + ((EFA_RESOURCE, instance.max_efa),))
    return group


def workloads(fleet):
    """The RayCluster's pods as the cluster rules see them: the head (and, when autoscaled, its autoscaler
    sidecar) on the system nodes, one worker per GPU node."""
    from .cluster import Toleration, Workload, quantity

    r = fleet.ray
    head_cpu = round(quantity(r.head_cpu) * 1000) + (round(quantity(r.autoscaler_cpu) * 1000) if r.autoscaling else 0)
    head_mib = round(quantity(r.head_memory) / 2**20) + (round(quantity(r.autoscaler_memory) / 2**20)
                                                         if r.autoscaling else 0)
    path = fleet.scheduler.path
    return [
        Workload(f"{fleet.name}/{r.cluster_name}-head", f"fleet {fleet.name}", "RayCluster head", 1, 1, head_cpu,
                 head_mib, 0, (), (("fleetform.dev/node-group", "system"),), (), None, path),
        Workload(f"{fleet.name}/{r.cluster_name}-{r.group}", f"fleet {fleet.name}", "RayCluster worker",
                 r.min_replicas, r.max_replicas, r.cpu_m, r.memory_mib, 0,
                 (("nvidia.com/gpu", r.gpus),) + (((EFA_RESOURCE, r.efa),) if r.efa else ()),
                 tuple(r.node_labels), tuple(Toleration(k, "Equal", e) for k, _, e in r.node_taints), fleet.name,
                 path),
    ]


COUNTS = ("replicas", "minReplicas", "maxReplicas")


def recreates_pods(inputs) -> bool:
    """Whether a RayCluster update (its changed inputs: path, old, new) makes KubeRay recreate its pods: with
    upgradeStrategy Recreate, any change of the spec but the worker groups' counts (KubeRay v1.7.0
    utils.GenerateHashWithoutReplicasAndWorkersToDelete, compared in raycluster_controller.go
    shouldRecreatePodsForUpgrade). Labels and annotations of the object itself recreate nothing."""
    def without_counts(value):
        if isinstance(value, list):
            return [{k: v for k, v in g.items() if k not in COUNTS} if isinstance(g, dict) else g for g in value]
        return value

    for path, old, new in inputs:
        if not path.startswith("spec"):
            continue
        if path == "spec.workerGroupSpecs" and without_counts(old) == without_counts(new):
            continue
        return True
    return False
