"""Resolve: schema-valid blueprint data -> the typed model, defaults applied, catalog facts attached.

Nothing here judges the blueprint: what is missing or inconsistent stays visible in the model
(an unknown instance type leaves `instance` None) for the rules to report with a position.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from . import (acceptance, accounting, cluster, gateway, health, k8s, kueue, login, lora, lws, mig, monitoring,
               semrouter,
               nccl, pool, ray, slinky, slurm)
from .slurm import host_count
from .lws import spans_nodes
from .catalog import Catalog, InstanceType
from .loader import Document
from .models import load_models
from .model import (
    IMPORT_DIR, AllowReplace, Autoscale, Blueprint, CacheSpec, Checkpoint, CheckpointExport, Fleet, GatewaySpec, GpuSharing, Image,
    Interconnect, KubernetesScheduler, Model, Nccl, Network, NodeShape, Partition, RayScheduler, SlurmScheduler, Size,
    SlinkyDirectory, SlinkyScheduler, Slo, Storage, Switch,
    Topology, Waiver, Weights, WholeGpus, Workload, under,
)

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's own default
DEFAULT_PORT = 8000  # vLLM's OpenAI server default
DEFAULT_SCALE_DOWN_WINDOW_S = 300  # the HPA's default scale-down stabilization
DEFAULT_DRAIN_S = 120  # long enough for a few thousand tokens at typical decode speeds
DEFAULT_PROMETHEUS_RELEASE = "kube-prometheus-stack"  # the chart's usual release name
DEFAULT_IMAGE = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
"""AWS's Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04), by its public SSM parameter. Its
release notes (https://docs.aws.amazon.com/dlami/latest/devguide/, "Base OSS Nvidia Driver GPU AMI
(Ubuntu 24.04)") list the NVIDIA driver, EFA and aws-ofi-nccl, not Slurm, munge or a Lustre client: the
bootstrap installs slurmctld/slurmd and munge from Ubuntu 24.04's archive and, where the fleet mounts
FSx for Lustre, lustre-client-modules-$(uname -r) from AWS's FSx apt repository."""
DEFAULT_IMAGE_SLURM = "23.11"
"""The Slurm release of Ubuntu 24.04's archive (slurm-wlm 23.11.4: https://packages.ubuntu.com/noble/slurm-wlm)."""


def _size(value: Any, path: tuple) -> Size | None:
    if value is None:
        return None
    if isinstance(value, int):
        return Size(value, value, False, path)
    return Size(value["min"], value["max"], True, path)


def _storage(item: dict, path: tuple) -> Storage:
    return Storage(
        name=item["name"], type=item["type"], path=path,
        capacity_gib=item.get("capacity_gib"), throughput_mb_per_tib=item.get("throughput_mb_per_tib"),
        mount_path=item.get("mount_path"), import_path=item.get("import_path"),
        versioning=item.get("versioning", True), noncurrent_expiry_days=item.get("noncurrent_expiry_days"),
    )


def _directory(data: dict | None, path: tuple) -> SlinkyDirectory | None:
    """A Slinky fleet's scheduler.directory as written (the slinky-directory rule judges it)."""
    if data is None:
        return None

    def ref(key: str, name_key: str, default_key: str) -> tuple[str, str] | None:
        item = data.get(key)
        return None if item is None else (item[name_key], item.get("key", default_key))

    return SlinkyDirectory(data.get("uri"), data.get("search_base"), data.get("start_tls", False),
                           data.get("schema", "rfc2307"), ref("tls_ca", "config_map", "ca.crt"), data.get("bind_dn"),
                           ref("bind_secret", "name", "bind.conf"), ref("sssd_secret", "name", "sssd.conf"), path,
                           data.get("id_mapping", False))


def _scheduler(data: dict | None, path: tuple) -> (SlurmScheduler | KubernetesScheduler | RayScheduler | SlinkyScheduler
                                                   | None):
    if data is None:
        return None
    if data["type"] == "slinky":
        return SlinkyScheduler(data["version"], data.get("namespace", slinky.DEFAULT_NAMESPACE),
                               data.get("cluster_name"), path, directory=_directory(data.get("directory"),
                                                                                    path + ("directory",)),
                               slurmd_image=data.get("slurmd_image"))
    if data["type"] == "ray":
        return RayScheduler(data["version"], data.get("namespace", "default"),
                            data.get("ray_version", ray.DEFAULT_RAY_VERSION), path)
    if data["type"] == "kubernetes":
        return KubernetesScheduler(data["version"], data.get("namespace", "default"),
                                   data.get("autoscaler", "keda"), data.get("prometheus_url"),
                                   data.get("prometheus_release", DEFAULT_PROMETHEUS_RELEASE), path,
                                   queue_namespaces=tuple(data.get("queue_namespaces", ())),
                                   job_image=data.get("job_image"), declared=tuple(sorted(data)))
    parts = tuple(
        Partition(p["name"], p.get("default", False), p.get("max_time"), p.get("nodes"), p.get("priority_tier"),
                  path + ("partitions", i))
        for i, p in enumerate(data.get("partitions", ()))
    )
    topo = data.get("topology")
    topology = None
    if topo is not None:
        tpath = path + ("topology",)
        switches = tuple(Switch(s["name"], s["nodes"], tpath + ("switches", i))
                         for i, s in enumerate(topo.get("switches", ())))
        topology = Topology(topo.get("nodes_per_switch"), switches, tpath)
    controller = data.get("controller", {})
    controller_image = None
    if "image" in controller:
        controller_image = _image(controller["image"], path + ("controller", "image"))
    return SlurmScheduler(data.get("cluster_name"), data.get("slurm_version"), controller.get("instance_type"),
                          controller.get("host"), controller_image, parts, topology, data.get("auth", "munge"), path)


def _image(value: str | None, path: tuple) -> Image:
    """A blueprint's image (an AMI id or an SSM parameter name), or fleetform's default."""
    if value is None:
        return Image(None, DEFAULT_IMAGE, True, path)
    if value.startswith("ami-"):
        return Image(value, None, False, path)
    return Image(None, value, False, path)


def _model(item: dict, path: tuple) -> Model:
    auto = item.get("autoscale")
    slo = item.get("slo")
    weights = item.get("weights")
    spec = load_models().find(item["model"])
    given = "model_params_billion" in item
    return Model(
        name=item["name"], image=item["image"], model=item["model"],
        # the schema asks for model_params_billion unless the model catalog lists the model
        model_params_billion=item["model_params_billion"] if given else spec.params_billion,
        precision=item["precision"],
        tensor_parallel=item["tensor_parallel"], pipeline_parallel=item.get("pipeline_parallel", 1),
        max_model_len=item.get("max_model_len"),
        gpu_memory_utilization=item.get("gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION),
        port=item.get("port", DEFAULT_PORT),
        replicas=_size(item.get("replicas", 1), path + ("replicas",)),
        max_surge=item.get("max_surge", 0),
        autoscale=None if auto is None else Autoscale(
            auto["metric"], auto["target_per_replica"],
            auto.get("scale_down_window_s", DEFAULT_SCALE_DOWN_WINDOW_S), path + ("autoscale",),
            auto.get("scale_up", {}).get("replicas"), auto.get("scale_up", {}).get("period_s"),
            auto.get("fallback_replicas"), auto.get("kv_cache_target"), auto.get("cold_start_latency_s")),
        slo=None if slo is None else Slo(
            slo["peak_qps"], slo.get("qps_per_gpu"), slo.get("latency_s"), slo.get("redundancy", 0),
            slo.get("burst_headroom", 0.0), path + ("slo",), slo.get("ttft_p90_s"),
            slo.get("input_tokens"), slo.get("output_tokens"), slo.get("itl_s")),
        hf_token_secret=item.get("hf_token_secret"),
        path=path,
        checkpoint_precision=item.get("checkpoint_precision", ""),
        weights=None if weights is None else Weights(
            weights.get("source", "hub"), weights.get("revision"), weights.get("uri"), weights.get("claim"),
            weights.get("path"), path + ("weights",)),
        extra_args=tuple(item.get("extra_args", ())),
        drain_s=item.get("drain_s", DEFAULT_DRAIN_S),
        api_key_secret=item.get("api_key_secret"),
        spec=spec, params_given=given,
        lora=_lora(item, path),
    )


def _lora(item: dict, path: tuple):
    """A model's adapters with vLLM's limits, given or derived (fleetform/lora.py derive); None without adapters."""
    adapters = item.get("adapters")
    if not adapters:
        return None
    return lora.derive(tuple(lora.Adapter(a["name"], a["source"], a.get("revision"), a["rank"], path + ("adapters", i))
                             for i, a in enumerate(adapters)),
                       item.get("max_loras"), item.get("max_lora_rank"), item.get("max_cpu_loras"), path)


def _shape(item: dict, catalog: Catalog, cloud: str) -> NodeShape | None:
    hardware = item.get("hardware")
    if hardware is not None:
        gpu = catalog.gpus[hardware["gpu"]]
        s, c, t = hardware["sockets"], hardware["cores_per_socket"], hardware["threads_per_core"]
        return NodeShape(gpu, hardware["gpu_count"], s * c * t, hardware["memory_gib"], s, c, t)
    instance = catalog.instance(item.get("instance_type", "")) if cloud == "aws" else None
    if instance is None:
        return None
    sockets, cores, threads = slurm.cpu_layout(instance.name, instance.vcpus)
    return NodeShape(instance.gpu, instance.gpu_count, instance.vcpus, instance.mem_gib, sockets, cores, threads)


def _interconnect(item: dict, path: tuple, instance: InstanceType | None) -> Interconnect | None:
    """The declared fabric, or on AWS the instance's: EFA where it has it, else TCP.
    None when it cannot be known (on-prem without one declared, an instance type not in the catalog)."""
    data = item.get("interconnect")
    if data is not None:
        return Interconnect(data["fabric"], tuple(data.get("hcas", ())), data.get("socket_ifname"),
                            data.get("gid_index"), data.get("traffic_class"), path + ("interconnect",), True)
    if instance is not None:
        return Interconnect("efa" if instance.has_efa else "tcp", (), None, None, None, path, False)
    return None


def _fleet(item: dict, path: tuple, catalog: Catalog, cloud: str) -> Fleet:
    role = item["role"]
    instance = catalog.instance(item.get("instance_type", "")) if cloud == "aws" else None
    nodes = _size(item.get("nodes"), path + ("nodes",))
    if nodes is None and item.get("hosts"):
        count = host_count(item["hosts"])
        nodes = Size(count, count, False, path + ("hosts",))
    capacity = item.get("capacity", {"type": "on-demand"})
    sharing = item.get("gpu_sharing", {"strategy": "none"})
    nccl = item.get("nccl")
    workload = item.get("workload")
    checkpoint = item.get("checkpoint")
    return Fleet(
        name=item["name"], role=role, path=path,
        instance_type=item.get("instance_type"), instance=instance,
        # AWS training fleets always have an image (the default one if they name none); elsewhere an
        # image is only kept to be reported by the image-applies rule
        image=(_image(item.get("image"), path + ("image",)) if cloud == "aws" and role == "training"
               else _image(item["image"], path + ("image",)) if "image" in item else None),
        shape=_shape(item, catalog, cloud), nodes=nodes, hosts=item.get("hosts"),
        capacity_type=capacity["type"], reservation_id=capacity.get("reservation_id"),
        # a replica that spans nodes (fleetform/lws.py) talks NCCL between them: one placement group, as training
        placement=item.get("placement", "cluster" if role == "training" or spans_nodes(item, instance) else "none"),
        storage=tuple(item.get("storage", ())),
        scheduler=_scheduler(item.get("scheduler"), path + ("scheduler",)),
        interconnect=_interconnect(item, path, instance),
        nccl=None if nccl is None else Nccl(
            nccl.get("debug"),
            MappingProxyType({k: _env_text(v) for k, v in (nccl.get("env") or {}).items()}),
            path + ("nccl",)),
        workload=None if workload is None else Workload(
            workload["model_params_billion"], workload["precision"], workload.get("optimizer"),
            workload.get("tokens_billion"), workload.get("mfu"), path + ("workload",)),
        checkpoint=None if checkpoint is None else Checkpoint(
            checkpoint["every_minutes"], checkpoint.get("path"), path + ("checkpoint",)),
        gpu_sharing=GpuSharing(sharing["strategy"], sharing.get("profile"), sharing.get("replicas"),
                               sharing.get("mig_strategy", "single"), path + ("gpu_sharing",),
                               tuple(sharing.get("mig_gpus", ())), _whole_gpus(sharing, path + ("gpu_sharing",))),
        models=tuple(_model(m, path + ("models", i)) for i, m in enumerate(item.get("models", ()))),
        renamed_from=tuple(item.get("renamed_from", ())),
        gateway=None if "gateway" not in item else GatewaySpec(
            item["gateway"].get("request_timeout_s", 300), path + ("gateway",),
            item["gateway"].get("expose", "cluster"), item["gateway"].get("prefix_routing", "approximate"),
            item["gateway"].get("proxy_replicas")),
        semantic_routing=semrouter.spec(item["semantic_routing"], path + ("semantic_routing",))
        if "semantic_routing" in item else None,
        cache=None if "cache" not in item else CacheSpec(
            item["cache"].get("storage_class"), item["cache"].get("size_gib"), path + ("cache",)),
    )


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _checkpoint_export(fleet: Fleet, storage: tuple[Storage, ...]) -> CheckpointExport | None:
    """The export of a checkpoint path on an attached FSx for Lustre file system to the fleet's first
    attached bucket; None when there is none to make (the checkpoint-location rule says why)."""
    ckpt = fleet.checkpoint
    if ckpt is None or not ckpt.location or ckpt.location.startswith("s3://"):
        return None
    attached = [s for name in fleet.storage for s in storage if s.name == name]
    bucket = next((s for s in attached if s.type == "s3"), None)
    for fs in attached:
        if fs.type != "fsx-lustre" or not fs.mount_path or not under(ckpt.location, fs.mount_path):
            continue
        directory = "/" + posixpath.relpath(posixpath.normpath(ckpt.location), posixpath.normpath(fs.mount_path))
        if bucket is None or directory == "/." or (fs.import_path and under(directory, IMPORT_DIR)):
            return None
        return CheckpointExport(fs.name, directory, bucket.name, directory.strip("/") + "/")
    return None


def _derive(fleet: Fleet, meta: dict, region: str | None, cloud: str) -> Fleet:
    """Attach what the render stage prints for a fleet: its Slurm config and NCCL environment, or
    its Kubernetes objects."""
    name = meta["name"]
    if not fleet.training:
        if lws.multinode(fleet):  # its replicas' pods talk NCCL across nodes: the fleet's nccl.env, as training's
            fleet = replace(fleet, nccl_env=nccl.environment(fleet))
        kube = k8s.build(fleet, name, meta.get("labels", {}), region)
        fleet = replace(fleet, kube=kube, inference_gateway=gateway.build(fleet, kube))
        return replace(fleet, split=mig.build(fleet, name))
    return replace(fleet, slurm=slurm.build(fleet, name, region, cloud), nccl_env=nccl.environment(fleet))


def resolve(doc: Document, catalog: Catalog) -> Blueprint:
    """Build the model of a schema-valid document."""
    data = doc.data
    meta, provider = data["metadata"], data["provider"]
    cloud = provider["cloud"]
    net = provider.get("network", {})
    storage = tuple(_storage(s, ("storage", i)) for i, s in enumerate(data.get("storage", ())))
    fleets = tuple(_derive(_fleet(f, ("fleets", i), catalog, cloud), meta, provider.get("region"), cloud)
                   for i, f in enumerate(data["fleets"]))
    fleets = tuple(replace(f, checkpoint=replace(f.checkpoint, export=_checkpoint_export(f, storage)))
                   if f.checkpoint is not None else f for f in fleets)
    fleets = tuple(replace(f, kueue=kueue.build(f, meta["name"], f.nccl_env, storage)) if f.training and cloud == "aws"
                   else f for f in fleets)
    fleets = tuple(replace(f, ray=ray.build(f, storage)) if cloud == "aws" and f.training else f for f in fleets)
    fleets = tuple(replace(f, slinky=slinky.build(f, f.nccl_env, storage)) if cloud == "aws" and f.training else f
                   for f in fleets)
    fleets = tuple(replace(f, health=health.build(f, item.get("health"), storage, cloud),
                           health_declared="health" in item, health_keys=tuple(item.get("health") or ()),
                           auto_repair=(item.get("health") or {}).get("auto_repair", health.DEFAULT_AUTO_REPAIR))
                   for f, item in zip(fleets, data["fleets"]))
    fleets = tuple(replace(f, login=login.build(f, item, storage)) for f, item in zip(fleets, data["fleets"]))
    fleets = tuple(replace(f, acceptance=acceptance.build(f, item.get("acceptance"), f.health, cloud),
                           acceptance_declared="acceptance" in item, model_checks=acceptance.model_checks(f.kube))
                   for f, item in zip(fleets, data["fleets"]))
    fleets = tuple(replace(f, teams=accounting.teams(item.get("scheduler"), ("fleets", i, "scheduler")),
                           accounting_declared="accounting" in (item.get("scheduler") or {}),
                           accounting=accounting.build(f, item.get("scheduler"), ("fleets", i, "scheduler"), cloud))
                   for i, (f, item) in enumerate(zip(fleets, data["fleets"])))
    fleets = tuple(replace(f, monitoring=monitoring.build(f)) for f in fleets)
    bp = Blueprint(
        name=meta["name"], version=meta["version"], description=meta.get("description", ""),
        labels=MappingProxyType(dict(meta.get("labels", {}))),
        cloud=cloud, region=provider.get("region"), availability_zone=provider.get("availability_zone"),
        site=provider.get("site"),
        network=Network(net.get("cidr"), net.get("vpc_id"), net.get("subnet_id"),
                        tuple(net.get("ssh_ingress_cidrs", ())), ("provider", "network")),
        storage=storage, fleets=fleets,
        waivers=tuple(Waiver(w["rule"], w.get("fleet"), w["reason"], ("waivers", i))
                      for i, w in enumerate(data.get("waivers", ()))),
        file=doc.file, sha256=doc.sha256,
        bases=tuple(MappingProxyType(dict(b)) for b in doc.bases),
        pools=tuple(pool.build(p, ("pools", i)) for i, p in enumerate(data.get("pools", ()))),
        allow_replace=tuple(AllowReplace(a["part"], a["reason"], ("update_safety", "allow_replace", i))
                            for i, a in enumerate(data.get("update_safety", {}).get("allow_replace", ()))),
    )
    bp = replace(bp, pools=tuple(replace(p, handover=pool.handover(p, bp.fleets)) for p in bp.pools))
    bp = replace(bp, pools=tuple(replace(p, lead_min=pool.warmup_minutes(p, bp.fleets),
                                         lag_min=pool.release_minutes(p, bp.fleets)) for p in bp.pools))
    bp = replace(bp, fleets=tuple(_pool_cron(_pool_edge(f, bp.pools), bp.pools) for f in bp.fleets))
    return replace(bp, cluster=cluster.build(bp, provider.get("eks")))


def _pool_edge(fleet: Fleet, pools: tuple) -> Fleet:
    """An AWS Slurm training fleet of a pool gets what its controller's bin/pool-edge needs."""
    if not fleet.training or fleet.slurm is None or fleet.slurm.ec2 is None:
        return fleet
    owner = next((p for p in pools if p.share(fleet.name) is not None), None)
    if owner is None:
        return fleet
    import hostlist

    return replace(fleet, pool_edge=pool.edge(owner, fleet, hostlist.expand_hostlist(fleet.slurm.all_nodes)))


def _pool_cron(fleet: Fleet, pools: tuple) -> Fleet:
    """An inference fleet of a pool on Kubernetes: its node group follows the pool's schedule (scheduled actions on
    its Auto Scaling group), and with KEDA each model's minimum follows the windows (cron triggers)."""
    if fleet.training or fleet.kube is None:
        return fleet
    owner = next((p for p in pools if p.share(fleet.name) is not None), None)
    if owner is None:
        return fleet
    fleet = replace(fleet, pool_scaling=pool.scaling_actions(owner, fleet.name))
    crons = pool.cron_windows(owner, fleet)
    servers = tuple(replace(s, autoscaling=replace(s.autoscaling, cron=crons.get(s.name, ())))
                    if s.autoscaling is not None and s.autoscaling.kind == "keda" else s for s in fleet.kube.servers)
    return replace(fleet, kube=replace(fleet.kube, servers=servers))


def _whole_gpus(sharing: dict, path: tuple) -> WholeGpus | None:
    whole = sharing.get("whole_gpus")
    if whole is None:
        return None
    return WholeGpus(tuple(whole["namespaces"]), whole.get("gpus_per_job"), whole.get("job_image"),
                     path + ("whole_gpus",))
