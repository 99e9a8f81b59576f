"""The Kubernetes side of an inference fleet, as data: every name, label, quantity and setting the
manifests print, computed here so the templates under templates/k8s compute nothing.

The node labels and taints the manifests select on are part of this model too, so the Pulumi node
groups can put the same ones on the nodes.
"""

from __future__ import annotations

import math

from . import kvevents, lora, lws
from .records import frozen

GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
"""The taint on GPU nodes, so only pods that tolerate it (GPU workloads) land there."""

GPU_OPERATOR_NAMESPACE = "gpu-operator"
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
"""The Prometheus service kube-prometheus-stack creates; KEDA's trigger and the Prometheus adapter query it."""

PROBE_PERIOD_S = 10
STARTUP_BASE_S = 600
STARTUP_S_PER_GB = 10
"""Startup probe budget: 10 minutes plus 10 s per GB of weights (a 140 GB model gets 33 minutes)."""

CACHE_FACTOR = 1.2
CACHE_EXTRA_GIB = 10
"""The model cache holds the downloaded weights (plus 20% and 10 GiB for tokenizer and compile caches)."""

QUEUE_METRIC = "vllm:num_requests_waiting"
KV_CACHE_METRIC = "vllm:kv_cache_usage_perc"
"""vLLM 0.11.0's KV-cache use, a gauge from 0 to 1 per engine (vllm/v1/metrics/loggers.py,
gauge_kv_cache_usage: "KV-cache usage. 1 means 100 percent usage.", labels model_name and engine); the
older vllm:gpu_cache_usage_perc is hidden in 0.11 unless --show-hidden-metrics-for-version is given."""
TTFT_METRIC = "vllm:time_to_first_token_seconds"
"""vLLM 0.11.0's time-to-first-token histogram (vllm/v1/metrics/loggers.py, histogram_time_to_first_token,
labels model_name and engine; buckets 0.001 ... 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
160.0, 640.0, 2560.0 s): its p90 is interpolated inside the bucket the target falls in."""
TTFT_WINDOW = "2m"
"""The rate window of the TTFT quantile: eight of KEDA's 15 s polls, four of Prometheus' default 30 s scrapes."""
HPA_METRIC = "vllm_num_requests_waiting"
"""The name the HPA asks the custom metrics API for: the rendered Prometheus adapter rule matches vLLM's
series (QUEUE_METRIC) and exports it under this name (rules.custom[].name.as). Kubernetes would take ':'
in the HPA (IsValidPathSegmentName refuses only '/', '%', '.' and '..'), but the name is also a path
segment of the custom metrics API (/apis/custom.metrics.k8s.io/.../pods/*/<name>) and a Prometheus
recording-rule name with ':' was served through the adapter only once renamed without it
(kubernetes-sigs/prometheus-adapter #307): a plain name leaves no doubt on that path."""

ADAPTER_METRICS_QUERY = "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"
"""The Prometheus adapter's per-pod query template (its documented default form)."""

RUN_AS = 10001
"""UID and GID of the server: above 10000, so it is no host account (checkov CKV_K8S_40). The image has
no passwd entry for it: USER and LOGNAME below keep getpass.getuser() off the passwd database."""

CACHE_DIR = "/cache"
TMP_SIZE_GIB = 4
"""/tmp is an emptyDir bounded to this size (the S3 streamer puts config and tokenizer files there)."""

ENDPOINT_GRACE_S = 10
"""preStop waits this long before draining: time for the endpoint to leave the Service everywhere."""
EXIT_MARGIN_S = 30
"""terminationGracePeriodSeconds = ENDPOINT_GRACE_S + the drain + this, for vLLM to exit after SIGTERM."""

PROGRESS_MARGIN_S = 600
"""progressDeadlineSeconds = the startup probe's whole budget + this: a rollout reads as failed
(ProgressDeadlineExceeded) only once a new replica has had all the time its startup probe allows. The
Deployment default of 600 s (Kubernetes API, DeploymentSpec.progressDeadlineSeconds: "Defaults to 600s")
marked a 70B replica, which needs about 2,000 s to load, as failed while it was still loading."""

READY_OVERHEAD_S = 120
"""Engine start beyond reading weights: CUDA graph capture and torch.compile (vLLM logs both)."""
LOAD_GB_PER_S = {"hub": 0.2, "s3": 1.0, "volume": 0.5}
"""Estimated weight read rate per replica by source (GB/s): a Hub download through NAT, the Run:ai
streamer from S3 in the same region, a shared file system. Only sizes the default scale-up period."""

SHARED_CACHE_DIR = "/shared-cache"
"""Where a fleet with `cache:` mounts its shared ReadWriteMany claim: VLLM_CACHE_ROOT and HF_HOME live there, the
rest of the caches (XDG, config) stay in the pod's own emptyDir at CACHE_DIR."""
COMPILE_SAVED_S = 15
"""Seconds of READY_OVERHEAD_S a start saves when vLLM finds its torch.compile cache: Inductor's compile of the
graph for the general shape (14.77 s) and the Triton kernels' compile (about 5 s, seen as longer CUDA graph
capture) for Meta-Llama-3-8B (vllm-project/vllm#11005), less loading the cached graphs (4.19 s,
vllm-project/vllm#16848: "Directly load the compiled graph(s) ... from the cache, took 4.190 s"): 14.77 + 5 - 4.19
= 15.6, rounded down. Dynamo's bytecode transform (4.6-7.5 s) and CUDA graph capture run on every start, cache or
not (vllm-project/vllm#20264: a start that reused the cache still logged Dynamo 7.51 s and graph capture 17 s).
vLLM keeps Inductor's and Triton's caches inside VLLM_CACHE_ROOT/torch_compile_cache/<hash>/ (compiler_interface.py
InductorAdaptor.initialize_cache sets TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR there), so sharing
VLLM_CACHE_ROOT shares all three."""

DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
"""vLLM --dtype of an unquantized precision (vLLM's ModelConfig dtype choices)."""

