"""Model routing by the request body (issue 23): the Inference Extension's body-based router (BBR v1.1.0) copies
the OpenAI body's `model` into the header the gateway's routes match, wired into kgateway v2.1 as an ext-proc
GatewayExtension that a TrafficPolicy attaches to the Gateway. tests/test_k8s.py validates every object strictly and
against tests/crd/ (the kgateway kinds from its v2.1.2 CRDs, tests/crd/README.md); this file checks what a schema cannot:
that the objects name each other, that the router runs as the pinned chart runs it (tests/data/gateway/bbr/), that
the header it sets is the one the routes match, that it is admitted and reachable, and the gateway-names rule.

tests/test_bbr_envoy.py runs the routing in a real Envoy configured as kgateway v2.1.2 configures it (the router is
enabled per matched route, so a request without the header needs the catch-all route to meet it; the route is
re-selected after the router sets the header: ClearRouteCache in pkg/bbr/handlers/request.go, kgateway's
routeCacheAction default FromResponse). What only a cluster proves (not run here): kgateway's own translation and
its TLS to the router under the BackendConfigPolicy. docs/gateway.md has the curl to run."""

from __future__ import annotations

import json
import re

import jsonschema
import yaml

from conftest import ROOT
from fleetform.pipeline import check
from test_gateway import EXAMPLE, _objects
from test_k8s import _restricted_violations

BBR = ROOT / "tests/data/gateway/bbr"
ROUTER = "chat-gateway-bbr"


def test_the_router_is_wired_in_front_of_every_route():
    _, files, objs = _objects()
    gateway = objs["Gateway"]["chat-gateway"]
    policy = objs["TrafficPolicy"][ROUTER]["spec"]
    # attached to the Gateway's way in (the listener clients reach), so every request passes the router there, and
    # not again on the second pass
    way_in, pools = gateway["spec"]["listeners"]
    assert policy["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                     "name": gateway["metadata"]["name"], "sectionName": way_in["name"]}]
    assert pools["name"] != way_in["name"]
    extension = objs["GatewayExtension"][policy["extProc"]["extensionRef"]["name"]]
    assert extension["metadata"]["namespace"] == gateway["metadata"]["namespace"]
    ext = extension["spec"]
    assert ext["type"] == "ExtProc" and ext["extProc"]["failOpen"] is False
    ref = ext["extProc"]["grpcService"]["backendRef"]
    service = objs["Service"][ref["name"]]
    assert ref["port"] in [p["port"] for p in service["spec"]["ports"]]
    deployment = objs["Deployment"][ROUTER]
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert ref["port"] in [p["containerPort"] for p in container["ports"]]
    # the proxy speaks TLS to the router's Service
    tls = objs["BackendConfigPolicy"][ROUTER]["spec"]
    assert tls["targetRefs"] == [{"group": "", "kind": "Service", "name": service["metadata"]["name"]}]
    assert tls["tls"] == {"insecureSkipVerify": True}
    # and every file is listed by the fleet's kustomization
    listed = yaml.safe_load(files["chat/k8s/kustomization.yaml"])["resources"]
    assert {f"{ROUTER}-{k}.yaml" for k in ("deployment", "service", "serviceaccount", "networkpolicy",
                                            "gatewayextension", "trafficpolicy", "backendconfigpolicy")} <= set(listed)


def test_the_router_runs_as_the_pinned_chart_runs_it():
    values = yaml.safe_load((BBR / "values.yaml").read_text())["bbr"]
    template = (BBR / "templates-bbr.yaml").read_text()
    _, _, objs = _objects()
    (container,) = objs["Deployment"][ROUTER]["spec"]["template"]["spec"]["containers"]
    image = values["image"]
    assert container["image"] == f"{image['hub']}/{image['name']}:{image['tag']}"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (ports["grpc"], ports["grpc-health"]) == (values["port"], values["healthCheckPort"])
    # the chart's args: --streaming (Envoy's FULL_DUPLEX_STREAMED body mode), and a log level
    chart_args = re.findall(r'^\s+- "(--[a-z-]+)"', template, re.M)
    assert chart_args == ["--streaming", "--v"] and container["args"] == ["--streaming"]
    assert container["livenessProbe"]["grpc"]["port"] == values["healthCheckPort"]


def _istio_processing_mode() -> dict[str, str]:
    text = (BBR / "templates-istio.yaml").read_text()
    block = text[text.index("processing_mode:"):text.index("grpc_service:")]
    pairs = dict(re.findall(r"(\w+_mode): \"(\w+)\"", block))
    return {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): v for k, v in pairs.items()}


