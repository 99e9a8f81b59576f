"""Derived configuration of how an inference model starts from nothing: the cold-start estimate the
cold-start-budget rule holds to the blueprint's autoscale.cold_start_latency_s. The gateway of issue 23
(Gateway API Inference Extension) builds on it: a model may scale to zero only where a request that
finds no replica can still wake one."""

from __future__ import annotations

import json
import math

from . import kvevents, proxy, semrouter
from .k8s import COMPILE_SAVED_S, KV_CACHE_METRIC, LOAD_GB_PER_S, READY_OVERHEAD_S
from .records import frozen
from .semrouter import SemanticRouter  # noqa: F401  (the type of InferenceGateway.semantic_router)


@frozen
class ColdStart:
    """The estimated seconds from a scale-up from zero to a ready replica, in parts."""

    source: str  # hub | s3 | volume
    weights_gb: float  # the checkpoint a replica reads
    read_s: float  # weights_gb over the source's rate
    engine_s: float  # load onto the GPUs, CUDA graph capture and torch.compile
    rate: float  # GB/s of the source
    node_s: float = 0.0  # a new node first: node ready + the image's pull - the part pre-pulled while it joins
    node_detail: str = ""
    later: "ColdStart | None" = None  # a fleet with `cache:`: a start that finds the shared cache filled
    compile_saved_s: float = 0.0  # a later start: the compile it loads from the cache instead (k8s.COMPILE_SAVED_S)

    @property
    def total_s(self) -> float:
        return self.node_s + self.read_s + self.engine_s

    @property
    def detail(self) -> str:
        engine = (f"plus {self.engine_s:.0f} s to load and capture CUDA graphs, the compiled graphs read from the "
                  f"shared cache ({self.compile_saved_s:.0f} s less)" if self.compile_saved_s
                  else f"plus {self.engine_s:.0f} s to load, compile and capture CUDA graphs")
        return ((f"{self.node_detail}, then " if self.node_s else "")
                + f"{self.weights_gb:g} GB from {self.source} at {self.rate:g} GB/s = {self.read_s:.0f} s, {engine}")


def new_node_s(image: str) -> tuple[int, str]:
    """The wait for a new GPU node before a replica's weights start to load (the pool's lead terms,
    fleetform/pool.py): node ready, plus the image's pull less the part the node group's pre-pull runs while the
    node joins (fleetform/prepull.py; none for an image in private ECR, which the kubelet pulls after Ready)."""
    from . import pool, prepull

    pull = math.ceil(pool.image_gb(image) / pool.IMAGE_PULL_GB_PER_MIN * 60)
    pulled = not prepull.PRIVATE_ECR.match(prepull.ctr_reference(image))
    overlap = min(prepull.NODE_JOIN_S, pool.NODE_READY_S, pull) if pulled else 0
    return (pool.NODE_READY_S + pull - overlap,
            f"a new node: ready {pool.NODE_READY_S} s + image pull {pull} s - {overlap} s of it pre-pulled while the "
            f"node joins = {pool.NODE_READY_S + pull - overlap} s")


def cold_start(model, fleet=None) -> ColdStart:
    """The time a replica takes to become ready when none runs: the same figures (k8s.LOAD_GB_PER_S,
    k8s.READY_OVERHEAD_S) that size the default scale-up period, so the two never disagree. On a fleet whose
    node group may itself be at zero nodes (nodes.min 0) the replica waits for a new node first (new_node_s);
    where the group keeps a node, that node has the image already (pre-pulled at its boot, or by an earlier replica:
    imagePullPolicy IfNotPresent), so only the weights and the engine count."""
    source = model.weights.source if model.weights is not None else "hub"
    weights = model.checkpoint_gb
    node_s, node_detail = (0, "")
    if fleet is not None and fleet.nodes is not None and fleet.nodes.min == 0:
        node_s, node_detail = new_node_s(model.image)
    later = None
    if fleet is not None and fleet.cache is not None:
        # the shared claim outlives every replica: a start after the first of the same model, image and flags reads
        # Hub weights from it at the volume rate (S3 weights are streamed again) and loads the compiled graphs
        warm = "volume" if source == "hub" else source
        later = ColdStart(warm + (" (shared cache)" if source == "hub" else ""), round(weights, 3),
                          weights / LOAD_GB_PER_S[warm], float(READY_OVERHEAD_S - COMPILE_SAVED_S), LOAD_GB_PER_S[warm],
                          float(node_s), node_detail, compile_saved_s=float(COMPILE_SAVED_S))
    return ColdStart(source, round(weights, 3), weights / LOAD_GB_PER_S[source], float(READY_OVERHEAD_S),
                     LOAD_GB_PER_S[source], float(node_s), node_detail, later)