SERVE_COMMAND = ("vllm", "serve")
"""The container's command, given explicitly: the vllm/vllm-openai image's ENTRYPOINT is
`python3 -m vllm.entrypoints.openai.api_server` in some Dockerfiles (vllm-project/vllm docker/Dockerfile,
target vllm-openai) and `vllm serve` in newer ones; `vllm serve` takes the model as its first positional
argument (entrypoints/cli/serve.py: usage `vllm serve <model_tag> [options]`), and `--model` after `serve`
is refused or deprecated by FlexibleArgumentParser depending on the release, so the model is never
given as --model."""

OWNED_FLAGS = frozenset({
    "--model", "--served-model-name", "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp",
    "--distributed-executor-backend", "--port", "--host", "--uds",
    "--gpu-memory-utilization", "--max-model-len", "--dtype", "--quantization", "-q", "--revision",
    "--tokenizer-revision", "--code-revision", "--load-format", "--download-dir", "--api-key", "--config",
    # a model's adapters (fleetform/lora.py): the slots the memory rules count and the adapters every replica has
    "--enable-lora", "--no-enable-lora", "--max-loras", "--max-lora-rank", "--max-cpu-loras", "--lora-modules",
})
"""vLLM flags fleetform sets (or must not be overridden: --config would replace them): extra_args may
not give them."""

PRE_STOP_SCRIPT = (
    "import time,urllib.request as u;time.sleep({grace});d=time.time()+{drain};"
    "f=lambda:sum(float(l.split()[-1]) for l in u.urlopen('http://127.0.0.1:{port}/metrics',timeout=5)"
    ".read().decode().splitlines() if l.startswith(('vllm:num_requests_running','vllm:num_requests_waiting')));"
    "all(f()>0 and not time.sleep(2) for _ in iter(lambda:time.time()<d,False))"
)
"""The preStop hook: vLLM 0.11 does not drain on SIGTERM (its serve_http signal handler cancels the
server task, entrypoints/launcher.py), so the hook first lets the endpoint leave the Service, then
waits until vLLM reports no running or waiting request, for at most the model's drain_s."""


@frozen
class Trigger:
    """A KEDA prometheus trigger beyond the queue: KEDA hands every trigger to the HPA as one metric,
    and the HPA takes the highest replica count any of them asks for (Kubernetes HPA, "Algorithm
    details": with several metrics it "chooses the scale with the largest number of replicas")."""

    name: str
    metric_type: str  # AverageValue (the query's sum over replicas) | Value (a level the fleet as a whole holds)
    query: str
    threshold: str  # a quantity string
    comment: str  # what the trigger reads, for the rendered file
    activation: str | None = None  # KEDA activationThreshold: above it the model leaves 0 replicas


@frozen
class Autoscaling:
    kind: str  # keda | hpa
    min_replicas: int
    max_replicas: int
    target: str  # per replica, as a quantity string
    scale_down_window_s: int
    query: str  # PromQL of the summed queue (KEDA)
    prometheus: str
    scale_up_pods: int  # at most this many replicas added per period...
    scale_up_percent: int | None  # ...or this percentage of the current ones, whichever is more (None: pods only)
    scale_up_period_s: int
    fallback_replicas: int  # KEDA: held while the metric cannot be read (more if more run)
    fallback_failures: int
    cron: tuple = ()  # KEDA: the pool's windows as cron triggers (fleetform/pool.py CronWindow), next to the queue
    triggers: tuple[Trigger, ...] = ()  # KEDA: KV-cache use and time to first token, after the queue


@frozen
class SharedCache:
    """The fleet's `cache:` claim: one ReadWriteMany PersistentVolumeClaim in the fleet's namespace that every
    replica of its models mounts at SHARED_CACHE_DIR."""

    claim: str
    namespace: str
    storage_class: str
    size: str  # the claim's request, a quantity: EFS_CLAIM_REQUEST on fleetform's EFS class, which ignores it
    estimate_gib: int  # what the cache holds when full: cache.size_gib, or shared_cache_gib (the plan's EFS cost)
    efs: bool = False  # fleetform makes the class and its EFS file system (AWS, no storage_class given)
    uid: int = RUN_AS  # the access points' owner: the pods' runAsUser and fsGroup


@frozen
class EnvVar:
    name: str
    value: str


@frozen
class SecretEnv:
    name: str
    secret: str
    key: str


@frozen
class Volume:
    """A pod volume and where the server mounts it."""

    name: str
    mount_path: str
    kind: str  # emptyDir | persistentVolumeClaim | secret
    read_only: bool = False
    size_limit: str | None = None  # emptyDir
    medium: str | None = None  # emptyDir: Memory for /dev/shm
    source: str | None = None  # the claim or secret name
    items: tuple[tuple[str, str], ...] = ()  # secret: key -> file


@frozen
class WeightsAccess:
    """What the EKS Pod Identity association of a model reading from S3 needs: its weights streamed by the
    Run:ai streamer, its adapters copied by an init container, or both."""

    namespace: str
    service_account: str
    bucket: str | None  # the weights' (None: the weights are not on S3)
    prefix: str | None
    uris: tuple[str, ...] = ()  # every S3 folder the pods read: the weights' and the adapters', sorted


