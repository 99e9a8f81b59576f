"""The Kubernetes side of an inference fleet, as data: every name, label, quantity and setting the
manifests print, computed here so the templates under templates/k8s compute nothing.

The node labels and taints the manifests select on are part of this model too, so the Pulumi node
groups can put the same ones on the nodes.
"""

from __future__ import annotations

import math

from .records import frozen

GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
"""The taint on GPU nodes, so only pods that tolerate it (GPU workloads) land there."""

GPU_OPERATOR_NAMESPACE = "gpu-operator"
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
"""The Prometheus service kube-prometheus-stack creates; KEDA's trigger queries it."""

PROBE_PERIOD_S = 10
STARTUP_BASE_S = 600
STARTUP_S_PER_GB = 10
"""Startup probe budget: 10 minutes plus 10 s per GB of weights (a 140 GB model gets 33 minutes)."""

CACHE_FACTOR = 1.2
CACHE_EXTRA_GIB = 10
"""The model cache holds the downloaded weights (plus 20% and 10 GiB for tokenizer and compile caches)."""

QUEUE_METRIC = "vllm:num_requests_waiting"
HPA_METRIC = "vllm_num_requests_waiting"
"""The same metric as the Prometheus adapter exposes it to the HPA (':' is not allowed there)."""


@frozen
class Autoscaling:
    kind: str  # keda | hpa
    min_replicas: int
    max_replicas: int
    target: str  # per replica, as a quantity string
    scale_down_window_s: int
    query: str  # PromQL of the summed queue (KEDA)
    prometheus: str


@frozen
class Probe:
    kind: str  # startup | readiness | liveness
    path: str
    period_s: int
    failure_threshold: int
    timeout_s: int


@frozen
class Toleration:
    key: str
    operator: str  # Exists | Equal
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@frozen
class Server:
    """One model's Deployment, Service, PodDisruptionBudget, autoscaler and ServiceMonitor."""

    name: str
    namespace: str
    labels: tuple[tuple[str, str], ...]  # on every object and the pod template
    selector: tuple[tuple[str, str], ...]  # the subset that selects the pods
    image: str
    args: tuple[str, ...]
    port: int
    gpu_resource: str
    gpu_count: int
    cpu_request: str
    memory: str
    shm_size: str
    cache_size: str  # the downloaded weights: requested as ephemeral storage, the cache emptyDir's limit
    monitor_labels: tuple[tuple[str, str], ...]  # what the Prometheus instance selects ServiceMonitors by
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]
    probes: tuple[Probe, ...]
    service_type: str
    max_surge: int  # 0 unless the blueprint asks: a rollout then needs no spare GPU
    max_unavailable: int
    replicas: int | None  # None when an autoscaler owns the count
    autoscaling: Autoscaling | None
    hf_token_secret: str | None
    priority_class: str


@frozen
class DevicePluginConfig:
    """time-slicing or MPS: the device plugin's config, selected per node by a label."""

    configmap: str
    key: str
    strategy: str  # timeSlicing | mps
    replicas: int


@frozen
class MigConfig:
    configmap: str
    name: str  # the mig-parted config, e.g. all-3g.40gb
    profile: str
    per_gpu: int
    strategy: str  # single | mixed


@frozen
class KubeFleet:
    version: str
    namespace: str
    priority_class: str
    servers: tuple[Server, ...]
    device_plugin: DevicePluginConfig | None
    mig: MigConfig | None
    node_labels: tuple[tuple[str, str], ...]
    node_taints: tuple[tuple[str, str, str], ...]
    gpu_operator_namespace: str
    monitor_labels: tuple[tuple[str, str], ...]
    dcgm_monitor: str  # name of the ServiceMonitor of the GPU Operator's DCGM exporter


def _gib(value: float) -> str:
    return f"{max(1, math.floor(value))}Gi"


