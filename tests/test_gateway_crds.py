"""The Gateway API (v1.4.0, standard channel) and Inference Extension (v1.1.0) CRD schemas in tests/crd/,
extracted from those releases by tests/crd/from_crd.py, accept the Inference Extension's own manifests
at v1.1.0 (tests/data/gateway/, sources in its README) and refuse what the API server would prune or
reject: a misspelt field, a missing required one, a value outside the CRD's enum or bounds."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml

from conftest import ROOT

CRD = ROOT / "tests/crd"
DATA = ROOT / "tests/data/gateway"
KINDS = {"Gateway": "gateway.networking.k8s.io_v1_Gateway", "HTTPRoute": "gateway.networking.k8s.io_v1_HTTPRoute",
         "InferencePool": "inference.networking.k8s.io_v1_InferencePool",
         "InferenceObjective": "inference.networking.x-k8s.io_v1alpha2_InferenceObjective"}


def _validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((CRD / f"{KINDS[kind]}.json").read_text()))


def _upstream() -> list[dict]:
    docs = []
    for path in sorted(DATA.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in KINDS and doc["apiVersion"] == json.loads(
                    (CRD / f"{KINDS[doc['kind']]}.json").read_text())["properties"]["apiVersion"]["const"]:
                docs.append(doc)
    return docs


def test_upstream_manifests_cover_every_kind():
    assert {d["kind"] for d in _upstream()} == set(KINDS)


@pytest.mark.parametrize("doc", _upstream(), ids=lambda d: f"{d['kind']}-{d['metadata']['name']}")
def test_upstream_manifest_is_accepted(doc):
    assert [e.message for e in _validator(doc["kind"]).iter_errors(doc)] == []


def _pool() -> dict:
    return next(d for d in _upstream() if d["kind"] == "InferencePool")


def _route() -> dict:
    return next(d for d in _upstream() if d["kind"] == "HTTPRoute")


@pytest.mark.parametrize("break_it", [
    lambda d: d["spec"].__setitem__("targetPortNumber", 8000),  # the v1alpha2 field name: gone in v1
    lambda d: d["spec"]["endpointPickerRef"].__setitem__("failureMode", "FailSometimes"),  # enum FailOpen | FailClose
    lambda d: d["spec"].pop("selector"),  # required
    lambda d: d["spec"].__setitem__("targetPorts", [{"number": 70000}]),  # a port is at most 65535
], ids=["v1alpha2-field", "failure-mode", "no-selector", "port-range"])
def test_broken_pool_is_refused(break_it):
    doc = copy.deepcopy(_pool())
    break_it(doc)
    assert list(_validator("InferencePool").iter_errors(doc))


@pytest.mark.parametrize("break_it", [
    lambda d: d["spec"]["rules"][0].__setitem__("backendRef", d["spec"]["rules"][0].get("backendRefs")),  # misspelt
    lambda d: d["spec"]["rules"][0]["matches"][0]["path"].__setitem__("type", "Prefix"),  # enum Exact | PathPrefix | RegularExpression
], ids=["misspelt", "path-type"])
def test_broken_route_is_refused(break_it):
    doc = copy.deepcopy(next(d for d in _upstream() if d["kind"] == "HTTPRoute" and d["spec"]["rules"][0].get("matches")))
    break_it(doc)
    assert list(_validator("HTTPRoute").iter_errors(doc))