# ---- the gateway: Gateway API v1.4.0 and its Inference Extension v1.1.0 ----

GATEWAY_CLASS = "kgateway"
"""The gateway implementation: kgateway v2.1.2 (KGATEWAY_VERSION below), a patch release of v2.1.0, the version the
Inference Extension v1.1.0 getting-started guide installs with `--set inferenceExtension.enabled=true`
(kubernetes-sigs/gateway-api-inference-extension f5bce5a2, site-src/guides/index.md), and a conformant
implementation of the extension (its conformance/reports/v1.0.0/gateway/kgateway). It runs its Envoy proxy
in the Gateway's namespace behind a Service that the Gateway's GatewayParameters (PROXY_SERVICE) keeps private; GKE's is GKE only,
and the same guide installs Istio from a 1.28 development build for InferencePool v1.
v2.1.2, not v2.1.0: v2.1.x commit 57b97ee5c (2025-11-04, #12813) made the placeholder InferencePool ext_proc filter
fail open (`FailureModeAllow: true`, "so requests that do NOT match any route ... are not converted into 500"), which
the catch-all route (ModelFallback) needs: on v2.1.0 and v2.1.1 a request without MODEL_HEADER gets 500 there before
the body-based router runs (tests/test_bbr_envoy.py). v2.1.1 was announced 2025-10-23, before that commit; v2.1.2
on 2025-12-12 (kgateway-dev/kgateway.dev d4fc766d, assets/docs/versions), when the head of `v2.1.x` was a31f0744e or
3592c0f9e, both after it and after 531027deb (#12810: an InferencePool with no endpoints no longer fails the route's
translation). The CRDs and chart fleetform uses are byte-identical to v2.1.0's (tests/crd/README.md)."""
KGATEWAY_VERSION = "v2.1.2"
EPP_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.1.0"
"""The endpoint picker of the pinned extension (config/charts/inferencepool/values.yaml at v1.1.0)."""
EPP_GRPC_PORT = 9002  # ext-proc (values.yaml inferenceExtension.extProcPort)
EPP_HEALTH_PORT = 9003  # the gRPC health service the chart probes (service inference-extension)
EPP_METRICS_PORT = 9090
EPP_CONFIG_FILE = "default-plugins.yaml"
EPP_SCORERS = ("queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer")
"""The scorers of the chart's default plugins file (templates/epp-config.yaml at v1.1.0): the shortest
queue, the lowest KV-cache use, and the longest prefix already cached on a replica (vLLM 0.11 caches
prefixes by default, vllm/engine/arg_utils.py), all in the `default` scheduling profile."""
EPP_METRIC_ARGS = ("--kv-cache-usage-percentage-metric", KV_CACHE_METRIC)
"""The default picker reads KV-cache use from vllm:gpu_cache_usage_perc unless told otherwise (the extension v1.1.0,
pkg/epp/server/runserver.go DefaultKvCacheUsagePercentageMetric, the default of cmd/epp/runner/runner.go's
--kv-cache-usage-percentage-metric; v1.3.0, under the precise picker, defaults to vllm:kv_cache_usage_perc in
pkg/epp/server/options.go NewOptions, and gets the same flag), a name vLLM 0.11 hides: renamed vllm:kv_cache_usage_perc in 0.9.2, the old
gauge is registered only with --show-hidden-metrics-for-version (vllm/v1/metrics/loggers.py at v0.11.0). Without the
flag the scrape of every replica fails on that metric, KVCacheUsagePercent stays 0 on all of them
(pkg/epp/backend/metrics/metrics.go promToPodMetrics) and the kv-cache-utilization-scorer scores them all alike.
The picker's other defaults are vLLM 0.11's names: vllm:num_requests_waiting, vllm:lora_requests_info (labels
max_lora, waiting_lora_adapters, running_lora_adapters; only where LoRA is on) and vllm:cache_config_info."""
EPP_GRACE_S = 130  # the chart's terminationGracePeriodSeconds
EPP_RUN_AS = 65532  # the `nonroot` user of distroless images, which the EPP image is built on
MODEL_HEADER = "X-Gateway-Model-Name"
"""The header a route matches to pick a model's pool (config/manifests/bbr-example/httproute_bbr.yaml at
v1.1.0); the extension's body-based router (BodyRouter) copies the body's `model` into it."""
LISTENER_PORT = 80
LISTENER_NAME = "http"
"""The Gateway's way in: the listener clients reach on the proxy Service. Its route is the catch-all
(ModelFallback.route): every request under ROUTE_PATH_PREFIX passes the body-based router there and is then sent to
POOLS_LISTENER through the proxy itself (a request for the semantic router's name to its own listener instead:
fleetform/semrouter.py LISTENER)."""
POOLS_LISTENER = "pools"
POOLS_PORT = 8081
"""The listener of the second pass: the models' routes (a header match per model -> its InferencePool), the semantic
router's route and the unknown-model answer attach here. A request meets them with MODEL_HEADER already set, so the
route it matches on arrival is its model's and kgateway's InferencePool filter (first in the chain, its pool taken
from that route) asks the model's endpoint picker (docs/gateway.md, "Routing by the body's model"). kgateway binds
a listener on its own port (v2.1 translator/listener getListenerPortNumber; no offset) and refuses only 9091, 8082
and 19000 (validate/gateway.go reservedPorts: its metrics, readiness and Envoy admin ports)."""
LOOPBACK = "127.0.0.1"
"""The second pass never leaves the proxy's pod: a kgateway Backend of type Static with this address is a STATIC
Envoy cluster (v2.1 plugins/backend/static.go processStaticBackendForEnvoy: an IP is not resolved), and the pod's
Envoy listens on POOLS_PORT on every address."""
ROUTE_PATH_PREFIX = "/v1"
"""The paths a route sends on: vLLM's API key guards only paths under /v1 (vLLM 0.11 api_server.py, the
authentication middleware passes any other path through), and the same server answers inference on
/invocations (SageMaker's route, dispatched to the same chat and completion handlers), /pooling, /score,
/rerank, /classify and /tokenize without a key (vllm-project/vllm#18892, #58144; vLLM docs usage/security.md).
A route on `/` would hand those to anyone who reaches the Gateway; on /v1 they get the Gateway's 404."""
EPP_CPU = "2"
EPP_MEMORY = "2Gi"
"""The EPP's request and limit: the chart sets none; a fixed share keeps it Guaranteed beside GPU pods. It
holds per-replica metrics and the prefix-cache index of one pool (a choice, not a measured figure)."""


