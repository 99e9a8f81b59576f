"""Inference fleets' manifests: every one passes kubernetes-validate --strict at the fleet's
Kubernetes version (an unknown kind fails), the custom resources pass schemas written from their
CRDs, `kubectl kustomize` builds each folder, and the mission's autoscaling comes out exactly."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import EXAMPLES, ROOT, require
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
    kubectl = require("kubectl", "kubernetes-client")
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


# Every YAML 1.1 spelling of a bool or null (https://yaml.org/type/bool.html, https://yaml.org/type/null.html),
# and strings a YAML 1.1 reader takes for numbers (https://yaml.org/type/int.html, .../float.html: sexagesimal
# 1:00, underscores, octal 017, hex, binary): each must reach the manifests as the same string.
YAML11_SPELLINGS = (
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
    "true", "True", "TRUE", "false", "False", "FALSE",
    "on", "On", "ON", "off", "Off", "OFF",
    "null", "Null", "NULL", "~", "",
    "4711", "1e3", "0x1F", "0x1f", "1:00", "1:30:00", "1_000", "1.5", "017", "0b101", ".inf", ".NaN",
)
REFUSED_EVERYWHERE = {"~", ".inf", ".NaN"}
"""Spellings no string position of the schema admits (checked below, so a schema change shows here)."""

SCHEMA = json.loads((ROOT / "blueprints/fleetform-v1.schema.json").read_text())


def _admits(ref: str, value: str) -> bool:
    """Whether the schema's definition at `ref` (a JSON pointer under the schema) admits the string."""
    node = SCHEMA
    for part in ref.split("/"):
        node = node[part]
    resolver = {"$defs": SCHEMA["$defs"], **node}
    return jsonschema.Draft202012Validator(resolver).is_valid(value)


def _deployment(files):
    return next(yaml.safe_load(d) for n, d in files.items() if n.endswith("-deployment.yaml"))


def _arg(container, flag):
    return container["args"][container["args"].index(flag) + 1]


