"""The model: one typed, immutable, resolved Blueprint, the only input of every later stage.

`resolve` builds it from schema-valid data: defaults applied, catalog facts attached. Every
object keeps the path it was written at, so rules can point findings at the right line.
Rules then check it; render, plan and the Pulumi program receive it only when no rule failed.
"""

from __future__ import annotations

import posixpath
from typing import Literal, Mapping

from .catalog import Gpu, InstanceType
from .cluster import Cluster
from .gateway import InferenceGateway
from .k8s import KubeFleet
from .kueue import KueueFleet
from .lora import Lora
from .mig import SplitQueue
from .models import ModelSpec
from .ray import RayConfig
from .slinky import SlinkyConfig
from .pool import Pool, PoolEdge
from .records import frozen
from .acceptance import AcceptanceConfig
from .accounting import AccountingConfig, Team
from .health import HealthConfig
from .monitoring import MonitoringConfig
from .login import LoginConfig
from .slurm import SlurmConfig

Path = tuple  # keys and indexes into the blueprint, e.g. ("fleets", 0, "nodes")

IMPORT_DIR = "/data"
"""Where on an FSx for Lustre file system its import_path appears (<mount_path>/data). Not the root:
a data repository association at / must be the file system's only one, and the checkpoint
directory needs an export association of its own (FSx API reference, DataRepositoryAssociation
FileSystemPath: https://docs.aws.amazon.com/fsx/latest/APIReference/API_DataRepositoryAssociation.html)."""


def under(path: str, directory: str) -> bool:
    """Whether an absolute path is the directory or inside it."""
    path, directory = posixpath.normpath(path), posixpath.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
"""Bytes one parameter takes in memory, by precision."""

EMBEDDING_SHARE = 0.15
EMBEDDING_MAX_BILLION = 2.2
"""Parameters of the input embedding and the lm_head, which quantized checkpoints (fp8, int8, int4:
RedHatAI's FP8-dynamic, AWQ, GPTQ) keep in 16 bits: vocabulary x hidden size, twice when untied. For
Qwen2.5-7B 2 x 152064 x 3584 = 1.09B of 7.6B (14%), Llama-3.1-8B 2 x 128256 x 4096 = 1.05B of 8.0B (13%),
Qwen2.5-1.5B (tied) 151936 x 1536 = 0.23B of 1.54B (15%), Llama-3.1-70B 2 x 128256 x 8192 = 2.1B
(the models' config.json on the Hugging Face Hub). The blueprint gives no vocabulary: 15% of the
parameters, at most 2.2B, is the estimate."""

GPU_OVERHEAD_GB = 2.0
"""GPU memory per GPU that vLLM takes out of its gpu_memory_utilization budget before sizing the KV
cache, besides the weights: the activation peak of its profiling run and non-torch memory (CUDA context
remainder, cuBLAS/NCCL workspaces). vLLM's worker logs both (v1/worker/gpu_worker.py, "Memory profiling
takes ... torch peak memory increase: 1.40GiB; non-torch forward increase memory: 0.02GiB; weights memory:
8.80GiB" for an 8B model on an L4, and 1.42 + 0.51 GiB for 18 GiB of weights): about 1.9 GiB = 2.0 GB."""


@frozen
class Size:
    """A count of nodes or replicas: fixed (min == max, `elastic` False) or a {min, max} range."""

    min: int
    max: int
    elastic: bool
    path: Path


@frozen
class Storage:
    name: str
    type: Literal["fsx-lustre", "s3"]
    path: Path
    capacity_gib: int | None = None
    throughput_mb_per_tib: int | None = None
    mount_path: str | None = None
    import_path: str | None = None
    versioning: bool = True
    noncurrent_expiry_days: int | None = None


