"""The gateway of an inference fleet (issue 23): a Gateway, and per model an HTTPRoute, an InferencePool and its
endpoint picker. tests/test_k8s.py validates every object against the pinned CRDs (tests/crd/) and strictly;
this file checks what a schema cannot: that the objects name each other, that the picker scores with the
pinned chart's plugins, that its pod is admitted under Pod Security 'restricted' and not shut out by the
servers' NetworkPolicy, and the gateway-auth rule."""

from __future__ import annotations

import json
import re

import yaml

from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render
from test_k8s import _restricted_violations

EXAMPLE = ROOT / "blueprints/inference-gateway.yaml"


def _objects(source=EXAMPLE):
    result = check(source)
    assert result.model is not None, [f.to_text() for f in result.findings]
    files = render(result.model)
    by_kind: dict[str, dict[str, dict]] = {}
    for name, data in files.items():
        if "/k8s/" in name and not name.endswith("kustomization.yaml"):
            doc = yaml.safe_load(data)
            by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    return result, files, by_kind


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_every_route_reaches_a_pool_its_picker_and_the_models_replicas():
    _, files, objs = _objects()
    (gateway,) = objs["Gateway"].values()
    assert gateway["spec"]["gatewayClassName"] == "kgateway"
    servers = {n: d for n, d in objs["Deployment"].items() if not n.endswith(("-epp", "-bbr"))}
    # a route per model, the way in and the unknown-model answer (tests/test_router.py)
    routes = {n: r for n, r in objs["HTTPRoute"].items()
              if n not in ("chat-gateway-models", "chat-gateway-unknown-model")}
    assert set(routes) == set(objs["InferencePool"]) == set(servers) == {"qwen-7b", "llama-8b"}
    for name, route in routes.items():
        (parent,) = route["spec"]["parentRefs"]
        assert parent["name"] == gateway["metadata"]["name"] and parent["kind"] == "Gateway"
        (rule,) = route["spec"]["rules"]
        (backend,) = rule["backendRefs"]
        assert (backend["group"], backend["kind"]) == ("inference.networking.k8s.io", "InferencePool")
        pool = objs["InferencePool"][backend["name"]]
        # the route matches the name the model is served under, which the body-based router puts in the header
        container = servers[name]["spec"]["template"]["spec"]["containers"][0]
        # the model's own name first, then each LoRA adapter's name (vLLM --lora-modules NAME=PATH), all to this pool
        match, *adapters = rule["matches"]
        served = container["args"][container["args"].index("--lora-modules") + 1:] if adapters else []
        assert [m["headers"][0]["value"] for m in adapters] == [s.split("=", 1)[0] for s in served]
        # only the paths vLLM's API key guards: /invocations, /pooling, /score... answer without it (vllm#58144)
        assert match["path"] == {"type": "PathPrefix", "value": "/v1"}
        assert all(m["path"] == match["path"] for m in adapters)
        assert match["headers"] == [{"type": "Exact", "name": "X-Gateway-Model-Name",
                                     "value": _arg(container["args"], "--served-model-name")}]
        assert rule["timeouts"] == {"request": "300s"}
        # the pool selects this model's replicas, on their port
        labels = servers[name]["spec"]["template"]["metadata"]["labels"]
        assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert pool["spec"]["targetPorts"] == [{"number": container["ports"][0]["containerPort"]}]
        for other, deployment in servers.items():
            if other != name:
                assert not pool["spec"]["selector"]["matchLabels"].items() <= \
                    deployment["spec"]["template"]["metadata"]["labels"].items()
        # its picker: a Service on the port the pool names, selecting the picker's pods, which serve this pool
        ref = pool["spec"]["endpointPickerRef"]
        service = objs["Service"][ref["name"]]
        assert ref["port"]["number"] in [p["port"] for p in service["spec"]["ports"]]
        picker = objs["Deployment"][ref["name"]]
        pod = picker["spec"]["template"]
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        epp = pod["spec"]["containers"][0]
        assert _arg(epp["args"], "--pool-name") == name
        assert _arg(epp["args"], "--pool-namespace") == pool["metadata"]["namespace"]
        assert ref["port"]["number"] in [p["containerPort"] for p in epp["ports"]]
        assert pod["spec"]["serviceAccountName"] in objs["ServiceAccount"]
        binding = objs["RoleBinding"][pod["spec"]["serviceAccountName"]]
        assert binding["subjects"][0]["name"] == pod["spec"]["serviceAccountName"]
        assert binding["roleRef"]["name"] in objs["Role"]
        (volume,) = pod["spec"]["volumes"]
        assert volume["configMap"]["name"] in objs["ConfigMap"]