@frozen
class InitContainer:
    """A container that runs to completion before vLLM starts: the adapters' download (fleetform/lora.py)."""

    name: str
    image: str
    command: tuple[str, ...]
    env: tuple[EnvVar, ...]
    mounts: tuple[tuple[str, str, bool], ...]  # (volume, path, read-only)
    cpu: str = "1"
    memory: str = "2Gi"
    comment: str = ""


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
    args: tuple[str, ...]  # after SERVE_COMMAND: the model location first (positional), then flags
    port: int
    gpu_resource: str
    gpu_count: int
    cpu_request: str
    memory: str
    shm_size: str | None  # the /dev/shm emptyDir; None under MPS, whose /dev/shm the device plugin mounts
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
    env: tuple[EnvVar, ...] = ()
    secret_env: tuple[SecretEnv, ...] = ()
    volumes: tuple[Volume, ...] = ()
    ephemeral_storage: str = "1Gi"  # requested: the cache plus /tmp
    pre_stop: tuple[str, ...] = ()
    grace_s: int = 60
    run_as: int = RUN_AS
    service_account: str | None = None  # a ServiceAccount of its own (S3 weights), else the default one
    automount_token: bool = False
    weights_access: WeightsAccess | None = None
    command: tuple[str, ...] = SERVE_COMMAND
    progress_deadline_s: int = 600  # the Deployment's progressDeadlineSeconds (PROGRESS_MARGIN_S)
    init_containers: tuple[InitContainer, ...] = ()  # the adapters' download, before vLLM starts
    group: lws.Group | None = None  # a replica spanning nodes: a LeaderWorkerSet (fleetform/lws.py), not a Deployment
    field_env: tuple[tuple[str, str], ...] = ()  # (name, fieldPath): the pod's own facts (POD_IP for KV events)

    @property
    def kind(self) -> str:
        """The workload object the autoscaler scales (its scale subresource)."""
        return lws.KIND if self.group is not None else "Deployment"

    @property
    def api_version(self) -> str:
        return lws.API_VERSION if self.group is not None else "apps/v1"

    @property
    def serving_selector(self) -> tuple[tuple[str, str], ...]:
        """The pods that serve requests: every replica's pod, or a group's leader only."""
        return self.group.leader_selector if self.group is not None else self.selector


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
    mig_devices: tuple[int, ...] = ()  # a split node (mixed): the GPU indices split into slices; () every GPU
    whole_devices: tuple[int, ...] = ()  # a split node: the GPU indices left whole (MIG mode off)


@frozen
class NetworkPolicy:
    """Who may reach the model servers: pods of the namespace, pods anywhere labelled as its clients,
    and Prometheus; only on the servers' ports."""

    name: str
    pod_selector: tuple[tuple[str, str], ...]
    ports: tuple[int, ...]
    client_label: tuple[str, str]
    prometheus_namespace: str


@frozen
class AdapterRule:
    """A Prometheus adapter custom-metrics rule (chart value rules.custom[])."""

    series_query: str
    name_matches: str
    name_as: str
    metrics_query: str


@frozen
class AdapterPrometheus:
    """Where the Prometheus adapter reads Prometheus (chart values prometheus.url, .port, .path): the chart's
    default is http://prometheus.default.svc port 9090 (prometheus-community/helm-charts
    charts/prometheus-adapter/values.yaml), which kube-prometheus-stack does not create."""

    url: str  # scheme and host, no port
    port: int
    path: str


def adapter_prometheus(url: str) -> AdapterPrometheus:
    """Split a Prometheus URL (scheme://host[:port][/path], as the schema allows) into the adapter's values;
    no port means the scheme's (80 for http, 443 for https)."""
    scheme, rest = url.split("://", 1)
    netloc, _, path = rest.partition("/")
    host, _, port = netloc.partition(":")
    return AdapterPrometheus(f"{scheme}://{host}", int(port) if port else (443 if scheme == "https" else 80),
                             f"/{path}".rstrip("/") if path else "")


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
    psa_labels: tuple[tuple[str, str], ...] = ()  # Pod Security Admission labels of the namespace
    network_policy: NetworkPolicy | None = None
    adapter_rules: tuple[AdapterRule, ...] = ()  # what the HPA's metric needs from the Prometheus adapter
    adapter_prometheus: AdapterPrometheus | None = None  # the Prometheus the adapter reads (HPA fleets)
    shared_cache: SharedCache | None = None  # `cache:`: the compile cache and Hub downloads the replicas share


def _gib(value: float) -> str:
    return f"{max(1, math.floor(value))}Gi"


