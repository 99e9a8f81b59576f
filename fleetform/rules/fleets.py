"""Rules over each fleet: nodes, instance types, capacity, placement and role."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..catalog import load_catalog
from ..model import Blueprint, Fleet, Size
from ..slurm import MAX_HOSTS as MAX_NODES  # the largest fleet fleetform renders
from . import Reporter, did_you_mean, rule


@rule("instance-type", "error", "an AWS fleet names a GPU instance type in fleetform's catalog")
def instance_type(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud != "aws":
        return
    catalog = load_catalog()
    for fleet in bp.fleets:
        if fleet.instance_type is None:
            report(fleet.path, f"fleet '{fleet.name}' names no instance_type",
                   "add e.g. `instance_type: p5.48xlarge`; `fleetform catalog` lists the choices")
        elif fleet.instance is None:
            known = uncataloged_instances().get(fleet.instance_type)
            if known is None:
                report(fleet.path + ("instance_type",), f"'{fleet.instance_type}' is not a GPU instance type in the catalog",
                       did_you_mean(fleet.instance_type, catalog.instances, "see `fleetform catalog`; known"))
                continue
            total = known["gpu_count"] * known["gpu_gb_each"]
            report(fleet.path + ("instance_type",),
                   f"'{fleet.instance_type}' ({known['gpu_count']} x NVIDIA {known['gpu']}, {known['gpu_gb_each']} GB each) "
                   "is an EC2 GPU instance type that fleetform's catalog does not list: the catalog holds A10G and "
                   "newer GPUs (G5, G6, G6e, P4d and later), whose prices, network cards and EFA it knows",
                   f"nearest catalogued types with at least its {total} GB of GPU memory: "
                   + ", ".join(f"{i.name} ({i.gpu_count} x {i.gpu.name}, {i.gpu_count * i.gpu.memory_gb:.0f} GB)"
                               for i in nearest_by_gpu_memory(catalog, total))
                   + "; `fleetform catalog` lists them all")


NEAREST = 4
"""Catalogued instance types an uncatalogued type's finding names at most."""


@lru_cache(maxsize=1)
def uncataloged_instances() -> dict[str, dict]:
    """EC2 GPU instance types fleetform's catalog leaves out, with their GPUs (providers/aws/uncataloged-instances.json)."""
    text = resources.files("fleetform.providers.aws").joinpath("uncataloged-instances.json").read_text(encoding="utf-8")
    return {row["instance_type"]: row for row in json.loads(text)["rows"]}


def nearest_by_gpu_memory(catalog, total_gb: float) -> list:
    """The catalogued instance types with at least `total_gb` of GPU memory in all, least memory first, then cheapest."""
    bigger = [i for i in catalog.instances.values() if i.gpu_count * i.gpu.memory_gb >= total_gb]
    return sorted(bigger, key=lambda i: (round(i.gpu_count * i.gpu.memory_gb), i.price_usd_hr is None,
                                         i.price_usd_hr or 0.0, i.name))[:NEAREST]


