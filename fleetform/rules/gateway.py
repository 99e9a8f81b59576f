"""Rules over how inference models scale beyond the queue (KV-cache use, time to first token) and
how long a replica takes to start from nothing (the cold-start budget of a model that may scale to zero)."""

from __future__ import annotations

from ..cluster import addons_data
from .. import proxy
from ..gateway import KGATEWAY_VERSION, cold_start, fallback_route_name, gateway_name, router_name, unknown_route_name
from ..k8s import LOAD_GB_PER_S
from ..model import Blueprint
from . import Reporter, rule


def _kube_inference(bp: Blueprint):
    return [f for f in bp.fleets if not f.training and f.scheduler is not None and f.scheduler.type == "kubernetes"]


@rule("autoscale-triggers", "error",
      "KV-cache and time-to-first-token triggers need KEDA, and a TTFT target within the SLO's latency")
def autoscale_triggers(bp: Blueprint, report: Reporter) -> None:
    """Only KEDA takes several Prometheus queries as triggers of one ScaledObject; the HPA path scales on
    the queue metric the Prometheus adapter exports and nothing else, so a KV-cache or TTFT target
    there would be silently ignored."""
    for fleet in _kube_inference(bp):
        autoscaler = fleet.scheduler.autoscaler
        for model in fleet.models:
            auto, slo = model.autoscale, model.slo
            if auto is not None and auto.kv_cache_target is not None and autoscaler != "keda":
                report(auto.path + ("kv_cache_target",),
                       f"model '{model.name}' asks to scale on KV-cache use, but the fleet's autoscaler is {autoscaler}",
                       "set scheduler.autoscaler: keda (the HPA path scales on the queue only), or remove kv_cache_target")
            if slo is None or slo.ttft_p90_s is None:
                continue
            if auto is not None and model.replicas.elastic and autoscaler != "keda":
                report(slo.path + ("ttft_p90_s",),
                       f"model '{model.name}' has a TTFT target, but the fleet's autoscaler is {autoscaler}: "
                       "nothing would scale on it",
                       "set scheduler.autoscaler: keda, or remove ttft_p90_s")
            if slo.latency_s is not None and slo.ttft_p90_s > slo.latency_s:
                report(slo.path + ("ttft_p90_s",),
                       f"the p90 time to first token target ({slo.ttft_p90_s:g} s) is longer than the whole "
                       f"request's latency target ({slo.latency_s:g} s)",
                       f"lower ttft_p90_s below {slo.latency_s:g}, or raise latency_s")


@rule("cold-start-budget", "error",
      "a model that may scale to zero starts within the latency a cold request accepts")
def cold_start_budget(bp: Blueprint, report: Reporter) -> None:
    """A request that finds no replica waits for one to start: pull the weights at the source's rate,
    load them and capture CUDA graphs / compile (fleetform.gateway.cold_start). The blueprint says how
    long such a request may wait (autoscale.cold_start_latency_s); an estimate over it is an error, and
    a minimum of 0 with no budget given is one too, because nobody has decided what a cold request costs.

    With a shared cache (`cache:`) a start after the first reads Hub weights from the claim and loads the compiled
    graphs (estimate.later), but the rule still holds the first start to the budget: the cache's folder is keyed by
    a hash of the model's configs, flags and vLLM's code, so a new image or flag, which is no pod roll while the model
    sits at zero, leaves the next wake-up to compile and download again, as does a new claim. The message names
    both starts, so the budget can be read against what most wake-ups see."""
    for fleet in _kube_inference(bp):
        for model in fleet.models:
            if model.replicas.min != 0 or model.autoscale is None:
                continue
            estimate = cold_start(model, fleet)
            budget = model.autoscale.cold_start_latency_s
            later = "" if estimate.later is None else (
                f"; a later start, with the shared cache filled, about {estimate.later.total_s:.0f} s "
                f"({estimate.later.detail})")
            if budget is None:
                report(model.replicas.path + ("min",),
                       f"model '{model.name}' may scale to 0 replicas with no cold-start budget: the first request "
                       f"waits about {estimate.total_s:.0f} s ({estimate.detail}){later}",
                       f"set autoscale.cold_start_latency_s to what a cold request may wait (at least "
                       f"{estimate.total_s:.0f}), or keep replicas.min at 1")
            elif estimate.total_s > budget:
                report(model.autoscale.path + ("cold_start_latency_s",),
                       f"model '{model.name}' needs about {estimate.total_s:.0f} s to start from zero "
                       f"({estimate.detail}), over the {budget:g} s a cold request may wait"
                       + (f" (the first start after a new image or flag, with the cache empty, counts){later}"
                          if later else ""),
                       "keep replicas.min at 1, load the weights from a faster source (s3 streams at "
                       f"{LOAD_GB_PER_S['s3']:g} GB/s), or accept a longer wait")