BBR_IMAGE = "registry.k8s.io/gateway-api-inference-extension/bbr:v1.1.0"
"""The body-based router of the pinned extension (config/charts/body-based-routing/values.yaml at v1.1.0:
hub, name `bbr`, tag v1.1.0). It reads the OpenAI body's `model` and sets MODEL_HEADER to it, asking Envoy
to clear its route cache so the new header picks the route (pkg/bbr/handlers/request.go, ClearRouteCache)."""
BBR_GRPC_PORT = 9004  # ext-proc (cmd/bbr/main.go --grpc-port default; the chart's bbr.port)
BBR_HEALTH_PORT = 9005  # the gRPC health service (--grpc-health-port; the chart's bbr.healthCheckPort)
BBR_ARGS = ("--streaming",)
"""As the chart runs it (templates/bbr.yaml): streaming, for Envoy's FULL_DUPLEX_STREAMED body mode."""
BBR_REPLICAS = 2
"""The chart's default is 1; every request passes the router and the extension fails closed (BBR_FAIL_OPEN), so
one pod would make a node drain or a rollout an outage of the endpoint. It keeps no state between requests."""
BBR_CPU = "500m"
BBR_MEMORY = "256Mi"
"""The chart sets no requests; a fixed share keeps it Guaranteed (a choice, not a measured figure)."""
BBR_FAIL_OPEN = False
"""kgateway's ExtProcProvider.failOpen defaults to true (kgateway.dev 2.1.x API reference): with the router
down a request would pass without the header and meet every route's 404. The chart's Istio filter sets
`failure_mode_allow: false` (templates/istio.yaml at v1.1.0); so does this."""
BBR_PROCESSING = (("requestHeaderMode", "SEND"), ("responseHeaderMode", "SKIP"),
                  ("requestBodyMode", "FULL_DUPLEX_STREAMED"), ("responseBodyMode", "NONE"),
                  ("requestTrailerMode", "SEND"), ("responseTrailerMode", "SKIP"))