def build(fleet, blueprint_name: str, labels: dict) -> KubeFleet | None:
    """The Kubernetes model of an inference fleet; None when its scheduler or node shape is unknown."""
    scheduler, shape = fleet.scheduler, fleet.shape
    if scheduler is None or scheduler.type != "kubernetes" or shape is None:
        return None
    sharing = fleet.gpu_sharing
    gpu = shape.gpu
    node_labels: dict[str, str] = {"fleetform.dev/fleet": fleet.name}
    device_plugin = mig = None
    product = gpu.gfd_product
    per_node = shape.gpu_count
    resource = "nvidia.com/gpu"
    if sharing.strategy in ("time-slicing", "mps") and sharing.replicas:
        device_plugin = DevicePluginConfig(f"{fleet.name}-device-plugin", fleet.name,
                                           "timeSlicing" if sharing.strategy == "time-slicing" else "mps",
                                           sharing.replicas)
        node_labels["nvidia.com/device-plugin.config"] = fleet.name
        product += "-SHARED"  # GPU Feature Discovery marks shared GPUs so
        per_node *= sharing.replicas
    elif sharing.strategy == "mig" and sharing.profile in gpu.mig:
        profile = gpu.mig[sharing.profile]
        mig = MigConfig(f"{fleet.name}-mig-parted", f"all-{profile.name}", profile.name, profile.max_per_gpu,
                        sharing.mig_strategy)
        node_labels["nvidia.com/mig.config"] = mig.name
        per_node *= profile.max_per_gpu
        if sharing.mig_strategy == "single":
            product += f"-MIG-{profile.name}"  # GFD's product label under the single strategy
        else:
            resource = f"nvidia.com/mig-{profile.name}"
    namespace = scheduler.namespace
    priority_class = f"{blueprint_name}-{fleet.name}"
    servers = []
    for model in fleet.models:
        selector = (("app.kubernetes.io/name", model.name), ("app.kubernetes.io/instance", f"{fleet.name}-{model.name}"))
        object_labels = selector + (("app.kubernetes.io/part-of", blueprint_name),
                                    ("app.kubernetes.io/managed-by", "fleetform"),
                                    ("fleetform.dev/fleet", fleet.name)) + tuple(sorted(labels.items()))
        share = model.tensor_parallel / per_node
        # vLLM's utilization is a fraction of the whole physical GPU: pods sharing one by time-slicing
        # or MPS must split it, or the second pod on a GPU finds no memory left
        utilization = model.gpu_memory_utilization / (sharing.replicas if device_plugin is not None else 1)
        args = ["--model", model.model, "--served-model-name", model.name,
                "--tensor-parallel-size", str(model.tensor_parallel), "--port", str(model.port),
                "--gpu-memory-utilization", f"{math.floor(utilization * 1000) / 1000:g}"]
        if model.max_model_len:
            args += ["--max-model-len", str(model.max_model_len)]
        startup_s = STARTUP_BASE_S + STARTUP_S_PER_GB * model.weights_gb
        autoscaling = None
        if model.replicas.elastic and model.autoscale is not None and scheduler.autoscaler in ("keda", "hpa"):
            autoscaling = Autoscaling(
                scheduler.autoscaler, model.replicas.min, model.replicas.max,
                f"{model.autoscale.target_per_replica:g}", model.autoscale.scale_down_window_s,
                f'sum({QUEUE_METRIC}{{namespace="{namespace}",model_name="{model.name}"}})',
                scheduler.prometheus_url or DEFAULT_PROMETHEUS)
        servers.append(Server(
            name=model.name, namespace=namespace, labels=object_labels, selector=selector, image=model.image,
            args=tuple(args), port=model.port, gpu_resource=resource,
            gpu_count=model.tensor_parallel,
            cpu_request=str(max(1, math.floor(shape.vcpus * 0.9 * share))),
            memory=_gib(shape.memory_gib * 0.9 * share),
            shm_size="16Gi" if model.tensor_parallel > 1 else "4Gi",
            cache_size=f"{math.ceil(model.weights_gb * CACHE_FACTOR + CACHE_EXTRA_GIB)}Gi",
            monitor_labels=(("release", scheduler.prometheus_release),) if scheduler.prometheus_release else (),
            node_selector=(("nvidia.com/gpu.product", product), ("fleetform.dev/fleet", fleet.name)),
            tolerations=(Toleration(GPU_TAINT[0], "Exists", GPU_TAINT[2]),),
            probes=(Probe("startup", "/health", PROBE_PERIOD_S, math.ceil(startup_s / PROBE_PERIOD_S), 1),
                    Probe("readiness", "/health", PROBE_PERIOD_S, 3, 1),
                    Probe("liveness", "/health", 15, 4, 5)),
            service_type="ClusterIP",
            max_surge=model.max_surge, max_unavailable=0 if model.max_surge else 1,
            replicas=None if autoscaling else model.replicas.min,
            autoscaling=autoscaling, hf_token_secret=model.hf_token_secret, priority_class=priority_class,
        ))
    return KubeFleet(scheduler.version, namespace, priority_class, tuple(servers), device_plugin, mig,
                     tuple(sorted(node_labels.items())), (GPU_TAINT,), GPU_OPERATOR_NAMESPACE,
                     (("release", scheduler.prometheus_release),) if scheduler.prometheus_release else (),
                     f"{fleet.name}-dcgm-exporter")
