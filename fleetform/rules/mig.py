"""Rules of a node split by GPU (gpu_sharing.mig_gpus): some GPUs of each node in MIG slices for the models,
the others whole for training jobs queued by Kueue (fleetform/k8s.py, fleetform/mig.py). The split must add up:
GPUs the node has, each once, some left whole where training asks for them, and the GPU Operator's mixed
strategy, the only one that advertises slices and whole GPUs side by side."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


def _split(bp: Blueprint):
    return [f for f in bp.fleets if f.role == "inference" and (f.gpu_sharing.mig_gpus or f.gpu_sharing.whole_gpus)]


@rule("mig-split", "error", "a node split by GPU names GPUs the node has, uses the mixed MIG strategy, and gives "
      "training no more whole GPUs than are left")
def mig_split(bp: Blueprint, report: Reporter) -> None:
    for fleet in _split(bp):
        sharing = fleet.gpu_sharing
        path = sharing.path
        if sharing.strategy != "mig":
            report(path + ("strategy",), "mig_gpus and whole_gpus split a node's GPUs between MIG slices and whole "
                   f"GPUs, which strategy {sharing.strategy} does not do", "set strategy: mig and mig_strategy: mixed")
            continue
        if sharing.whole_gpus is not None and bp.cloud == "aws":
            _whole_gpus_namespaces(bp, fleet, sharing.whole_gpus, report)
        if sharing.whole_gpus is not None and not sharing.mig_gpus:
            report(path + ("whole_gpus",), "whole_gpus needs mig_gpus: without it every GPU is split into slices "
                   "and none is left whole", "list the GPUs to split in mig_gpus")
            continue
        if sharing.mig_strategy != "mixed":
            # single: the device plugin advertises every MIG device as nvidia.com/gpu and expects every GPU of
            # the node to have the same MIG layout (NVIDIA k8s-device-plugin README, MIG strategies); a node with
            # whole GPUs beside slices advertises nothing the models or the jobs could tell apart
            report(path + ("mig_strategy",),  # its default, single, is reported at gpu_sharing
                   "a node split between MIG slices and whole GPUs needs the mixed MIG strategy: under single "
                   "the slices and the whole GPUs are one resource, nvidia.com/gpu",
                   "set mig_strategy: mixed")
        shape = fleet.shape
        if shape is None:
            continue
        count = shape.gpu_count
        beyond = sorted(i for i in sharing.mig_gpus if i >= count)
        if beyond:
            # mig-parted matches a `devices` index against the node's GPUs only (NVIDIA/mig-parted
            # api/spec/v1/helpers.go MatchesDevices): a GPU the node lacks is never split, and never said so
            report(path + ("mig_gpus",), f"GPU {', '.join(map(str, beyond))} of mig_gpus is beyond a "
                   f"{fleet.instance_type} node's {count} GPUs (indices 0-{count - 1})",
                   f"use indices 0-{count - 1}")
        whole = count - len([i for i in sharing.mig_gpus if i < count])
        job = sharing.whole_gpus
        if job is None:
            continue
        if whole == 0:
            report(path + ("mig_gpus",), f"mig_gpus splits all {count} GPUs of a {fleet.instance_type} node: "
                   "none is left whole for whole_gpus' training jobs", "leave some GPUs out of mig_gpus")
        elif job.gpus_per_job is not None and job.gpus_per_job > whole:
            report(job.path + ("gpus_per_job",), f"a training pod asks for {job.gpus_per_job} whole GPUs, but a "
                   f"{fleet.instance_type} node has {whole} left whole ({count} GPUs, {count - whole} in MIG slices): "
                   "Kueue would never admit the job", f"ask for at most {whole}, or split fewer GPUs")



def _whole_gpus_namespaces(bp: Blueprint, fleet, whole, report: Reporter) -> None:
    """The training namespaces of a split node are the jobs' own, as a Kueue training fleet's are (kueue-namespace):
    the fleet's own serving namespace enforces Pod Security restricted, which refuses the rendered Job's pod (root, no
    securityContext) after Kueue admits it; kube-system in Kueue's managedJobsNamespaceSelector makes Kueue refuse its
    configuration (kueue v0.19.2 pkg/config/validation.go); a chart's or another fleet's namespace would get a second
    Namespace object, deleted with this fleet."""
    from .kueue import _k8s_training, taken_namespaces

    taken = taken_namespaces(bp)
    for other in _k8s_training(bp):
        for namespace in other.scheduler.queue_namespaces or (other.scheduler.namespace,):
            taken.setdefault(namespace, f"training fleet '{other.name}''s, whose Namespace object fleetform makes")
    for other in _split(bp):
        if other.name != fleet.name and other.gpu_sharing.whole_gpus is not None:
            for namespace in other.gpu_sharing.whole_gpus.namespaces:
                taken.setdefault(namespace, f"the whole GPUs' of fleet '{other.name}', whose Namespace object "
                                 "fleetform makes")
    for i, namespace in enumerate(whole.namespaces):
        if namespace in taken:
            report(whole.path + ("namespaces", i), f"namespace '{namespace}' of fleet '{fleet.name}''s whole GPUs is "
                   f"{taken[namespace]}", "give the training jobs a namespace of their own")