@rule("gateway-auth", "error",
      "a gateway fronts only Kubernetes inference fleets whose models all check an API key")
def gateway_auth(bp: Blueprint, report: Reporter) -> None:
    """The Gateway's proxy answers any pod of the cluster (with gateway.expose: internal, any client in the VPC),
    unlike the ClusterIP Services behind their NetworkPolicy; the request passes the gateway and its endpoint picker with its Authorization
    header, and vLLM checks it against VLLM_API_KEY from the model's Secret (vLLM 0.11 api_server.py, on
    /v1 paths). A model without api_key_secret would answer anyone the gateway lets in. The gateway's own
    authentication cannot replace it: kgateway 2.1's TrafficPolicy has no API-key or JWT authentication, only extAuth
    through an external service (docs/gateway.md, "Authentication")."""
    for fleet in bp.fleets:
        if fleet.gateway is None:
            continue
        if fleet.training or fleet.scheduler is None or fleet.scheduler.type != "kubernetes":
            report(fleet.gateway.path,
                   f"fleet '{fleet.name}' has a gateway, which fronts model servers on Kubernetes only",
                   "remove gateway, or make the fleet an inference fleet with scheduler.type: kubernetes")
            continue
        for model in fleet.models:
            if not model.api_key_secret:
                report(model.path + ("name",),
                       f"model '{model.name}' sits behind the gateway of fleet '{fleet.name}' with no API key: anyone "
                       "who reaches the gateway could use it",
                       "set api_key_secret to a Secret with key VLLM_API_KEY, or remove the fleet's gateway")


@rule("gateway-names", "error",
      "no model behind a gateway is named like another model's endpoint picker, the gateway's proxy, its body-based "
      "router or one of its own routes")
def gateway_names(bp: Blueprint, report: Reporter) -> None:
    """A model's endpoint picker is named <model>-epp (its Deployment, Service, ServiceMonitor and
    NetworkPolicy, fleetform/gateway.py), and the body-based router <fleet>-gateway-bbr: a model of that name in
    the same fleet would have its own objects of those kinds and names, and one would replace the other when applied.
    A model's HTTPRoute has the model's name, and the gateway has two HTTPRoutes of its own (fleetform/gateway.py
    ModelFallback): the way in, <fleet>-gateway-models, and the unknown-model answer of the second pass,
    <fleet>-gateway-unknown-model; a model of either name would replace it. kgateway names the proxy's Deployment,
    Service, ServiceAccount and ConfigMap after the Gateway, <fleet>-gateway (pkg/deployer, test/deployer/testdata), and
    fleetform its PodDisruptionBudget: a model of that name would have its own Deployment, Service and
    PodDisruptionBudget of those names in the same namespace."""
    for fleet in bp.fleets:
        if fleet.gateway is None:
            continue
        names = {model.name for model in fleet.models}
        router, fallback, unknown = router_name(fleet), fallback_route_name(fleet), unknown_route_name(fleet)
        for model in fleet.models:
            if model.name == gateway_name(fleet):
                report(model.path + ("name",),
                       f"model '{model.name}' has the name of the gateway's proxy: kgateway names the proxy's "
                       "Deployment and Service after the Gateway, so the model's and the proxy's would be one object "
                       "each, and so would their PodDisruptionBudgets",
                       f"rename model '{model.name}'")
            if model.name == fallback:
                report(model.path + ("name",),
                       f"model '{model.name}' has the name of the gateway's catch-all HTTPRoute: its own route would "
                       "replace the one every request enters by",
                       f"rename model '{model.name}'")
            if model.name == unknown:
                report(model.path + ("name",),
                       f"model '{model.name}' has the name of the HTTPRoute that answers a request for a model the "
                       "gateway does not serve: its own route would replace that answer",
                       f"rename model '{model.name}'")
            if model.name == router:
                report(model.path + ("name",),
                       f"model '{model.name}' has the name of the gateway's body-based router: their Deployments, "
                       "Services and NetworkPolicies would be one object",
                       f"rename model '{model.name}'")
            if f"{model.name}-epp" in names:
                other = next(m for m in fleet.models if m.name == f"{model.name}-epp")
                report(other.path + ("name",),
                       f"model '{other.name}' has the name of the endpoint picker of model '{model.name}': their "
                       "Deployments, Services and ServiceMonitors would be one object",
                       f"rename model '{other.name}'")


@rule("gateway-install", "warning",
      "a gateway's CRDs and controller are installed by hand where no Pulumi program builds the cluster")