def build(fleet, blueprint_name: str, labels: dict, region: str | None = None) -> KubeFleet | None:
    """The Kubernetes model of an inference fleet; None when its scheduler or node shape is unknown.
    region: the blueprint's cloud region, which S3 weights are streamed from."""
    scheduler, shape = fleet.scheduler, fleet.shape
    if scheduler is None or scheduler.type != "kubernetes" or shape is None:
        return None
    sharing = fleet.gpu_sharing
    # names and labels the cluster keys on (selectors, node labels, priority class) carry the fleet's
    # first name: a fleet renamed with renamed_from keeps its objects, as its cloud resources do
    ident = fleet.cloud_name
    gpu = shape.gpu
    node_labels: dict[str, str] = {"fleetform.dev/fleet": ident}
    device_plugin = mig = None
    product = gpu.gfd_product
    per_node = shape.gpu_count
    resource = "nvidia.com/gpu"
    if sharing.strategy in ("time-slicing", "mps") and sharing.replicas:
        device_plugin = DevicePluginConfig(f"{ident}-device-plugin", ident,
                                           "timeSlicing" if sharing.strategy == "time-slicing" else "mps",
                                           sharing.replicas)
        node_labels["nvidia.com/device-plugin.config"] = ident
        product += "-SHARED"  # GPU Feature Discovery marks shared GPUs so
        per_node *= sharing.replicas
    elif sharing.strategy == "mig" and sharing.profile in gpu.mig:
        profile = gpu.mig[sharing.profile]
        split = tuple(sorted(i for i in sharing.mig_gpus if i < shape.gpu_count))
        if split:
            # a split node: mig-parted applies a config's entries per GPU index, `devices: [4, 5]` matching those
            # indices only (NVIDIA/mig-parted api/spec/v1/helpers.go MatchesDevices; examples/config.yaml
            # custom-config mixes MIG-disabled and MIG-enabled GPUs in one config); an index the node lacks
            # matches nothing, silently (the mig-split rule refuses it)
            whole = tuple(i for i in range(shape.gpu_count) if i not in split)
            # the config's name carries the layout (the split GPUs as a bit mask, f0 = GPUs 4-7), as `all-<profile>`
            # carries the profile: a changed split is a changed nvidia.com/mig.config label, which is what makes the
            # MIG manager repartition a node (NVIDIA/mig-parted cmd/nvidia-mig-manager/main.go
            # ContinuouslySyncMigConfigChanges: it acts on a node update whose label value differs)
            mask = sum(1 << i for i in split)
            mig = MigConfig(f"{ident}-mig-parted", f"{ident}-split-{profile.name}-{mask:x}", profile.name,
                            profile.max_per_gpu, sharing.mig_strategy, split, whole)
            per_node = len(split)
        else:
            mig = MigConfig(f"{ident}-mig-parted", f"all-{profile.name}", profile.name, profile.max_per_gpu,
                            sharing.mig_strategy)
        node_labels["nvidia.com/mig.config"] = mig.name
        per_node *= profile.max_per_gpu
        if sharing.mig_strategy == "single":
            product += f"-MIG-{profile.name}"  # GFD's product label under the single strategy
        else:
            resource = f"nvidia.com/mig-{profile.name}"
    namespace = scheduler.namespace
    priority_class = f"{blueprint_name}-{ident}"
    prometheus = scheduler.prometheus_url or DEFAULT_PROMETHEUS
    servers = []
    for model in fleet.models:
        selector = (("app.kubernetes.io/name", model.name), ("app.kubernetes.io/instance", f"{ident}-{model.name}"))
        object_labels = selector + (("app.kubernetes.io/part-of", blueprint_name),
                                    ("app.kubernetes.io/managed-by", "fleetform"),
                                    ("fleetform.dev/fleet", ident)) + tuple(sorted(labels.items()))
        weights = model.weights
        source = weights.source if weights is not None else "hub"
        checkpoint_gb = model.checkpoint_gb
        downloaded = source == "hub"
        startup_s = STARTUP_BASE_S + STARTUP_S_PER_GB * (checkpoint_gb if downloaded else checkpoint_gb / 5)
        # a replica spanning nodes is a group of pods, one per node, each with a node's share of its GPUs; its
        # Ray cluster may take the whole startup budget to form (fleetform/lws.py ray_wait_s)
        grouped = lws.group(model, shape.gpu_count, fleet.instance, selector, model.name,
                            PROBE_PERIOD_S * math.ceil(startup_s / PROBE_PERIOD_S), TMP_SIZE_GIB) \
            if sharing.strategy == "none" else None
        pod_gpus = model.gpus // grouped.size if grouped is not None else model.gpus
        # a split node's servers share the CPUs and memory of its MIG GPUs only; the rest is its whole GPUs'
        # training pods' (fleetform/mig.py)
        share = pod_gpus / per_node * (len(mig.mig_devices) / shape.gpu_count
                                       if mig is not None and mig.whole_devices else 1)
        mps = device_plugin is not None and device_plugin.strategy == "mps"
        # vLLM's utilization is a fraction of the GPU memory the CUDA driver reports. Time-slicing has no
        # memory isolation: every pod sees the whole GPU, so the pods sharing one split the fraction, or
        # the second finds no memory left. MPS already caps each client at total / replicas (NVIDIA
        # k8s-device-plugin cmd/mps-control-daemon/mps/daemon.go: set_default_device_pinned_mem_limit
        # per device, totalMemory/replicas) and a client sees that cap as its memory: dividing again
        # would leave vLLM 1/replicas of its share.
        split = sharing.replicas if device_plugin is not None and not mps else 1
        utilization = model.gpu_memory_utilization / split
        args = [model_location(model), "--served-model-name", model.name,
                "--tensor-parallel-size", str(model.tensor_parallel)]
        if model.pipeline_parallel > 1:
            args += ["--pipeline-parallel-size", str(model.pipeline_parallel)]
        if grouped is not None:
            args += list(lws.EXECUTOR_ARGS)
        args += ["--port", str(model.port),
                "--gpu-memory-utilization", f"{math.floor(utilization * 1000) / 1000:g}"]
        if model.max_model_len:
            args += ["--max-model-len", str(model.max_model_len)]
        args += precision_args(model)
        if source == "hub" and weights is not None and weights.revision:
            args += ["--revision", weights.revision]  # the tokenizer follows (ModelConfig: tokenizer_revision = revision)
        if source == "s3":
            args += ["--load-format", "runai_streamer"]
        if model.lora is not None:
            args += model.lora.args()
        events = kvevents.build(fleet, model, namespace)
        if events is not None:
            args += list(events.vllm_args)  # before extra_args, which the prefix-routing rule keeps off these flags
        args += list(model.extra_args)
        # with a shared cache the Hub download lands on the claim: the pod's emptyDir keeps the small caches only
        cache_gib = math.ceil(checkpoint_gb * CACHE_FACTOR + CACHE_EXTRA_GIB) if downloaded and fleet.cache is None \
            else CACHE_EXTRA_GIB
        autoscaling = None
        if model.replicas.elastic and model.autoscale is not None and scheduler.autoscaler in ("keda", "hpa"):
            auto = model.autoscale
            # a scale-up adds replicas while one runs: with a shared cache that one has filled it (a later start)
            ready_s = start_s(model, fleet, later=fleet.cache is not None)
            autoscaling = Autoscaling(
                scheduler.autoscaler, model.replicas.min, model.replicas.max,
                f"{auto.target_per_replica:g}", auto.scale_down_window_s,
                f'sum({QUEUE_METRIC}{{namespace="{namespace}",model_name="{model.name}"}})', prometheus,
                scale_up_pods=auto.scale_up_replicas or 2,
                scale_up_percent=None if auto.scale_up_replicas else 100,
                scale_up_period_s=auto.scale_up_period_s or min(1800, max(60, math.ceil(ready_s))),
                fallback_replicas=auto.fallback_replicas if auto.fallback_replicas is not None else model.replicas.min,
                fallback_failures=3,
                triggers=(load_triggers(model, namespace) + wake_triggers(fleet, model, namespace)
                          if scheduler.autoscaler == "keda" else ()))
        env = [EnvVar("HOME", CACHE_DIR), EnvVar("USER", "vllm"), EnvVar("LOGNAME", "vllm"),
               EnvVar("XDG_CACHE_HOME", CACHE_DIR), EnvVar("XDG_CONFIG_HOME", f"{CACHE_DIR}/config"),
               EnvVar("VLLM_CACHE_ROOT", f"{CACHE_DIR}/vllm"),
               EnvVar("TORCHINDUCTOR_CACHE_DIR", f"{CACHE_DIR}/torchinductor"),
               EnvVar("TRITON_CACHE_DIR", f"{CACHE_DIR}/triton"), EnvVar("HF_HOME", f"{CACHE_DIR}/huggingface"),
               EnvVar("VLLM_NO_USAGE_STATS", "1"), EnvVar("DO_NOT_TRACK", "1")]
        volumes = [Volume("cache", CACHE_DIR, "emptyDir", size_limit=f"{cache_gib}Gi"),
                   Volume("tmp", "/tmp", "emptyDir", size_limit=f"{TMP_SIZE_GIB}Gi")]
        if fleet.cache is not None:
            # the torch.compile cache and Hub downloads outlive the pod; XDG and config stay the pod's own
            env = [e if e.name not in SHARED_ENV else EnvVar(e.name, SHARED_ENV[e.name]) for e in env]
            volumes.append(Volume("shared-cache", SHARED_CACHE_DIR, "persistentVolumeClaim", source=shared_claim(ident)))
        shm = None
        if not mps:
            # under MPS the device plugin mounts the MPS daemon's shared memory at /dev/shm itself
            # (k8s-device-plugin internal/plugin/mps.go updateReponse: ContainerPath daemon.ShmDir(),
            # "/dev/shm"); an emptyDir there would hide it and the client could not attach
            shm = "16Gi" if pod_gpus > 1 else "4Gi"
            volumes.insert(0, Volume("shm", "/dev/shm", "emptyDir", size_limit=shm, medium="Memory"))
        secret_env = []
        if model.hf_token_secret and source == "hub":
            # a file, not an environment variable (huggingface_hub reads HF_TOKEN_PATH)
            volumes.append(Volume("hf-token", "/etc/huggingface", "secret", read_only=True,
                                  source=model.hf_token_secret, items=(("HF_TOKEN", "token"),)))
            env.append(EnvVar("HF_TOKEN_PATH", "/etc/huggingface/token"))
        if source == "volume":
            volumes.append(Volume("weights", WEIGHTS_MOUNT, "persistentVolumeClaim", read_only=True, source=weights.claim))
            env.append(EnvVar("HF_HUB_OFFLINE", "1"))  # everything is on the volume
        if grouped is not None:
            # the group's NCCL traffic crosses nodes: the fleet's nccl.env, as Kueue's and Ray's pods get it
            # (NCCL_SOCKET_IFNAME names a host interface, not a pod's: kueue.SCHEDULER_SPECIFIC)
            from .kueue import SCHEDULER_SPECIFIC
            env += [EnvVar(v.name, v.value) for v in fleet.nccl_env if v.name not in SCHEDULER_SPECIFIC]
            env += [EnvVar(name, value) for name, value in grouped.ray_env]  # Ray's logs fit /tmp
        if model.api_key_secret:
            secret_env.append(SecretEnv("VLLM_API_KEY", model.api_key_secret, "VLLM_API_KEY"))
        field_env = ()
        if events is not None:
            env.append(EnvVar("PYTHONHASHSEED", events.hash_seed))  # the root block hash the scorer seeds with
            field_env = (("POD_IP", "status.podIP"),)  # the topic's $(POD_IP)
        access = None
        adapter_uris = tuple(a.source for a in model.lora.adapters if a.kind == "s3") if model.lora else ()
        init = adapter_fetchers(model, region) if model.lora is not None else ()
        if init:
            volumes.append(Volume("adapters", lora.ADAPTERS_DIR, "emptyDir", read_only=True,
                                  size_limit=f"{ADAPTERS_SIZE_GIB}Gi"))
            if model.hf_token_secret and source != "hub" and any(a.kind == "hub" for a in model.lora.adapters):
                volumes.append(Volume("hf-token", "/etc/huggingface", "secret", read_only=True,
                                      source=model.hf_token_secret, items=(("HF_TOKEN", "token"),)))
        if source == "s3" or adapter_uris:
            uris = tuple(sorted({weights.uri, *adapter_uris} if source == "s3" else set(adapter_uris)))
            access = WeightsAccess(namespace, f"{model.name}-weights", weights.bucket if source == "s3" else None,
                                   weights.prefix if source == "s3" else None, uris)
        if source == "s3":
            if region:
                # the Run:ai streamer sets AWS_EC2_METADATA_DISABLED=true unless given (runai-model-streamer
                # s3_utils.py DEFAULT_AWS_EC2_METADATA_DISABLED), so no region comes from the instance
                # metadata: the pod names the blueprint's region, the one its bucket is read in
                env.append(EnvVar("AWS_REGION", region))
        drain = model.drain_s
        servers.append(Server(
            name=model.name, namespace=namespace, labels=object_labels, selector=selector, image=model.image,
            args=tuple(args), port=model.port, gpu_resource=resource,
            gpu_count=pod_gpus,
            cpu_request=str(max(1, math.floor(shape.vcpus * 0.9 * share))),
            memory=_gib(shape.memory_gib * 0.9 * share),
            shm_size=shm,
            cache_size=f"{cache_gib}Gi",
            monitor_labels=(("release", scheduler.prometheus_release),) if scheduler.prometheus_release else (),
            node_selector=(("nvidia.com/gpu.product", product), ("fleetform.dev/fleet", ident)),
            tolerations=(Toleration(GPU_TAINT[0], "Exists", GPU_TAINT[2]),),
            # readiness and liveness answer within 5 and 10 s: /health waits on the engine, which is
            # busy under load, and a 1 s timeout took loaded pods out of the Service
            probes=(Probe("startup", "/health", PROBE_PERIOD_S, math.ceil(startup_s / PROBE_PERIOD_S), 5),
                    Probe("readiness", "/health", PROBE_PERIOD_S, 3, 5),
                    Probe("liveness", "/health", 15, 4, 10)),
            service_type="ClusterIP",
            max_surge=model.max_surge, max_unavailable=0 if model.max_surge else 1,
            replicas=None if autoscaling else model.replicas.min,
            autoscaling=autoscaling, hf_token_secret=model.hf_token_secret, priority_class=priority_class,
            env=tuple(env), secret_env=tuple(secret_env), volumes=tuple(volumes), field_env=field_env,
            ephemeral_storage=f"{cache_gib + TMP_SIZE_GIB}Gi",
            pre_stop=("python3", "-c", PRE_STOP_SCRIPT.format(grace=ENDPOINT_GRACE_S, drain=drain, port=model.port)),
            grace_s=ENDPOINT_GRACE_S + drain + EXIT_MARGIN_S,
            service_account=access.service_account if access else None,
            # EKS Pod Identity hands credentials over a projected service account token
            automount_token=access is not None,
            weights_access=access,
            progress_deadline_s=PROBE_PERIOD_S * math.ceil(startup_s / PROBE_PERIOD_S) + PROGRESS_MARGIN_S,
            init_containers=init,
            command=grouped.leader_command if grouped is not None else SERVE_COMMAND,
            group=grouped,
        ))
    monitor = (("release", scheduler.prometheus_release),) if scheduler.prometheus_release else ()
    minor = scheduler.version
    psa = tuple((f"pod-security.kubernetes.io/{mode}{suffix}", value) for mode in ("enforce", "audit", "warn")
                for suffix, value in (("", "restricted"), ("-version", f"v{minor}")))
    policy = NetworkPolicy(f"{ident}-model-servers", (("fleetform.dev/fleet", ident),),
                           tuple(sorted({m.port for m in fleet.models})), (CLIENT_LABEL, namespace),
                           prometheus_namespace(prometheus))
    rules = ()
    adapter = None
    if any(s.autoscaling is not None and s.autoscaling.kind == "hpa" for s in servers):
        rules = (AdapterRule(f'{QUEUE_METRIC}{{namespace!="",pod!=""}}', f"^{QUEUE_METRIC}$", HPA_METRIC,
                             ADAPTER_METRICS_QUERY),)
        adapter = adapter_prometheus(prometheus)
    shared = None
    if fleet.cache is not None:
        estimate = fleet.cache.size_gib or shared_cache_gib(fleet)
        made = fleet.cache.storage_class is None  # on AWS fleetform makes it (rules/caches.py refuses it elsewhere)
        shared = SharedCache(shared_claim(ident), namespace, fleet.cache.storage_class or shared_claim(ident),
                             EFS_CLAIM_REQUEST if made else f"{estimate}Gi", estimate, made)
    return KubeFleet(scheduler.version, namespace, priority_class, tuple(servers), device_plugin, mig,
                     tuple(sorted(node_labels.items())), (GPU_TAINT,), GPU_OPERATOR_NAMESPACE, monitor,
                     f"{ident}-dcgm-exporter", psa, policy, rules, adapter, shared)


