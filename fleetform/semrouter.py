"""Routing simple requests to a smaller model (issue 23): vLLM's Semantic Router beside a fleet's gateway.

Why this router, pinned at vllm-project/semantic-router v0.3.0 (9afc5a421886f44085f9070a8fbd878b80724f64,
2026-06-05, its latest release; v0.1.0 and v0.2.0 predate the v0.3 config contract):
- it is an Envoy external processor (gRPC ext-proc on 50051), the same kind of component as the Inference
  Extension's body-based router this repository already wires into kgateway (fleetform/gateway.py), so it runs
  in the fleet's namespace and needs no proxy of its own;
- it decides by the request's content on CPU (its complexity signal compares a prompt's embedding with example
  prompts of easy and hard requests: pkg/classification/complexity_rule_scoring.go), rewrites the body's
  `model` to the chosen one and sets headers through a decision's header_mutation plugin
  (pkg/extproc/processor_req_body_routing.go, req_filter_header_mutation.go), so a request reaches the chosen
  model's existing route and InferencePool;
- it ships a release image and a chart (deploy/helm/semantic-router) whose resources and ports are the
  figures used here.
Alternatives read: RouteLLM (lm-sys/RouteLLM README: `python -m routellm.openai_server --routers mf
--strong-model ... --weak-model ...`) is an OpenAI-compatible server in Python that routes each prompt between a
strong and a weak model with trained routers and a cost threshold; it is a proxy of its own that calls the models'
endpoints, so it would sit in front of the gateway (a second hop, its own authentication and scaling) rather than
in it, and its routers are trained for one model pair, where the complexity signal here takes the blueprint's
example prompts. The Inference Extension alone (v1.1.0) routes by the model a request names
(body-based router) and picks a replica within one pool (endpoint picker): nothing in it looks at how hard a
request is.

The release: the extproc image is pushed as ghcr.io/vllm-project/semantic-router/extproc:<tag> when the tag is
pushed (.github/workflows/docker-release.yml at v0.3.0); no digest is published in the repository, so the tag
is the pin.
"""

from __future__ import annotations

import json
from dataclasses import astuple, replace

from .records import frozen

VERSION = "v0.3.0"
IMAGE = f"ghcr.io/vllm-project/semantic-router/extproc:{VERSION}"
GRPC_PORT = 50051  # ext-proc (cmd/runtime_bootstrap.go --port default; the chart's service.grpc.port)
API_PORT = 8080  # the router's HTTP API: /health and /ready (pkg/apiserver/routes.go); --api-port default
METRICS_PORT = 9190  # Prometheus metrics (--metrics-port default; the chart's service.metrics.port)
ARGS = ("--secure=false",)
"""As the chart runs it (values.yaml `args`): plaintext gRPC inside the namespace (cmd/runtime_bootstrap.go
--secure defaults to false too; the entrypoint passes --config itself, scripts/entrypoint.sh)."""
CPU_REQUEST, MEMORY_REQUEST = "1", "3Gi"
CPU_LIMIT, MEMORY_LIMIT = "2", "7Gi"
"""The chart's resources at v0.3.0 (deploy/helm/semantic-router/values.yaml: requests 1 CPU / 3Gi, limits 2 CPU /
7Gi): its classifiers (mmBERT embedding and classification models, canonical_defaults.go) run on CPU."""
MODELS_DIR = "/app/models"
MODELS_SIZE = "10Gi"
"""The router downloads its classifier models from the Hugging Face Hub at start into models/ under its working
directory /app (canonical_defaults.go paths `models/...`; tools/docker/Dockerfile.extproc WORKDIR /app); the chart
mounts a 10Gi claim there (values.yaml persistence.size). Here an emptyDir of that size: the root file system is
read-only, and a restarted pod downloads again (the pod needs egress to huggingface.co)."""
TMP_SIZE = "1Gi"  # /tmp: HOME and the Hub client's cache
EPHEMERAL_REQUEST = "11Gi"  # MODELS_SIZE + TMP_SIZE: the emptyDirs live on the node's disk, so the scheduler counts them
CONFIG_DIR = "/app/fleetform"
"""The ConfigMap is mounted as this directory, not with subPath over the image's /app/config/config.yaml (as the
chart does): the kubelet never updates a subPath mount (Kubernetes docs, ConfigMaps: "A container using a ConfigMap
as a subPath volume mount will not receive ConfigMap updates"), while the router watches its config file's
directory and reloads on a change (pkg/extproc/server_config_watch.go at v0.3.0). The entrypoint takes the file
from CONFIG_FILE (scripts/entrypoint.sh: CONFIG_FILE_PATH=${CONFIG_FILE:-/app/config/config.yaml})."""
RUN_AS = 65532
"""The image sets no USER (Dockerfile.extproc: root); Pod Security restricted needs a non-root user, and the router
writes only under MODELS_DIR and /tmp (HOME and the Hub cache point there), both emptyDirs."""
REPLICAS = 2
"""The chart's default is 1; every routed request passes the router and the filter fails closed (FAIL_OPEN), so
one pod would make a drain an outage of routing by difficulty. The config keeps no state between requests (the
semantic cache is off, no learning selector): two replicas route alike."""
FAIL_OPEN = False
PROCESSING = (("requestHeaderMode", "SEND"), ("responseHeaderMode", "SEND"),
              ("requestBodyMode", "BUFFERED"), ("responseBodyMode", "NONE"),
              ("requestTrailerMode", "SKIP"), ("responseTrailerMode", "SKIP"))