def gateway_install(bp: Blueprint, report: Reporter) -> None:
    """On AWS the Pulumi program installs the gateway's CRDs and controller (providers/aws/gateway.py: the Gateway
    API and Inference Extension CRD bundles, then kgateway's CRD chart and kgateway, before the fleet's objects).
    An on-prem fleet's k8s/ folder goes to a cluster fleetform does not build: `kubectl apply -k` fails on the
    Gateway, HTTPRoute and InferencePool there until the same versions are installed, and validate and render
    pass, so without this warning nothing says so before the apply."""
    if bp.cluster is not None:
        return
    data = addons_data()
    bundles = ", ".join(f"{name} {b['version']}" for name, b in data["crd_bundles"].items() if b["when"] == "gateway")
    kgateway = data["charts"]["kgateway"]["version"]
    for fleet in bp.fleets:
        if fleet.gateway is None or fleet.training or fleet.scheduler is None or fleet.scheduler.type != "kubernetes":
            continue
        report(fleet.gateway.path,
               f"fleet '{fleet.name}' has a gateway on a cluster fleetform does not build: nothing installs its CRDs "
               f"and controller ({bundles} CRDs, kgateway {kgateway}), and `kubectl apply -k` fails on the Gateway "
               "until they are installed",
               "install them on the cluster before applying the fleet's k8s/ folder (docs/gateway.md, 'On-prem "
               "clusters'), or remove gateway")


@rule("gateway-wake", "warning",
      "a model that scales to zero behind kgateway is woken only if kgateway calls the endpoint picker for an empty pool")
def gateway_wake(bp: Blueprint, report: Reporter) -> None:
    """The wake trigger (k8s.wake_triggers) counts the requests the endpoint picker refuses while a model has no
    replica. The picker does count them (gateway-api-inference-extension v1.1.0, director.go and server.go), but
    kgateway attaches the picker to a route only while the InferencePool selects a pod: with none it answers
    `no endpoints found for InferencePool` itself, and the route was not rebuilt when pods appeared
    (kgateway-dev/kgateway#12219, open; endpointpicker ApplyForBackend). v2.1.2 has v2.1.x 531027deb (#12810), which
    keeps such a route valid with an empty subset hint instead of failing it; whether the picker is then called and
    counts the request is not verified here: the model may still never wake. docs/gateway.md has the check to run on a cluster."""
    for fleet in bp.fleets:
        if fleet.gateway is None or fleet.training or fleet.scheduler is None or fleet.scheduler.type != "kubernetes":
            continue
        for model in fleet.models:
            if model.replicas.min == 0:
                report(model.replicas.path + ("min",),
                       f"model '{model.name}' scales to 0 behind kgateway {KGATEWAY_VERSION}, which may answer a "
                       "request for an "
                       "empty InferencePool itself without calling the endpoint picker (kgateway-dev/kgateway#12219): "
                       "the request that should wake the model is then not counted, and the model stays at 0",
                       "run the scale-from-zero check of docs/gateway.md on the cluster and waive this with its "
                       "result, or keep replicas.min at 1")


@rule("gateway-capacity", "warning",
      "gateway.proxy_replicas carries every sequence the fleet's models run at once")
def gateway_capacity(bp: Blueprint, report: Reporter) -> None:
    """Every request crosses the gateway's loopback Backend, whose cluster keeps Envoy's default circuit breakers:
    one proxy replica carries at most proxy.LOOPBACK_MAX_REQUESTS requests in flight and answers 503 to those past as
    many more waiting (fleetform/proxy.py). fleetform sizes the replicas from the models' maximum replicas and the
    sequences each runs at once; fewer asked with proxy_replicas cap the fleet below what its GPUs take."""
    for fleet in bp.fleets:
        if fleet.inference_gateway is None or fleet.gateway.proxy_replicas is None:
            continue
        sizing = fleet.inference_gateway.proxies
        if sizing.asked < sizing.needed:
            ceiling = sizing.asked * proxy.LOOPBACK_MAX_REQUESTS
            report(fleet.gateway.path + ("proxy_replicas",),
                   f"{sizing.asked} proxy replica{'s carry' if sizing.asked != 1 else ' carries'} at most {ceiling:,} "
                   f"requests in flight, and the models' replicas run {sizing.slots:,} sequences at once at their "
                   f"maximum counts (`fleetform plan` shows the sum): past {ceiling:,} in flight and as many waiting the gateway "
                   "answers 503 while GPUs have room"
                   + (", and one replica is an outage on every node drain" if sizing.asked == 1 else ""),
                   f"set proxy_replicas to {sizing.needed} or more, or remove it and let fleetform size it; a model "
                   "whose replicas run fewer sequences can say so with --max-num-seqs in extra_args")
