"""Rules over routing simple requests to a smaller model (fleetform/semrouter.py, vLLM's Semantic Router v0.3.0
beside the fleet's gateway): a gateway to sit in, two different chat models of the fleet, a name clients can
ask for, room on the system nodes, and where the router runs at all under kgateway."""

from __future__ import annotations

from ..cluster import quantity
from ..gateway import MODEL_HEADER, router_name as bbr_name
from ..model import Blueprint
from ..semrouter import CPU_LIMIT, MEMORY_LIMIT, router_name
from . import Reporter, rule
from .cluster import _overhead

# vLLM 0.11 runs a model as a pooling model (embeddings, classification, scores: no /v1/chat/completions or
# /v1/completions) when asked with --task embed|classify|score|reward or --runner pooling (vllm/config/model.py
# at v0.11.0: TaskOption, RunnerOption); such a model cannot answer a request the router sends it.
POOLING_TASKS = {"embed", "embedding", "classify", "score", "reward"}


def _routed(bp: Blueprint):
    for fleet in bp.fleets:
        if fleet.semantic_routing is not None:
            yield fleet, fleet.semantic_routing


def _pooling(model) -> str | None:
    args = list(model.extra_args)
    for i, arg in enumerate(args):
        flag, _, value = arg.partition("=")
        if flag in ("--task", "--runner") and not value and i + 1 < len(args):
            value = args[i + 1]
        if (flag == "--task" and value in POOLING_TASKS) or (flag == "--runner" and value == "pooling"):
            return f"{flag} {value}"
    return None


@rule("semantic-router-gateway", "error",
      "routing simple requests to a smaller model needs the fleet's gateway on Kubernetes")
def semantic_router_gateway(bp: Blueprint, report: Reporter) -> None:
    """The router is an ext-proc filter of the gateway's proxy (kgateway GatewayExtension and TrafficPolicy): with no
    `gateway:` nothing would ever call it, and the models' own Services do not pass through it."""
    for fleet, spec in _routed(bp):
        if fleet.gateway is None:
            report(spec.path,
                   f"fleet '{fleet.name}' asks for semantic routing without a gateway: nothing would send a request "
                   "through the router",
                   "add `gateway: {}` to the fleet (one OpenAI endpoint for its models), or remove semantic_routing")


@rule("semantic-router-models", "error",
      "semantic routing names two different models of the fleet, both serving chat and completions, the small one "
      "with at least the large one's context")
def semantic_router_models(bp: Blueprint, report: Reporter) -> None:
    """The router rewrites a request's `model` to `small` or `large` and sets the header their routes match
    (fleetform/semrouter.py): a name that is not a model of the fleet matches no route (404), the same model twice
    routes nothing, a pooling model answers no chat request, and a small model with a shorter context refuses
    the long simple requests the large one would take (vLLM's max_model_len check), since the router's complexity
    signal does not look at length."""
    for fleet, spec in _routed(bp):
        models = {m.name: m for m in fleet.models}
        for role in ("small", "large"):
            name = getattr(spec, role)
            if name not in models:
                report(spec.path + (role,),
                       f"semantic_routing.{role} '{name}' is not a model of fleet '{fleet.name}'",
                       f"name one of: {', '.join(sorted(models)) or 'none (the fleet has no models)'}")
            elif (how := _pooling(models[name])) is not None:
                report(spec.path + (role,),
                       f"model '{name}' runs as a pooling model ({how}): it serves no chat or completions request",
                       "route between two generative models")
        if spec.small == spec.large:
            report(spec.path + ("small",), f"small and large are both '{spec.small}': nothing is routed",
                   "name the fleet's smaller model as small and its larger one as large")
            continue
        if spec.small in models and spec.large in models:
            small, large = models[spec.small].context_tokens, models[spec.large].context_tokens
            if small is not None and large is not None and small < large:
                report(spec.path + ("small",),
                       f"model '{spec.small}' serves {small:,} tokens of context, less than the {large:,} of "
                       f"'{spec.large}': a simple request longer than that fails on the small model",
                       f"raise max_model_len of '{spec.small}' to {large}, or lower that of '{spec.large}'")


@rule("semantic-router-name", "error",
      "the model name clients send to be routed by difficulty is no model's or adapter's, and no model takes the "
      "router's object names")
def semantic_router_name(bp: Blueprint, report: Reporter) -> None:
    """A request reaches the router by its way-in HTTPRoute, matched by the header the body-based router copies from
    the body's `model` (gateway.MODEL_HEADER = model_name; fleetform/semrouter.py LISTENER). A model or LoRA adapter
    of the same name has a route with the same match on the models' listener, where the way in never sends it, so it is
    never reached (or, sent with the header to the models' listener directly, never routed). A model named like the
    router's objects (its Deployment, ConfigMap, way-in HTTPRoute) would be one object with them."""
    for fleet, spec in _routed(bp):
        if fleet.gateway is None:
            continue
        for model in fleet.models:
            adapters = [a.name for a in model.lora.adapters] if model.lora is not None else []
            if spec.model_name == model.name or spec.model_name in adapters:
                what = "a model" if spec.model_name == model.name else f"a LoRA adapter of model '{model.name}'"
                report(spec.path + ("model_name",),
                       f"'{spec.model_name}' is {what} too: two routes would match {MODEL_HEADER}: "
                       f"{spec.model_name}, and the Gateway API sends such requests to one of them only",
                       "set semantic_routing.model_name to a name no model or adapter of the fleet has")
            if model.name in (router_name(fleet), f"{router_name(fleet)}-config", f"{router_name(fleet)}-way-in"):
                report(model.path + ("name",),
                       f"model '{model.name}' has the name of the semantic router's objects",
                       f"rename model '{model.name}'")
        if spec.model_name == bbr_name(fleet):
            report(spec.path + ("model_name",), f"'{spec.model_name}' is the body-based router's name",
                   "choose another model_name")


@rule("semantic-router-fit", "error",
      "the semantic router's limits fit one system node after its node agents", stage="cluster")
def semantic_router_fit(bp: Blueprint, report: Reporter) -> None:
    """The router's classifiers run on CPU (its chart at v0.3.0: requests 1 CPU / 3Gi, limits 2 CPU / 7Gi). It
    tolerates no GPU taint, so it runs on the system node group, where cluster-admission and the capacity rules
    count its requests. Its limits are what it uses loaded and busy (the classifier models are held in memory in
    full): a limit over what a node has after its node agents is memory the router reaches only by evicting
    others or being OOM-killed, and CPU it never gets."""
    cluster = bp.cluster
    if cluster is None:
        return
    system = cluster.system
    cpu_agents, memory_agents = _overhead(cluster, system)
    for fleet, spec in _routed(bp):
        if fleet.inference_gateway is None or fleet.inference_gateway.semantic_router is None:
            continue
        for what, value, allocatable, unit in (
                ("CPU limit", quantity(CPU_LIMIT) * 1000, system.cpu_m - cpu_agents, "m"),
                ("memory limit", quantity(MEMORY_LIMIT) / 2**20, system.memory_mib - memory_agents, "Mi")):
            if value > allocatable:
                report(spec.path,
                       f"the semantic router's {what} ({value:.0f}{unit}) is more than a system node has for it "
                       f"({system.instance_type}: {allocatable}{unit} allocatable after node agents)",
                       "give provider.eks.system_nodes a larger instance_type (m7i.xlarge or larger)")