SHARED_ENV = {"VLLM_CACHE_ROOT": f"{SHARED_CACHE_DIR}/vllm", "HF_HOME": f"{SHARED_CACHE_DIR}/huggingface"}
"""What a fleet with `cache:` moves to the shared claim. VLLM_CACHE_ROOT: vLLM's torch.compile cache, one folder per
hash of every config that shapes the graph, the PyTorch configs and the traced source files (docs/design/torch_compile.md,
"Compilation Cache": "you can directly copy the whole ~/.cache/vllm/torch_compile_cache directory ... to save a great
amount of compilation time"), so replicas of different models or images never read each other's artifacts. With
torch 2.8 (the 0.11.0 image) vLLM compiles through InductorStandaloneAdaptor (VLLM_USE_STANDALONE_COMPILE defaults to 1),
which saves its artifacts under VLLM_CACHE_ROOT/torch_compile_cache/<hash>/ itself. Two replicas compiling one hash at
once: vLLM's current docs describe a file lock the first holds and a .cache_ready marker the others wait for
("Concurrent Access Control"); whether the pinned 0.11.0 has it was not read here. Without it, vllm_compile_cache.py is
written with a plain open("w") and read back with ast.literal_eval (compilation/backends.py), so a replica that starts
while another writes can read half a file and fail, and torch 2.8 predates pytorch#162432 (corrupt cache files when
processes compile concurrently): a corrupt entry on the shared claim would fail every later start of that model until
its folder is deleted. Rollouts replace one pod at a time and KEDA adds replicas once one serves, so the exposure is a
first deploy (or a new image or flag) with replicas.min of 2 or more (README, Shared compile and model cache).
HF_HOME: huggingface_hub's cache, whose downloads take a file lock per blob under .locks/ (WeakFileLock, flock) and
move a finished .incomplete file into place, so two replicas starting at once download one copy, the second waiting
on the lock. That holds where flock locks across clients: Linux's NFS client emulates flock() with NFSv4 byte-range
locks on the whole file (flock(2), "since Linux 2.6.12"), which EFS serves (EFS FAQ: "file locking"), and the EFS
CSI driver mounts without local_lock. Where flock silently succeeds for every caller (Lustre or GPFS without flock,
NFS with local_lock), two downloads of one blob append to the same .incomplete file and can poison the cache
(huggingface/huggingface_hub#4306, fixed in releases after the vLLM 0.11.0 image's): a storage_class of such a file
system should not hold HF_HOME. TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR stay in the pod: the
graphs vLLM compiles are saved under VLLM_CACHE_ROOT (above), and whatever else uses those caches is the pod's."""


