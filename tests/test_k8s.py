"""Inference fleets' manifests: every one passes kubernetes-validate --strict at the fleet's
Kubernetes version (an unknown kind fails), the custom resources pass schemas written from their
CRDs, `kubectl kustomize` builds each folder, and the mission's autoscaling comes out exactly."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import EXAMPLES, ROOT
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.rules import run
from variants import INFERENCE_VARIANTS

CRD_SCHEMAS = {path.stem: json.loads(path.read_text()) for path in (ROOT / "tests/crd").glob("*.json")}


def _crd_key(doc: dict) -> str:
    return f"{doc['apiVersion'].replace('/', '_')}_{doc['kind']}"


def _rendered(source: Path | str, tmp_path: Path):
    if isinstance(source, str):
        path = tmp_path / "bp.yaml"
        path.write_text(source)
        source = path
    result = check(source)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return result.model, render(result.model)


def _validate(model, files: dict[str, bytes]) -> int:
    """Validate every manifest; return how many were checked."""
    versions = {f.name: f.kube.version for f in model.fleets if f.kube is not None}
    checked = 0
    for name, data in files.items():
        fleet, _, rest = name.partition("/")
        if not rest.startswith("k8s/") or rest == "k8s/kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(data):
            key = _crd_key(doc)
            if key in CRD_SCHEMAS:
                errors = [e.message for e in jsonschema.Draft202012Validator(CRD_SCHEMAS[key]).iter_errors(doc)]
                assert errors == [], f"{name}: {errors}"
            else:
                try:
                    kubernetes_validate.validate(doc, f"{versions[fleet]}.0", strict=True)
                except kubernetes_validate.SchemaNotFoundError as err:  # an unknown kind fails, it does not warn
                    pytest.fail(f"{name}: no schema for {doc['apiVersion']} {doc['kind']}: {err}")
                except kubernetes_validate.ValidationError as err:
                    pytest.fail(f"{name}: {err.message} at {list(err.path)}")
            checked += 1
    return checked


CASES = ([pytest.param(p, id=p.stem) for p in EXAMPLES if "kubernetes" in p.read_text()]
         + [pytest.param(text, id=name) for name, text in INFERENCE_VARIANTS.items()])


@pytest.mark.parametrize("source", CASES)
def test_every_manifest_validates_strictly(source, tmp_path):
    model, files = _rendered(source, tmp_path)
    assert _validate(model, files) >= 6


@pytest.mark.parametrize("source", CASES)
def test_kustomize_builds_every_fleet(source, tmp_path):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on this machine")
    _, files = _rendered(source, tmp_path)
    out = tmp_path / "out"
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    folders = sorted(out.glob("*/k8s"))
    assert folders
    for folder in folders:
        built = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        listed = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
        assert len(list(yaml.safe_load_all(built.stdout))) == len(listed)


def test_mission_autoscaling_comes_out_exactly(tmp_path):
    _, files = _rendered(ROOT / "blueprints/reference.yaml", tmp_path)
    scaled = yaml.safe_load(files["serve/k8s/llama-70b-scaledobject.yaml"])
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (2, 20)
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["threshold"] == "5"
    assert trigger["metadata"]["query"] == 'sum(vllm:num_requests_waiting{namespace="llm",model_name="llama-70b"})'
    window = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert window == {"stabilizationWindowSeconds": 300}
    deployment = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])
    assert "replicas" not in deployment["spec"]  # the autoscaler owns the count
    assert "serve/k8s/llama-70b-hpa.yaml" not in files  # never both autoscalers


def test_deployment_settings(tmp_path):
    _, files = _rendered(ROOT / "blueprints/reference.yaml", tmp_path)
    spec = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}  # no spare GPUs needed
    args = container["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and args[args.index("--served-model-name") + 1] == "llama-70b"
    assert container["env"][-1] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}}
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 1800  # 140 GB of weights take a while
    cache = next(v for v in pod["volumes"] if v["name"] == "cache")["emptyDir"]
    assert cache == {"sizeLimit": "178Gi"} and container["resources"]["requests"]["ephemeral-storage"] == "178Gi"
    monitor = yaml.safe_load(files["serve/k8s/llama-70b-servicemonitor.yaml"])
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"  # what the stack's Prometheus selects
    shm = next(v for v in pod["volumes"] if v["name"] == "shm")["emptyDir"]
    assert shm == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_a_rollout_uses_spare_gpus_only_when_the_blueprint_says_so(tmp_path):
    text = (ROOT / "blueprints/reference.yaml").read_text().replace(
        "        replicas: {min: 2, max: 20}\n", "        replicas: {min: 2, max: 20}\n        max_surge: 2\n")
    _, files = _rendered(text, tmp_path)
    spec = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 2, "maxUnavailable": 0}


def test_gpu_sharing_configs(tmp_path):
    model, files = _rendered(ROOT / "blueprints/reference.yaml", tmp_path)
    mig = yaml.safe_load(yaml.safe_load(files["small-models/k8s/mig-parted-config.yaml"])["data"]["config.yaml"])
    assert mig["version"] == "v1" and mig["mig-configs"]["all-3g.40gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    small = next(f for f in model.fleets if f.name == "small-models")
    assert ("nvidia.com/mig.config", "all-3g.40gb") in small.kube.node_labels
    values = yaml.safe_load(files["small-models/gpu-operator-values.yaml"])
    assert values["mig"] == {"strategy": "single"} and values["migManager"]["config"]["default"] == "all-3g.40gb"
    _, l4 = _rendered(ROOT / "blueprints/inference-l4.yaml", tmp_path)
    plugin = yaml.safe_load(l4["chat/k8s/device-plugin-config.yaml"])
    config = yaml.safe_load(plugin["data"]["chat"])
    assert config["sharing"]["timeSlicing"] == {"renameByDefault": False, "failRequestsGreaterThanOne": True,
                                                "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}
    pod = yaml.safe_load(l4["chat/k8s/qwen-7b-deployment.yaml"])["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"
    args = pod["containers"][0]["args"]
    # two pods share each L4: each may take 0.9 / 2 of the physical GPU's memory
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.45"
    _, mixed = _rendered(INFERENCE_VARIANTS["mig-mixed"], tmp_path)
    limits = yaml.safe_load(mixed["serve/k8s/model-0-deployment.yaml"])["spec"]["template"]["spec"]["containers"][0]
    assert limits["resources"]["limits"]["nvidia.com/mig-2g.20gb"] == 1


def _break(model, **changes):
    fleet = next(f for f in model.fleets if f.kube is not None)
    server = replace(fleet.kube.servers[0], **changes)
    broken = replace(fleet, kube=replace(fleet.kube, servers=(server,) + fleet.kube.servers[1:]))
    return replace(model, fleets=tuple(broken if f is fleet else f for f in model.fleets))


@pytest.mark.parametrize("rule, changes, words", [
    ("k8s-selectors", {"selector": (("app.kubernetes.io/name", "other"),)}, "does not match its pod labels"),
    ("k8s-quantities", {"memory": "64 GB"}, "not a quantity"),
    ("k8s-enums", {"service_type": "Internal"}, "Service type"),
    ("k8s-gpu-limit", {"gpu_count": 2}, "requests 2 x nvidia.com/gpu but runs with tensor_parallel 4"),
    ("k8s-names", {"name": "Llama_70B"}, "not a valid Kubernetes name"),
])
def test_config_rules_fire_on_broken_objects(rule, changes, words):
    result = check(ROOT / "blueprints/reference.yaml")
    findings = [f for f in run(_break(result.model, **changes), result.document) if f.rule == rule]
    assert len(findings) == 1 and words in findings[0].message, [f.to_text() for f in findings]


def test_config_rules_pass_on_every_variant(tmp_path):
    for text in INFERENCE_VARIANTS.values():
        path = tmp_path / "bp.yaml"
        path.write_text(text)
        assert [f.to_text() for f in check(path).findings if f.rule.startswith("k8s-")] == []