"""The processing modes of the router's own Istio filter at v0.3.0 (deploy/kubernetes/istio/envoyfilter.yaml:
request headers and the buffered body, response headers, no body or trailers), in kgateway's ProcessingMode names."""
MESSAGE_TIMEOUT = "300s"
"""How long the proxy waits for each of the router's answers, as the router's own Istio filter sets it
(deploy/kubernetes/istio/envoyfilter.yaml at v0.3.0: message_timeout: 300s; its other deployments 60s to 300s).
Left out, Envoy waits 200 ms (envoy ext_proc.proto ExternalProcessor.message_timeout: "If not configured, default
is 200 milliseconds"; kgateway v2.1 ExtProcProvider.messageTimeout passes it through), and with failOpen false a
classification slower than that (an embedding of a long prompt on CPU) fails the request."""
STARTUP_PERIOD_S, STARTUP_FAILURES = 10, 360
"""The chart's startupProbe (10 s x 360: an hour for the model download on a slow link)."""
COMPLEXITY_RULE = "difficulty"
DEFAULT_EASY = ("answer briefly", "quick summary", "simple rewrite")
DEFAULT_HARD = ("solve this step by step", "compare multiple tradeoffs", "analyze the root cause")
"""The example prompts of the router's shipped complexity signal (config/config.yaml and
config/signal/complexity/escalation.yaml at v0.3.0). A request is easy when its score against the hard examples
minus its score against the easy ones is below -threshold, hard above +threshold, medium between
(complexity_rule_scoring.go classifyComplexityDifficulty): only easy requests go to the small model. The shipped
threshold, 0.75, is no default here: the schema requires one, since at 0.75 ordinary prompts are almost never easy."""
DEFAULT_MODEL_NAME = "auto"


def spec(item: dict, path):
    from .model import SemanticRoutingSpec

    return SemanticRoutingSpec(
        item["small"], item["large"], item.get("model_name", DEFAULT_MODEL_NAME),
        float(item["threshold"]), float(item["simple_share"]),
        tuple(item.get("easy", DEFAULT_EASY)), tuple(item.get("hard", DEFAULT_HARD)), path)


@frozen
class Choice:
    """One decision of the router's config: requests it matches go to `model`, whose route matches `header`."""

    name: str
    description: str
    priority: int
    condition: str | None  # a complexity signal result (`difficulty:easy`), None: every request
    model: str


LISTENER = "semantic"
PORT = 8083
"""The gateway's listener of the router (fleetform/gateway.py has the way in, 80, and the models' second pass, 8081;
kgateway reserves 8082, 9091 and 19000). A request for `model_name` goes through the proxy three times:
1. the way in: the body-based router sets MODEL_HEADER to `model_name`, and the way-in route for that header (`way_in`)
   sends the request back into the proxy on this listener (a Static Backend named `name` on 127.0.0.1:PORT);
2. here one route (`name`), the path prefix with no header, on which the router runs: it rewrites the body's `model`
   and the header to the model it chooses and clears the route cache; the route is still this one, whose backend is
   the gateway's second pass (fleetform/gateway.py ModelFallback.backend);
3. the chosen model's route, where that model's endpoint picker schedules the request.
In one pass the router (a per-route filter, like the body-based router) would be in the chain only for requests that
arrived with the header, and a routed request would be scheduled by the picker of the route it arrived on, not by
the chosen model's (kgateway runs the picker filter first: docs/gateway.md, "Routing by the body's model")."""