EFS_CLAIM_REQUEST = "5Gi"
"""The request of a claim on fleetform's EFS class: one figure that never changes. EFS is elastic and the driver ignores
a claim's size (EKS User Guide, "Amazon EFS CSI driver": "The actual storage capacity value in persistent volumes and
persistent volume claims isn't used ... you must specify a valid value, such as, `5Gi`"), while a bound claim's request cannot change in place: Kubernetes refuses a larger one unless the class allows
expansion (the driver implements no expansion) and a smaller one always (fleetform/changes.py claim_resize). A request
derived from the fleet's models would make the `pulumi up` after a model is added or removed fail on the claim."""

EFS_USD_PER_GB_MONTH = 0.30
"""EFS Standard storage, us-east-1 (aws.amazon.com/efs/pricing, read 2026-11-24: "$0.30/GB-month", billed on the
average bytes stored)."""
EFS_ELASTIC_USD_PER_GB = (0.03, 0.06)
"""EFS elastic throughput, us-east-1: $0.03 per GB read, $0.06 per GB written (the EFS pricing page's elastic
throughput rates as factualminds.com's "Amazon EFS Pricing" summary of June 2026 lists them; not read on the AWS page
itself here)."""


def efs_cost_note(fleet) -> str | None:
    """The plan's line on a fleet's EFS cache: storage at the claim's size if it fills, and what elastic throughput bills
    for the start of one replica of each model (its Hub weights read, or the first start's download written)."""
    shared = fleet.kube.shared_cache if fleet.kube is not None else None
    if shared is None or not shared.efs:
        return None
    size = shared.estimate_gib * 1.073741824  # GiB -> GB
    read, write = EFS_ELASTIC_USD_PER_GB
    hub = sum(m.checkpoint_gb for m in fleet.models if m.weights is None or m.weights.source == "hub")
    return (f"fleet {fleet.name}: shared cache on EFS, not in the totals: {size:,.0f} GB if full x "
            f"${EFS_USD_PER_GB_MONTH:.2f}/GB-month = ${size * EFS_USD_PER_GB_MONTH:,.2f} a month (EFS Standard, us-east-1, "
            f"aws.amazon.com/efs/pricing, 2026-11-24); elastic throughput ${read:.2f}/GB read, ${write:.2f}/GB written: "
            f"the first start of every model writes {hub:g} GB (${hub * write:,.2f}), each later replica start reads "
            f"its model's weights (${hub * read:,.2f} for one of each)")


