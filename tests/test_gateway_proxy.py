"""The gateway's proxy (kgateway's Envoy Deployment and Service, which kgateway makes from the Gateway): a
GatewayParameters the Gateway references keeps its Service off the Internet and its pod admitted under the
namespace's Pod Security "restricted" profile. kgateway's defaults (tests/data/gateway/kgateway-default-proxy.yaml)
are a LoadBalancer Service, which EKS's in-tree cloud provider makes an internet-facing Classic ELB, and an Envoy
container with no seccompProfile, which "restricted" refuses."""

from __future__ import annotations

import copy
import json

import jsonschema
import yaml

from conftest import ROOT
from test_gateway import EXAMPLE, _objects
from test_gateway_install import example  # noqa: F401 (the recorded plan of the example, a fixture)
from test_k8s import _restricted_violations

SCHEMA = json.loads((ROOT / "tests/crd/gateway.kgateway.dev_v1alpha1_GatewayParameters.json").read_text())
DEFAULTS = yaml.safe_load((ROOT / "tests/data/gateway/kgateway-default-proxy.yaml").read_text())
INTERNAL = ("service.beta.kubernetes.io/aws-load-balancer-internal", "service.beta.kubernetes.io/aws-load-balancer-scheme")


def _merge(dst, src):
    """kgateway's deployer merge of a Gateway's GatewayParameters over the defaults (internal/kgateway/deployer/
    merge.go): a field set in src wins, objects merge field by field, lists append (deepMergeSlices)."""
    if isinstance(dst, dict) and isinstance(src, dict):
        out = dict(dst)
        for key, value in src.items():
            out[key] = _merge(dst[key], value) if key in dst else value
        return out
    if isinstance(dst, list) and isinstance(src, list):
        return dst + src if src else src
    return src


def _proxy_pod(params: dict) -> dict:
    """The pod spec kgateway renders from the merged parameters: the pod's securityContext and the Envoy
    container's (the proxy listens on the Gateway's port plus 8000 when it is below 1024, no hostPort)."""
    kube = _merge(DEFAULTS, params.get("spec", {}))["kube"]
    pod = {"containers": [{"name": "kgateway-proxy", "securityContext": kube["envoyContainer"]["securityContext"],
                           "ports": [{"containerPort": 8080}]}]}
    if "securityContext" in kube.get("podTemplate", {}):
        pod["securityContext"] = kube["podTemplate"]["securityContext"]
    return pod


def _params(objs):
    (gateway,) = objs["Gateway"].values()
    ref = gateway["spec"]["infrastructure"]["parametersRef"]
    assert (ref["group"], ref["kind"]) == ("gateway.kgateway.dev", "GatewayParameters")
    return gateway, objs["GatewayParameters"][ref["name"]]


def test_the_gateway_names_parameters_that_keep_its_proxy_inside_the_cluster():
    _, _, objs = _objects()
    gateway, params = _params(objs)
    assert params["metadata"]["namespace"] == gateway["metadata"]["namespace"]  # a LocalParametersReference
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(params)) == []
    service = params["spec"]["kube"]["service"]
    assert service == {"type": "ClusterIP"}
    assert _merge(DEFAULTS, params["spec"])["kube"]["service"]["type"] == "ClusterIP"
    assert DEFAULTS["kube"]["service"]["type"] == "LoadBalancer"  # what it replaces


def test_expose_internal_asks_for_an_internal_load_balancer(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(EXAMPLE.read_text().replace("      request_timeout_s: 300", "      request_timeout_s: 300\n      expose: internal"))
    _, _, objs = _objects(path)
    _, params = _params(objs)
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(params)) == []
    service = params["spec"]["kube"]["service"]
    assert service["type"] == "LoadBalancer"
    assert service["extraAnnotations"] == {INTERNAL[0]: "true", INTERNAL[1]: "internal"}


def test_an_internet_facing_gateway_is_not_a_choice(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(EXAMPLE.read_text().replace("      request_timeout_s: 300", "      request_timeout_s: 300\n      expose: internet"))
    from fleetform.pipeline import check
    result = check(path)
    assert result.model is None
    (finding,) = [f for f in result.findings if "expose" in f.to_text()]
    assert finding.severity == "error" and "internal" in finding.to_text()


def test_the_proxy_pod_passes_pod_security_restricted():
    _, _, objs = _objects()
    _, params = _params(objs)
    assert _restricted_violations(_proxy_pod(params)) == []
    assert _restricted_violations(_proxy_pod({})) == ["seccompProfile"]  # kgateway's defaults alone are refused
    for container in ("envoyContainer", "sdsContainer"):
        sc = params["spec"]["kube"][container]["securityContext"]
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"} and sc["capabilities"]["drop"] == ["ALL"]
        assert sc["allowPrivilegeEscalation"] is False and sc["runAsNonRoot"] is True


def test_the_schema_refuses_a_misspelt_field():
    _, _, objs = _objects()
    _, params = _params(objs)
    bad = copy.deepcopy(params)
    bad["spec"]["kube"]["service"]["serviceType"] = "ClusterIP"
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(bad))
    bad = copy.deepcopy(params)
    bad["spec"]["kube"]["service"]["type"] = "Internal"
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(bad))


def test_the_program_creates_the_parameters_before_the_gateway(example):
    """Under the mocks: the Gateway depends on its GatewayParameters, so kgateway never sees the Gateway without
    them and never provisions its default, internet-facing LoadBalancer in between."""
    _, resources = example
    (params,) = [r for r in resources if r["type"].endswith(":GatewayParameters")]
    (gateway,) = [r for r in resources if r["type"] == "kubernetes:gateway.networking.k8s.io/v1:Gateway"]
    assert params["name"] in gateway["depends_on"]
    assert params["inputs"]["spec"]["kube"]["service"] == {"type": "ClusterIP"}