@frozen
class SemanticRouter:
    """The router's Deployment, Service, ServiceAccount, NetworkPolicy, PodDisruptionBudget, ConfigMap, its listener's
    route and Backend, the way-in route for requests naming `model_name`, and the kgateway GatewayExtension and
    TrafficPolicy that run it on its route (LISTENER says how a request passes)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    pod_selector: tuple[tuple[str, str], ...]
    model_name: str  # what a client sends as `model` (and in the route's header) to be routed by difficulty
    small: str
    large: str
    threshold: float
    easy: tuple[str, ...]
    hard: tuple[str, ...]
    choices: tuple[Choice, ...]
    way_in: str  # the HTTPRoute on the gateway's way in for requests naming model_name
    listener: str = LISTENER
    port: int = PORT
    image: str = IMAGE
    args: tuple[str, ...] = ARGS
    grpc_port: int = GRPC_PORT
    api_port: int = API_PORT
    metrics_port: int = METRICS_PORT
    replicas: int = REPLICAS
    cpu_request: str = CPU_REQUEST
    memory_request: str = MEMORY_REQUEST
    cpu_limit: str = CPU_LIMIT
    memory_limit: str = MEMORY_LIMIT
    models_dir: str = MODELS_DIR
    models_size: str = MODELS_SIZE
    tmp_size: str = TMP_SIZE
    ephemeral_request: str = EPHEMERAL_REQUEST
    config_dir: str = CONFIG_DIR
    config_digest: str = ""  # sha256 of everything the config says: on the pod template, so a change rolls the pods
    run_as: int = RUN_AS
    fail_open: bool = FAIL_OPEN
    processing: tuple[tuple[str, str], ...] = PROCESSING
    message_timeout: str = MESSAGE_TIMEOUT
    startup_period_s: int = STARTUP_PERIOD_S
    startup_failures: int = STARTUP_FAILURES
    rule: str = COMPLEXITY_RULE
    config_version: str = "v0.3"

    @property
    def config_name(self) -> str:
        return f"{self.name}-config"

    @property
    def config_path(self) -> str:
        return f"{self.config_dir}/config.yaml"


def router_name(fleet) -> str:
    from .gateway import gateway_name

    return f"{gateway_name(fleet)}-semrouter"


def build(fleet, common: tuple[tuple[str, str], ...]) -> SemanticRouter | None:
    """The router of a fleet whose blueprint asks for `semantic_routing` and has a gateway; None otherwise, or where
    a named model is not in the fleet (semantic-router-models says so)."""
    spec = fleet.semantic_routing
    if spec is None or fleet.gateway is None:
        return None
    names = {m.name for m in fleet.models}
    if spec.small not in names or spec.large not in names:
        return None
    name = router_name(fleet)
    selector = (("app.kubernetes.io/name", name), ("app.kubernetes.io/instance", name))
    choices = (
        Choice("simple", f"requests the complexity signal finds easy go to {spec.small}", 200,
               f"{COMPLEXITY_RULE}:easy", spec.small),
        # an AND of no condition matches every request (pkg/decision/engine.go evalAND at v0.3.0), and the priority
        # strategy takes the highest-priority match: easy requests match both and go to the small model
        Choice("default", f"every other request (medium, hard, or unclassified) goes to {spec.large}", 100,
               None, spec.large),
    )
    router = SemanticRouter(name, selector + (("app.kubernetes.io/component", "semantic-router"),) + common,
                            selector, spec.model_name, spec.small, spec.large, spec.threshold, spec.easy, spec.hard,
                            choices, f"{name}-way-in")
    import hashlib  # here: validate's import floor has no hashlib (tests/test_cli.py) unless a router is asked for

    # the config's inputs (the ConfigMap's template adds only constants of this module and the gateway's timeout)
    said = json.dumps([VERSION, router.model_name, router.small, router.large, router.threshold, router.easy,
                       router.hard, [list(c) for c in (astuple(c) for c in choices)], fleet.gateway.request_timeout_s,
                       router.grpc_port, router.api_port], sort_keys=True)
    return replace(router, config_digest=hashlib.sha256(said.encode()).hexdigest())