def test_the_filter_sees_what_the_charts_filter_sees_and_fails_closed():
    """The chart's only Envoy wiring is Istio's EnvoyFilter: its processing modes, in kgateway's camelCase names,
    are the GatewayExtension's, and like it the filter does not let a request past a router that is down."""
    _, _, objs = _objects()
    ext = objs["GatewayExtension"][ROUTER]["spec"]["extProc"]
    assert _istio_processing_mode() == ext["processingMode"]
    assert ext["processingMode"]["requestBodyMode"] == "FULL_DUPLEX_STREAMED"
    text = (BBR / "templates-istio.yaml").read_text()
    assert "failure_mode_allow: false" in text and ext["failOpen"] is False
    assert "insecureSkipVerify: true" in text  # the DestinationRule: the router's certificate is self-signed


def test_the_header_the_router_sets_is_the_one_the_routes_match():
    """pkg/bbr/handlers/request.go at v1.1.0: `const modelHeader = "X-Gateway-Model-Name"`, set from the body's
    `model` (RequestBody.Model, json:"model"); every route matches that header with the served model name."""
    upstream = yaml.safe_load_all((ROOT / "tests/data/gateway/bbr-example-httproute_bbr.yaml").read_text())
    upstream_headers = {h["name"] for d in upstream if d for r in d["spec"]["rules"] for m in r["matches"]
                        for h in m.get("headers", ())}
    assert upstream_headers == {"X-Gateway-Model-Name"}
    _, _, objs = _objects()
    served = set()
    for route in objs["HTTPRoute"].values():
        (rule,) = route["spec"]["rules"]
        if "headers" not in rule["matches"][0]:
            continue  # the way in and the unknown-model answer (test_every_request_enters_by_the_catch_all_...)
        for match in rule["matches"]:  # the model's name, then its LoRA adapters' (fleetform/lora.py)
            (header,) = match["headers"]
            assert header["name"] in upstream_headers and header["type"] == "Exact"
            served.add(header["value"])
    # the `model` a client sends: vLLM's --served-model-name, and llama-8b's two adapters' --lora-modules names
    assert served == {"qwen-7b", "llama-8b", "llama-8b-sql", "llama-8b-support"}