@rule("onprem-nodes", "error", "an on-prem fleet lists its hosts and hardware, and no cloud-only fields")
def onprem_nodes(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        shape_given = fleet.shape is not None and fleet.instance is None
        if bp.cloud == "aws":
            if fleet.hosts is not None:
                report(fleet.path + ("hosts",), "hosts name existing on-prem machines; AWS nodes are created",
                       "remove hosts, or set provider.cloud: onprem")
            if shape_given:
                report(fleet.path + ("hardware",), "hardware describes on-prem nodes; AWS nodes take it from instance_type",
                       "remove hardware")
            continue
        if fleet.instance_type is not None:
            report(fleet.path + ("instance_type",), "instance_type applies to cloud: aws",
                   "describe on-prem nodes with hardware: {gpu, gpu_count, sockets, ...}")
        if fleet.hosts is None:
            report(fleet.path, f"on-prem fleet '{fleet.name}' lists no hosts", "add e.g. `hosts: dgx-[01-06]`")
        if fleet.shape is None:
            report(fleet.path, f"on-prem fleet '{fleet.name}' has no hardware",
                   "add hardware: {gpu: H100-80GB, gpu_count: 8, sockets: 2, cores_per_socket: 56, "
                   "threads_per_core: 2, memory_gib: 2048}")
        if fleet.capacity_type != "on-demand" or fleet.reservation_id is not None:
            report(fleet.path + ("capacity",), "capacity applies to cloud: aws", "remove capacity")


def _check_size(report: Reporter, size: Size, what: str) -> None:
    if size.elastic and size.min > size.max:
        report(size.path + ("min",), f"{what} min {size.min} is above max {size.max}", "make min <= max")


@rule("size-range", "error", "node and replica counts have min <= max, and on-prem counts match the hosts")
def size_range(bp: Blueprint, report: Reporter) -> None:
    from ..slurm import host_count

    for fleet in bp.fleets:
        if fleet.nodes is None:
            if bp.cloud == "aws":
                report(fleet.path, f"fleet '{fleet.name}' does not say how many nodes it has",
                       "add `nodes: N`, or `nodes: {min: N, max: M}` for an elastic fleet")
        else:
            _check_size(report, fleet.nodes, "nodes")
            if fleet.nodes.max > MAX_NODES:
                report(fleet.nodes.path, f"{fleet.nodes.max:,} nodes is more than the {MAX_NODES:,} fleetform renders",
                       "split the fleet")
        if fleet.hosts is not None and host_count(fleet.hosts) == 0:
            report(fleet.path + ("hosts",), f"hosts '{fleet.hosts}' names no host",
                   "write ranges low to high, e.g. dgx-[01-06]")
        elif fleet.hosts is not None and fleet.nodes is not None and fleet.nodes.path[-1] == "nodes":
            hosts = host_count(fleet.hosts)
            if hosts != fleet.nodes.max or fleet.nodes.elastic:
                report(fleet.nodes.path, f"nodes says {fleet.nodes.max} but hosts '{fleet.hosts}' names {hosts}",
                       "on-prem fleets are fixed: drop nodes, or make it match the hosts")
        for model in fleet.models:
            _check_size(report, model.replicas, "replicas")


@rule("efa-multinode", "warning", "multi-node training runs over EFA or InfiniBand, not plain TCP")
def efa_multinode(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if not fleet.training or fleet.nodes is None or fleet.nodes.max < 2 or fleet.interconnect is None:
            continue
        if fleet.interconnect.fabric == "tcp":
            if fleet.instance is not None and not fleet.instance.has_efa:
                report(fleet.path + ("instance_type",),
                       f"{fleet.nodes.max}-node training on {fleet.instance.name}, which has no EFA: "
                       "all-reduce between nodes runs over TCP",
                       "choose an instance with EFA (p5, p4d, g6e.8xlarge and up; see `fleetform catalog`)")
            else:
                report(fleet.interconnect.path, f"{fleet.nodes.max}-node training over plain TCP",
                       "use fabric efa, infiniband or roce where the nodes have it")


@rule("spot-training", "warning", "training on spot capacity checkpoints often enough to survive interruptions")
def spot_training(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if bp.cloud == "aws" and fleet.training and fleet.capacity_type == "spot":
            detail = (f"each reclaim loses up to {fleet.checkpoint.every_minutes} min of work since the last checkpoint"
                      if fleet.checkpoint else "this fleet writes no checkpoints, so a reclaim loses all progress")
            report(fleet.path + ("capacity", "type"),
                   f"spot instances can be reclaimed at two minutes' notice; {detail}",
                   "checkpoint to durable storage often (checkpoint.every_minutes), or use on-demand, "
                   "a reservation or a Capacity Block")


@rule("reservation-id", "error", "reservation and capacity-block capacity name their reservation id; others do not")
def reservation_id(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        needs = fleet.capacity_type in ("reservation", "capacity-block")
        if needs and fleet.reservation_id is None:
            report(fleet.path + ("capacity",), f"capacity type {fleet.capacity_type} needs reservation_id",
                   "add `reservation_id: cr-...`, the id EC2 gave the reservation")
        elif not needs and fleet.reservation_id is not None:
            report(fleet.path + ("capacity", "reservation_id"),
                   f"reservation_id does nothing with capacity type {fleet.capacity_type}",
                   "remove it, or set type: reservation or capacity-block")


@rule("placement-zone", "error", "cluster placement and EFA keep every node in one availability zone")
def placement_zone(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud != "aws" or bp.availability_zone is not None:
        return
    for fleet in bp.fleets:
        if fleet.placement == "cluster":
            report(("provider",), f"fleet '{fleet.name}' uses cluster placement, which needs one availability zone",
                   f"add provider.availability_zone, e.g. {bp.region}a")
            return


SPREAD_MAX_PER_ZONE = 7
"""A spread placement group (rack level) holds at most seven running instances per availability zone
and group (Amazon EC2 User Guide, "Placement strategies", Spread placement groups; "Placement group
rules and limitations"); a launch beyond them fails with InsufficientInstanceCapacity."""


@rule("spread-placement", "error", "a fleet with spread placement holds at most 7 nodes (its one availability zone)")
def spread_placement(bp: Blueprint, report: Reporter) -> None:
    """fleetform puts a fleet's nodes in one subnet, so one availability zone: its spread placement
    group can run 7 of them, and the eighth never launches."""
    if bp.cloud != "aws":
        return
    for fleet in bp.fleets:
        if fleet.placement == "spread" and fleet.nodes is not None and fleet.nodes.max > SPREAD_MAX_PER_ZONE:
            report(fleet.path + ("placement",),
                   f"spread placement runs at most {SPREAD_MAX_PER_ZONE} instances per availability zone; fleet "
                   f"'{fleet.name}' may have {fleet.nodes.max} nodes in one zone, and the rest never launch",
                   f"use placement: cluster or none, or at most {SPREAD_MAX_PER_ZONE} nodes")


def _scheduler_hint(fleet: Fleet) -> str:
    if fleet.training:
        return "add scheduler: {type: slurm, partitions: [{name: gpu, default: true}]}"
    return f'add scheduler: {{type: kubernetes, version: "{suggested_k8s_version()}", namespace: ..., autoscaler: keda}}'


def suggested_k8s_version() -> str:
    """The version a hint suggests: the newest in EKS standard support that fleetform renders for
    (fleetform/eks_versions.py), else the newest it renders for."""
    from ..eks_versions import newest_in_standard_support, today
    from .inference import K8S_MAX

    try:
        return newest_in_standard_support(today(), K8S_MAX) or ".".join(map(str, K8S_MAX))
    except ValueError:  # FLEETFORM_TODAY is no date: eks-version says so
        return ".".join(map(str, K8S_MAX))


@rule("role-scheduler", "error",
      "training fleets are scheduled by Slurm, Kubernetes, Ray or Slinky, inference fleets by Kubernetes")
def role_scheduler(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        want = "slurm" if fleet.training else "kubernetes"
        if fleet.scheduler is None:
            report(fleet.path, f"{fleet.role} fleet '{fleet.name}' has no scheduler", _scheduler_hint(fleet))
        elif fleet.training and fleet.scheduler.type in ("kubernetes", "ray", "slinky"):
            continue  # Kueue and JobSet (fleetform/kueue.py), KubeRay (fleetform/ray.py) or Slinky (fleetform/slinky.py)
        elif fleet.scheduler.type != want:
            report(fleet.scheduler.path + ("type",),
                   f"a {fleet.role} fleet is scheduled by {want}, not {fleet.scheduler.type}",
                   "split training and serving into separate fleets")


@rule("role-fields", "error", "each fleet uses only the sections of its role")
def role_fields(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        if fleet.training:
            if fleet.models:
                report(fleet.path + ("models",), "models are served by inference fleets",
                       "move them to a fleet with role: inference")
            if fleet.gpu_sharing.strategy != "none":
                report(fleet.gpu_sharing.path, "GPU sharing applies to inference fleets",
                       "training takes whole GPUs; remove gpu_sharing")
        else:
            for field in ("workload", "checkpoint", "nccl"):
                section = getattr(fleet, field)
                if section is not None:
                    report(section.path, f"{field} applies to training fleets", f"remove {field}")
            if not fleet.models:
                report(fleet.path, f"inference fleet '{fleet.name}' serves no models",
                       "add models: [{name, image, model, model_params_billion, precision, tensor_parallel}]")


@rule("interconnect", "error", "the fabric exists where the fleet runs: EFA on AWS instances that have it, InfiniBand or RoCE on-prem")
def interconnect(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        net = fleet.interconnect
        if net is None:
            if bp.cloud == "onprem" and fleet.training:
                report(fleet.path, f"on-prem training fleet '{fleet.name}' declares no interconnect",
                       "add interconnect: {fabric: infiniband, hcas: [mlx5_0, ...], socket_ifname: eth0}")
            continue
        if not net.declared:
            continue
        path = net.path + ("fabric",)
        if bp.cloud == "aws" and net.fabric in ("infiniband", "roce"):
            report(path, f"AWS instances have no {net.fabric}", "use fabric efa (or tcp); EFA carries NCCL on AWS")
        elif bp.cloud == "aws" and net.fabric == "efa" and fleet.instance is not None and not fleet.instance.has_efa:
            report(path, f"{fleet.instance.name} has no EFA interface", "choose an instance with EFA, or fabric tcp")
        elif bp.cloud == "onprem" and net.fabric == "efa":
            report(path, "EFA exists only on AWS", "use infiniband, roce or tcp")
        if net.hcas and net.fabric not in ("infiniband", "roce"):
            report(net.path + ("hcas",), f"hcas name RDMA devices; fabric {net.fabric} uses none", "remove hcas")
        for field in ("gid_index", "traffic_class"):
            if getattr(net, field) is not None and net.fabric != "roce":
                report(net.path + (field,), f"{field} applies to fabric roce", f"remove {field}")



@rule("image-slurm-version", "error", "with fleetform's default image, a Slurm fleet runs the Slurm of its archive")
def image_slurm_version(bp: Blueprint, report: Reporter) -> None:
    """The default image (Ubuntu 24.04) installs Slurm from Ubuntu's archive, which has one release:
    another slurm_version would render files for a Slurm the nodes do not run."""
    from ..resolve import DEFAULT_IMAGE_SLURM
    from ..slurm import SLURM_VERSIONS

    for fleet in bp.fleets:
        scheduler = fleet.scheduler
        if bp.cloud != "aws" or not fleet.training or fleet.image is None or getattr(scheduler, "type", "") != "slurm":
            continue
        version = scheduler.slurm_version
        release = ".".join(version.split(".")[:2]) if version else DEFAULT_IMAGE_SLURM
        defaults = [i for i in (fleet.image, scheduler.controller_image) if i is not None and i.default]
        if release != DEFAULT_IMAGE_SLURM and release in SLURM_VERSIONS and defaults:  # unknown: slurm-version
            which = "the nodes" if fleet.image.default else "the controller"
            report(scheduler.path + ("slurm_version",),
                   f"Slurm {version}, but {which} boot fleetform's default image (Ubuntu 24.04), which runs "
                   f"Slurm {DEFAULT_IMAGE_SLURM}",
                   f"name an image with Slurm {release} (an AMI id or SSM parameter) in the fleet's `image:`, "
                   f"or use slurm_version: \"{DEFAULT_IMAGE_SLURM}\"")


@rule("image-applies", "error", "an image is named for the nodes and controller of AWS training fleets only")
def image_applies(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        aws_training = bp.cloud == "aws" and fleet.training
        where = "an on-prem fleet" if bp.cloud != "aws" else "an inference fleet (its EKS node group has its own image)"
        if fleet.image is not None and not aws_training:
            report(fleet.image.path, f"image does not apply to {where}", "remove image")
        controller_image = getattr(fleet.scheduler, "controller_image", None)
        if controller_image is not None and not aws_training:
            report(controller_image.path, f"image does not apply to {where}", "remove image")