def test_the_picker_scores_with_the_pinned_charts_plugins():
    """queue, KV-cache use and cached prefix: the inferencepool chart's default-plugins.yaml at v1.1.0, copied
    under tests/data/gateway; the picker is told to read the file the ConfigMap holds."""
    _, _, objs = _objects()
    upstream = yaml.safe_load((ROOT / "tests/data/gateway/epp-default-plugins.yaml").read_text())
    for name, config in objs["ConfigMap"].items():
        (key,) = config["data"]
        assert yaml.safe_load(config["data"][key]) == upstream
        epp = objs["Deployment"][name]["spec"]["template"]["spec"]["containers"][0]
        assert _arg(epp["args"], "--config-file") == f"/config/{key}"
        assert epp["volumeMounts"] == [{"name": "plugins-config", "mountPath": "/config", "readOnly": True}]
        assert epp["image"] == "registry.k8s.io/gateway-api-inference-extension/epp:v1.1.0"


def test_the_picker_is_admitted_and_reachable():
    """Pod Security 'restricted' (the namespace enforces it), a token for the API it watches, and pods the
    servers' NetworkPolicy does not select: that policy opens the model port only, and the gateway's proxy
    calls the picker on 9002."""
    _, _, objs = _objects()
    (policy,) = [d for n, d in objs["NetworkPolicy"].items() if not n.endswith(("-epp", "-bbr"))]
    selected = policy["spec"]["podSelector"]["matchLabels"]
    pickers = [d for n, d in objs["Deployment"].items() if n.endswith("-epp")]
    assert len(pickers) == 2
    for picker in pickers:
        pod = picker["spec"]["template"]
        assert _restricted_violations(pod["spec"]) == []
        assert pod["spec"]["automountServiceAccountToken"] is True
        assert not selected.items() <= pod["metadata"]["labels"].items()
        # its own policy: the namespace (the gateway's proxy runs beside it) on ext-proc and health only
        own = objs["NetworkPolicy"][picker["metadata"]["name"]]["spec"]
        assert own["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        assert own["ingress"][0] == {"from": [{"podSelector": {}}],
                                     "ports": [{"protocol": "TCP", "port": 9002}, {"protocol": "TCP", "port": 9003}]}
        assert picker["spec"]["strategy"] == {"type": "Recreate"} and picker["spec"]["replicas"] == 1
    servers = [d for n, d in objs["Deployment"].items() if not n.endswith(("-epp", "-bbr"))]
    assert all(selected.items() <= d["spec"]["template"]["metadata"]["labels"].items() for d in servers)


def test_no_gateway_block_renders_no_gateway(tmp_path):
    text = EXAMPLE.read_text()
    path = tmp_path / "bp.yaml"
    path.write_text(re.sub(r"    gateway:\n      request_timeout_s: 300[^\n]*\n", "", text).replace(
        "replicas: {min: 0, max: 8}", "replicas: {min: 1, max: 8}"))
    _, files, objs = _objects(path)
    assert "Gateway" not in objs and "InferencePool" not in objs and "HTTPRoute" not in objs
    assert not any("epp" in name for name in files)


def _auth_findings(tmp_path, text: str) -> list[str]:
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return [f.to_text() for f in check(path).findings if f.rule == "gateway-auth"]


def test_gateway_auth(tmp_path):
    text = EXAMPLE.read_text()
    assert _auth_findings(tmp_path, text) == []
    # the first model without its key: one finding, on that model
    one = re.sub(r"        api_key_secret: chat-api-key[^\n]*\n", "", text, count=1)
    (finding,) = _auth_findings(tmp_path, one)
    assert "model 'qwen-7b'" in finding and "fleets[0].models[0].name" in finding
    assert len(_auth_findings(tmp_path, re.sub(r"        api_key_secret: chat-api-key[^\n]*\n", "", text))) == 2


def _zero_findings(tmp_path, text: str) -> list[str]:
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return [f"{f.rule} {f.to_text()}" for f in check(path).findings if f.rule in ("scale-to-zero", "cold-start-budget")]