@frozen
class Image:
    """The machine image of AWS nodes or a controller: an AMI id, or an SSM parameter holding one."""

    ami: str | None
    ssm_parameter: str | None
    default: bool  # fleetform's default image (its Slurm release is known), not the blueprint's
    path: Path

    @property
    def launch_id(self) -> str:
        """How a launch template names it: the AMI id, or `resolve:ssm:` and the parameter, which EC2
        resolves at every launch."""
        return self.ami or f"resolve:ssm:{self.ssm_parameter}"


@frozen
class Partition:
    name: str
    default: bool
    max_time: str | int | None
    nodes: str | None
    priority_tier: int | None
    path: Path


@frozen
class Switch:
    name: str
    nodes: str
    path: Path


@frozen
class Topology:
    nodes_per_switch: int | None
    switches: tuple[Switch, ...]
    path: Path


@frozen
class SlurmScheduler:
    cluster_name: str | None
    slurm_version: str | None
    controller_instance_type: str | None
    controller_host: str | None
    controller_image: Image | None  # aws: the controller's image; None: the fleet's
    partitions: tuple[Partition, ...]
    topology: Topology | None
    auth: Literal["munge", "slurm"]
    path: Path
    type: Literal["slurm"] = "slurm"


@frozen
class KubernetesScheduler:
    version: str
    namespace: str
    autoscaler: Literal["keda", "hpa", "none"]
    prometheus_url: str | None
    prometheus_release: str  # the `release` label on ServiceMonitors; empty for none
    path: Path
    type: Literal["kubernetes"] = "kubernetes"
    queue_namespaces: tuple[str, ...] = ()  # training: namespaces with a LocalQueue; () the fleet's namespace
    job_image: str | None = None  # training: the image of the JobSet template
    declared: tuple[str, ...] = ()  # the keys the blueprint wrote (defaults fill the rest): kueue-fields' input

    @property
    def minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)


@frozen
class SlinkyDirectory:
    """scheduler.directory of a Slinky fleet as written: where the login and slurmd pods' sssd finds the users jobs
    run as. An LDAP or AD server (uri ... bind_secret), or sssd_secret: an existing Secret with a complete sssd.conf.
    The slinky-directory rule checks what is missing or unsafe; fleetform/slinky.py builds sssd.conf from it."""

    uri: str | None
    search_base: str | None
    start_tls: bool
    schema: str  # sssd's ldap_schema: rfc2307, rfc2307bis or ad
    tls_ca: tuple[str, str] | None  # a ConfigMap in the fleet's namespace and its key: the directory's CA certificate
    bind_dn: str | None
    bind_secret: tuple[str, str] | None  # a Secret in the fleet's namespace and its key: an sssd.conf snippet
    sssd_secret: tuple[str, str] | None  # a Secret in the fleet's namespace and its key: a complete sssd.conf
    path: Path
    id_mapping: bool = False  # sssd's ldap_id_mapping: uids and gids from Active Directory objectSIDs


@frozen
class SlinkyScheduler:
    """A training fleet scheduled by Slurm running on the blueprint's EKS cluster: slurmd pods of a NodeSet of
    SchedMD's Slinky slurm-operator (fleetform/slinky.py)."""

    version: str  # the cluster's Kubernetes version
    namespace: str
    cluster_name: str | None
    path: Path
    type: Literal["slinky"] = "slinky"
    directory: SlinkyDirectory | None = None  # the job users' directory (none: no job can run, slinky-users)
    slurmd_image: str | None = None  # the slurmd pods' image; None: the chart's (no aws-ofi-nccl, slinky-efa-image)

    @property
    def minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)


@frozen
class RayScheduler:
    """A training fleet scheduled by Ray: a RayCluster (KubeRay) on the blueprint's EKS cluster."""

    version: str  # the cluster's Kubernetes version
    namespace: str
    ray_version: str
    path: Path
    type: Literal["ray"] = "ray"

    @property
    def minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)


@frozen
class Interconnect:
    fabric: Literal["efa", "infiniband", "roce", "tcp"]
    hcas: tuple[str, ...]
    socket_ifname: str | None
    gid_index: int | None
    traffic_class: int | None
    path: Path
    declared: bool  # written in the blueprint (else derived from the instance type)


