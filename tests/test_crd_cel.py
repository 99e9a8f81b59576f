"""The CEL rules (`x-kubernetes-validations`) of the pinned releases' CRDs (tests/crd), which JSON Schema cannot
express and tests/test_k8s.py therefore does not check, evaluated on every custom resource fleetform renders for the
example blueprints and the inference variants (tests/crd_cel.py: defaults applied first, as the API server does).
Each negative control breaks one rendered object the way the CRD's own rule forbids."""

from __future__ import annotations

import copy
from collections import Counter

import pytest
import yaml

from conftest import EXAMPLES
from crd_cel import check
from test_k8s import CRD_SCHEMAS, _crd_key, _rendered
from variants import INFERENCE_VARIANTS

CASES = ([pytest.param(p, id=p.stem) for p in EXAMPLES]
         + [pytest.param(text, id=name) for name, text in INFERENCE_VARIANTS.items()])


def _custom_resources(source, tmp_path) -> dict[str, list[dict]]:
    _, files = _rendered(source, tmp_path)
    found: dict[str, list[dict]] = {}
    for name, data in sorted(files.items()):
        if not name.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(data):
            if isinstance(doc, dict) and {"apiVersion", "kind"} <= doc.keys() and _crd_key(doc) in CRD_SCHEMAS:
                found.setdefault(_crd_key(doc), []).append(doc)
    return found


@pytest.mark.parametrize("source", CASES)
def test_every_custom_resource_passes_its_crds_cel_rules(source, tmp_path):
    """Every rendered file, whatever its folder (k8s/, kueue and Ray fleets' manifests)."""
    for key, docs in _custom_resources(source, tmp_path).items():
        for doc in docs:
            _, found = check(CRD_SCHEMAS[key], doc)
            assert found == [], f"{key} {doc['metadata']['name']}: {found}"


def test_the_rules_of_the_gateway_example_are_evaluated(tmp_path):
    """The example with every kind whose CRD has rules fleetform's objects reach: the counts show the rules ran."""
    from test_gateway import EXAMPLE

    evaluated = Counter()
    for key, docs in _custom_resources(EXAMPLE, tmp_path).items():
        for doc in docs:
            count, found = check(CRD_SCHEMAS[key], doc)
            assert found == []
            evaluated[key] += count
    kinds = {key.rsplit("_", 1)[1] for key, count in evaluated.items() if count}
    assert {"ScaledObject", "GatewayExtension", "TrafficPolicy", "BackendConfigPolicy", "GatewayParameters",
            "HTTPRoute", "Gateway", "InferencePool", "Backend"} <= kinds, evaluated


def _one(tmp_path, key):
    from test_gateway import EXAMPLE

    return copy.deepcopy(_custom_resources(EXAMPLE, tmp_path)[key][0])


def test_negative_controls(tmp_path):
    """Each breaks one rule of the pinned CRD (kgateway v2.1.2, KEDA 2.20.2), and the check refuses it."""
    cases = []
    scaled = _one(tmp_path, "keda.sh_v1alpha1_ScaledObject")
    scaled["spec"]["minReplicaCount"] = scaled["spec"]["maxReplicaCount"] + 1  # minReplicaCount <= maxReplicaCount
    cases.append(("keda.sh_v1alpha1_ScaledObject", scaled))
    ext = _one(tmp_path, "gateway.kgateway.dev_v1alpha1_GatewayExtension")
    ext["spec"]["type"] = "ExtAuth"  # type ExtAuth needs extAuth, and extProc needs type ExtProc
    cases.append(("gateway.kgateway.dev_v1alpha1_GatewayExtension", ext))
    ext = _one(tmp_path, "gateway.kgateway.dev_v1alpha1_GatewayExtension")
    del ext["spec"]["extProc"]["grpcService"]["backendRef"]["port"]  # a Service backendRef needs a port
    cases.append(("gateway.kgateway.dev_v1alpha1_GatewayExtension", ext))
    backend = _one(tmp_path, "gateway.kgateway.dev_v1alpha1_BackendConfigPolicy")
    backend["spec"]["tls"]["wellKnownCACertificates"] = "System"  # exactly one of the TLS sources
    cases.append(("gateway.kgateway.dev_v1alpha1_BackendConfigPolicy", backend))
    policy = _one(tmp_path, "gateway.kgateway.dev_v1alpha1_TrafficPolicy")
    policy["spec"]["extProc"]["disable"] = {}  # extensionRef or disable, not both
    cases.append(("gateway.kgateway.dev_v1alpha1_TrafficPolicy", policy))
    loop = _one(tmp_path, "gateway.kgateway.dev_v1alpha1_Backend")
    loop["spec"]["type"] = "AWS"  # type AWS needs aws, and exactly one kind of backend
    cases.append(("gateway.kgateway.dev_v1alpha1_Backend", loop))
    params = _one(tmp_path, "gateway.kgateway.dev_v1alpha1_GatewayParameters")
    params["spec"]["selfManaged"] = {}  # kube or selfManaged
    cases.append(("gateway.kgateway.dev_v1alpha1_GatewayParameters", params))
    for key, doc in cases:
        _, found = check(CRD_SCHEMAS[key], doc)
        assert len(found) >= 1, (key, doc["spec"])