def test_scale_to_zero_only_where_the_gateway_and_keda_can_wake_the_model(tmp_path):
    text = EXAMPLE.read_text()
    assert "replicas: {min: 0, max: 8}" in text
    assert _zero_findings(tmp_path, text) == []
    no_gateway = re.sub(r"    gateway:\n      request_timeout_s: 300[^\n]*\n", "", text)
    (finding,) = _zero_findings(tmp_path, no_gateway)
    assert finding.startswith("scale-to-zero") and "model 'llama-8b' may scale to 0" in finding
    # the HPA path cannot go to 0 (and has no wake trigger): refused even behind the gateway
    hpa = text.replace("autoscaler: keda", "autoscaler: hpa").replace("          kv_cache_target: 0.8      ", "          # ").replace(
        "          kv_cache_target: 0.75\n", "").replace("          ttft_p90_s: 1.5", "          # ttft")
    assert [f.split()[0] for f in _zero_findings(tmp_path, hpa)] == ["scale-to-zero"]
    # the cold-start budget still holds: 16 GB from the Hub at 0.2 GB/s + 120 s = 200 s, over 199
    assert [f.split()[0] for f in _zero_findings(tmp_path, text.replace("cold_start_latency_s: 300", "cold_start_latency_s: 199"))] \
        == ["cold-start-budget"]
    assert _zero_findings(tmp_path, text.replace("cold_start_latency_s: 300", "cold_start_latency_s: 200")) == []


def test_the_wake_trigger_is_on_the_model_at_zero_only_and_its_counters_are_scraped():
    _, files, objs = _objects()
    llama = yaml.safe_load(files["chat/k8s/llama-8b-scaledobject.yaml"])["spec"]
    qwen = yaml.safe_load(files["chat/k8s/qwen-7b-scaledobject.yaml"])["spec"]
    assert llama["minReplicaCount"] == 0 and qwen["minReplicaCount"] == 1
    assert [t.get("name") for t in llama["triggers"]] == [None, "kv-cache", "gateway-requests"]
    assert "gateway-requests" not in [t.get("name") for t in qwen["triggers"]]
    assert all("activationThreshold" not in t["metadata"] for t in qwen["triggers"])
    for name, monitor in objs["ServiceMonitor"].items():
        if name.endswith("-epp"):
            service = objs["Service"][name]
            assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
            assert monitor["spec"]["endpoints"][0]["port"] in [p["name"] for p in service["spec"]["ports"]]
            assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
            # and the picker serves /metrics without a token: the ServiceMonitor sends none
            epp = objs["Deployment"][name]["spec"]["template"]["spec"]["containers"][0]
            assert "--metrics-endpoint-auth=false" in epp["args"]
    assert {n for n in objs["ServiceMonitor"] if n.endswith("-epp")} == {"qwen-7b-epp", "llama-8b-epp"}


def test_gateway_install_warns_only_where_no_pulumi_program_installs_the_controllers(tmp_path):
    """On AWS the Pulumi program installs the gateway's CRDs and kgateway (tests/test_gateway_install.py): the
    example is not warned. An on-prem fleet's k8s/ folder goes to a cluster fleetform does not build, where
    nothing installs them: `kubectl apply -k` would fail on the Gateway, and validate says so first."""
    assert [f.rule for f in check(EXAMPLE).findings if f.rule == "gateway-install"] == []
    onprem = ROOT / "tests/corpus/398-gateway-install.yaml"
    (finding,) = [f for f in check(onprem).findings if f.rule == "gateway-install"]
    assert finding.severity == "warning" and "fleets[0].gateway" in finding.to_text()
    assert "kgateway v2.1.2" in finding.message and "gateway-api v1.4.0" in finding.message
    # the same on-prem fleet without a gateway: nothing to install
    path = tmp_path / "bp.yaml"
    path.write_text(onprem.read_text().replace("    gateway: {}\n", ""))
    assert [f.rule for f in check(path).findings if f.rule == "gateway-install"] == []


def _parse_picker_args(args, flags, bools, parser):
    """The picker's command line read as its runner reads it: Go's flag package (src/flag/flag.go, "Command line
    flag syntax": `-flag x` is for non-boolean flags only, a boolean is turned off only by `-flag=false`, and
    parsing stops just before the first non-flag argument) or spf13/pflag (the same flag forms, but a non-flag
    argument is set aside and parsing goes on: README, "flags may be interspersed with arguments"). Returns the flags
    given (name: value) and the arguments no flag took."""
    given, rest, i = {}, [], 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            if parser == "flag" or arg == "--":
                return given, rest + args[i:]
            rest.append(arg)
            i += 1
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        assert name in flags, arg
        if not eq:
            if name in bools:
                value = "true"
            else:
                i += 1
                value = args[i]
        given[name] = value
        i += 1
    return given, rest