@frozen
class EnvVar:
    """One line of a rendered environment file, with the comment that says why it is there."""

    name: str
    value: str
    why: str


@frozen
class Nccl:
    debug: str | None
    env: Mapping[str, str]
    path: Path


@frozen
class Workload:
    model_params_billion: float
    precision: str
    optimizer: str | None
    tokens_billion: float | None
    mfu: float | None
    path: Path


@frozen
class CheckpointExport:
    """Checkpoints written on an FSx for Lustre file system reach an S3 bucket through a data
    repository association that exports the checkpoint directory."""

    file_system: str  # storage name of the file system
    directory: str  # the checkpoint directory, as a path of the file system ("/checkpoints")
    bucket: str  # storage name of the bucket
    prefix: str  # key prefix in the bucket ("checkpoints/")


@frozen
class Checkpoint:
    every_minutes: int
    location: str | None
    path: Path
    export: CheckpointExport | None = None  # where an FSx checkpoint path is exported to


@frozen
class WholeGpus:
    """The GPUs of a split node (GpuSharing.mig_gpus) left whole: Kueue queues these namespaces' training jobs
    on them."""

    namespaces: tuple[str, ...]
    gpus_per_job: int | None  # None: every whole GPU of a node
    job_image: str | None  # the Job template's image; None: no template
    path: Path


@frozen
class GpuSharing:
    strategy: Literal["none", "time-slicing", "mps", "mig"]
    profile: str | None
    replicas: int | None
    mig_strategy: Literal["single", "mixed"]
    path: Path
    mig_gpus: tuple[int, ...] = ()  # mixed MIG: the GPU indices split into slices; () every GPU
    whole_gpus: WholeGpus | None = None  # mig_gpus: the training jobs queued on the GPUs left whole


@frozen
class CacheSpec:
    """An inference fleet's `cache:` block: a ReadWriteMany claim its replicas share for the compile cache and
    Hub downloads (fleetform/k8s.py SharedCache)."""

    storage_class: str
    size_gib: int | None
    path: Path


@frozen
class GatewaySpec:
    """An inference fleet's `gateway:` block: one OpenAI endpoint in front of its models (issue 23)."""

    request_timeout_s: int
    path: Path
    expose: str = "cluster"  # cluster: a ClusterIP Service | internal: an internal AWS load balancer in the VPC
    prefix_routing: str = "approximate"  # approximate | precise: vLLM KV events to llm-d's scorer (fleetform/kvevents.py)
    proxy_replicas: int | None = None  # the proxy's replicas; None: sized from the models (fleetform/proxy.py)


@frozen
class SemanticRoutingSpec:
    """An inference fleet's `semantic_routing:` block: requests for `model_name` go to `small` when vLLM's Semantic
    Router finds them simple, to `large` otherwise (issue 23; fleetform/semrouter.py)."""

    small: str
    large: str
    model_name: str
    threshold: float
    simple_share: float
    easy: tuple[str, ...]
    hard: tuple[str, ...]
    path: Path


@frozen
class Autoscale:
    metric: str
    target_per_replica: float
    scale_down_window_s: int
    path: Path
    scale_up_replicas: int | None = None  # None: fleetform's default step
    scale_up_period_s: int | None = None  # None: the estimated time a replica takes to become ready
    fallback_replicas: int | None = None  # None: replicas.min
    kv_cache_target: float | None = None  # keda: a KV-cache use trigger (fraction of the cache), None: none
    cold_start_latency_s: float | None = None  # the wait a request accepts when no replica runs (min 0)