"""The processing modes of the chart's Istio EnvoyFilter at v1.1.0 (templates/istio.yaml), in kgateway's
ProcessingMode names and enums (kgateway.dev 2.1.x API reference): the router sees request headers and the
streamed body (which is what `--streaming` expects), never the response."""


PARAMETERS_GROUP = "gateway.kgateway.dev"
PARAMETERS_KIND = "GatewayParameters"
"""The Gateway names its proxy's parameters in spec.infrastructure.parametersRef (Gateway API v1.4.0
LocalParametersReference: group, kind, name); kgateway deep-merges them over its defaults
(kgateway-dev/kgateway 06ff8b9d internal/kgateway/deployer/merge.go)."""
PROXY_SERVICE = {
    # kgateway's default proxy Service is type LoadBalancer: on EKS without the AWS Load Balancer Controller the
    # in-tree cloud provider makes an internet-facing Classic ELB on the public subnets (port 80 to 0.0.0.0/0)
    "cluster": ("ClusterIP", ()),
    # the in-tree AWS cloud provider makes its load balancer internal on aws-load-balancer-internal (any value but
    # "false": kubernetes/website#15771); the AWS Load Balancer Controller reads aws-load-balancer-scheme (internal is
    # its default since v2.2.0, the first annotation deprecated for it: kubernetes-sigs.github.io/aws-load-balancer-
    # controller/latest/guide/service/annotations); both, so the Service is internal whichever controller takes it
    "internal": ("LoadBalancer", (("service.beta.kubernetes.io/aws-load-balancer-internal", "true"),
                                  ("service.beta.kubernetes.io/aws-load-balancer-scheme", "internal"))),
}
"""gateway.expose -> the proxy Service's type and extra annotations (kgateway 2.1 API reference, kgateway-dev/kgateway.dev
85cd0fc8 content/docs/envoy/2.1.x/reference/api.md: KubernetesProxyConfig.service, Service.type, extraAnnotations)."""


