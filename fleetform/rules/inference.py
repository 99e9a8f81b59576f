"""Rules over inference fleets: tensor parallelism, memory, autoscaling and GPU sharing."""

from __future__ import annotations

import math

from ..model import Blueprint, Model
from . import Reporter, did_you_mean, rule

KV_CACHE_MIN_SHARE = 0.2
"""Share of the memory vLLM may use that should be left for the KV cache after the weights."""

K8S_MIN = (1, 25)
K8S_MAX = (1, 37)
"""Kubernetes versions fleetform renders manifests for and validates them against."""


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _inference(bp: Blueprint):
    return [f for f in bp.fleets if not f.training]


@rule("tensor-parallel", "error", "tensor_parallel divides the GPUs of a node; shared GPUs take tensor_parallel 1")
def tensor_parallel(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        if fleet.shape is None:
            continue
        gpus = fleet.shape.gpu_count
        for model in fleet.models:
            tp = model.tensor_parallel
            path = model.path + ("tensor_parallel",)
            if fleet.gpu_sharing.strategy != "none" and tp != 1:
                report(path, f"tensor_parallel {tp} on {fleet.gpu_sharing.strategy} devices",
                       "vLLM cannot split a model across shared GPU slices; use tensor_parallel: 1 "
                       "or a fleet without gpu_sharing")
            elif tp > gpus or gpus % tp:
                fits = [d for d in range(1, gpus + 1) if gpus % d == 0]
                report(path, f"tensor_parallel {tp} does not divide the {gpus} GPUs of a node",
                       f"use one of {', '.join(map(str, fits))}")


def _usable_gb(model: Model, device_gb: float) -> float:
    return model.tensor_parallel * device_gb * model.gpu_memory_utilization


@rule("model-fits", "error", "a model's weights fit the memory of its tensor_parallel GPUs")
def model_fits(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        devices = fleet.devices()
        if devices is None:
            continue
        _, device_gb, device = devices
        for model in fleet.models:
            usable = _usable_gb(model, device_gb)
            if model.weights_gb > usable:
                report(model.path + ("tensor_parallel",),
                       f"{model.model_params_billion:g}B parameters in {model.precision} take {model.weights_gb:.1f} GB, "
                       f"more than the {usable:.1f} GB vLLM may use on {model.tensor_parallel} x {device} "
                       f"({device_gb:.1f} GB x {model.gpu_memory_utilization:g})",
                       "raise tensor_parallel, pick a GPU with more memory, or serve a quantized precision")


@rule("kv-cache-room", "warning", f"weights leave at least {KV_CACHE_MIN_SHARE:.0%} of usable GPU memory for the KV cache")
def kv_cache_room(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        devices = fleet.devices()
        if devices is None:
            continue
        _, device_gb, device = devices
        for model in fleet.models:
            usable = _usable_gb(model, device_gb)
            room = usable - model.weights_gb
            if 0 <= room < KV_CACHE_MIN_SHARE * usable:
                report(model.path + ("tensor_parallel",),
                       f"weights take {model.weights_gb:.1f} of {usable:.1f} GB, leaving {room:.1f} GB "
                       f"({room / usable:.0%}) for the KV cache",
                       f"keep at least {KV_CACHE_MIN_SHARE:.0%} for the KV cache: raise tensor_parallel "
                       "or use a GPU with more memory")


@rule("autoscaler-reach", "error", "the fleet's largest size holds every model at its maximum replicas")
def autoscaler_reach(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        devices = fleet.devices()
        if devices is None or fleet.nodes is None or not fleet.models:
            continue
        per_node, _, device = devices
        if any(per_node % m.tensor_parallel for m in fleet.models):
            continue  # tensor-parallel reports the model that does not fit a node
        wanted = sum(m.replicas.max * m.tensor_parallel for m in fleet.models)
        have = fleet.nodes.max * per_node
        if wanted > have:
            detail = " + ".join(f"{m.replicas.max} x {m.tensor_parallel}" for m in fleet.models)
            report(fleet.nodes.path,
                   f"at most {_count(fleet.nodes.max, 'node')} x {per_node} = {have} devices ({device}), "
                   f"but the models' maximum replicas need {detail} = {wanted}",
                   f"raise nodes.max to {math.ceil(wanted / per_node)} or lower replicas.max")


@rule("autoscale-config", "error", "autoscaled replicas ({min, max}) have an autoscale target and an autoscaler")
def autoscale_config(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        scheduler = fleet.scheduler
        autoscaler = scheduler.autoscaler if scheduler is not None and scheduler.type == "kubernetes" else None
        for model in fleet.models:
            if not model.replicas.elastic:
                continue
            if model.autoscale is None:
                report(model.replicas.path, f"replicas of '{model.name}' range from {model.replicas.min} to "
                       f"{model.replicas.max}, but nothing says when to scale",
                       "add autoscale: {metric: queue_depth, target_per_replica: 5}")
            elif autoscaler == "none":
                report(scheduler.path + ("autoscaler",), f"model '{model.name}' autoscales, but the fleet's autoscaler is none",
                       "set autoscaler: keda or hpa, or give fixed replicas")


@rule("slo-replicas", "warning", "replicas.min serves the SLO's peak with redundancy and burst headroom")
def slo_replicas(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        for model in fleet.models:
            slo = model.slo
            if slo is None:
                continue
            base = math.ceil(slo.peak_qps / slo.qps_per_gpu)
            gpus = math.ceil((base + slo.redundancy) * (1 + slo.burst_headroom))
            replicas = math.ceil(gpus / model.tensor_parallel)
            if model.replicas.min < replicas:
                report(model.replicas.path,
                       f"the SLO needs {replicas} replicas: {slo.peak_qps:g} QPS / {slo.qps_per_gpu:g} per GPU = {base} GPUs, "
                       f"+{slo.redundancy} spare = {base + slo.redundancy}, x{1 + slo.burst_headroom:g} burst = {gpus} GPUs, "
                       f"/ {model.tensor_parallel} per replica; replicas.min is {model.replicas.min}",
                       f"raise replicas.min to {replicas}")


@rule("gpu-sharing", "error", "MIG names a profile of the fleet's GPU; time-slicing and MPS share each GPU 2+ ways")
def gpu_sharing(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        sharing = fleet.gpu_sharing
        path = sharing.path
        if sharing.strategy == "mig":
            if sharing.replicas is not None:
                report(path + ("replicas",), "replicas applies to time-slicing and mps",
                       "MIG slices are set by the profile; remove replicas")
            if fleet.shape is None:
                continue
            gpu = fleet.shape.gpu
            if not gpu.mig:
                report(path + ("strategy",), f"{gpu.name} does not support MIG",
                       "MIG needs an A100, H100 or H200 (p4d, p4de, p5, p5e, p5en); or use time-slicing")
            elif sharing.profile is None:
                report(path, "MIG needs a profile", f"add profile, one of: {', '.join(gpu.mig)}")
            elif sharing.profile not in gpu.mig:
                report(path + ("profile",), f"'{sharing.profile}' is not a MIG profile of {gpu.name}",
                       did_you_mean(sharing.profile, gpu.mig, f"{gpu.name} profiles"))
        elif sharing.strategy in ("time-slicing", "mps"):
            if sharing.profile is not None:
                report(path + ("profile",), "profile applies to MIG", f"remove it for {sharing.strategy}")
            if sharing.replicas is None or sharing.replicas < 2:
                got = "no replicas" if sharing.replicas is None else f"replicas {sharing.replicas}"
                report(path + ("replicas",) if sharing.replicas is not None else path,
                       f"{sharing.strategy} with {got} shares nothing", "set replicas: 2 or more pods per GPU")
        else:
            for field in ("profile", "replicas"):
                if getattr(sharing, field) is not None:
                    report(path + (field,), f"{field} does nothing without GPU sharing",
                           "remove it, or choose a strategy")


@rule("k8s-version", "error", "the Kubernetes version is one fleetform renders and validates manifests for")
def k8s_version(bp: Blueprint, report: Reporter) -> None:
    low, high = ".".join(map(str, K8S_MIN)), ".".join(map(str, K8S_MAX))
    for fleet in bp.fleets:
        scheduler = fleet.scheduler
        if scheduler is None or scheduler.type != "kubernetes":
            continue
        if not K8S_MIN <= scheduler.minor <= K8S_MAX:
            report(scheduler.path + ("version",), f"Kubernetes {scheduler.version} is outside {low} to {high}",
                   f"fleetform renders and validates manifests for Kubernetes {low} to {high}")