@frozen
class Weights:
    """Where a model's replicas load the weights from."""

    source: Literal["hub", "s3", "volume"]
    revision: str | None  # hub: the pinned commit, tag or branch
    uri: str | None  # s3: s3://bucket/prefix/
    claim: str | None  # volume: the PersistentVolumeClaim
    subpath: str | None  # volume: the model's folder in it
    path: Path

    @property
    def bucket(self) -> str | None:
        return self.uri[5:].split("/", 1)[0] if self.uri else None

    @property
    def prefix(self) -> str | None:
        return self.uri[5:].partition("/")[2] if self.uri else None


@frozen
class Slo:
    peak_qps: float
    qps_per_gpu: float | None  # measured; None: estimated from the SLO (fleetform/slo.py)
    latency_s: float | None
    redundancy: int
    burst_headroom: float
    path: Path
    ttft_p90_s: float | None = None  # keda: a time-to-first-token trigger, None: none
    input_tokens: int | None = None  # the SLO's workload and inter-token target: fleetform/slo.py's roofline
    output_tokens: int | None = None
    itl_s: float | None = None


@frozen
class Model:
    name: str
    image: str
    model: str
    model_params_billion: float
    precision: str
    tensor_parallel: int
    max_model_len: int | None
    gpu_memory_utilization: float
    port: int
    replicas: Size
    max_surge: int
    autoscale: Autoscale | None
    slo: Slo | None
    hf_token_secret: str | None
    path: Path
    checkpoint_precision: str = ""  # as the blueprint says it; "" when it does not (see `checkpoint`)
    weights: Weights | None = None  # None: the Hub, floating revision
    extra_args: tuple[str, ...] = ()
    drain_s: int = 120
    api_key_secret: str | None = None
    spec: ModelSpec | None = None  # the model catalog's entry for `model`, None for a model it does not list
    params_given: bool = True  # model_params_billion written in the blueprint (else the catalog's)
    lora: Lora | None = None  # LoRA adapters and the limits vLLM serves them under (fleetform/lora.py)
    pipeline_parallel: int = 1  # vLLM --pipeline-parallel-size: the layers split into this many stages

    @property
    def gpus(self) -> int:
        """GPUs of one replica: tensor_parallel x pipeline_parallel (vLLM's world size)."""
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def context_tokens(self) -> int | None:
        """The longest sequence vLLM serves: max_model_len, or where the blueprint sets none the model's
        own maximum, which vLLM then takes (--max-model-len defaults to config.json's
        max_position_embeddings, scaled by a rope_scaling override in extra_args). None when neither is known."""
        from .models import derived_max_len

        if self.max_model_len is not None:
            return self.max_model_len
        return derived_max_len(self.spec, self.extra_args)[0] if self.spec is not None else None

    @property
    def weights_gb(self) -> float:
        """Weights in GPU memory, decimal GB: parameters x bytes per parameter of the precision, the
        embedding and lm_head of a quantized precision in 16 bits (EMBEDDING_SHARE)."""
        params, size = self.model_params_billion, BYTES_PER_PARAM[self.precision]
        if size >= 2:
            return params * size
        embedding = min(params * EMBEDDING_SHARE, EMBEDDING_MAX_BILLION)
        return (params - embedding) * size + embedding * 2.0

    @property
    def overhead_gb(self) -> float:
        """What vLLM reserves besides weights and KV cache on the model's GPUs: GPU_OVERHEAD_GB each, plus the
        LoRA slots it preallocates for max_loras adapters of max_lora_rank (fleetform/lora.py slots_gb)."""
        from .lora import slots_gb

        return self.gpus * GPU_OVERHEAD_GB + slots_gb(self)

    @property
    def checkpoint_gb(self) -> float:
        """The checkpoint's size in decimal GB: what a replica downloads or streams."""
        return self.model_params_billion * BYTES_PER_PARAM[self.checkpoint]

    @property
    def checkpoint(self) -> str:
        """The checkpoint's precision: as given, else the served precision."""
        return self.checkpoint_precision or self.precision

    @property
    def quantize_on_load(self) -> bool:
        """vLLM quantizes a 16/32-bit checkpoint to fp8 while loading (--quantization fp8)."""
        return self.precision == "fp8" and self.checkpoint in ("fp32", "bf16", "fp16")

    @property
    def load_gb(self) -> float:
        """GPU memory the weights take while loading: vLLM 0.11 allocates a layer quantized on load in the
        checkpoint's 16-bit dtype and quantizes only after every weight is in (fp8.py create_weights,
        base_loader.py process_weights_after_loading), so the peak is the unquantized size."""
        if self.quantize_on_load:
            return self.model_params_billion * 2.0
        return self.weights_gb