def shared_claim(ident: str) -> str:
    """The name of a fleet's shared cache claim in its namespace."""
    return f"{ident}-model-cache"


def shared_cache_gib(fleet) -> int:
    """The shared claim's default request: each Hub model's download plus 20% and CACHE_EXTRA_GIB, and CACHE_EXTRA_GIB
    for the compile cache of each model read from S3 or a volume (their weights never land on the claim)."""
    total = 0
    for model in fleet.models:
        hub = model.weights is None or model.weights.source == "hub"
        total += math.ceil(model.checkpoint_gb * CACHE_FACTOR + CACHE_EXTRA_GIB) if hub else CACHE_EXTRA_GIB
    return total


def start_s(model, fleet=None, later: bool = False) -> float:
    """Seconds from a pod's start to a ready replica, the node aside: the weights over the source's rate, plus
    READY_OVERHEAD_S. A later start on a fleet with a shared cache (the cache filled by an earlier start of the same
    model, image and flags) reads Hub weights from the claim at the volume rate and saves COMPILE_SAVED_S; S3 weights
    are streamed again (the Run:ai streamer reads into GPU memory, not into HF_HOME)."""
    source = model.weights.source if model.weights is not None else "hub"
    warm = later and fleet is not None and fleet.cache is not None
    rate = LOAD_GB_PER_S["volume" if warm and source == "hub" else source]
    return model.checkpoint_gb / rate + READY_OVERHEAD_S - (COMPILE_SAVED_S if warm else 0)


def load_triggers(model, namespace: str) -> tuple[Trigger, ...]:
    """The KEDA triggers that scale a model on more than its queue: KV-cache use (autoscale.kv_cache_target)
    and the p90 time to first token against the SLO (slo.ttft_p90_s)."""
    match = f'namespace="{namespace}",model_name="{model.name}"'
    triggers = []
    auto = model.autoscale
    if auto is not None and auto.kv_cache_target is not None:
        # the sum over replicas as an AverageValue: the HPA divides it by the replicas, so it scales when
        # their average use is above the target
        triggers.append(Trigger("kv-cache", "AverageValue", f"sum({KV_CACHE_METRIC}{{{match}}})",
                                f"{auto.kv_cache_target:g}",
                                f"average KV-cache use per replica above {auto.kv_cache_target:g} ({KV_CACHE_METRIC})"))
    if model.slo is not None and model.slo.ttft_p90_s is not None:
        # a Value: the fleet's p90 against the SLO, replicas scaled by measured / target. With no request
        # in the window histogram_quantile is NaN; `> 0 or vector(0)` reads that as 0, not as an error
        quantile = (f"histogram_quantile(0.9, sum by (le) (rate({TTFT_METRIC}_bucket{{{match}}}[{TTFT_WINDOW}])))")
        triggers.append(Trigger("ttft-p90", "Value", f"({quantile} > 0) or vector(0)", f"{model.slo.ttft_p90_s:g}",
                                f"p90 time to first token above the SLO's {model.slo.ttft_p90_s:g} s ({TTFT_METRIC})"))
    return tuple(triggers)


EPP_REQUESTS = 'inference_objective_request(_error)?_total'
"""The endpoint picker's request counters (Gateway API Inference Extension v1.1.0, pkg/epp/metrics/metrics.go:
inference_objective_request_total and inference_objective_request_error_total, labels model_name and
target_model_name). A request for a model with no pod is counted as an error before the EPP answers 503
(pkg/epp/handlers/server.go: the deferred RecordRequestErrCounter; requestcontrol/director.go:
ServiceUnavailable with no candidate pod): the counter moves while no replica runs."""
WAKE_THRESHOLD = "1000000"
"""The wake trigger only takes a model off zero: KEDA activates a prometheus trigger when its value is above
activationThreshold (kedacore/keda pkg/scalers/prometheus_scaler.go: `val > ActivationThreshold`), 0 here.
Its threshold for sizing is beyond any request rate, so it asks the HPA for one replica and the queue,
KV-cache and TTFT triggers set the count (the HPA takes the highest)."""
WAKE_WINDOW = "2m"


