"""Routing simple requests to a smaller model (issue 23): vLLM's Semantic Router v0.3.0 beside the gateway
(fleetform/semrouter.py, blueprints/inference-router.yaml). tests/test_k8s.py validates every object strictly,
against tests/crd/ and the cluster's admission; this file checks what a schema cannot: that the router's config uses
only keys its pinned source parses (tests/data/semantic-router/config-keys-v0.3.0.json, written by extract_keys.py
from src/semantic-router/pkg/config at v0.3.0), that its decisions send easy requests to the small model and set
the header the models' routes match, that its objects name each other and pass Pod Security restricted, the rules,
and the plan's blended cost.

What only a cluster proves (not run here): that the image downloads its classifier models and turns /ready within
the startup budget as a non-root user on a read-only root, that kgateway 2.1 runs the route-level ext-proc and
re-selects the chosen model's route after the router clears the route cache, and that the re-selected route's
endpoint picker runs (docs/gateway.md, 'Routing by difficulty')."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import ROOT, check_text, checked_model, rule_findings
from fleetform import semrouter
from fleetform.sizing import sizing
from fleetform.render import render
from test_gateway import _objects
from test_k8s import _restricted_violations

EXAMPLE = ROOT / "blueprints/inference-router.yaml"
KEYS = json.loads((ROOT / "tests/data/semantic-router/config-keys-v0.3.0.json").read_text())
ROUTER = "chat-gateway-semrouter"
# a decision plugin's `configuration` is decoded by its type into a struct (plugin_config.go at v0.3.0:
# GetHeaderMutationConfig -> decodeDecisionPlugin(d, "header_mutation", HeaderMutationPluginConfig))
PLUGIN_STRUCTS = {"header_mutation": "HeaderMutationPluginConfig"}
SCALARS = {"string", "bool", "int", "int64", "float32", "float64"}


def _struct(type_: str) -> str:
    type_ = type_.lstrip("*")
    return KEYS["aliases"].get(type_, type_)


def unknown_keys(value, type_: str, where: str = "") -> list[str]:
    """Keys of `value` that the Go type `type_` (as the pinned source declares it) does not parse."""
    type_ = type_.lstrip("*")
    if type_.startswith("[]"):
        return [k for i, item in enumerate(value) for k in unknown_keys(item, type_[2:], f"{where}[{i}]")]
    if type_.startswith("map["):
        inner = type_[type_.index("]") + 1:]
        return [k for key, item in value.items() for k in unknown_keys(item, inner, f"{where}.{key}")]
    if type_ in SCALARS:
        assert not isinstance(value, (dict, list)), f"{where}: a {type_} in the source, {value!r} here"
        return []
    fields = dict(KEYS["structs"][_struct(type_)])
    for key in [k for k in fields if k.startswith("<inline>:")]:  # an embedded struct's keys are the struct's own
        fields.update(KEYS["structs"][_struct(key.split(":", 1)[1])])
    assert isinstance(value, dict), f"{where}: a {type_} struct in the source, {value!r} here"
    out = []
    for key, item in value.items():
        if key not in fields or key.startswith("<inline>:"):
            out.append(f"{where}.{key}")
        elif _struct(type_) == "DecisionPlugin" and key == "configuration":
            out += unknown_keys(item, PLUGIN_STRUCTS[value["type"]], f"{where}.{key}")
        else:
            out += unknown_keys(item, fields[key], f"{where}.{key}")
    return out


def _config(objs) -> dict:
    return yaml.safe_load(objs["ConfigMap"][f"{ROUTER}-config"]["data"]["config.yaml"])


def test_the_key_list_was_taken_from_the_pinned_source():
    assert KEYS["source"].startswith(f"github.com/vllm-project/semantic-router {semrouter.VERSION},")
    assert semrouter.IMAGE.endswith(f":{semrouter.VERSION}")
    # the structs a v0.3 config file is parsed into (canonical_config.go, decision_config.go, signal_config.go)
    assert set(KEYS["structs"]["CanonicalConfig"]) == {"version", "listeners", "providers", "routing", "global"}
    assert set(KEYS["structs"]["ComplexityRule"]) >= {"name", "threshold", "hard", "easy"}


def test_every_key_of_the_rendered_config_exists_in_the_pinned_go_structs():
    _, _, objs = _objects(EXAMPLE)
    config = _config(objs)
    assert unknown_keys(config, "CanonicalConfig") == []
    # the walker does catch a key the source does not parse, at any depth (negative controls)
    broken = json.loads(json.dumps(config))
    broken["routing"]["signals"]["complexity"][0]["thresold"] = 0.2
    broken["routing"]["decisions"][0]["plugins"][0]["configuration"]["set"] = []
    broken["global"]["router"]["auto_model"] = "x"
    assert unknown_keys(broken, "CanonicalConfig") == [
        ".routing.signals.complexity[0].thresold", ".routing.decisions[0].plugins[0].configuration.set",
        ".global.router.auto_model"]


def test_the_config_sends_easy_requests_to_the_small_model_and_sets_the_routes_header():
    result, _, objs = _objects(EXAMPLE)
    config = _config(objs)
    (fleet,) = result.model.fleets
    spec = fleet.semantic_routing
    routes = {r["spec"]["rules"][0]["matches"][0]["headers"][0]["value"]: r
              for r in objs["HTTPRoute"].values() if "headers" in r["spec"]["rules"][0]["matches"][0]}
    assert config["version"] == "v0.3"
    assert config["global"]["router"]["auto_model_name"] == spec.model_name == "auto"
    assert config["global"]["router"]["clear_route_cache"] is True  # so the gateway re-selects the route
    (rule,) = config["routing"]["signals"]["complexity"]
    assert rule["threshold"] == spec.threshold and rule["easy"]["candidates"] == list(spec.easy)
    assert rule["hard"]["candidates"] == list(spec.hard)
    by_model = {}
    for d in config["routing"]["decisions"]:
        (ref,) = d["modelRefs"]
        (plugin,) = d["plugins"]
        (header,) = plugin["configuration"]["update"]
        # the header the chosen model's route matches, set to the chosen model
        assert header == {"name": "X-Gateway-Model-Name", "value": ref["model"]} and ref["model"] in routes
        by_model[ref["model"]] = d
    small, large = by_model[spec.small], by_model[spec.large]
    # easy (the signal's `<rule>:easy` result, complexity_rule_scoring.go) goes to the small model, at a higher
    # priority than the catch-all, whose empty AND matches every request (decision/engine.go evalAND)
    assert small["rules"]["conditions"] == [{"type": "complexity", "name": f"{rule['name']}:easy"}]
    assert large["rules"] == {"operator": "AND", "conditions": []} and small["priority"] > large["priority"]
    assert config["global"]["router"]["strategy"] == "priority"
    # every model the router may choose is a model card and a provider model (canonical_config.go's contract)
    cards = {m["name"] for m in config["routing"]["modelCards"]}
    assert cards == {m["name"] for m in config["providers"]["models"]} == {spec.small, spec.large}
    assert all(m["provider_model_id"] == m["name"] for m in config["providers"]["models"])
    assert config["providers"]["defaults"]["default_model"] == spec.large


def test_the_router_runs_on_its_own_route_and_names_its_objects():
    _, files, objs = _objects(EXAMPLE)
    # the router's listener has one route, every request there, the second pass its backend
    route = objs["HTTPRoute"][ROUTER]
    (match,) = route["spec"]["rules"][0]["matches"]
    assert match == {"path": {"type": "PathPrefix", "value": "/v1"}}
    (backend,) = route["spec"]["rules"][0]["backendRefs"]
    assert backend["kind"] == "Backend" and backend["name"] in objs["Backend"]
    # requests reach that listener by the way-in route of the routed name's header
    (match,) = objs["HTTPRoute"][f"{ROUTER}-way-in"]["spec"]["rules"][0]["matches"]
    assert match["headers"] == [{"type": "Exact", "name": "X-Gateway-Model-Name", "value": "auto"}]
    assert match["path"] == {"type": "PathPrefix", "value": "/v1"}
    policy = objs["TrafficPolicy"][ROUTER]["spec"]
    assert policy["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": ROUTER}]
    ext = objs["GatewayExtension"][policy["extProc"]["extensionRef"]["name"]]["spec"]
    assert ext["type"] == "ExtProc" and ext["extProc"]["failOpen"] is False
    # the router's own Envoy filter's modes (deploy/kubernetes/istio/envoyfilter.yaml at v0.3.0): it reads the
    # buffered body, where the `model` it rewrites is
    assert ext["extProc"]["processingMode"]["requestBodyMode"] == "BUFFERED"
    # and its message timeout: without one Envoy gives the router 200 ms for each answer (ext_proc.proto
    # message_timeout), and a slower classification fails the request, the filter failing closed
    assert ext["extProc"]["messageTimeout"] == "300s"
    ref = ext["extProc"]["grpcService"]["backendRef"]
    service = objs["Service"][ref["name"]]
    assert ref["port"] == service["spec"]["ports"][0]["port"] == semrouter.GRPC_PORT
    assert service["spec"]["ports"][0]["appProtocol"] == "grpc"
    deployment = objs["Deployment"][ROUTER]
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert ref["port"] in [p["containerPort"] for p in container["ports"]]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    config_mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert volumes["config"]["configMap"]["name"] in objs["ConfigMap"]
    # a directory mount, which the kubelet updates (a subPath mount never is), and the entrypoint's CONFIG_FILE
    # (scripts/entrypoint.sh at v0.3.0) names the file in it
    assert "subPath" not in config_mount
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["CONFIG_FILE"] == config_mount["mountPath"] + "/config.yaml"
    assert "config.yaml" in objs["ConfigMap"][volumes["config"]["configMap"]["name"]]["data"]
    listed = yaml.safe_load(files["chat/k8s/kustomization.yaml"])["resources"]
    assert {f"{ROUTER}-{k}.yaml" for k in semrouter_objects()} <= set(listed)


def test_a_change_of_the_routing_rolls_the_routers_pods(tmp_path):
    def digest(text):
        model = checked_model(text, tmp_path)
        return model.fleets[0].inference_gateway.semantic_router.config_digest

    before = digest(EXAMPLE.read_text())
    assert re.fullmatch(r"[0-9a-f]{64}", before) and before == digest(EXAMPLE.read_text())
    for change in ({"threshold": "0.2"}, {"small": "qwen-32b", "large": "qwen-7b"}, {"model_name": "cheap"}):
        assert digest(_bp(**change)) != before, change
    _, _, objs = _objects(EXAMPLE)
    annotations = objs["Deployment"][ROUTER]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["fleetform.dev/config-sha256"] == before


def semrouter_objects():
    from fleetform.render.gateway import SEMROUTER_OBJECTS

    return SEMROUTER_OBJECTS


def test_the_router_pod_is_restricted_pinned_and_probed_where_it_serves():
    _, _, objs = _objects(EXAMPLE)
    pod = objs["Deployment"][ROUTER]["spec"]["template"]["spec"]
    assert _restricted_violations(pod) == []
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/vllm-project/semantic-router/extproc:v0.3.0"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["args"] == ["--secure=false"]  # plaintext gRPC, as the chart runs it
    # /ready and /health on the HTTP API (pkg/apiserver/routes.go at v0.3.0), the startup budget the chart's
    for probe, path in (("startupProbe", "/ready"), ("readinessProbe", "/ready"), ("livenessProbe", "/health")):
        assert container[probe]["httpGet"] == {"path": path, "port": semrouter.API_PORT}
    assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] == 3600
    # the chart's resources (values.yaml at v0.3.0)
    assert container["resources"]["requests"]["cpu"] == "1" and container["resources"]["requests"]["memory"] == "3Gi"
    assert container["resources"]["limits"]["cpu"] == "2" and container["resources"]["limits"]["memory"] == "7Gi"
    # the classifier models' download directory is writable (canonical_defaults.go `models/...` under WORKDIR /app)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/app/models"]] and "emptyDir" in volumes[mounts["/tmp"]]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HOME"].startswith("/tmp") and env["HF_HOME"].startswith("/tmp")


def test_the_plan_prints_the_blended_cost_per_1000_requests():
    result, _, _ = _objects(EXAMPLE)
    (fleet,) = sizing(result.model)
    steps = {s.what: s for s in fleet.steps}
    step = steps["requests for 'auto': blended cost per 1,000 requests"]
    # 60% at qwen-7b's cost, 40% at qwen-32b's: each 1,000 / (QPS per GPU x 3,600 s) x a GPU's share of
    # g6e.12xlarge's $10.4926/h (4 x L40S), qwen-7b at 4 QPS per GPU, qwen-32b at 1
    gpu = 10.4926 / 4
    small, large = 1000 * gpu / (4 * 3600), 1000 * gpu / (1 * 3600)
    assert steps["qwen-7b: cost per 1,000 requests"].result.startswith(f"${small:.4f} at full")
    assert steps["qwen-32b: cost per 1,000 requests"].result.startswith(f"${large:.4f} at full")
    expected = 0.6 * small + 0.4 * large
    assert step.result.startswith(f"${expected:.4f} at full throughput"), step
    assert f"{1 - expected / large:.0%} less than all to qwen-32b" in step.result
    assert "the router's CPU on the system nodes not counted" in step.formula
    # without routing, no blend
    text = re.sub(r"    semantic_routing:\n(      [^\n]*\n|        [^\n]*\n)+", "", EXAMPLE.read_text())
    from fleetform.pipeline import check as check_path
    import tempfile, pathlib
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "bp.yaml"
        path.write_text(text)
        (plain,) = sizing(check_path(path).model)
    assert not [s for s in plain.steps if "blended" in s.what]


def _bp(**routing) -> str:
    text = EXAMPLE.read_text()
    for key, value in routing.items():
        if value is None:
            text = re.sub(rf"\n      {key}:[^\n]*", "", text, count=1)
        else:
            text = re.sub(rf"(\n      {key}:) [^\n]*", rf"\1 {value}", text, count=1)
    return text


def test_the_example_checks_clean(tmp_path):
    result = check_text(EXAMPLE.read_text(), tmp_path)
    assert [(f.severity.value if hasattr(f.severity, "value") else f.severity, f.rule) for f in result.findings] == []


def test_routing_without_a_gateway_is_an_error(tmp_path):
    text = EXAMPLE.read_text().replace("    gateway:\n      request_timeout_s: 300\n", "")
    (message,) = rule_findings(text, tmp_path, "semantic-router-gateway")
    assert "without a gateway" in message
    assert rule_findings(EXAMPLE.read_text(), tmp_path, "semantic-router-gateway") == []


def test_both_models_exist_differ_and_serve_chat(tmp_path):
    assert rule_findings(EXAMPLE.read_text(), tmp_path, "semantic-router-models") == []
    (missing,) = rule_findings(_bp(small="qwen-3b"), tmp_path, "semantic-router-models")
    assert "'qwen-3b' is not a model of fleet 'chat'" in missing
    (same,) = rule_findings(_bp(small="qwen-32b"), tmp_path, "semantic-router-models")
    assert "both 'qwen-32b'" in same
    pooling = EXAMPLE.read_text().replace(
        "        model: Qwen/Qwen2.5-7B-Instruct\n",
        "        model: Qwen/Qwen2.5-7B-Instruct\n        extra_args: [\"--task\", \"embed\"]\n")
    (embed,) = rule_findings(pooling, tmp_path, "semantic-router-models")
    assert "pooling model (--task embed)" in embed
    shorter = EXAMPLE.read_text().replace("max_model_len: 8192\n        api_key_secret: chat-api-key   #",
                                          "max_model_len: 4096\n        api_key_secret: chat-api-key   #")
    (context,) = rule_findings(shorter, tmp_path, "semantic-router-models")
    assert "4,096 tokens of context, less than the 8,192 of 'qwen-32b'" in context


def test_the_routed_name_is_no_model_or_adapter(tmp_path):
    assert rule_findings(EXAMPLE.read_text(), tmp_path, "semantic-router-name") == []
    (model,) = rule_findings(_bp(model_name="qwen-7b"), tmp_path, "semantic-router-name")
    assert "'qwen-7b' is a model too" in model
    adapters = EXAMPLE.read_text().replace(
        "        max_model_len: 8192\n        api_key_secret: chat-api-key   #",
        "        max_model_len: 8192\n        adapters:\n          - {name: auto, source: \"s3://acme-adapters/auto/\", "
        "rank: 16}\n        api_key_secret: chat-api-key   #")
    (adapter,) = rule_findings(adapters, tmp_path, "semantic-router-name")
    assert "a LoRA adapter of model 'qwen-7b'" in adapter


def test_the_router_fits_a_system_node(tmp_path):
    assert rule_findings(EXAMPLE.read_text(), tmp_path, "semantic-router-fit") == []
    # m7i.large: 2 vCPUs, 8 GiB: after its node agents, less than the router's 7Gi memory limit and 2 CPU limit
    small = EXAMPLE.read_text().replace("instance_type: m7i.2xlarge", "instance_type: m7i.large")
    found = rule_findings(small, tmp_path, "semantic-router-fit")
    assert any("memory limit (7168Mi)" in m for m in found) and any("CPU limit (2000m)" in m for m in found)
    # and the cluster counts its requests with the gateway's other pods (cluster-admission / capacity)
    model = checked_model(EXAMPLE.read_text(), tmp_path)
    (w,) = [w for w in model.cluster.workloads if w.name == f"chat/{ROUTER}"]
    assert w.min_replicas == w.max_replicas == 2
    assert w.cpu_m == 1000 and w.memory_mib == 3072 and w.ephemeral_gib == 11


def test_the_router_has_its_own_pass_through_the_gateway(tmp_path):
    """fleetform/semrouter.py LISTENER: a third listener on the Gateway, a way-in route for the routed name's header
    to a Static Backend on that listener, and the router's route there, whose backend is the models' second pass.
    tests/test_bbr_envoy.py runs the three passes in a real Envoy."""
    model = checked_model(EXAMPLE.read_text(), tmp_path)
    files = render(model)
    docs = {(d["kind"], d["metadata"]["name"]): d for n, data in files.items() if "/k8s/" in n
            and not n.endswith("kustomization.yaml") for d in [yaml.safe_load(data)]}
    listeners = {x["name"]: x["port"] for x in docs[("Gateway", "chat-gateway")]["spec"]["listeners"]}
    assert listeners == {"http": 80, "pools": 8081, "semantic": 8083}
    way_in = docs[("HTTPRoute", f"{ROUTER}-way-in")]["spec"]
    assert way_in["parentRefs"][0]["sectionName"] == "http"
    assert way_in["rules"][0]["matches"][0]["headers"] == [
        {"type": "Exact", "name": "X-Gateway-Model-Name", "value": "auto"}]
    assert way_in["rules"][0]["backendRefs"] == [{"group": "gateway.kgateway.dev", "kind": "Backend", "name": ROUTER}]
    assert docs[("Backend", ROUTER)]["spec"]["static"]["hosts"] == [{"host": "127.0.0.1", "port": 8083}]
    route = docs[("HTTPRoute", ROUTER)]["spec"]
    assert route["parentRefs"][0]["sectionName"] == "semantic" and "headers" not in route["rules"][0]["matches"][0]
    assert route["rules"][0]["backendRefs"] == [
        {"group": "gateway.kgateway.dev", "kind": "Backend", "name": "chat-gateway-pools"}]
    assert docs[("TrafficPolicy", ROUTER)]["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": ROUTER}]
    # the unknown-model answer lists the routed name with the models
    answer = json.loads(docs[("DirectResponse", "chat-gateway-unknown-model")]["spec"]["body"])
    assert answer["error"]["message"].endswith("it serves: qwen-7b, qwen-32b, auto")
    # a model named like the way-in route would replace it
    (named,) = rule_findings(EXAMPLE.read_text().replace("- name: qwen-7b", f"- name: {ROUTER}-way-in"), tmp_path,
                             "semantic-router-name")
    assert "the semantic router's objects" in named
    # no router: no third listener, no router objects
    text = re.sub(r"    semantic_routing:\n(      [^\n]*\n|        [^\n]*\n)+", "", EXAMPLE.read_text())
    assert "semantic_routing" not in text
    model = checked_model(text, tmp_path)
    assert model.fleets[0].inference_gateway.semantic_router is None
    assert not [n for n in render(model) if "semrouter" in n]
    gateway = next(yaml.safe_load(d) for n, d in render(model).items() if n.endswith("/k8s/gateway.yaml"))
    assert [x["name"] for x in gateway["spec"]["listeners"]] == ["http", "pools"]


@pytest.mark.parametrize("bad, where", [
    ("simple_share: 1.5", "simple_share"),
    ("threshold: 0", "threshold"),
    ("model_name: Auto", "model_name"),
])
def test_the_schema_refuses_bad_values(tmp_path, bad, where):
    key = bad.split(":")[0]
    text = re.sub(rf"\n      {key}:[^\n]*", f"\n      {bad}", EXAMPLE.read_text(), count=1)
    result = check_text(text, tmp_path)
    assert result.model is None
    assert any(f.rule == "schema" and where in f.to_text() for f in result.findings)


def test_the_threshold_is_required(tmp_path):
    """No default threshold: the router's shipped 0.75 makes a request easy only when it is 0.75 closer to the easy
    examples than to the hard ones (prototype_scoring.go), which ordinary prompts almost never are, so nearly every
    request would reach the large model while the plan printed simple_share's saving."""
    text = re.sub(r"\n      threshold:[^\n]*", "", EXAMPLE.read_text(), count=1)
    assert "threshold:" not in text
    result = check_text(text, tmp_path)
    assert result.model is None
    assert any(f.rule == "schema" and "threshold" in f.to_text() for f in result.findings)