# Each string position of an inference fleet: the schema definition that bounds it, how to put a value
# there, and where the value must come back out of the rendered manifests (read by PyYAML, a YAML 1.1 reader).
POSITIONS = {
    "metadata.name": ("$defs/metadata/properties/name", lambda bp, v: bp["metadata"].update(name=v),
                      lambda files, v: [_deployment(files)["metadata"]["labels"]["app.kubernetes.io/part-of"]]),
    "metadata.labels key": ("$defs/metadata/properties/labels/propertyNames",
                            lambda bp, v: bp["metadata"]["labels"].update({v: "x"}),
                            lambda files, v: [k for k in _deployment(files)["metadata"]["labels"] if k == v]),
    "metadata.labels value": ("$defs/metadata/properties/labels/additionalProperties",
                              lambda bp, v: bp["metadata"]["labels"].update(team=v),
                              lambda files, v: [_deployment(files)["metadata"]["labels"]["team"]]),
    "fleet name": ("$defs/dnsLabel", lambda bp, v: bp["fleets"][0].update(name=v),
                   lambda files, v: [_deployment(files)["metadata"]["labels"]["fleetform.dev/fleet"]]
                   + [yaml.safe_load(d)["devicePlugin"]["config"]["default"]
                      for n, d in files.items() if n.endswith("gpu-operator-values.yaml") and b"devicePlugin" in d]
                   + [k for n, d in files.items() if n.endswith("device-plugin-config.yaml")
                      for k in yaml.safe_load(d)["data"]]),
    "namespace": ("$defs/scheduler/properties/namespace", lambda bp, v: bp["fleets"][0]["scheduler"].update(namespace=v),
                  lambda files, v: [_deployment(files)["metadata"]["namespace"]]),
    "prometheus_release": ("$defs/scheduler/properties/prometheus_release",
                           lambda bp, v: bp["fleets"][0]["scheduler"].update(prometheus_release=v),
                           lambda files, v: [yaml.safe_load(d)["metadata"]["labels"]["release"]
                                             for n, d in files.items() if n.endswith("servicemonitor.yaml")] if v else [v]),
    "model name": ("$defs/model/properties/name", lambda bp, v: bp["fleets"][0]["models"][0].update(name=v),
                   lambda files, v: [_deployment(files)["metadata"]["name"],
                                     _arg(_deployment(files)["spec"]["template"]["spec"]["containers"][0],
                                          "--served-model-name")]),
    "model id": ("$defs/model/properties/model", lambda bp, v: bp["fleets"][0]["models"][0].update(model=v),
                 lambda files, v: [_arg(_deployment(files)["spec"]["template"]["spec"]["containers"][0], "--model")]),
    "image": ("$defs/model/properties/image", lambda bp, v: bp["fleets"][0]["models"][0].update(image=v),
              lambda files, v: [_deployment(files)["spec"]["template"]["spec"]["containers"][0]["image"]]),
    "hf_token_secret": ("$defs/model/properties/hf_token_secret",
                        lambda bp, v: bp["fleets"][0]["models"][0].update(hf_token_secret=v),
                        lambda files, v: [e["valueFrom"]["secretKeyRef"]["name"] for e in _deployment(files)[
                            "spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "HF_TOKEN"]),
}


def _inference_blueprint(sharing: dict, autoscaler: str) -> dict:
    return {
        "apiVersion": "fleetform/v1", "kind": "Blueprint",
        "metadata": {"name": "plain", "version": "1.0.0", "labels": {"team": "ml"}},
        "provider": {"cloud": "aws", "region": "us-east-1", "availability_zone": "us-east-1a",
                     "network": {"cidr": "10.0.0.0/16"}},
        "fleets": [{
            "name": "serve", "role": "inference", "instance_type": "p4de.24xlarge" if "profile" in sharing else "g6.12xlarge",
            "nodes": {"min": 1, "max": 2}, "capacity": {"type": "on-demand"},
            "scheduler": {"type": "kubernetes", "version": "1.33", "namespace": "llm", "autoscaler": autoscaler},
            "gpu_sharing": sharing,
            "models": [{"name": "chat", "image": "vllm/vllm-openai:v0.11.0", "model": "Qwen/Qwen2.5-7B-Instruct",
                        "model_params_billion": 1.5, "precision": "bf16", "tensor_parallel": 1,
                        "max_model_len": 4096, "replicas": {"min": 1, "max": 2},
                        "autoscale": {"metric": "queue_depth", "target_per_replica": 4},
                        "hf_token_secret": "hf-token"}],
        }],
    }


def _scalars(node):
    """Every scalar node of a composed YAML document, keys included."""
    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _scalars(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _scalars(key)
            yield from _scalars(value)


def _yaml_texts(files: dict[str, bytes]):
    """Every rendered YAML text, and the YAML documents ConfigMaps carry as data (device plugin, mig-parted)."""
    for name, data in files.items():
        if name.endswith(".yaml"):
            yield name, data.decode()
            for doc in yaml.safe_load_all(data):
                if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
                    for key, text in doc["data"].items():
                        yield f"{name}:data.{key}", text


def _plain(files: dict[str, bytes], spelling: str) -> int:
    """How many plain (unquoted) scalars of the rendered YAML texts are spelt `spelling`."""
    return sum(scalar.value == spelling and scalar.style is None
               for _, text in _yaml_texts(files) for node in yaml.compose_all(text) for scalar in _scalars(node))


@pytest.mark.parametrize("sharing, autoscaler", [({"strategy": "time-slicing", "replicas": 2}, "keda"),
                                                 ({"strategy": "mig", "profile": "3g.40gb"}, "hpa")],
                         ids=["time-slicing-keda", "mig-hpa"])
def test_yaml11_bool_null_and_number_spellings_stay_strings(sharing, autoscaler, tmp_path):
    """Issue 9 defect 4: a name or label spelt like a YAML 1.1 bool, null or number is written as a quoted
    string in every position the schema admits it, so PyYAML (YAML 1.1, like kubectl's reader) gives the
    same string back. Every scalar carrying the spelling is quoted too: go-yaml v2 also reads y/n as bools."""
    admitted = {spelling: [] for spelling in YAML11_SPELLINGS}
    path = tmp_path / "bp.yaml"
    path.write_text(json.dumps(_inference_blueprint(dict(sharing), autoscaler)))
    baseline = _rendered(path, tmp_path)[1]
    for spelling in YAML11_SPELLINGS:
        bp = _inference_blueprint(dict(sharing), autoscaler)
        positions = [name for name, (ref, _, _) in POSITIONS.items() if _admits(ref, spelling)]
        for name in positions:
            POSITIONS[name][1](bp, spelling)
        admitted[spelling] = positions
        if not positions:
            continue
        path.write_text(json.dumps(bp, indent=1))  # JSON is YAML, and every string in it is quoted
        files = _rendered(path, tmp_path)[1]
        for name in positions:
            found = POSITIONS[name][2](files, spelling)
            assert found and all(type(value) is str and value == spelling for value in found), (spelling, name, found)
        # the templates' own literals (`enabled: false`) are the only plain scalars spelt like this
        assert _plain(files, spelling) == _plain(baseline, spelling), spelling
    assert {s for s, positions in admitted.items() if not positions} == REFUSED_EVERYWHERE
    for name in POSITIONS:  # every position took some of the spellings
        assert any(name in positions for positions in admitted.values()), name


def test_every_string_a_k8s_template_prints_is_quoted_or_a_number():
    """The templates under templates/k8s print each value through `q` (a JSON string: a YAML double-quoted
    scalar) or `n` (a number, refusing anything else); a bare `{{ value }}` could print `on` as a bool."""
    bare = []
    for template in sorted((ROOT / "templates/k8s").glob("*.j2")):
        for number, line in enumerate(template.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue  # a comment: YAML never reads it as a value
            for expression in re.findall(r"\{\{(.*?)\}\}", line):
                if not re.search(r"\|\s*(q|n)\s*$", expression):
                    bare.append(f"{template.name}:{number}: {{{{{expression}}}}}")
            # and each printed value is a whole scalar: `{{ x | q }}-suffix` would not parse
            if re.search(r"[^\s]\{\{|\}\}(?!:\s|:$|$)", line):
                bare.append(f"{template.name}:{number}: a value glued to other text: {line.strip()}")
    assert bare == []


@pytest.mark.parametrize("value", [True, None, "4", float("nan")])
def test_the_number_filter_refuses_what_is_not_a_number(value):
    from fleetform.render.jinja import RenderError, environment

    with pytest.raises(RenderError):
        environment().from_string("{{ v | n }}").render(v=value)
