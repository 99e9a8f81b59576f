"""An endpoint picker restarts when its plugins file changes (fleetform/gateway.py plugins_digest).

The picker reads the file of its ConfigMap once, when it starts: the extension v1.1.0's runner
(cmd/epp/runner/runner.go Run -> parsePluginsConfiguration -> os.ReadFile) and v1.3.0's, which
llm-d-inference-scheduler v0.5.0 runs (parseConfigurationPhaseOne), watch only their TLS certificates
(pkg/common/certs.go). A ConfigMap changed alone therefore never reached a running picker; the sha256 of the
ConfigMap's data on the pod template ("fleetform.dev/config-sha256", the semantic router's key) makes that change a
new pod, which `fleetform diff` shows as the picker's drain (Recreate).

What only a cluster proves: that the API server's ConfigMap holds the bytes hashed here, and that the new pod reads
the new file. Checked here instead: the digest is recomputed from the rendered ConfigMap as a YAML reader sees it
(what `kubectl get cm -o json | jq -cSj .data | sha256sum` gives), and the plan applies the ConfigMap before the
Deployment that mounts it."""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import ROOT
from fleetform import kvevents
from test_gateway import _objects

GATEWAY = ROOT / "blueprints/inference-gateway.yaml"
PRECISE = ROOT / "blueprints/inference-precise.yaml"
ROUTER = ROOT / "blueprints/inference-router.yaml"
KEY = "fleetform.dev/config-sha256"


def _data_digest(configmap: dict) -> str:
    """The digest of a ConfigMap's data, computed from the object as parsed (not by fleetform's function)."""
    said = json.dumps(configmap["data"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(said.encode()).hexdigest()


def _pickers(source) -> dict[str, tuple[dict, dict]]:
    """Each picker's (Deployment, the ConfigMap its plugins-config volume mounts)."""
    _, _, objs = _objects(source)
    out = {}
    for name, deployment in objs["Deployment"].items():
        if name.endswith("-epp"):
            volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
            out[name] = (deployment, objs["ConfigMap"][volumes["plugins-config"]["configMap"]["name"]])
    assert out, source
    return out


@pytest.mark.parametrize("source", [GATEWAY, PRECISE, ROUTER], ids=lambda p: p.stem)
def test_the_picker_pod_template_carries_the_digest_of_the_configmap_it_mounts(source):
    for name, (deployment, configmap) in _pickers(source).items():
        annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
        assert annotations.get(KEY) == _data_digest(configmap), name
        # the file the picker is told to read is the one the digest covers
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--config-file") + 1] == "/config/" + next(iter(configmap["data"]))


def _precise_weight(weight: int):
    return ((kvevents.PLUGIN_TYPE, weight),) + tuple(kvevents.SCORER_WEIGHTS[1:])


@pytest.mark.parametrize("source, change", [
    # a precise-routing setting that reaches only the plugins file (the scorer's weight in the profile)
    (PRECISE, lambda mp: mp.setattr(kvevents, "SCORER_WEIGHTS", _precise_weight(3))),
    # the default picker's scorers (a new chart's default plugins file)
    (GATEWAY, lambda mp: mp.setattr("fleetform.gateway.EPP_SCORERS", ("queue-scorer", "prefix-cache-scorer"))),
], ids=["precise", "default"])
def test_the_digest_changes_with_the_configmap_data_and_not_otherwise(source, change, monkeypatch):
    before = _pickers(source)
    with monkeypatch.context() as mp:
        change(mp)
        after = _pickers(source)
    assert set(after) == set(before)
    for name, (deployment, configmap) in after.items():
        old_deployment, old_configmap = before[name]
        assert configmap["data"] != old_configmap["data"], name  # the simulated change reached the file
        old_template, template = old_deployment["spec"]["template"], deployment["spec"]["template"]
        assert template["metadata"]["annotations"][KEY] != old_template["metadata"]["annotations"][KEY], name
        # and nothing else of the pod changed: without the digest the picker kept the old file
        assert {**template, "metadata": {}} == {**old_template, "metadata": {}}, name
        assert template["metadata"]["labels"] == old_template["metadata"]["labels"], name


def test_a_change_that_leaves_the_plugins_file_alone_leaves_the_digest(tmp_path):
    """The digest follows the file's data only: the request timeout (HTTPRoute) and a model's replicas change
    nothing of it, and the two pickers of one gateway with the same file share one digest."""
    text = GATEWAY.read_text()
    assert "request_timeout_s: 300" in text and "replicas: {min: 1, max: 8}" in text
    changed = tmp_path / GATEWAY.name
    changed.write_text(text.replace("request_timeout_s: 300", "request_timeout_s: 600")
                       .replace("replicas: {min: 1, max: 8}", "replicas: {min: 1, max: 6}"))
    before, after = _pickers(GATEWAY), _pickers(changed)
    digests = {n: d["spec"]["template"]["metadata"]["annotations"][KEY] for n, (d, _) in before.items()}
    assert digests == {n: d["spec"]["template"]["metadata"]["annotations"][KEY] for n, (d, _) in after.items()}
    assert len(set(digests.values())) == 1  # the default plugins file is the same for every model
    # where the files differ (precise: each names its own model and tokenizer), so do the digests
    precise = {n: d["spec"]["template"]["metadata"]["annotations"][KEY] for n, (d, _) in _pickers(PRECISE).items()}
    assert len(set(precise.values())) == len(precise) == 2


def test_diff_shows_a_picker_whose_plugins_file_changed_restarting(monkeypatch):
    """A change that reaches only the ConfigMap (simulated: the precise scorer's weight, as a new fleetform
    release would change it) is the picker Deployment's drain in `fleetform diff`, since its pod template changed
    with the digest; before, diff showed only the ConfigMap updated in place and `pulumi up` restarted nothing.
    The plan applies the ConfigMap before the Deployment (providers/aws/inference.py: ConfigMaps are early
    objects), so the new pod reads the new file."""
    from fleetform.commands.diff import compute
    from fleetform.commands.plan import build

    old = build(str(PRECISE))
    monkeypatch.setattr(kvevents, "SCORER_WEIGHTS", _precise_weight(3))
    new = build(str(PRECISE))
    data = compute("old", old[1], "new", new[1], old[0], new[0])
    drains = {d["what"] for d in data["disruptions"] if d["class"] == "drain"}
    changed = {(r["type"].rsplit(":", 1)[1], r["name"]) for r in data["resources"]}
    for model in ("qwen-7b", "llama-8b"):
        deployment, configmap = f"chat-deployment-chat-{model}-epp", f"chat-configmap-chat-{model}-epp"
        assert f"Deployment {deployment}" in drains
        assert ("ConfigMap", configmap) in changed
        (recorded,) = (r for r in new[1][0]["resources"] if r["name"] == deployment)
        assert configmap in recorded["depends_on"]
    # the model servers read no plugins file: they keep running
    assert not {n for k, n in changed if k == "Deployment" and not n.endswith("-epp")}