@frozen
class NodeShape:
    """What one node has: from the instance catalog (aws) or the blueprint's hardware (onprem)."""

    gpu: Gpu
    gpu_count: int
    vcpus: int
    memory_gib: int
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None


@frozen
class Fleet:
    name: str
    role: Literal["training", "inference"]
    path: Path
    instance_type: str | None
    instance: InstanceType | None  # None on-prem, or when the type is not in the catalog
    image: Image | None  # aws: the nodes' machine image; None on-prem
    shape: NodeShape | None  # None when unknown (a rule reports why)
    nodes: Size | None
    hosts: str | None
    capacity_type: Literal["on-demand", "spot", "reservation", "capacity-block"]
    reservation_id: str | None
    placement: Literal["cluster", "spread", "none"]
    storage: tuple[str, ...]
    scheduler: SlurmScheduler | KubernetesScheduler | RayScheduler | SlinkyScheduler | None
    interconnect: Interconnect | None
    nccl: Nccl | None
    workload: Workload | None
    checkpoint: Checkpoint | None
    gpu_sharing: GpuSharing
    models: tuple[Model, ...]
    renamed_from: tuple[str, ...] = ()  # earlier names: the cloud resources keep them as aliases
    slurm: SlurmConfig | None = None  # training fleets scheduled by Slurm, when their shape is known
    nccl_env: tuple[EnvVar, ...] = ()  # training fleets: what nccl.env sets, each with its reason
    kube: KubeFleet | None = None  # inference fleets on Kubernetes, when their shape is known
    kueue: KueueFleet | None = None  # training fleets on Kubernetes (fleetform/kueue.py), when their shape is known
    health: HealthConfig | None = None  # Slurm training fleets: the node health check (fleetform/health.py)
    health_declared: bool = False  # the blueprint wrote a `health` block (the health-scope rule's input)
    health_keys: tuple[str, ...] = ()  # the keys that block sets (health-scope: inference fleets may set auto_repair only)
    auto_repair: bool = True  # inference fleets on EKS: node auto repair on the GPU node group (fleetform/health.py)
    ray: RayConfig | None = None  # training fleets scheduled by Ray, when their shape is known (fleetform/ray.py)
    split: SplitQueue | None = None  # an inference fleet's node split by GPU: Kueue on its whole GPUs (fleetform/mig.py)
    slinky: SlinkyConfig | None = None  # Slurm on EKS through Slinky, when the shape is known (fleetform/slinky.py)
    login: LoginConfig | None = None  # login nodes, users, home (fleetform/login.py); None when none is declared
    acceptance: AcceptanceConfig | None = None  # Slurm training fleets: the acceptance job (fleetform/acceptance.py)
    acceptance_declared: bool = False  # the blueprint wrote an `acceptance` block (the acceptance-scope rule's input)
    model_checks: tuple = ()  # inference fleets on Kubernetes: each model's acceptance request (fleetform/acceptance.py)
    pool_edge: PoolEdge | None = None  # AWS Slurm training fleets that lend nodes to a pool (fleetform/pool.py)
    pool_scaling: tuple = ()  # inference fleets on EKS in a pool: their node group's scheduled actions (pool.ScalingAction)
    gateway: GatewaySpec | None = None  # inference on Kubernetes: the blueprint's `gateway:` block
    cache: CacheSpec | None = None  # inference on Kubernetes: the shared compile and download cache (`cache:`)
    inference_gateway: InferenceGateway | None = None  # its objects, when the fleet has kube and a gateway
    semantic_routing: SemanticRoutingSpec | None = None  # the blueprint's `semantic_routing:` block
    accounting: AccountingConfig | None = None  # Slurm fleets with `scheduler.accounting` (fleetform/accounting.py)
    teams: tuple[Team, ...] = ()  # `scheduler.teams` as written, with or without accounting (the rules' input)
    accounting_declared: bool = False  # the scheduler writes an `accounting` block (the accounting-scope rule's input)
    monitoring: MonitoringConfig | None = None  # Slurm training fleets on AWS: exporters and Prometheus (fleetform/monitoring.py)

    @property
    def training(self) -> bool:
        return self.role == "training"

    @property
    def cloud_name(self) -> str:
        """The name cloud resources carry (EKS cluster and node group, launch template, tags): the
        fleet's first name, so a rename with `renamed_from` changes no physical name and replaces
        nothing. `renamed_from` lists earlier names, oldest first."""
        return self.renamed_from[0] if self.renamed_from else self.name

    def mig_gpu_count(self) -> int:
        """The GPUs of a node split into MIG slices: gpu_sharing.mig_gpus that the node has (mig-split reports the
        others), else every GPU (also when it has none of them: fleetform/k8s.py then splits every GPU)."""
        shape, sharing = self.shape, self.gpu_sharing
        if shape is None:
            return 0
        return len([i for i in sharing.mig_gpus if i < shape.gpu_count]) or shape.gpu_count

    def devices(self) -> tuple[int, float, str] | None:
        """(devices per node, memory of one device in GB, what a device is) as pods see them: whole
        GPUs, MIG slices, or 1/replicas shares of a time-sliced or MPS GPU. None when unknown."""
        shape, sharing = self.shape, self.gpu_sharing
        if shape is None:
            return None
        if sharing.strategy == "mig":
            profile = shape.gpu.mig.get(sharing.profile or "")
            if profile is None:
                return None
            return (self.mig_gpu_count() * profile.max_per_gpu, profile.memory_mib * 1048576 / 1e9,
                    f"{profile.name} MIG slice")
        if sharing.strategy in ("time-slicing", "mps") and sharing.replicas:
            return (shape.gpu_count * sharing.replicas, shape.gpu.memory_gb / sharing.replicas,
                    f"1/{sharing.replicas} share of a {shape.gpu.name}")
        return shape.gpu_count, shape.gpu.memory_gb, shape.gpu.name


