"""<fleet>/k8s/: the Kubernetes objects of an inference fleet, one file each, and the
kustomization that lists them; <fleet>/gpu-operator-values.yaml for the GPU Operator's chart and,
when a model scales with the HPA, <fleet>/prometheus-adapter-values.yaml for the adapter's chart."""

from __future__ import annotations

from importlib import resources

from ..k8s import HPA_METRIC
from ..model import Blueprint, Fleet
from . import mig
from .gateway import objects as gateway_objects
from .jinja import render

ACCEPTANCE_PROGRAMS = ("accept-models",)
"""templates/k8s/bin/: the inference fleet's acceptance program (docs/acceptance.md), copied as it is; its
values are in <fleet>/acceptance/models.json."""


def _program(name: str) -> bytes:
    return (resources.files("fleetform.templates") / "k8s" / "bin" / name).read_bytes()


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    kube = fleet.kube
    if kube is None:
        return {}
    labels = (("app.kubernetes.io/part-of", bp.name), ("app.kubernetes.io/managed-by", "fleetform"),
              ("fleetform.dev/fleet", fleet.name)) + tuple(sorted(bp.labels.items()))
    common = {"fleet": fleet.name, "k": kube, "labels": labels}
    objects: dict[str, bytes] = {
        "namespace.yaml": render("k8s/namespace.yaml.j2", **common),
        "priorityclass.yaml": render("k8s/priorityclass.yaml.j2", **common),
        "networkpolicy.yaml": render("k8s/networkpolicy.yaml.j2", n=kube.network_policy, **common),
    }
    for server in kube.servers:
        one = {"s": server, "a": server.autoscaling, "hpa_metric": HPA_METRIC}
        if server.group is not None:  # a replica spanning nodes (fleetform/lws.py)
            objects[f"{server.name}-leaderworkerset.yaml"] = render("lws/leaderworkerset.yaml.j2", **one)
            objects[f"{server.name}-group-networkpolicy.yaml"] = render("lws/group-networkpolicy.yaml.j2", **one)
        else:
            objects[f"{server.name}-deployment.yaml"] = render("k8s/deployment.yaml.j2", **one)
        objects[f"{server.name}-service.yaml"] = render("k8s/service.yaml.j2", **one)
        objects[f"{server.name}-pdb.yaml"] = render("k8s/pdb.yaml.j2", **one)
        objects[f"{server.name}-servicemonitor.yaml"] = render("k8s/servicemonitor.yaml.j2", **one)
        if server.service_account is not None:
            objects[f"{server.name}-serviceaccount.yaml"] = render("k8s/serviceaccount.yaml.j2", **one)
        if server.autoscaling is not None:
            kind = server.autoscaling.kind
            template = "k8s/scaledobject.yaml.j2" if kind == "keda" else "k8s/hpa.yaml.j2"
            objects[f"{server.name}-{'scaledobject' if kind == 'keda' else 'hpa'}.yaml"] = render(template, **one)
    if kube.device_plugin is not None:
        objects["device-plugin-config.yaml"] = render("k8s/device-plugin-config.yaml.j2", d=kube.device_plugin, **common)
    if kube.mig is not None:
        objects["mig-parted-config.yaml"] = render("k8s/mig-parted-config.yaml.j2", m=kube.mig, **common)
    objects["dcgm-servicemonitor.yaml"] = render("k8s/dcgm-servicemonitor.yaml.j2", **common)
    if kube.shared_cache is not None:
        objects["shared-cache.yaml"] = render("k8s/shared-cache.yaml.j2", c=kube.shared_cache, **common)
    objects.update(gateway_objects(fleet))
    objects.update(mig.objects(fleet, labels))  # a node split by GPU: Kueue on its whole GPUs
    out = {f"{fleet.name}/k8s/{name}": data for name, data in objects.items()}
    out.update(mig.jobs(fleet))
    out[f"{fleet.name}/k8s/kustomization.yaml"] = render("k8s/kustomization.yaml.j2", fleet=fleet.name,
                                                         resources=sorted(objects))
    out[f"{fleet.name}/gpu-operator-values.yaml"] = render("k8s/gpu-operator-values.yaml.j2", d=kube.device_plugin,
                                                           m=kube.mig, **common)
    if fleet.model_checks:
        out[f"{fleet.name}/acceptance/models.json"] = render("k8s/acceptance-models.json.j2", fleet=fleet.name,
                                                             checks=fleet.model_checks)
        out.update({f"{fleet.name}/acceptance/{name}": _program(name) for name in ACCEPTANCE_PROGRAMS})
    if kube.adapter_rules:
        out[f"{fleet.name}/prometheus-adapter-values.yaml"] = render("k8s/prometheus-adapter-values.yaml.j2", **common)
    return out
