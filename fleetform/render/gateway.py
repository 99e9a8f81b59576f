"""<fleet>/k8s/ objects of an inference fleet's gateway (fleetform/gateway.py): the Gateway, per model
an HTTPRoute, an InferencePool and its endpoint picker, the way-in HTTPRoute and the Backend of the second pass,
the HTTPRoute with its DirectResponse for a request that names no model, and the body-based router with the kgateway objects that put it in front of the
routes, one file each, listed by the fleet's kustomization."""

from __future__ import annotations

from ..model import Fleet
from .jinja import render

EPP_OBJECTS = ("configmap", "serviceaccount", "role", "rolebinding", "service", "deployment", "networkpolicy",
               "servicemonitor")
BBR_OBJECTS = ("serviceaccount", "deployment", "pdb", "service", "networkpolicy", "gatewayextension", "trafficpolicy",
               "backendconfigpolicy")
SEMROUTER_OBJECTS = ("configmap", "serviceaccount", "deployment", "pdb", "service", "networkpolicy", "httproute",
                     "gatewayextension", "trafficpolicy")


def objects(fleet: Fleet) -> dict[str, bytes]:
    g = fleet.inference_gateway
    if g is None:
        return {}
    out = {"gateway.yaml": render("gateway/gateway.yaml.j2", fleet=fleet.name, g=g),
           "gatewayparameters.yaml": render("gateway/gatewayparameters.yaml.j2", g=g),
           f"{g.name}-pdb.yaml": render("gateway/proxy-pdb.yaml.j2", g=g)}
    for p in g.pickers:
        one = {"g": g, "p": p, "prometheus_namespace": fleet.kube.network_policy.prometheus_namespace,
               "monitor_labels": fleet.kube.monitor_labels}
        out[f"{p.pool}-httproute.yaml"] = render("gateway/httproute.yaml.j2", **one)
        out[f"{p.pool}-inferencepool.yaml"] = render("gateway/inferencepool.yaml.j2", **one)
        for kind in EPP_OBJECTS:
            out[f"{p.name}-{kind}.yaml"] = render(f"gateway/epp-{kind}.yaml.j2", **one)
    out[f"{g.fallback.route}-httproute.yaml"] = render("gateway/models-httproute.yaml.j2", g=g)
    out[f"{g.fallback.backend}-backend.yaml"] = render(
        "gateway/loopback-backend.yaml.j2", g=g, purpose="The second pass", name=g.fallback.backend, labels=g.labels,
        listener=g.pools_listener, port=g.pools_port)
    out[f"{g.fallback.unknown_route}-httproute.yaml"] = render("gateway/unknown-model-httproute.yaml.j2", g=g)
    out[f"{g.fallback.response}-directresponse.yaml"] = render("gateway/unknown-model-directresponse.yaml.j2", g=g)
    one = {"g": g, "r": g.router}
    for kind in BBR_OBJECTS:
        out[f"{g.router.name}-{kind}.yaml"] = render(f"gateway/bbr-{kind}.yaml.j2", **one)
    if g.semantic_router is not None:  # fleetform/semrouter.py
        one = {"g": g, "r": g.semantic_router}
        for kind in SEMROUTER_OBJECTS:
            out[f"{g.semantic_router.name}-{kind}.yaml"] = render(f"gateway/semrouter-{kind}.yaml.j2", **one)
        out[f"{g.semantic_router.way_in}-httproute.yaml"] = render("gateway/semrouter-way-in-httproute.yaml.j2", **one)
        out[f"{g.semantic_router.name}-backend.yaml"] = render(
            "gateway/loopback-backend.yaml.j2", g=g, purpose="The semantic router's pass", name=g.semantic_router.name,
            labels=g.semantic_router.labels, listener=g.semantic_router.listener, port=g.semantic_router.port)
    return out
