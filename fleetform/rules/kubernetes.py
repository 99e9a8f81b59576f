"""Rules over the Kubernetes objects fleetform derived for inference fleets: what the API server
or kubernetes-validate would not catch, or would catch only at `kubectl apply` time."""

from __future__ import annotations

import re

from ..model import Blueprint
from . import Reporter, rule

QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TOLERATION_OPERATORS = {"Exists", "Equal"}
TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
SERVICE_TYPES = {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}
PROBE_KINDS = {"startup", "readiness", "liveness"}


def _kube(bp: Blueprint):
    for fleet in bp.fleets:
        if fleet.kube is not None:
            yield fleet, fleet.kube


@rule("k8s-names", "error", "Kubernetes object names are DNS-1123 labels (Services) or subdomains, within length",
      stage="config")
def k8s_names(bp: Blueprint, report: Reporter) -> None:
    for fleet, kube in _kube(bp):
        names = [("namespace", kube.namespace, DNS_LABEL, 63), ("PriorityClass", kube.priority_class, DNS_SUBDOMAIN, 253)]
        names += [(f"Service of model {s.name!r}", s.name, DNS_LABEL, 63) for s in kube.servers]
        for what, name, pattern, limit in names:
            if not pattern.match(name) or len(name) > limit:
                report(fleet.scheduler.path, f"{what} name '{name}' is not a valid Kubernetes name",
                       f"at most {limit} lower-case letters, digits and '-'")


@rule("k8s-selectors", "error", "every selector matches the labels of the pods it selects", stage="config")
def k8s_selectors(bp: Blueprint, report: Reporter) -> None:
    for fleet, kube in _kube(bp):
        for server in kube.servers:
            labels = dict(server.labels)
            wrong = [f"{k}={v}" for k, v in server.selector if labels.get(k) != v]
            if not server.selector or wrong:
                report(fleet.scheduler.path, f"the selector of '{server.name}' does not match its pod labels "
                       f"({', '.join(wrong) or 'empty selector'})",
                       "the Deployment would be rejected, the Service and PDB would select nothing")


@rule("k8s-quantities", "error", "CPU, memory and volume sizes are Kubernetes quantities", stage="config")
def k8s_quantities(bp: Blueprint, report: Reporter) -> None:
    for fleet, kube in _kube(bp):
        for server in kube.servers:
            for what, value in (("cpu request", server.cpu_request), ("memory", server.memory),
                                ("/dev/shm size", server.shm_size), ("model cache size", server.cache_size)):
                if value is not None and not QUANTITY.match(value):
                    report(fleet.scheduler.path, f"the {what} of '{server.name}' is {value!r}, not a quantity",
                           "write e.g. 8, 500m, 64Gi")


@rule("k8s-enums", "error", "toleration operators and effects, probes and Service types are values Kubernetes knows",
      stage="config")
def k8s_enums(bp: Blueprint, report: Reporter) -> None:
    for fleet, kube in _kube(bp):
        for server in kube.servers:
            for t in server.tolerations:
                if t.operator not in TOLERATION_OPERATORS or t.effect not in TAINT_EFFECTS:
                    report(fleet.scheduler.path, f"toleration {t.key} of '{server.name}' has operator {t.operator!r} "
                           f"and effect {t.effect!r}", f"operator one of {sorted(TOLERATION_OPERATORS)}, effect one "
                           f"of {sorted(TAINT_EFFECTS)}")
            for p in server.probes:
                if p.kind not in PROBE_KINDS or not p.path.startswith("/") or min(p.period_s, p.failure_threshold,
                                                                                   p.timeout_s) < 1:
                    report(fleet.scheduler.path, f"the {p.kind} probe of '{server.name}' is invalid "
                           f"(path {p.path!r}, period {p.period_s}, failures {p.failure_threshold}, timeout {p.timeout_s})",
                           "probes take an absolute path and counts of at least 1")
            if server.service_type not in SERVICE_TYPES:
                report(fleet.scheduler.path, f"Service type {server.service_type!r} of '{server.name}'",
                       f"one of {sorted(SERVICE_TYPES)}")


@rule("k8s-gpu-limit", "error", "a replica's GPU request and limit equal the model's tensor_parallel", stage="config")
def k8s_gpu_limit(bp: Blueprint, report: Reporter) -> None:
    for fleet, kube in _kube(bp):
        models = {m.name: m for m in fleet.models}
        for server in kube.servers:
            model = models.get(server.name)
            pods = server.group.size if server.group is not None else 1  # a LeaderWorkerSet group: a node's GPUs a pod
            if model is not None and server.gpu_count * pods != model.gpus:
                runs = (f"tensor_parallel {model.tensor_parallel}" if model.pipeline_parallel == 1 else
                        f"tensor_parallel {model.tensor_parallel} x pipeline_parallel {model.pipeline_parallel}")
                each = f" in each of {pods} pods" if pods > 1 else ""
                report(model.path + ("tensor_parallel",), f"'{server.name}' requests {server.gpu_count} x "
                       f"{server.gpu_resource}{each} but runs with {runs}",
                       "vLLM would fail to start, or leave GPUs idle")


LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_VALUE_MAX = 63
"""Kubernetes, "Labels and Selectors", syntax and character set: a valid label value "must be 63
characters or less (can be empty), unless empty, must begin and end with an alphanumeric character
([a-z0-9A-Z]), could contain dashes (-), underscores (_), dots (.), and alphanumerics between"; the API
server refuses an object with any other (apimachinery validation IsValidLabelValue)."""


def _label_values(fleet, kube):
    """(where, key, value) of every label and selector value the fleet's objects and nodes carry."""
    yield from (("the namespace and node labels", k, v) for k, v in kube.node_labels + kube.psa_labels)
    for server in kube.servers:
        yield from ((f"the objects of '{server.name}'", k, v) for k, v in server.labels + server.selector
                    + server.monitor_labels + server.node_selector)
    if kube.network_policy is not None:
        policy = kube.network_policy
        yield from (("the NetworkPolicy", k, v) for k, v in policy.pod_selector + (policy.client_label,))


@rule("k8s-label-values", "error", "every Kubernetes label value is at most 63 characters of the allowed set")
def k8s_label_values(bp: Blueprint, report: Reporter) -> None:
    for fleet, kube in _kube(bp):
        seen = set()
        for where, key, value in _label_values(fleet, kube):
            if (key, value) in seen or (len(value) <= LABEL_VALUE_MAX and LABEL_VALUE.match(value)):
                continue
            seen.add((key, value))
            origin = fleet.path + ("renamed_from", 0) if fleet.renamed_from else fleet.path + ("name",)
            report(origin, f"label {key}={value} on {where} is {len(value)} characters; Kubernetes allows label "
                   f"values of at most {LABEL_VALUE_MAX} letters, digits, '-', '_' and '.'",
                   "shorten the fleet's first name (renamed_from[0], or name) or the model's name: the API server "
                   "would refuse the objects")