@frozen
class Waiver:
    rule: str
    fleet: str | None
    reason: str
    path: Path


@frozen
class AllowReplace:
    """A stateful part a change may replace (`update_safety.allow_replace`): `FLEET/controller`,
    `FLEET/state-volume` or `storage/NAME`; `fleetform diff` refuses the replacement without it."""

    part: str
    reason: str
    path: Path


@frozen
class Network:
    cidr: str | None
    vpc_id: str | None
    subnet_id: str | None
    ssh_ingress_cidrs: tuple[str, ...]
    path: Path


@frozen
class Blueprint:
    name: str
    version: str
    description: str
    labels: Mapping[str, str]
    cloud: Literal["aws", "onprem"]
    region: str | None
    availability_zone: str | None
    site: str | None
    network: Network
    storage: tuple[Storage, ...]
    fleets: tuple[Fleet, ...]
    waivers: tuple[Waiver, ...]
    file: str
    sha256: str
    bases: tuple[Mapping[str, str], ...] = ()  # versioned bases merged in: name, version, sha256
    cluster: Cluster | None = None  # aws: the one EKS cluster of the inference fleets
    allow_replace: tuple[AllowReplace, ...] = ()  # update_safety.allow_replace
    pools: tuple[Pool, ...] = ()  # capacity shared by time between fleets (fleetform/pool.py)

    def storage_named(self, name: str) -> Storage | None:
        return next((s for s in self.storage if s.name == name), None)