def wake_triggers(fleet, model, namespace: str) -> tuple[Trigger, ...]:
    """The trigger that wakes a model from 0 replicas: requests the gateway's endpoint picker counted for it
    (fleet.gateway, replicas.min 0). No vLLM metric exists while no replica runs."""
    if fleet.gateway is None or model.replicas.min != 0:
        return ()
    # a request for one of the model's adapters is counted under the adapter's name (the request's `model`)
    # and wakes the base model's replicas, which serve it
    names = [model.name] + ([a.name for a in model.lora.adapters] if model.lora is not None else [])
    match = f'model_name="{model.name}"' if len(names) == 1 else f'model_name=~"{"|".join(names)}"'
    query = (f'sum(rate({{__name__=~"{EPP_REQUESTS}",namespace="{namespace}",{match}}}'
             f'[{WAKE_WINDOW}]))')
    return (Trigger("gateway-requests", "AverageValue", query, WAKE_THRESHOLD,
                    "requests the gateway's endpoint picker counted for it, served or refused while no replica ran "
                    "(inference_objective_request_total, inference_objective_request_error_total)",
                    activation="0"),)


WEIGHTS_MOUNT = "/weights"
CLIENT_LABEL = "fleetform.dev/client-of"
"""Pods of other namespaces carrying this label with the fleet's namespace as value may call the models."""


def model_location(model) -> str:
    """What `vllm serve` takes as its model (first positional argument): the Hub id, the S3 prefix, or the folder on the mounted volume."""
    weights = model.weights
    if weights is None or weights.source == "hub":
        return model.model
    if weights.source == "s3":
        return weights.uri
    return f"{WEIGHTS_MOUNT}/{weights.subpath}" if weights.subpath else WEIGHTS_MOUNT


def precision_args(model) -> list[str]:
    """The flags that make vLLM load what the memory rules sized (vLLM 0.11 ModelConfig): a 16/32-bit
    checkpoint served in fp8 is quantized on load; an unquantized precision is the --dtype; a
    pre-quantized checkpoint (fp8, int8, int4) names its method in config.json, and an explicit
    --quantization that differs from it is an error in vLLM, so none is given."""
    if model.quantize_on_load:
        return ["--quantization", "fp8", "--dtype", "float16" if model.checkpoint == "fp16" else "bfloat16"]
    if model.precision in DTYPE:
        return ["--dtype", DTYPE[model.precision]]
    return []


def prometheus_namespace(url: str) -> str:
    """The namespace of an in-cluster Prometheus service URL (http://name.namespace.svc:port); monitoring
    (kube-prometheus-stack's usual one) for any other URL."""
    host = url.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]
    parts = host.split(".")
    if len(parts) >= 3 and parts[2] == "svc":
        return parts[1]
    return "monitoring"


ADAPTERS_SIZE_GIB = 10
"""The adapters' emptyDir: a rank-64 adapter of a 70B model is about 0.7 GB of safetensors, so ten GiB
holds a dozen of the largest with room to spare; the kubelet evicts a pod whose emptyDir outgrows it."""
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.27.49"
"""The S3 adapters' init container: the AWS CLI v2, which reads EKS Pod Identity credentials from 2.15.0 on
(EKS user guide, pod-id-minimum-sdk: 'AWS CLI - 2.15.0'); `aws s3 sync` lists the prefix (s3:ListBucket
with s3:prefix, which the s3-weights role grants) and gets each key."""
S3_FETCH_SCRIPT = (
    'for item; do name="${item%%=*}"; src="${item#*=}"; dest="' + lora.ADAPTERS_DIR + '/$name/"; '
    'aws s3 sync "$src" "$dest" --only-show-errors --no-progress; '
    'if [ ! -f "${dest}adapter_config.json" ]; then echo "$src: no adapter_config.json" >&2; exit 1; fi; '
    'echo "$name: $src"; done'
)
"""The S3 adapters' init container program (`sh -ec SCRIPT sh NAME=s3://... ...`): each adapter's folder is
copied into ADAPTERS_DIR/NAME; a folder without adapter_config.json (PEFT's file, which vLLM reads) fails in the
init container, which names the folder, rather than in vLLM's start. tests/test_lora.py runs it with a fake `aws`."""


def adapter_fetchers(model, region: str | None) -> tuple[InitContainer, ...]:
    """The init containers that put the model's adapters into the adapters volume before vLLM starts, so
    every replica, a new one included, has every adapter of --lora-modules at its start: one for the Hub
    adapters (the model's own vLLM image, whose huggingface_hub downloads them, with the Hub token where the
    model has one) and one for the S3 adapters (the AWS CLI, with the pod's EKS Pod Identity)."""
    out = []
    hub = [a for a in model.lora.adapters if a.kind == "hub"]
    s3 = [a for a in model.lora.adapters if a.kind == "s3"]
    base = (EnvVar("HOME", "/tmp"), EnvVar("XDG_CACHE_HOME", "/tmp"))
    mounts = (("adapters", lora.ADAPTERS_DIR, False), ("tmp", "/tmp", False))
    if hub:
        env = base + (EnvVar("HF_HOME", "/tmp/huggingface"), EnvVar("HF_HUB_DISABLE_TELEMETRY", "1"))
        hub_mounts = mounts
        if model.hf_token_secret:
            env += (EnvVar("HF_TOKEN_PATH", "/etc/huggingface/token"),)
            hub_mounts += (("hf-token", "/etc/huggingface", True),)
        out.append(InitContainer(
            "adapters-hub", model.image,
            ("python3", "-c", lora.FETCH_SCRIPT) + tuple(f"{a.name}|{a.source}|{a.revision or ''}" for a in hub),
            env, hub_mounts, comment="the Hub adapters, into " + lora.ADAPTERS_DIR))
    if s3:
        env = base + ((EnvVar("AWS_REGION", region),) if region else ())
        out.append(InitContainer(
            "adapters-s3", AWS_CLI_IMAGE,
            ("sh", "-ec", S3_FETCH_SCRIPT, "sh") + tuple(f"{a.name}={a.source}" for a in s3),
            env, mounts, comment="the S3 adapters, into " + lora.ADAPTERS_DIR))
    return tuple(out)