def test_the_router_is_admitted_and_reachable():
    _, _, objs = _objects()
    deployment = objs["Deployment"][ROUTER]
    pod = deployment["spec"]["template"]
    assert _restricted_violations(pod["spec"]) == []
    # controller-runtime reads the in-cluster config at start (cmd/bbr/main.go: ctrl.GetConfig)
    assert pod["spec"]["automountServiceAccountToken"] is True
    assert objs["ServiceAccount"][ROUTER]["automountServiceAccountToken"] is False
    # more than one replica, none taken down before its successor is ready: every request passes it
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    own = objs["NetworkPolicy"][ROUTER]["spec"]
    assert own["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert own["ingress"] == [{"from": [{"podSelector": {}}],
                               "ports": [{"protocol": "TCP", "port": 9004}, {"protocol": "TCP", "port": 9005}]}]
    # the model servers' policy does not select it (that one opens the model port only)
    (servers,) = [d for n, d in objs["NetworkPolicy"].items() if not n.endswith(("-epp", "-bbr"))]
    assert not servers["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()


def test_the_kgateway_schemas_refuse_a_misspelt_field():
    _, _, objs = _objects()
    for kind in ("GatewayExtension", "TrafficPolicy", "BackendConfigPolicy"):
        schema = json.loads((ROOT / f"tests/crd/gateway.kgateway.dev_v1alpha1_{kind}.json").read_text())
        doc = objs[kind][ROUTER]
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(doc)) == []
        spec = dict(doc["spec"], failopen=False)
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(dict(doc, spec=spec)))
    ext = objs["GatewayExtension"][ROUTER]
    bad = json.loads(json.dumps(ext))
    bad["spec"]["extProc"]["processingMode"]["requestBodyMode"] = "FULL_DUPLEX"
    schema = json.loads((ROOT / "tests/crd/gateway.kgateway.dev_v1alpha1_GatewayExtension.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))


def test_no_gateway_no_router(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(re.sub(r"    gateway:\n      request_timeout_s: 300[^\n]*\n", "", EXAMPLE.read_text()).replace(
        "replicas: {min: 0, max: 8}", "replicas: {min: 1, max: 8}"))
    _, files, objs = _objects(path)
    assert not any("bbr" in name for name in files)
    assert not {"GatewayExtension", "TrafficPolicy", "BackendConfigPolicy"} & set(objs)


def test_a_model_named_like_the_router_is_refused(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(EXAMPLE.read_text().replace("- name: qwen-7b", f"- name: {ROUTER}"))
    (finding,) = [f for f in check(path).findings if f.rule == "gateway-names"]
    assert finding.severity == "error" and "fleets[0].models[0].name" in finding.to_text()
    assert "body-based router" in finding.message
    assert [f for f in check(EXAMPLE).findings if f.rule == "gateway-names"] == []


def test_the_gateways_pods_are_counted_where_they_run(tmp_path):
    """The pickers and the router tolerate no GPU taint: the cluster-admission rule places them on the system node
    group with the cluster's services, at the requests their Deployments ask for."""
    result, _, objs = _objects()
    counted = {w.name: w for w in result.model.cluster.workloads if w.name.startswith("chat/") and w.fleet is None}
    assert set(counted) == {"chat/qwen-7b-epp", "chat/llama-8b-epp", f"chat/{ROUTER}"}
    for name, w in counted.items():
        deployment = objs["Deployment"][name.split("/")[1]]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert (w.min_replicas, w.max_replicas) == (deployment["spec"]["replicas"],) * 2
        assert w.cpu_m == {"2": 2000, "500m": 500}[container["resources"]["requests"]["cpu"]]
    # on the default m7i.large system nodes (1770m allocatable) no picker is admitted
    path = tmp_path / "bp.yaml"
    path.write_text(EXAMPLE.read_text().replace("system_nodes: {instance_type: m7i.xlarge, nodes: 2}",
                                                "system_nodes: {instance_type: m7i.large, nodes: 2}"))
    found = [f.message for f in check(path).findings if f.rule == "cluster-admission"]
    assert len(found) == 2 and all("-epp" in m and "CPU 2000m > 1770m allocatable" in m for m in found)


def test_the_proxy_speaks_http2_to_the_router():
    """ext-proc is gRPC, which runs over HTTP/2 only; kgateway builds a Service's cluster as HTTP/2 only when the
    port's appProtocol (or, without one, its name) is exactly one of http2, grpc, grpc-web or kubernetes.io/h2c
    (kgateway internal/kgateway/ir ParseAppProtocol, read from the port by plugins/kubernetes/k8s.go), else
    HTTP/1.1, which the router's gRPC server refuses. The chart marks its port `appProtocol: HTTP2`; kgateway's
    match is exact (case-sensitive), so the port says `grpc`. Only a cluster proves the stream is set up."""
    template = (BBR / "templates-bbr.yaml").read_text()
    assert "appProtocol: HTTP2" in template
    _, _, objs = _objects()
    ref = objs["GatewayExtension"][ROUTER]["spec"]["extProc"]["grpcService"]["backendRef"]
    (port,) = [p for p in objs["Service"][ROUTER]["spec"]["ports"] if p["port"] == ref["port"]]
    assert port.get("appProtocol", port["name"]) in {"http2", "grpc", "grpc-web", "kubernetes.io/h2c"}


def test_a_node_drain_leaves_a_router_running():
    """Two replicas keep the endpoint up through a drain only if they are on different nodes and the drain may
    not evict both at once: the router fails closed, so with both gone every request fails. kubectl drain and the
    Cluster Autoscaler evict through the Eviction API, which honours a PodDisruptionBudget; the scheduler spreads
    the replicas over nodes by hostname (soft, as the model servers' Deployments do, so one system node still
    schedules both)."""
    _, files, objs = _objects()
    pod = objs["Deployment"][ROUTER]["spec"]["template"]
    selector = objs["Deployment"][ROUTER]["spec"]["selector"]["matchLabels"]
    (spread,) = pod["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway" and spread["labelSelector"]["matchLabels"] == selector
    pdb = objs["PodDisruptionBudget"][ROUTER]["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"]["matchLabels"] == selector
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert f"{ROUTER}-pdb.yaml" in yaml.safe_load(files["chat/k8s/kustomization.yaml"])["resources"]


def test_every_request_enters_by_the_catch_all_and_comes_back_for_a_second_pass():
    """The way in (fleetform/gateway.py ModelFallback): the Gateway's first listener has one route, the models' path
    prefix with no header match, so every request matches it and the router (enabled per route by kgateway) runs; its
    backend is a Static Backend on 127.0.0.1 and the Gateway's second listener, so the request re-enters the same
    proxy with the header set. There the models' routes, and a rule with no header whose action is a kgateway
    DirectResponse (an HTTPRoute ExtensionRef filter: kgateway v2.1 plugins/directresponse) for a `model` no route
    matches. tests/test_bbr_envoy.py runs it."""
    _, files, objs = _objects()
    gateway = objs["Gateway"]["chat-gateway"]
    way_in, pools = gateway["spec"]["listeners"]
    parent = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "chat-gateway"}
    route = objs["HTTPRoute"]["chat-gateway-models"]
    assert route["spec"]["parentRefs"] == [{**parent, "sectionName": way_in["name"]}]
    on_way_in = [r for r in objs["HTTPRoute"].values()
                 if any(p.get("sectionName") != pools["name"] for p in r["spec"]["parentRefs"])]
    assert on_way_in == [route]  # nothing else is reachable without the second pass
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1"}}]  # the models' prefix, no header
    ((ref),) = rule["backendRefs"]
    assert (ref["group"], ref["kind"]) == ("gateway.kgateway.dev", "Backend")
    assert rule["timeouts"] == objs["HTTPRoute"]["qwen-7b"]["spec"]["rules"][0]["timeouts"]
    backend = objs["Backend"][ref["name"]]
    assert backend["metadata"]["namespace"] == route["metadata"]["namespace"]
    assert backend["spec"] == {"type": "Static", "static": {"hosts": [{"host": "127.0.0.1", "port": pools["port"]}]}}
    assert pools["port"] not in (9091, 8082, 19000)  # kgateway v2.1 validate/gateway.go reservedPorts

    unknown = objs["HTTPRoute"]["chat-gateway-unknown-model"]
    assert unknown["spec"]["parentRefs"] == [{**parent, "sectionName": pools["name"]}]
    assert objs["HTTPRoute"]["qwen-7b"]["spec"]["parentRefs"] == unknown["spec"]["parentRefs"]
    (rule,) = unknown["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1"}}]
    model_prefixes = {m["path"]["value"] for r in objs["HTTPRoute"].values() if r not in (route, unknown)
                      for m in r["spec"]["rules"][0]["matches"]}
    assert model_prefixes == {"/v1"}  # so Gateway API precedence (more header matches) picks a model's route first
    assert "backendRefs" not in rule
    ((flt),) = rule["filters"]
    ref = flt["extensionRef"]
    assert flt["type"] == "ExtensionRef" and (ref["group"], ref["kind"]) == ("gateway.kgateway.dev", "DirectResponse")
    answer = objs["DirectResponse"][ref["name"]]
    assert answer["metadata"]["namespace"] == route["metadata"]["namespace"]
    assert answer["spec"]["status"] == 404
    body = json.loads(answer["spec"]["body"])
    assert body["error"]["code"] == 404 and body["error"]["message"].endswith(
        "it serves: qwen-7b, llama-8b, llama-8b-sql, llama-8b-support")
    listed = yaml.safe_load(files["chat/k8s/kustomization.yaml"])["resources"]
    assert {"chat-gateway-models-httproute.yaml", "chat-gateway-pools-backend.yaml",
            "chat-gateway-unknown-model-httproute.yaml", "chat-gateway-unknown-model-directresponse.yaml"} <= set(listed)


def test_the_catch_all_answer_drops_the_model_list_past_the_crds_limit():
    from fleetform.gateway import UNKNOWN_MODEL_BODY_MAX, unknown_model_body

    few = json.loads(unknown_model_body("g", ["a", "b"]))
    assert few["error"]["message"].endswith("it serves: a, b")
    many = unknown_model_body("g", [f"model-{i:03d}-" + "x" * 50 for i in range(80)])
    assert len(many) <= UNKNOWN_MODEL_BODY_MAX and "it serves" not in many
    assert json.loads(many)["error"]["type"] == "NotFoundError"