@frozen
class BodyRouter:
    """The body-based router of a gateway: its Deployment, Service, ServiceAccount and NetworkPolicy (as the
    body-based-routing chart makes them), and the kgateway GatewayExtension and TrafficPolicy that put it in
    front of every route of the Gateway as an ext-proc filter (the chart wires Istio and GKE only)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    pod_selector: tuple[tuple[str, str], ...]
    image: str = BBR_IMAGE
    args: tuple[str, ...] = BBR_ARGS
    grpc_port: int = BBR_GRPC_PORT
    health_port: int = BBR_HEALTH_PORT
    replicas: int = BBR_REPLICAS
    cpu: str = BBR_CPU
    memory: str = BBR_MEMORY
    fail_open: bool = BBR_FAIL_OPEN
    processing: tuple[tuple[str, str], ...] = BBR_PROCESSING


UNKNOWN_MODEL_STATUS = 404
"""What a request gets when its body names no model of the gateway (or no model at all): not found, as vLLM answers
a `model` it does not serve, instead of another model's answer or a proxy's bare 404."""
UNKNOWN_MODEL_BODY_MAX = 4096  # kgateway v2.1.2's DirectResponse CRD (v2.1.0's bytes): spec.body maxLength


@frozen
class ModelFallback:
    """How a request reaches its model's route with the model's endpoint picker: two passes through the proxy.

    1. On the way in (listener LISTENER_NAME) one route, `route`: the path prefix with no header match, so every
       request matches it on arrival and the body-based router runs (kgateway enables a TrafficPolicy's ext-proc
       filter per route; Envoy adds a disabled filter to a request's chain only where the route it matched on arrival
       enables it). The router copies the body's `model` into MODEL_HEADER; the route's backend is `backend`, a
       kgateway Backend of type Static on LOOPBACK:POOLS_PORT, so the request goes back into the same proxy.
    2. On POOLS_LISTENER the request arrives with the header: it matches its model's route on arrival, so kgateway's
       InferencePool filter (first in the chain, the pool taken from the route at arrival) asks that model's picker.
       A `model` no route matches, or none, meets `unknown_route`: the path prefix with no header, whose action is the
       kgateway DirectResponse `response` (HTTPRoute filter ExtensionRef; plugins/directresponse ApplyForRoute makes
       it the Envoy route's direct_response) with `status` and `body`.

    One pass is not enough on kgateway's Envoy data plane: the picker filter runs before the router, with the pool of
    the route at arrival, so a request re-routed by the router's clear_route_cache reached its pool unscheduled
    (docs/gateway.md, "Routing by the body's model"). tests/test_bbr_envoy.py shows both in a real Envoy configured as
    kgateway v2.1.2 configures it (v2.1.0 and v2.1.1 answer a body-only request 500: KGATEWAY_VERSION)."""

    route: str  # the HTTPRoute on the way in
    backend: str  # the kgateway Backend of the second pass
    unknown_route: str  # the HTTPRoute on POOLS_LISTENER that answers an unknown model
    status: int
    body: str  # a JSON error, in the shape of an OpenAI error (`error.message`, `error.type`, `error.code`)
    host: str = LOOPBACK

    @property
    def response(self) -> str:
        """The DirectResponse the unknown-model route answers with: named as the route."""
        return self.unknown_route


@frozen
class Picker:
    """One model's InferencePool and its endpoint picker (EPP): Deployment, Service, ServiceAccount, the
    Role it reads pools and pods with and the ConfigMap of its plugins, as the inferencepool chart makes them."""

    name: str  # the EPP's Deployment, Service, ServiceAccount, Role and ConfigMap
    pool: str  # the InferencePool: the model's name
    model: str  # the served model name (the `model` of a request)
    selector: tuple[tuple[str, str], ...]  # the model server pods
    target_port: int
    labels: tuple[tuple[str, str], ...]  # on the EPP's objects and pods (not the fleet label the servers' policy selects)
    pod_selector: tuple[tuple[str, str], ...]
    adapters: tuple[str, ...] = ()  # the model's LoRA adapters: a request naming one goes to this pool too
    precise: kvevents.Precise | None = None  # gateway.prefix_routing precise: vLLM's KV events, llm-d's picker
    image: str = EPP_IMAGE  # the picker's image: the extension's, or llm-d-inference-scheduler's where precise
    config_lines: tuple[str, ...] = ()  # the plugins file: kvevents.picker_config where precise, else default_plugins
    extra_args: tuple[str, ...] = EPP_METRIC_ARGS  # after the chart's flags: the picker reads vLLM 0.11's KV-cache metric
    config_digest: str = ""  # plugins_digest of the ConfigMap's data: on the pod template, so a new file restarts it


def default_plugins(scorers: tuple[str, ...]) -> tuple[str, ...]:
    """The lines of the chart's default plugins file (templates/epp-config.yaml at v1.1.0), each scorer quoted."""
    return (("apiVersion: inference.networking.x-k8s.io/v1alpha1", "kind: EndpointPickerConfig", "plugins:")
            + tuple(f"- type: {json.dumps(s)}" for s in scorers)
            + ("schedulingProfiles:", "- name: default", "  plugins:")
            + tuple(f"  - pluginRef: {json.dumps(s)}" for s in scorers))


def plugins_digest(lines: tuple[str, ...], file: str = EPP_CONFIG_FILE) -> str:
    """sha256 of the picker ConfigMap's `data` as the API server holds it ({file: the lines, each ending in a newline,
    as the template's `|` block gives them}), in JSON with sorted keys and no spaces (`jq -cSj .data` of the object).

    Every picker reads its plugins file once, when it starts (the extension v1.1.0 cmd/epp/runner/runner.go Run ->
    parsePluginsConfiguration -> os.ReadFile(*configFile); v1.3.0, which llm-d-inference-scheduler v0.5.0 runs,
    parseConfigurationPhaseOne; neither watches it: fsnotify serves only the TLS certificates, pkg/common/certs.go), so
    a ConfigMap changed alone would reach a running picker never; the digest on the pod template makes the change a
    new pod. The gateway's other pods need none: the body-based router reads no ConfigMap (BodyRouter: flags only), and
    the semantic router watches its config directory and reloads it, its digest only a backstop (semrouter.py)."""
    import hashlib  # here: validate's import floor has no hashlib (tests/test_cli.py) unless a gateway is asked for

    data = {file: "".join(f"{line}\n" for line in lines)}
    said = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(said.encode()).hexdigest()


@frozen
class InferenceGateway:
    namespace: str
    name: str  # the Gateway
    gateway_class: str
    listener_port: int
    request_timeout_s: int
    labels: tuple[tuple[str, str], ...]
    pickers: tuple[Picker, ...]
    router: BodyRouter
    epp_image: str = EPP_IMAGE
    grpc_port: int = EPP_GRPC_PORT
    health_port: int = EPP_HEALTH_PORT
    metrics_port: int = EPP_METRICS_PORT
    config_file: str = EPP_CONFIG_FILE
    scorers: tuple[str, ...] = EPP_SCORERS
    grace_s: int = EPP_GRACE_S
    run_as: int = EPP_RUN_AS  # gcr.io/distroless/static:nonroot, the image's base (Dockerfile BASE_IMAGE at v1.1.0)
    cpu: str = EPP_CPU
    memory: str = EPP_MEMORY
    model_header: str = MODEL_HEADER
    path_prefix: str = ROUTE_PATH_PREFIX
    expose: str = "cluster"  # gateway.expose
    service_type: str = "ClusterIP"  # the proxy Service (PROXY_SERVICE)
    service_annotations: tuple[tuple[str, str], ...] = ()
    parameters_group: str = PARAMETERS_GROUP
    parameters_kind: str = PARAMETERS_KIND
    semantic_router: SemanticRouter | None = None  # fleetform/semrouter.py: routing simple requests to a smaller model
    fallback: ModelFallback | None = None  # the way in, the second pass and the unknown-model answer
    prefix_routing: str = "approximate"  # gateway.prefix_routing
    listener: str = LISTENER_NAME  # the way in: the catch-all only
    pools_listener: str = POOLS_LISTENER  # the second pass: the models' routes
    pools_port: int = POOLS_PORT
    proxy_ceiling: int = proxy.LOOPBACK_MAX_REQUESTS  # requests in flight one proxy carries
    proxy_spread: tuple[str, ...] = proxy.SPREAD  # the topology keys its replicas spread over (ScheduleAnyway)
    proxies: proxy.ProxySizing = proxy.ProxySizing((), proxy.MIN_REPLICAS, None)  # its replicas (fleetform/proxy.py)

    @property
    def parameters_name(self) -> str:
        """The GatewayParameters the Gateway references: the proxy's Service and its pod's security context."""
        return self.name

    @property
    def proxy_selector(self) -> tuple[tuple[str, str], ...]:
        """What selects the proxy's pods: kgateway v2.1's deployer labels them with the Gateway's name
        (test/deployer/testdata/*-out.yaml, the Deployment's selector), which the proxy's PodDisruptionBudget and
        topology spread select by."""
        return (("gateway.networking.k8s.io/gateway-name", self.name),)

    @property
    def request_timeout(self) -> str:
        """The HTTPRoute's timeouts.request, a Gateway API Duration."""
        return f"{self.request_timeout_s}s"


def gateway_name(fleet) -> str:
    return f"{fleet.cloud_name}-gateway"


def router_name(fleet) -> str:
    """The body-based router's Deployment, Service, ServiceAccount, NetworkPolicy and kgateway objects."""
    return f"{gateway_name(fleet)}-bbr"


def fallback_route_name(fleet) -> str:
    """The catch-all HTTPRoute on the way in (ModelFallback.route); a model's own HTTPRoute has the model's name."""
    return f"{gateway_name(fleet)}-models"


def unknown_route_name(fleet) -> str:
    """The HTTPRoute (and its DirectResponse) on POOLS_LISTENER that answers a request naming no model of the fleet."""
    return f"{gateway_name(fleet)}-unknown-model"


def pools_backend_name(fleet) -> str:
    """The kgateway Backend of the second pass (ModelFallback.backend)."""
    return f"{gateway_name(fleet)}-pools"


def unknown_model_body(gateway: str, served: list[str]) -> str:
    """The catch-all's JSON answer, naming the models a request may ask for (in the blueprint's order, the semantic
    router's name last) while that fits the CRD's limit."""
    message = f"gateway {gateway} serves no model named by the request body's \"model\""
    listed = f"{message}; it serves: {', '.join(served)}"
    for text in (listed, message):
        body = json.dumps({"error": {"message": text, "type": "NotFoundError", "code": UNKNOWN_MODEL_STATUS}},
                          separators=(", ", ": ")).replace("}}", "} }")
        # (JSON allows the space; the renderer refuses any value holding a template delimiter, its injection guard)
        if len(body) <= UNKNOWN_MODEL_BODY_MAX:
            return body
    raise ValueError("the gateway's name alone passes the DirectResponse body limit")  # names are <= 63 characters


def build(fleet, kube) -> InferenceGateway | None:
    """The gateway objects of an inference fleet with a `gateway:` block and Kubernetes objects."""
    spec = fleet.gateway
    if spec is None or kube is None:
        return None
    common = tuple((k, v) for k, v in kube.servers[0].labels if k in (
        "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by")) if kube.servers else ()
    pickers = []
    for server in kube.servers:
        name = f"{server.name}-epp"
        selector = (("app.kubernetes.io/name", name), ("app.kubernetes.io/instance", f"{fleet.cloud_name}-{name}"))
        model = next(m for m in fleet.models if m.name == server.name)
        # an adapter is served by its base model's replicas under its own name (vLLM --lora-modules NAME=PATH):
        # the body-based router puts the request's `model` into MODEL_HEADER whatever it names, so the route
        # matches each adapter's name as well and sends it to the base model's pool
        adapters = tuple(a.name for a in model.lora.adapters) if model.lora is not None else ()
        events = kvevents.build(fleet, model, kube.namespace)
        extra = {} if events is None else dict(precise=events, image=kvevents.LLMD_IMAGE)
        lines = default_plugins(EPP_SCORERS) if events is None else tuple(kvevents.picker_config(events).splitlines())
        pickers.append(Picker(name, server.name, server.name, server.serving_selector, server.port,
                              selector + (("app.kubernetes.io/component", "endpoint-picker"),) + common, selector,
                              adapters, config_lines=lines, config_digest=plugins_digest(lines), **extra))
    name, router = gateway_name(fleet), router_name(fleet)
    selector = (("app.kubernetes.io/name", router), ("app.kubernetes.io/instance", router))
    service_type, annotations = PROXY_SERVICE[spec.expose]
    routed = semrouter.build(fleet, common)
    served = [m for p in pickers for m in (p.model,) + p.adapters] + ([routed.model_name] if routed else [])
    return InferenceGateway(kube.namespace, name, GATEWAY_CLASS, LISTENER_PORT,
                            spec.request_timeout_s,
                            (("app.kubernetes.io/component", "gateway"),) + common, tuple(pickers),
                            BodyRouter(router, selector + (("app.kubernetes.io/component", "body-based-router"),) + common,
                                       selector),
                            expose=spec.expose, service_type=service_type, service_annotations=annotations,
                            prefix_routing=spec.prefix_routing,
                            semantic_router=routed,
                            fallback=ModelFallback(
                                fallback_route_name(fleet), pools_backend_name(fleet), unknown_route_name(fleet),
                                UNKNOWN_MODEL_STATUS, unknown_model_body(name, served)),
                            proxies=proxy.size(fleet))
