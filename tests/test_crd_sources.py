"""The custom resource schemas in tests/crd are the pinned releases' own CRDs (issues 21 and 23), not schemas written
from documentation: each names the release and the CRD file it was extracted from (tests/crd/README.md gives tag,
commit and path), and the KEDA and ServiceMonitor schemas hold facts only those CRDs have. What KEDA refuses beyond
its CRD (webhook, scalers) is a separate schema, tests/data/keda/scaledobject-admission.json."""

from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest

from conftest import ROOT

CRD = ROOT / "tests/crd"
ADMISSION = json.loads((ROOT / "tests/data/keda/scaledobject-admission.json").read_text())


def _schema(stem: str) -> dict:
    return json.loads((CRD / f"{stem}.json").read_text())


def _errors(schema: dict, doc: dict) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


@pytest.mark.parametrize("path", sorted(CRD.glob("*.json")), ids=lambda p: p.stem)
def test_every_schema_names_the_release_crd_it_was_taken_from(path):
    schema = json.loads(path.read_text())
    provenance = " ".join(str(schema.get(key, "")) for key in ("title", "description", "$comment"))
    assert "written" not in provenance.lower(), provenance
    assert re.search(r"\bv?\d+\.\d+\.\d+\b", provenance), f"{path.name}: no release named: {provenance}"
    assert re.search(r"[\w./-]+\.ya?ml\b", provenance), f"{path.name}: no CRD file named: {provenance}"
    assert path.name in (CRD / "README.md").read_text() or path.stem.split("_")[0] in (CRD / "README.md").read_text()


REPLACED = {  # extracted by tests/crd/from_crd.py from these commits (tests/crd/README.md)
    "keda.sh_v1alpha1_ScaledObject": "cbb9bb8ce0809dc9048f72302f7c09765d66ed56",
    "monitoring.coreos.com_v1_ServiceMonitor": "ea930baeebeba39f56d6b44e351f23b2a072a600",
    **{f"gateway.kgateway.dev_v1alpha1_{kind}": "919cae66255332a968f06f810bd2844bb817bbe0"
       for kind in ("GatewayExtension", "TrafficPolicy", "BackendConfigPolicy", "GatewayParameters",
                    "DirectResponse", "Backend")},
}


@pytest.mark.parametrize("stem", sorted(REPLACED))
def test_the_replaced_schemas_come_from_their_commit(stem):
    schema = _schema(stem)
    assert REPLACED[stem] in schema["description"] and "extracted by tests/crd/from_crd.py" in schema["description"]
    assert REPLACED[stem] in (CRD / "README.md").read_text()


def _scaled_object() -> dict:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "m", "namespace": "n"},
            "spec": {"scaleTargetRef": {"name": "m"}, "minReplicaCount": 1, "maxReplicaCount": 4,
                     "triggers": [{"type": "prometheus", "metricType": "AverageValue",
                                   "metadata": {"serverAddress": "http://prometheus:9090", "query": "sum(up)",
                                                "threshold": "5"}}]}}


def test_the_keda_schema_is_the_charts_crd():
    schema = _schema("keda.sh_v1alpha1_ScaledObject")
    doc = _scaled_object()
    assert _errors(schema, doc) == [] and _errors(ADMISSION, doc) == []
    # a field of KEDA 2.20's ScaledObjectSpec the schema written before left out (it closed `advanced` without it)
    modified = copy.deepcopy(doc)
    modified["spec"]["advanced"] = {"scalingModifiers": {"formula": "a + 1", "target": "2"}}
    assert _errors(schema, modified) == []
    # the chart's CRD bounds the HPA's stabilization window (kedacore/charts v2.20.2; kedacore/keda's own
    # config/crd/bases file at v2.20.2 does not), and a misspelt field is refused
    window = copy.deepcopy(doc)
    window["spec"]["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {
        "stabilizationWindowSeconds": 3601}}}}
    assert _errors(schema, window)
    window["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = 3600
    assert _errors(schema, window) == []
    assert _errors(schema, dict(doc, spec=dict(doc["spec"], pollingIntervall=15)))


def test_what_keda_refuses_beyond_its_crd():
    """KEDA v2.20.2's scalers read their metadata when the ScaledObject is reconciled, not at admission by the CRD:
    the prometheus scaler without a threshold, the cron scaler with six fields and a fallback with only cpu triggers
    pass the CRD's schema and are refused by KEDA (sources in the admission schema's description)."""
    crd = _schema("keda.sh_v1alpha1_ScaledObject")
    no_threshold = _scaled_object()
    del no_threshold["spec"]["triggers"][0]["metadata"]["threshold"]
    cron = _scaled_object()
    cron["spec"]["triggers"].append({"type": "cron", "metadata": {
        "timezone": "UTC", "start": "0 0 8 * * 1-5", "end": "0 20 * * 1-5", "desiredReplicas": "4"}})
    fallback = _scaled_object()
    fallback["spec"]["fallback"] = {"failureThreshold": 3, "replicas": 2}
    fallback["spec"]["triggers"] = [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]
    for doc in (no_threshold, cron, fallback):
        assert _errors(crd, doc) == [] and _errors(ADMISSION, doc), doc["spec"]
    cron["spec"]["triggers"][1]["metadata"]["start"] = "0 8 * * 1-5"
    fallback["spec"]["triggers"].append(_scaled_object()["spec"]["triggers"][0])
    assert _errors(ADMISSION, cron) == [] and _errors(ADMISSION, fallback) == []


def test_the_servicemonitor_schema_is_the_operators_crd():
    schema = _schema("monitoring.coreos.com_v1_ServiceMonitor")
    doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "m", "namespace": "n"},
           "spec": {"selector": {"matchLabels": {"app": "m"}},
                    "endpoints": [{"port": "http", "path": "/metrics", "interval": "15s"}]}}
    assert _errors(schema, doc) == []
    # prometheus-operator v0.93.1's CRD: the scrape interval is a Prometheus duration, and endpoints are closed
    assert _errors(schema, dict(doc, spec=dict(doc["spec"], endpoints=[{"port": "http", "interval": "15 s"}])))
    assert _errors(schema, dict(doc, spec=dict(doc["spec"], endpoints=[{"port": "http", "scrapeInterval": "15s"}])))
