"""Inference fleets' manifests: every one passes kubernetes-validate --strict at the fleet's
Kubernetes version (an unknown kind fails), the custom resources pass their pinned releases' CRD schemas
(tests/crd) and what KEDA's webhook and scalers check beyond them (tests/data/keda), `kubectl kustomize` builds each folder, and the mission's autoscaling comes out exactly."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections import Counter
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
# what an operator refuses beyond its CRD's schema (its admission webhook, its scalers), checked after the CRD
ADMISSION = {"keda.sh_v1alpha1_ScaledObject": json.loads((ROOT / "tests/data/keda/scaledobject-admission.json").read_text())}


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
    versions.update({f.name: f.kueue.version for f in model.fleets if f.kueue is not None})  # training on Kubernetes
    checked = 0
    for name, data in files.items():
        fleet, _, rest = name.partition("/")
        if not rest.startswith("k8s/") or rest == "k8s/kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(data):
            key = _crd_key(doc)
            if key in CRD_SCHEMAS:
                errors = [e.message for schema in (CRD_SCHEMAS[key], ADMISSION.get(key, {}))
                          for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
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
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 300
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
    # the token is a file (checkov CKV_K8S_35: secrets as files), read by huggingface_hub through HF_TOKEN_PATH
    assert {"name": "HF_TOKEN_PATH", "value": "/etc/huggingface/token"} in container["env"]
    token = next(v for v in pod["volumes"] if v["name"] == "hf-token")["secret"]
    assert token["secretName"] == "hf-token" and token["items"] == [{"key": "HF_TOKEN", "path": "token"}]
    assert {"name": "hf-token", "mountPath": "/etc/huggingface", "readOnly": True} in container["volumeMounts"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 1800  # 140 GB of weights take a while
    cache = next(v for v in pod["volumes"] if v["name"] == "cache")["emptyDir"]
    assert cache == {"sizeLimit": "178Gi"} and container["resources"]["requests"]["ephemeral-storage"] == "182Gi"
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
    _, sliced = _rendered(INFERENCE_VARIANTS["time-slicing-k8s-137"], tmp_path)
    plugin = yaml.safe_load(sliced["serve/k8s/device-plugin-config.yaml"])
    config = yaml.safe_load(plugin["data"]["serve"])
    assert config["sharing"]["timeSlicing"] == {"renameByDefault": False, "failRequestsGreaterThanOne": True,
                                                "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}
    pod = yaml.safe_load(sliced["serve/k8s/model-0-deployment.yaml"])["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    args = pod["containers"][0]["args"]
    # two pods share each L40S: each may take 0.9 / 2 of the physical GPU's memory
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
REFUSED_EVERYWHERE: set[str] = set()
"""Spellings no string position of the schema admits (none: extra_args values take any text)."""

SCHEMA = json.loads((ROOT / "blueprints/fleetform-v1.schema.json").read_text())


@functools.lru_cache(maxsize=None)
def _validator(ref: str) -> jsonschema.Draft202012Validator:
    node = SCHEMA
    for part in ref.split("/"):
        node = node[part]
    return jsonschema.Draft202012Validator({"$defs": SCHEMA["$defs"], **node})


def _admits(ref: str, value: str) -> bool:
    """Whether the schema's definition at `ref` (a JSON pointer under the schema) admits the string."""
    return _validator(ref).is_valid(value)


FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader when PyYAML has it: the same YAML 1.1 resolver as SafeLoader, faster."""


def test_mps_pods_keep_the_device_plugins_shm_and_their_memory_share(tmp_path):
    """NVIDIA k8s-device-plugin (v0.17+) internal/plugin/mps.go mounts the MPS daemon's shared memory at
    /dev/shm in the container (Daemon.ShmDir() is "/dev/shm"): a /dev/shm emptyDir of the pod hid it, so
    no MPS client could attach. And cmd/mps-control-daemon/mps/daemon.go already caps every client at
    totalMemory / replicas (set_default_device_pinned_mem_limit; README "With CUDA MPS"), so vLLM's
    utilization is not divided again; time-slicing (no memory isolation) keeps the division."""
    _, files = _rendered(INFERENCE_VARIANTS["mps"], tmp_path)
    pod = _pod(files)
    container = pod["containers"][0]
    assert "/dev/shm" not in {m["mountPath"] for m in container["volumeMounts"]}
    assert "shm" not in {v["name"] for v in pod["volumes"]}
    assert _arg(container, "--gpu-memory-utilization") == "0.9"  # of the 1/2 GPU MPS lets the client see
    _, files = _rendered(INFERENCE_VARIANTS["mps"].replace("strategy: mps", "strategy: time-slicing"), tmp_path)
    pod = _pod(files)
    assert _arg(pod["containers"][0], "--gpu-memory-utilization") == "0.45"  # control: time-slicing splits
    assert {"name": "shm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]


@functools.lru_cache(maxsize=256)
def _load(data: bytes):
    return yaml.load(data, Loader=FAST_LOADER)


def _deployment(files, index: int = 0):
    """The Deployment of the first model of the fleet (index 0), or of the model named vol (index 1)."""
    deployments = [_load(d) for n, d in files.items() if n.endswith("-deployment.yaml")]
    return sorted(deployments, key=lambda d: d["metadata"]["name"] == "vol")[index]


def _pod(files, index: int = 0):
    return _deployment(files, index)["spec"]["template"]["spec"]


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
                   + [_load(d)["devicePlugin"]["config"]["default"]
                      for n, d in files.items() if n.endswith("gpu-operator-values.yaml") and b"devicePlugin" in d]
                   + [k for n, d in files.items() if n.endswith("device-plugin-config.yaml")
                      for k in _load(d)["data"]]),
    "namespace": ("$defs/scheduler/properties/namespace", lambda bp, v: bp["fleets"][0]["scheduler"].update(namespace=v),
                  lambda files, v: [_deployment(files)["metadata"]["namespace"]]),
    "prometheus_release": ("$defs/scheduler/properties/prometheus_release",
                           lambda bp, v: bp["fleets"][0]["scheduler"].update(prometheus_release=v),
                           lambda files, v: [_load(d)["metadata"]["labels"]["release"]
                                             for n, d in files.items() if n.endswith("servicemonitor.yaml")] if v else [v]),
    "model name": ("$defs/model/properties/name", lambda bp, v: bp["fleets"][0]["models"][0].update(name=v),
                   lambda files, v: [_deployment(files)["metadata"]["name"],
                                     _arg(_deployment(files)["spec"]["template"]["spec"]["containers"][0],
                                          "--served-model-name")]),
    "model id": ("$defs/model/properties/model", lambda bp, v: bp["fleets"][0]["models"][0].update(model=v),
                 lambda files, v: [_deployment(files)["spec"]["template"]["spec"]["containers"][0]["args"][0]]),
    "image": ("$defs/model/properties/image", lambda bp, v: bp["fleets"][0]["models"][0].update(image=v),
              lambda files, v: [_deployment(files)["spec"]["template"]["spec"]["containers"][0]["image"]]),
    "hf_token_secret": ("$defs/model/properties/hf_token_secret",
                        lambda bp, v: bp["fleets"][0]["models"][0].update(hf_token_secret=v),
                        lambda files, v: [vol["secret"]["secretName"] for vol in _pod(files)["volumes"]
                                          if vol["name"] == "hf-token"]),
    "api_key_secret": ("$defs/model/properties/api_key_secret",
                       lambda bp, v: bp["fleets"][0]["models"][0].update(api_key_secret=v),
                       lambda files, v: [e["valueFrom"]["secretKeyRef"]["name"] for e in _pod(files)["containers"][0][
                           "env"] if e["name"] == "VLLM_API_KEY"]),
    "weights.revision": ("$defs/model/properties/weights/properties/revision",
                         lambda bp, v: bp["fleets"][0]["models"][0].update(weights={"source": "hub", "revision": v}),
                         lambda files, v: [_arg(_pod(files)["containers"][0], "--revision")]),
    "extra_args value": ("$defs/model/properties/extra_args/items",
                         lambda bp, v: bp["fleets"][0]["models"][0].update(extra_args=["--tool-call-parser", v]),
                         lambda files, v: [_arg(_pod(files)["containers"][0], "--tool-call-parser")]),
    "weights.claim": ("$defs/model/properties/weights/properties/claim",
                      lambda bp, v: bp["fleets"][0]["models"][1]["weights"].update(claim=v),
                      lambda files, v: [vol["persistentVolumeClaim"]["claimName"] for vol in _pod(files, 1)["volumes"]
                                        if vol["name"] == "weights"]),
    "weights.path": ("$defs/model/properties/weights/properties/path",
                     lambda bp, v: bp["fleets"][0]["models"][1]["weights"].update(path=v),
                     lambda files, v: [_pod(files, 1)["containers"][0]["args"][0].removeprefix("/weights/")]),
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
            "models": [{"name": "chat", "image": "vllm/vllm-openai:v0.11.0", "model": "Qwen/Qwen2.5-1.5B-Instruct",
                        "model_params_billion": 1.5, "precision": "bf16", "tensor_parallel": 1,
                        "max_model_len": 4096, "replicas": {"min": 1, "max": 2},
                        "autoscale": {"metric": "queue_depth", "target_per_replica": 4},
                        "hf_token_secret": "hf-token"},
                       {"name": "vol", "image": "vllm/vllm-openai:v0.11.0", "model": "Qwen/Qwen2.5-1.5B-Instruct",
                        "model_params_billion": 1.5, "precision": "bf16", "tensor_parallel": 1,
                        "weights": {"source": "volume", "claim": "weights", "path": "qwen"}}],
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
            for doc in yaml.load_all(data, Loader=FAST_LOADER):
                if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
                    for key, text in doc["data"].items():
                        yield f"{name}:data.{key}", text


def _plain(files: dict[str, bytes]) -> Counter:
    """How many plain (unquoted) scalars of the rendered YAML texts carry each text."""
    return Counter(scalar.value for _, text in _yaml_texts(files) for node in yaml.compose_all(text, Loader=FAST_LOADER)
                   for scalar in _scalars(node) if scalar.style is None)


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
    baseline = _plain(_rendered(path, tmp_path)[1])
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
        assert _plain(files)[spelling] == baseline[spelling], spelling
    assert {s for s, positions in admitted.items() if not positions} == REFUSED_EVERYWHERE
    for name in POSITIONS:  # every position took some of the spellings
        assert any(name in positions for positions in admitted.values()), name


def test_every_string_a_k8s_template_prints_is_quoted_or_a_number():
    """The templates under templates/k8s print each value through `q` (a JSON string: a YAML double-quoted
    scalar) or `n` (a number, refusing anything else); a bare `{{ value }}` could print `on` as a bool."""
    bare = []
    for template in (sorted((ROOT / "templates/k8s").glob("*.j2")) + sorted((ROOT / "templates/kueue").glob("*.j2"))
                     + sorted((ROOT / "templates/mig").glob("*.j2"))):
        for number, line in enumerate(template.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue  # a comment: YAML never reads it as a value
            for expression in re.findall(r"\{\{(.*?)\}\}", line):
                if not re.search(r"\|\s*(q|n|b)\s*$", expression):
                    bare.append(f"{template.name}:{number}: {{{{{expression}}}}}")
            # and each printed value is a whole YAML scalar: `{{ x | q }}-suffix` would not parse (a JSON template
            # such as acceptance-models.json.j2 prints `"key": {{ v | q }},`, which JSON reads)
            if template.name.endswith(".yaml.j2") and re.search(r"[^\s]\{\{|\}\}(?!:\s|:$|$)", line):
                bare.append(f"{template.name}:{number}: a value glued to other text: {line.strip()}")
    assert bare == []


@pytest.mark.parametrize("value", [True, None, "4", float("nan")])
def test_the_number_filter_refuses_what_is_not_a_number(value):
    from fleetform.render.jinja import RenderError, environment

    with pytest.raises(RenderError):
        environment().from_string("{{ v | n }}").render(v=value)


# ---- Issue 11: pods that start, load what the rules sized, scale within bounds and stop cleanly ----

def _reference(tmp_path, old: str = "", new: str = ""):
    text = (ROOT / "blueprints/reference.yaml").read_text()
    if old:
        assert old in text
        text = text.replace(old, new)
    return _rendered(text, tmp_path)


def test_the_server_runs_as_a_uid_without_a_passwd_entry(tmp_path, monkeypatch):
    """vllm/vllm-openai has no passwd entry for the pod's UID, and PyTorch's compile cache names its folder
    after getpass.getuser(), which then raises KeyError (kserve #5666, vllm #12219, vllm #44548).
    Each variable set here, and what reads it:
    - USER, LOGNAME: CPython Lib/getpass.py getuser() returns LOGNAME, USER, LNAME or USERNAME before it
      asks pwd.getpwuid (shown below with the real function). USER is needed even with
      TORCHINDUCTOR_CACHE_DIR set: torch calls default_cache_dir() directly in places (vllm #44548).
    - TORCHINDUCTOR_CACHE_DIR: torch/_inductor/runtime/cache_dir_utils.py cache_dir(), else
      /tmp/torchinductor_<user>.
    - VLLM_CACHE_ROOT: vLLM 0.11 vllm/envs.py, default $XDG_CACHE_HOME/vllm or ~/.cache/vllm.
    - TRITON_CACHE_DIR: triton/knobs.py cache_knobs.dir, default ~/.triton/cache ($TRITON_HOME).
    - HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME: the defaults above and vLLM's VLLM_CONFIG_ROOT
      (~/.config/vllm, envs.py get_default_config_root); HF_HOME: huggingface_hub's cache.
    All of them lie on writable mounts (the root file system is read-only)."""
    _, files = _reference(tmp_path)
    pod = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = pod["securityContext"]
    assert security["runAsUser"] > 10000 and security["runAsGroup"] > 10000 and security["fsGroup"] > 10000
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    writable = [m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")]
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR",
                 "TRITON_CACHE_DIR", "HF_HOME"):
        assert any(env[name] == m or env[name].startswith(m + "/") for m in writable), (name, env[name], writable)

    import getpass
    import pwd

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(KeyError):  # negative control: the crash of the issue
        getpass.getuser()
    monkeypatch.setenv("USER", env["USER"])
    monkeypatch.setenv("LOGNAME", env["LOGNAME"])
    assert getpass.getuser() == "vllm"


@pytest.mark.parametrize("precision, checkpoint, flags", [
    ("bf16", "", ["--dtype", "bfloat16"]),
    ("fp16", "", ["--dtype", "float16"]),
    ("fp32", "", ["--dtype", "float32"]),
    ("fp8", "bf16", ["--quantization", "fp8", "--dtype", "bfloat16"]),
    ("fp8", "fp16", ["--quantization", "fp8", "--dtype", "float16"]),
    ("fp8", "fp8", []),  # the checkpoint's config.json names its method; an explicit other one is an error
    ("int4", "", []),
])
def test_precision_reaches_vllm(precision, checkpoint, flags):
    """vLLM 0.11: ModelConfig._verify_quantization raises when --quantization differs from the checkpoint's
    quant_method, so pre-quantized checkpoints get none; fp8.py quantizes a 16-bit checkpoint on load."""
    from fleetform.k8s import precision_args

    model = check(ROOT / "blueprints/reference.yaml").model.fleets[1].models[0]
    assert precision_args(replace(model, precision=precision, checkpoint_precision=checkpoint)) == flags


def test_fp8_quantized_on_load_needs_room_for_the_16_bit_weights(tmp_path):
    """vLLM allocates a layer quantized on load in the checkpoint's dtype and quantizes once every weight is in
    (fp8.py create_weights, model_loader/base_loader.py process_weights_after_loading): 7.6B parameters
    take 15.2 GB while loading, more than the 10.8 GB a pod may use on half an L4."""
    text = (ROOT / "blueprints/inference-l4.yaml").read_text().replace(
        "    models:\n", "    gpu_sharing: {strategy: time-slicing, replicas: 2}\n    models:\n", 1)
    loaded = text.replace("model: RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic", "model: Qwen/Qwen2.5-7B-Instruct\n"
                          "        checkpoint_precision: bf16", 1)
    path = tmp_path / "bp.yaml"
    path.write_text(loaded)
    findings = [f for f in check(path).findings if f.rule == "model-fits"]
    assert len(findings) == 1 and "while loading" in findings[0].message and "15.2 GB" in findings[0].message
    _, files = _rendered(ROOT / "blueprints/inference-l4.yaml", tmp_path)  # control: the fp8 checkpoint fits
    args = yaml.safe_load(files["chat/k8s/qwen-7b-deployment.yaml"])["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--quantization" not in args and "--dtype" not in args


def test_kv_cache_room_counts_16_bit_embeddings_and_vllms_overhead(tmp_path):
    """An fp8 checkpoint keeps embed_tokens and lm_head in bf16 (RedHatAI FP8-dynamic recipes ignore lm_head;
    vLLM's VocabParallelEmbedding is unquantized), and vLLM sizes the KV cache from its budget minus the
    weights, the profiled activation peak and non-torch memory (vLLM v1/worker/gpu_worker.py logs "torch
    peak memory increase: 1.40GiB; non-torch forward increase memory: 0.02GiB" for an 8B model on an L4).
    At 1 byte per parameter and no overhead, 7.6B fp8 parameters left 3.2 of 10.8 GB (30%) on half an L4
    and nothing was reported; counted honestly they leave about 0.1 GB."""
    from fleetform.model import GPU_OVERHEAD_GB

    shared = (ROOT / "blueprints/inference-l4.yaml").read_text().replace(
        "    models:\n", "    gpu_sharing: {strategy: time-slicing, replicas: 2}\n    models:\n", 1)
    path = tmp_path / "half-l4.yaml"
    path.write_text(shared)
    result = check(path)
    qwen = result.model.fleets[0].models[0]
    assert round(qwen.weights_gb, 2) == round(7.6 * 0.85 + 7.6 * 0.15 * 2, 2) == 8.74  # 15% embeddings in bf16
    assert qwen.overhead_gb == GPU_OVERHEAD_GB == 2.0
    room = [f for f in result.findings if f.rule == "kv-cache-room"]
    assert [f.path for f in room] == ["fleets[0].models[0].tensor_parallel", "fleets[0].models[1].tensor_parallel"]
    assert "weights take 8.7 and activations and CUDA overhead about 2.0 of 10.8 GB" in room[0].message
    # control: a whole L4 per pod (the example) leaves room; a bf16 model is counted at 2 bytes throughout
    assert [f for f in check(ROOT / "blueprints/inference-l4.yaml").findings if f.rule == "kv-cache-room"] == []
    assert replace(qwen, precision="bf16").weights_gb == 7.6 * 2


def test_every_flag_fleetform_passes_is_a_vllm_flag(tmp_path):
    """The flags fleetform writes exist in the pinned vLLM line (providers/vllm-serve-flags.tsv), and every one
    of them is guarded against extra_args."""
    from fleetform.k8s import OWNED_FLAGS
    from fleetform.rules.inference import vllm_flags

    known = vllm_flags()
    assert OWNED_FLAGS <= set(known), OWNED_FLAGS - set(known)
    for source in [ROOT / "blueprints/reference.yaml", ROOT / "blueprints/inference-l4.yaml", ROOT / "blueprints/team-llm.yaml"]:
        _, files = _rendered(source, tmp_path)
        for name, data in files.items():
            if name.endswith("-deployment.yaml"):
                args = yaml.safe_load(data)["spec"]["template"]["spec"]["containers"][0]["args"]
                assert [a for a in args if a.startswith("-") and a not in known] == [], name


def test_the_server_starts_with_vllm_serve_and_a_positional_model(tmp_path):
    """vllm serve takes the model as its first positional argument (vllm-project/vllm v0.11.0,
    vllm/entrypoints/cli/serve.py: usage `vllm serve <model_tag> [options]`); FlexibleArgumentParser
    (vllm/utils/__init__.py) refuses or deprecates `--model` after `serve`. The image's ENTRYPOINT is
    `python3 -m vllm.entrypoints.openai.api_server` in docker/Dockerfile (target vllm-openai) of some
    releases and `vllm serve` in newer ones, so the command is explicit: the same argv works on both.
    Before, the pod had no command and passed `--model <id>`."""
    _, files = _reference(tmp_path)
    container = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["vllm", "serve"]
    args = container["args"]
    assert args[0] == "meta-llama/Llama-3.1-70B-Instruct" and "--model" not in args
    assert all(not a.startswith("-") for a in args[:1]) and args[1].startswith("--")
    # the flags fleetform owns still follow the model, and extra_args may not repeat --model
    assert _arg(container, "--port") == "8000" and ":8000/metrics" in container["lifecycle"]["preStop"]["exec"]["command"][2]
    assert container["startupProbe"]["httpGet"]["port"] == "http" and container["ports"][0]["containerPort"] == 8000
    text = (ROOT / "blueprints/reference.yaml").read_text().replace(
        "        max_model_len: 8192\n        replicas: {min: 2, max: 20}\n",
        "        max_model_len: 8192\n        replicas: {min: 2, max: 20}\n        extra_args: [--model, x]\n")
    path = tmp_path / "model.yaml"
    path.write_text(text)
    assert [f.message for f in check(path).findings if f.rule == "extra-args"] == ["--model is set by fleetform"]


def test_extra_args_reach_vllm_after_fleetforms_own(tmp_path):
    _, files = _reference(tmp_path, "        max_model_len: 8192\n        replicas: {min: 2, max: 20}\n",
                          "        max_model_len: 8192\n        replicas: {min: 2, max: 20}\n"
                          "        extra_args: [--enable-prefix-caching, --max-num-seqs, \"256\", --kv-cache-dtype=fp8]\n")
    args = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-4:] == ["--enable-prefix-caching", "--max-num-seqs", "256", "--kv-cache-dtype=fp8"]


def test_flag_names_are_read_as_vllms_parser_reads_them():
    from fleetform.rules.inference import flag_name

    assert flag_name("--max_num_seqs=8") == "--max-num-seqs"
    assert flag_name("--compilation-config.level") == "--compilation-config"
    assert flag_name("-tp") == "-tp"


def test_hpa_reads_the_metric_the_adapter_rule_serves(tmp_path):
    """vLLM 0.11 exports the queue as vllm:num_requests_waiting (vllm/v1/metrics/loggers.py); the rendered
    Prometheus adapter rule matches that series and exports it as vllm_num_requests_waiting, the name the HPA
    asks for: no ':' in a custom metrics API path (a recording-rule name with ':' was served only once renamed,
    kubernetes-sigs/prometheus-adapter #307). The adapter's values name the Prometheus to read: before, they
    had no prometheus block and the chart's default pointed at a service that does not exist."""
    _, files = _reference(tmp_path)
    hpa = yaml.safe_load(files["small-models/k8s/llama-8b-hpa.yaml"])
    (metric,) = hpa["spec"]["metrics"]
    name = metric["pods"]["metric"]["name"]
    assert name == "vllm_num_requests_waiting" and ":" not in name
    values = yaml.safe_load(files["small-models/prometheus-adapter-values.yaml"])
    (rule,) = values["rules"]["custom"]
    assert values["rules"]["default"] is False
    assert rule["name"]["as"] == name and re.fullmatch(rule["name"]["matches"], "vllm:num_requests_waiting")
    assert rule["seriesQuery"].startswith("vllm:num_requests_waiting{")
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    assert "<<.LabelMatchers>>" in rule["metricsQuery"] and "<<.GroupBy>>" in rule["metricsQuery"]
    # the chart's default Prometheus is http://prometheus.default.svc:9090 (prometheus-community/helm-charts
    # charts/prometheus-adapter/values.yaml); the adapter reads the fleet's (default kube-prometheus-stack's)
    assert values["prometheus"] == {"url": "http://prometheus-operated.monitoring.svc", "port": 9090, "path": ""}
    _, files = _reference(tmp_path, "      autoscaler: hpa\n",
                          "      autoscaler: hpa\n      prometheus_url: https://prom.example.com/select/0\n")
    values = yaml.safe_load(files["small-models/prometheus-adapter-values.yaml"])
    assert values["prometheus"] == {"url": "https://prom.example.com", "port": 443, "path": "/select/0"}
    # the HPA's behavior is bounded like KEDA's
    assert hpa["spec"]["behavior"]["scaleUp"]["policies"][0]["type"] == "Pods"


def test_keda_scale_up_is_bounded_and_has_a_fallback(tmp_path):
    """One burst took 2 -> 20 replicas of a 70B model at once. Now at most 2 replicas or 100% per period, the
    period being the estimated time a replica needs to become ready (120 s engine start + 140 GB from the Hub
    at 0.2 GB/s = 820 s); and while Prometheus cannot be read KEDA holds replicas.min or what runs, whichever
    is more (KEDA apis/keda/v1alpha1 Fallback; CheckFallbackValid needs an AverageValue trigger: ours)."""
    _, files = _reference(tmp_path)
    spec = yaml.safe_load(files["serve/k8s/llama-70b-scaledobject.yaml"])["spec"]
    up = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]
    assert up["policies"] == [{"type": "Pods", "value": 2, "periodSeconds": 820},
                              {"type": "Percent", "value": 100, "periodSeconds": 820}]
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicasIfHigher"}
    # fallback.behavior exists from KEDA 2.17 on (KEDA CHANGELOG v2.17.0, #6450): the manifest and the README say so
    assert "KEDA 2.17 or newer" in files["serve/k8s/llama-70b-scaledobject.yaml"].decode()
    keda_line = (ROOT / "README.md").read_text().split("- `autoscaler: keda`", 1)[1].split("\n- ", 1)[0]
    assert "needs KEDA 2.17 or newer" in " ".join(keda_line.split())
    assert spec["triggers"][0]["metricType"] == "AverageValue"
    _, files = _reference(tmp_path, "          target_per_replica: 5\n", "          target_per_replica: 5\n"
                          "          scale_up: {replicas: 1, period_s: 300}\n          fallback_replicas: 4\n")
    spec = yaml.safe_load(files["serve/k8s/llama-70b-scaledobject.yaml"])["spec"]
    up = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]
    assert up["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 300}]
    assert spec["fallback"]["replicas"] == 4


def test_a_stopping_replica_finishes_its_requests(tmp_path):
    """vLLM 0.11 does not drain on SIGTERM (entrypoints/launcher.py: the signal handler cancels the server
    task). The rendered preStop hook waits for the endpoint to leave the Service, then until vLLM's
    /metrics shows no running or waiting request, within drain_s; the grace period covers both."""
    import http.server
    import threading
    import time

    _, files = _reference(tmp_path)
    pod = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]
    command = pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["python3", "-c"] and "time.sleep(10)" in command[2] and "d=time.time()+120" in command[2]
    assert pod["terminationGracePeriodSeconds"] >= 10 + 120
    readiness = pod["containers"][0]["readinessProbe"]
    assert readiness["timeoutSeconds"] >= 5 and readiness["failureThreshold"] >= 3

    busy = {"left": 3}

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            running = 1 if busy["left"] > 0 else 0
            busy["left"] -= 1
            body = (f'# HELP vllm:num_requests_running x\nvllm:num_requests_running{{model_name="m"}} {running}.0\n'
                    'vllm:num_requests_waiting{model_name="m"} 0.0\n').encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        script = command[2].replace("time.sleep(10)", "time.sleep(0)").replace(":8000/", f":{server.server_port}/")
        for left, drain, low, high in ((3, 120, 4, 30), (10**6, 3, 3, 30)):
            busy["left"] = left
            script_now = script.replace("d=time.time()+120", f"d=time.time()+{drain}")
            start = time.monotonic()
            subprocess.run([sys.executable, "-c", script_now], check=True, timeout=60)
            elapsed = time.monotonic() - start
            # waits while requests run (3 polls 2 s apart), and never beyond the drain budget
            assert low <= elapsed < high, (left, drain, elapsed)
    finally:
        server.shutdown()


def test_weights_from_s3_stream_with_the_runai_streamer(tmp_path):
    """vLLM --load-format runai_streamer reads s3:// through runai-model-streamer, whose s3_utils.py sets
    AWS_EC2_METADATA_DISABLED=true unless given: the pod must name AWS_REGION itself (it had none)."""
    _, files = _reference(tmp_path, "        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                          "        weights: {source: s3, uri: \"s3://acme-models/llama-3.1-70b-instruct/\"}\n")
    pod = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[0] == "s3://acme-models/llama-3.1-70b-instruct/"
    assert _arg(pod["containers"][0], "--load-format") == "runai_streamer"
    assert "--revision" not in args
    assert pod["serviceAccountName"] == "llama-70b-weights"
    account = yaml.safe_load(files["serve/k8s/llama-70b-serviceaccount.yaml"])
    assert account["metadata"] == {**account["metadata"], "name": "llama-70b-weights", "namespace": "llm"}
    cache = next(v for v in pod["volumes"] if v["name"] == "cache")["emptyDir"]
    assert cache["sizeLimit"] == "10Gi"  # the weights stream into GPU memory, not onto disk
    # runai-model-streamer s3_utils.py: AWS_EC2_METADATA_DISABLED defaults to "true", so the region is not
    # read from the instance metadata; the pod gives the blueprint's (reference.yaml: us-east-1)
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["AWS_REGION"] == "us-east-1"
    hub = yaml.safe_load(files["small-models/k8s/llama-8b-deployment.yaml"])["spec"]["template"]["spec"]
    assert "AWS_REGION" not in {e["name"] for e in hub["containers"][0]["env"]}  # Hub weights need none
    text = (ROOT / "blueprints/reference.yaml").read_text().replace(
        "        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
        "        weights: {source: s3, uri: \"s3://acme-models/llama-3.1-70b-instruct/\"}\n")
    path = tmp_path / "s3.yaml"
    path.write_text(text)
    server = next(f for f in check(path).model.fleets if f.name == "serve").kube.servers[0]
    access = server.weights_access  # what the Pod Identity association (providers/aws) needs
    assert (access.namespace, access.service_account, access.bucket, access.prefix) == (
        "llm", "llama-70b-weights", "acme-models", "llama-3.1-70b-instruct/")


def test_weights_from_a_volume_and_a_pinned_hub_revision(tmp_path):
    _, files = _reference(tmp_path, "        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                          "        weights: {source: volume, claim: model-weights, path: llama-3.1-70b}\n")
    pod = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][0] == "/weights/llama-3.1-70b"
    assert {"name": "weights", "persistentVolumeClaim": {"claimName": "model-weights", "readOnly": True}} in pod["volumes"]
    assert {"name": "weights", "mountPath": "/weights", "readOnly": True} in container["volumeMounts"]
    revision = "0e9e39f249a16976918f6564b8830bc894c89659"
    _, files = _reference(tmp_path, "        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                          f"        hf_token_secret: hf-token\n        weights: {{revision: \"{revision}\"}}\n")
    container = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]["containers"][0]
    # vLLM 0.11 ModelConfig: tokenizer_revision defaults to revision, so one flag pins both
    assert _arg(container, "--revision") == revision and "--tokenizer-revision" not in container["args"]


def test_nodes_needed_packs_whole_replicas():
    from fleetform.rules.inference import nodes_needed

    assert nodes_needed([(4, 1), (8, 1)], 8) == 2
    assert nodes_needed([(2, 3), (4, 1)], 8) == 2  # 2+2+2 and 4 do not share one node of 8
    assert nodes_needed([(1, 6)], 4) == 2
    assert nodes_needed([(4, 2), (2, 4)], 8) == 2


RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def _restricted_violations(pod: dict) -> list[str]:
    """The Pod Security Standards' restricted profile (kubernetes.io/docs/concepts/security/pod-security-standards),
    as far as these pods can touch it."""
    bad = []
    for v in pod.get("volumes", []):
        if not set(v) - {"name"} <= RESTRICTED_VOLUMES:
            bad.append(f"volume {v['name']}")
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        bad.append("host namespaces")
    pod_sc = pod.get("securityContext", {})
    for c in pod["containers"]:
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append("allowPrivilegeEscalation")
        if "ALL" not in sc.get("capabilities", {}).get("drop", []):
            bad.append("capabilities.drop ALL")
        if set(sc.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            bad.append("capabilities.add")
        if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True):
            bad.append("runAsNonRoot")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            bad.append("runAsUser 0")
        seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append("seccompProfile")
        if sc.get("privileged") or any(p.get("hostPort") for p in c.get("ports", [])):
            bad.append("privileged or hostPort")
    return bad


def test_hardening(tmp_path):
    """Issue 11 defect 12: the namespace enforces Pod Security 'restricted' and the pods satisfy it; a
    NetworkPolicy admits only the namespace, labelled clients and Prometheus, on the model port; no service
    account token; /tmp is bounded; an API key comes from a Secret (vLLM 0.11 api_server.py reads
    VLLM_API_KEY when --api-key is not given, and checks it on /v1 paths only: probes and /metrics stay open)."""
    _, files = _reference(tmp_path, "        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                          "        hf_token_secret: hf-token\n        api_key_secret: llama-api-key\n")
    namespace = yaml.safe_load(files["serve/k8s/namespace.yaml"])["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"
    assert namespace["pod-security.kubernetes.io/enforce-version"] == "v1.33"
    pod = yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["template"]["spec"]
    assert _restricted_violations(pod) == []
    broken = json.loads(json.dumps(pod))
    broken["containers"][0]["securityContext"]["capabilities"]["drop"] = []
    assert _restricted_violations(broken) == ["capabilities.drop ALL"]  # negative control
    assert pod["automountServiceAccountToken"] is False
    assert next(v for v in pod["volumes"] if v["name"] == "tmp")["emptyDir"] == {"sizeLimit": "4Gi"}
    env = pod["containers"][0]["env"]
    assert {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llama-api-key", "key": "VLLM_API_KEY"}}} in env
    policy = yaml.safe_load(files["serve/k8s/networkpolicy.yaml"])
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"fleetform.dev/fleet": "serve"}} and spec["policyTypes"] == ["Ingress"]
    (ingress,) = spec["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert ingress["from"] == [
        {"podSelector": {}},
        {"namespaceSelector": {}, "podSelector": {"matchLabels": {"fleetform.dev/client-of": "llm"}}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert "networkpolicy.yaml" in yaml.safe_load(files["serve/k8s/kustomization.yaml"])["resources"]


# ---- checkov's Kubernetes checks on every rendered example ----

CHECKOV_EXCEPTIONS = ROOT / "tests/checkov-exceptions.yaml"


def _checkov() -> str | None:
    """checkov pins packaging<24, which pulumi and pytest cannot share: it lives in a venv of its own,
    .venv-checkov (made by .ci/run), or on PATH, or where FLEETFORM_CHECKOV says."""
    for candidate in (os.environ.get("FLEETFORM_CHECKOV"), str(ROOT / ".venv-checkov/bin/checkov")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def test_checkov_finds_nothing_but_the_listed_exceptions(tmp_path):
    """Every rendered example (blueprints/*.yaml with inference fleets and the inference variants) goes through
    `checkov --framework kubernetes` in one call; each failed check must be listed, with the kinds it fails
    on and the reason it does not apply, in tests/checkov-exceptions.yaml. A new failure fails this test,
    and so does an exception that no longer fails anything."""
    checkov = _checkov() or require("checkov", "none: PyPI checkov, in .venv-checkov as .ci/run installs it")
    root = tmp_path / "rendered"
    for param in CASES:
        (source,) = param.values
        name = source.stem if isinstance(source, Path) else param.id
        _, files = _rendered(source, tmp_path)
        for path, data in files.items():
            if "/k8s/" in path and not path.endswith("kustomization.yaml"):
                out = root / name / path
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
    run = subprocess.run([checkov, "-d", str(root), "--framework", "kubernetes", "-o", "json", "--quiet", "--compact",
                          "--skip-download"], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"})
    assert run.returncode in (0, 1), run.stderr[-2000:]
    report = json.loads(run.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = {(c["check_id"], c["resource"].split(".")[0]) for r in reports for c in r["results"]["failed_checks"]}
    passed = sum(r["summary"]["passed"] for r in reports)
    assert passed > 100, "checkov checked nothing"
    exceptions = yaml.safe_load(CHECKOV_EXCEPTIONS.read_text())
    listed = {(e["check"], kind) for e in exceptions for kind in e["kinds"]}
    assert all(e["reason"].strip() for e in exceptions)
    assert sorted(failed - listed) == [], f"new checkov failures: fix them, or list them with a reason: {sorted(failed - listed)}"
    assert sorted(listed - failed) == [], "these exceptions no longer fail: remove them from tests/checkov-exceptions.yaml"


def test_a_rollout_is_failed_only_after_a_replica_had_its_whole_startup_budget(tmp_path):
    """The Deployment default progressDeadlineSeconds is 600 (Kubernetes API, DeploymentSpec: "Defaults to
    600s"); the 70B replica's startup probe allows about 2,000 s to load its weights, so a rollout read as
    failed (ProgressDeadlineExceeded) while the replica was still loading."""
    _, files = _reference(tmp_path, "", "")
    for path in ("serve/k8s/llama-70b-deployment.yaml", "small-models/k8s/llama-8b-deployment.yaml"):
        deployment = yaml.safe_load(files[path])
        (startup,) = [c["startupProbe"] for c in deployment["spec"]["template"]["spec"]["containers"]]
        budget = startup["periodSeconds"] * startup["failureThreshold"]
        assert deployment["spec"]["progressDeadlineSeconds"] >= budget + 600
    assert yaml.safe_load(files["serve/k8s/llama-70b-deployment.yaml"])["spec"]["progressDeadlineSeconds"] > 2000