def test_picker_args_are_parsed_as_go_parses_them():
    """The parser above is Go's on the forms that matter (negative controls of the test below)."""
    flags, bools = {"tracing": None, "config-file": "", "kv-cache-usage-percentage-metric": ""}, ["tracing"]
    args = ["--config-file", "/c", "--tracing", "false", "--kv-cache-usage-percentage-metric", "m"]
    assert _parse_picker_args(args, flags, bools, "flag") == (
        {"config-file": "/c", "tracing": "true"}, ["false", "--kv-cache-usage-percentage-metric", "m"])
    assert _parse_picker_args(args, flags, bools, "pflag") == (
        {"config-file": "/c", "tracing": "true", "kv-cache-usage-percentage-metric": "m"}, ["false"])
    fixed = ["--config-file", "/c", "--tracing=false", "--kv-cache-usage-percentage-metric", "m"]
    for parser in ("flag", "pflag"):
        assert _parse_picker_args(fixed, flags, bools, parser) == (
            {"config-file": "/c", "tracing": "false", "kv-cache-usage-percentage-metric": "m"}, [])


def test_every_picker_reads_the_metrics_vllm_0_11_shows():
    """Each endpoint picker's flags are its runner's (tests/data/kvevents/epp-flags.json: the extension's
    cmd/epp/runner/runner.go at v1.1.0, the default picker's image, and pkg/epp/server/options.go at v1.3.0, which
    llm-d-inference-scheduler v0.5.0 runs), and every vLLM metric it reads, by a flag or by its default, is one vLLM 0.11.0 registers without
    --show-hidden-metrics-for-version. The runner's default KV-cache metric, vllm:gpu_cache_usage_perc, is hidden in
    0.11: a picker left at it gets no KV-cache use from any replica and its kv-cache-utilization-scorer scores them
    all alike."""
    facts = json.loads((ROOT / "tests/data/kvevents/epp-flags.json").read_text())
    vllm = facts["vllm-0.11.0"]
    metric_flags = ("total-queued-requests-metric", "kv-cache-usage-percentage-metric", "lora-info-metric",
                    "cache-info-metric")
    for source, version in ((EXAMPLE, "v1.1.0"), (ROOT / "blueprints/inference-precise.yaml", "v1.3.0")):
        _, _, objs = _objects(source)
        flags = facts["versions"][version]
        pickers = [d for name, d in objs["Deployment"].items() if name.endswith("-epp")]
        assert pickers
        for picker in pickers:
            args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
            given, rest = _parse_picker_args(args, flags, facts["bool"][version], facts["parser"][version])
            # nothing left over: with Go's flag package a bool flag given as `--tracing false` is set to true and
            # "false" ends the parsing, so every flag after it (the metric's) is silently never read
            assert rest == [], (source.name, rest)
            assert given["tracing"] == "false" and given["metrics-endpoint-auth"] == "false", source.name
            for flag in metric_flags:
                metric = given.get(flag, flags[flag])
                assert metric in vllm["registered"] and metric not in vllm["hidden"], (source.name, flag, metric)


def test_diff_says_a_new_listener_port_rolls_the_gateways_proxy(tmp_path):
    """kgateway's deployer makes each listener port a containerPort of the proxy's Envoy (pkg/deployer/values_helpers.go
    GetPortsValues), so turning semantic_routing on (a third listener, 8083) replaces the proxy's pods and ends the
    streams on the old ones after kgateway's 10 s preStop: the diff says so instead of "nothing running notices"."""
    from conftest import run_cli

    router = ROOT / "blueprints/inference-router.yaml"
    text = router.read_text()
    start = text.index("    semantic_routing:\n")
    end = text.index("    models:\n", start)
    old = tmp_path / "no-router.yaml"
    old.write_text(text[:start] + text[end:])
    out = run_cli("diff", str(old), str(router)).stdout
    assert "[rolling] Gateway chat-gateway-chat-chat-gateway: its listeners' ports changed: kgateway rolls the " \
           "gateway's proxy pods" in out, out


def test_a_gateway_listener_change_that_keeps_the_ports_rolls_nothing():
    from fleetform.changes import UPDATE, Change, InputChange, classify

    def gateway(old, new):
        return Change(UPDATE, "kubernetes:gateway.networking.k8s.io/v1:Gateway", "chat-gateway",
                      inputs=[InputChange("spec.listeners", old, new, False)])

    http = {"name": "http", "port": 80, "protocol": "HTTP"}
    pools = {"name": "pools", "port": 8081, "protocol": "HTTP"}
    renamed = classify(gateway([http, pools], [http, {**pools, "name": "second"}]), ("", ""))
    assert renamed.cls == "in place", renamed
    added = classify(gateway(json.dumps([http]), json.dumps([http, pools])), ("", ""))
    assert added.cls == "rolling" and "proxy pods" in added.how, added
