"""The Pulumi program installs a gateway's CRDs and controllers (issue 23): the Gateway API v1.4.0 standard CRDs and
the Inference Extension v1.1.0 CRDs from files vendored under providers/aws/crds/ (pinned by git blob id), then
kgateway's CRD chart and kgateway v2.1.2 (OCI charts, pinned), then the fleet's Gateway, HTTPRoutes and
InferencePools. Checked under Pulumi's mocks (fleetform.plan.record), as tests/test_kueue.py checks JobSet and
Kueue. What only a real cluster would show (kgateway programming the Envoy proxy for an InferencePool) is not
checked here: docs/gateway.md says what to run after `pulumi up`."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from dataclasses import replace

import pytest
import yaml

from conftest import ROOT
from fleetform.changes import DELETE, UPDATE, compare
from fleetform.cluster import addons_data
from fleetform.pipeline import check
from fleetform.render import render
from test_kueue import _missing

EXAMPLE = ROOT / "blueprints/inference-gateway.yaml"
CRDS = ROOT / "providers/aws/crds"
CHARTS = ROOT / "tests/data/charts"
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"


def _blob(data: bytes) -> str:
    """git's object id of a file's bytes (`git hash-object`): the SHA-1 of `blob <size>\\0` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 (git's id, not a secret)


def _record(model):
    from fleetform.plan import record

    return record(model, render(model))


def _without_gateway(tmp_path):
    """The example with no gateway: its model at zero goes back to one replica (scale-to-zero needs the gateway)."""
    path = tmp_path / "bp.yaml"
    path.write_text(re.sub(r"    gateway:\n      request_timeout_s: 300[^\n]*\n", "", EXAMPLE.read_text()).replace(
        "replicas: {min: 0, max: 8}", "replicas: {min: 1, max: 8}"))
    result = check(path)
    assert result.model is not None and result.model.fleets[0].gateway is None
    return result.model


@pytest.fixture(scope="module")
def example():
    result = check(EXAMPLE)
    assert result.model is not None
    return result.model, _record(result.model)


def test_the_vendored_crds_are_the_pinned_upstream_files():
    """Every file of a bundle is listed in addons.yaml with its git blob id at the upstream tag (read from the
    repositories' trees: gateway-api v1.4.0 config/crd/standard, gateway-api-inference-extension v1.1.0
    config/crd/bases), and nothing else is in the folder: a file edited by hand, or left from another version,
    fails here."""
    bundles = addons_data()["crd_bundles"]
    assert set(bundles) == {"gateway-api", "inference-extension"}
    for name, bundle in bundles.items():
        folder = CRDS / f"{name}-{bundle['version']}"
        assert {p.name for p in folder.iterdir()} == set(bundle["files"]), name
        for file, blob in bundle["files"].items():
            data = (folder / file).read_bytes()
            assert _blob(data) == blob, file
            (crd,) = [d for d in yaml.safe_load_all(data) if d]
            assert crd["kind"] == "CustomResourceDefinition"
            # the bundle's own version stamp agrees with the folder's
            annotations = crd["metadata"]["annotations"]
            assert bundle["version"] in (annotations.get("gateway.networking.k8s.io/bundle-version"),
                                         annotations.get("inference.networking.k8s.io/bundle-version")), file
    # negative control: one byte more is another blob
    some = CRDS / "gateway-api-v1.4.0/gateway.networking.k8s.io_gateways.yaml"
    assert _blob(some.read_bytes() + b"\n") != bundles["gateway-api"]["files"][some.name]


def test_the_installed_crds_are_the_schemas_the_rendered_objects_are_checked_against():
    """tests/crd/ holds the schemas tests/test_k8s.py validates the Gateway, HTTPRoute and InferencePool with; they
    must be those of the CRDs the program installs, or an object could pass here and be refused by the cluster."""
    spec = importlib.util.spec_from_file_location("from_crd", ROOT / "tests/crd/from_crd.py")
    from_crd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(from_crd)
    pairs = [("gateway-api-v1.4.0/gateway.networking.k8s.io_gateways.yaml", "gateway.networking.k8s.io_v1_Gateway"),
             ("gateway-api-v1.4.0/gateway.networking.k8s.io_httproutes.yaml", "gateway.networking.k8s.io_v1_HTTPRoute"),
             ("inference-extension-v1.1.0/inference.networking.k8s.io_inferencepools.yaml",
              "inference.networking.k8s.io_v1_InferencePool"),
             ("inference-extension-v1.1.0/inference.networking.x-k8s.io_inferenceobjectives.yaml",
              "inference.networking.x-k8s.io_v1alpha2_InferenceObjective")]
    for vendored, schema in pairs:
        crd = yaml.safe_load((CRDS / vendored).read_text())
        version = schema.split("_")[1]
        made = from_crd.convert(crd, version, "")
        kept = json.loads((ROOT / f"tests/crd/{schema}.json").read_text())
        made.pop("description"), kept.pop("description")
        assert made == kept, schema


def test_every_kgateway_values_key_exists_in_the_pinned_chart(example):
    """kgateway's values (addons.yaml, and the requests written at `resources_at`) against the keys of the chart
    v2.1.2 (tests/data/charts/kgateway-v2.1.2-values.yaml, with its source); the CRD chart takes no values."""
    model, _ = example
    releases = {r.name: r for r in model.cluster.releases}
    kgateway, crds = releases["kgateway"], releases["kgateway-crds"]
    chart = yaml.safe_load((CHARTS / f"kgateway-{kgateway.version}-values.yaml").read_text())
    assert kgateway.values["inferenceExtension"] == {"enabled": True}
    # the version the rendered Gateway's class is written for (fleetform/gateway.py) is the one installed
    from fleetform.gateway import KGATEWAY_VERSION

    assert kgateway.version == crds.version == KGATEWAY_VERSION
    assert kgateway.values["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}}
    assert _missing(kgateway.values, chart) == []
    assert crds.values == {}
    # negative control: a key of another chart version (v2.2 renamed the agentgateway switch's block) is seen
    assert _missing({"inferenceExtension": {"enable": True}, "agentGateway": {}}, chart) == [
        "inferenceExtension.enable", "agentGateway"]


def test_the_program_installs_the_crds_then_kgateway_then_the_gateway_objects(example):
    """Under the mocks: one CustomResourceDefinition resource per vendored file, never deleted by `pulumi up`
    (retain_on_delete); the kgateway-crds release after every CRD, kgateway after kgateway-crds; every Gateway,
    HTTPRoute and InferencePool after kgateway and after the CRD of its kind. The charts are OCI references at the
    pinned version, in kgateway-system."""
    model, resources = example
    crds = {r["inputs"]["metadata"]["name"]: r for r in resources if r["type"] == CRD_TYPE}
    assert set(crds) == {
        "gatewayclasses.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io",
        "grpcroutes.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io",
        "referencegrants.gateway.networking.k8s.io", "backendtlspolicies.gateway.networking.k8s.io",
        "inferencepools.inference.networking.k8s.io", "inferencepools.inference.networking.x-k8s.io",
        "inferenceobjectives.inference.networking.x-k8s.io"}
    assert all(r["options"] == {"retainOnDelete": True} for r in crds.values())
    # the CRD as the file has it: its schema is what the API server gets
    gateways = crds["gateways.gateway.networking.k8s.io"]["inputs"]
    assert gateways["metadata"]["annotations"]["gateway.networking.k8s.io/bundle-version"] == "v1.4.0"
    assert [v["name"] for v in gateways["spec"]["versions"]] == ["v1", "v1beta1"]
    releases = {r["name"]: r for r in resources if r["type"] == RELEASE_TYPE}
    crd_names = {r["name"] for r in crds.values()}
    for name in ("eks-kgateway-crds", "eks-kgateway"):
        inputs = releases[name]["inputs"]
        assert inputs["chart"] == f"oci://cr.kgateway.dev/kgateway-dev/charts/{inputs['name']}"
        assert inputs["version"] == "v2.1.2" and inputs["namespace"] == "kgateway-system"
        assert "repositoryOpts" not in inputs
        assert crd_names <= set(releases[name]["depends_on"]), name
    assert "eks-kgateway-crds" in releases["eks-kgateway"]["depends_on"]
    assert releases["eks-kgateway"]["inputs"]["values"]["inferenceExtension"] == {"enabled": True}
    assert "eks-namespace-kgateway-system" in releases["eks-kgateway"]["depends_on"]
    plural = {"Gateway": "gateways.gateway.networking.k8s.io", "HTTPRoute": "httproutes.gateway.networking.k8s.io",
              "InferencePool": "inferencepools.inference.networking.k8s.io"}
    objects = [r for r in resources if r["type"].split(":")[-1] in plural and not r["type"].startswith("fleetform:")]
    assert len(objects) == 7  # one Gateway, an HTTPRoute and an InferencePool per model, the way-in and unknown-model HTTPRoutes
    for obj in objects:
        after = set(obj["depends_on"])
        assert {"eks-kgateway", "eks-kgateway-crds", crds[plural[obj["type"].split(":")[-1]]]["name"]} <= after
    # the plan's release table lists both
    from fleetform.commands.plan import _cluster_lines

    text = "\n".join(_cluster_lines(resources, False, lambda title: [title]))
    for chart in ("kgateway-crds", "kgateway"):
        assert re.search(rf"\n  {chart} +oci://cr\.kgateway\.dev/kgateway-dev/charts/{chart} v2\.1\.2 +kgateway-system +"
                         r"\(OCI reference\)", text), chart
    # and the CRD bundles, by group and the version their CRDs are stamped with
    assert re.search(r"\n  gateway\.networking\.k8s\.io +v1\.4\.0 +BackendTLSPolicy, GRPCRoute, Gateway, GatewayClass, "
                     r"HTTPRoute, ReferenceGrant\n", text)
    assert re.search(r"\n  inference\.networking\.k8s\.io +v1\.1\.0 +InferencePool\n", text)


def test_a_version_bump_is_an_update_and_a_removed_gateway_leaves_its_crds(example, tmp_path):
    """Day 2, as `fleetform diff` reads the two plans: a new kgateway version updates both releases in place (Helm
    upgrades a release; its name and namespace stay); removing the gateway deletes the releases, and the CRDs
    only leave Pulumi's state: the API server keeps them, and with them any Gateway or InferencePool left."""
    model, before = example
    bumped = replace(model, cluster=replace(model.cluster, releases=tuple(
        replace(r, version="v2.1.3") if r.name.startswith("kgateway") else r for r in model.cluster.releases)))
    changes = {c.name: c for c in compare(before, _record(bumped))}
    assert set(changes) == {"eks-kgateway", "eks-kgateway-crds"}  # nothing else moves
    for name in ("eks-kgateway", "eks-kgateway-crds"):
        change = changes[name]
        assert change.action == UPDATE
        assert [(i.path, i.old, i.new) for i in change.inputs] == [("version", "v2.1.2", "v2.1.3")]
    assert not any(c.type == CRD_TYPE for c in changes.values())

    gone = _record(_without_gateway(tmp_path))
    assert not any(r["type"] == CRD_TYPE for r in gone)
    assert not any(r["type"] == RELEASE_TYPE and "kgateway" in r["name"] for r in gone)
    changes = [c for c in compare(before, gone) if c.type == CRD_TYPE]
    assert len(changes) == 9 and all(c.action == DELETE for c in changes)
    assert all(any("in the cluster (retain_on_delete)" in e for e in c.effects) for c in changes)
    # and says what adding a gateway back costs: pulumi-kubernetes 4.29+ creates with a plain create, which the API
    # server refuses for an object that exists (CHANGELOG 4.29.0, #2926), unless upsertExistingObjects is on
    assert all(any("AlreadyExists" in e and "PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true" in e for e in c.effects)
               for c in changes)


@pytest.mark.parametrize("mode, expected", [("", None), ("gateway-open", "without the API key was not refused"),
                                            ("no-address", "is Programmed but has no address"),
                                            # an HTTP error that is not vLLM's 401 (the Gateway's 404 for a route
                                            # that did not match) proves nothing about the key
                                            ("gateway-404", "HTTP status 404; 22 and 401 expected")])
def test_the_end_to_end_check_asks_the_gateway_what_a_user_would(mode, expected, tmp_path, monkeypatch, capsys):
    """stacks/check_inference.py after `pulumi up` (never run against AWS here): for a fleet with a gateway it
    waits for the Gateway to be Programmed, then sends one completion per model through the Gateway's address with
    the model's header and key, and the same without the key, which must end in an HTTP error. A fake kubectl
    answers as a working cluster would, or with a gateway that lets a keyless request through, or no address."""
    import runpy

    from test_eks import FAKE_KUBECTL

    fake = FAKE_KUBECTL.replace('if "get" in args and "pod" in args and any("exitCode" in a for a in args):', '''\
if "get" in args and "gateway" in args:
    print(json.dumps({"status": {"addresses": [] if mode == "no-address" else [
        {"type": "Hostname", "value": "gw.elb.example"}]}}))
elif "get" in args and "pod" in args and pod().endswith("-nokey"):
    exit_code = any("exitCode" in a for a in args)
    print((0 if mode == "gateway-open" else 22) if exit_code else ("Succeeded" if mode == "gateway-open" else "Failed"))
elif "logs" in args and pod().endswith("-nokey"):
    print("fleetform-http-status=" + {"gateway-open": "200", "gateway-404": "404"}.get(mode, "401"))
elif "get" in args and "pod" in args and any("exitCode" in a for a in args):''', 1)
    assert fake != FAKE_KUBECTL
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(fake)
    kubectl.chmod(0o755)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls"))
    monkeypatch.setenv("FAKE_MODE", mode)
    module = runpy.run_path(str(ROOT / "stacks/check_inference.py"))
    code = module["main"]([str(EXAMPLE), "--kubectl", str(kubectl)])
    out = capsys.readouterr()
    calls = (tmp_path / "calls").read_text().splitlines()
    assert json.dumps(["-n", "chat", "wait", "--for=condition=Programmed", "gateway/chat-gateway",
                       "--timeout=10m"]) in calls
    if expected is not None:
        assert code == 1 and expected in out.err
        return
    assert code == 0 and "qwen-7b answers through the Gateway with the key, and refuses without it" in out.out
    pods = {p["metadata"]["name"]: p for p in (json.loads(c[len("STDIN "):]) for c in calls
                                               if c.startswith("STDIN ") and '"Pod"' in c)}
    for model in ("qwen-7b", "llama-8b"):
        keyed, keyless = pods[f"e2e-gw-{model}-completion"], pods[f"e2e-gw-{model}-nokey"]
        args = keyed["spec"]["containers"][0]["args"]
        assert not any(a.startswith("X-Gateway-Model-Name") for a in args)  # the body only, as a client sends it
        assert args[-1] == "http://gw.elb.example:80/v1/completions"
        assert "Authorization: Bearer $(VLLM_API_KEY)" in args
        (env,) = keyed["spec"]["containers"][0]["env"]
        assert env["valueFrom"]["secretKeyRef"] == {"name": "chat-api-key", "key": "VLLM_API_KEY"}
        assert not any("Authorization" in a for a in keyless["spec"]["containers"][0]["args"])
        assert "fleetform-http-status=%{http_code}\n" in keyless["spec"]["containers"][0]["args"]
        assert "env" not in keyless["spec"]["containers"][0]


def test_the_program_applies_the_routes_in_the_order_that_keeps_requests_answered():
    """A running gateway that moves to the passes (or a fresh one) gets its routes in order: the Gateway (its
    listeners) and the Backends, DirectResponse and policies first, then the second pass's unknown-model answer, then
    the way in (which sends requests to the second pass), then the model routes and the semantic router's own route,
    which leave the way in. Pulumi updates a resource after what it depends on (providers/aws/inference.py apply)."""
    result = check(ROOT / "blueprints/inference-router.yaml")
    assert result.model is not None
    resources = _record(result.model)
    by = {(r["type"].split(":")[-1], r["inputs"]["metadata"]["name"]): r for r in resources
          if not r["type"].startswith("fleetform:") and isinstance(r.get("inputs"), dict)
          and isinstance(r["inputs"].get("metadata"), dict) and "name" in r["inputs"]["metadata"]}
    name = {key: r["name"] for key, r in by.items()}
    routes = {key[1]: set(r["depends_on"]) for key, r in by.items() if key[0] == "HTTPRoute"}
    assert set(routes) == {"chat-gateway-unknown-model", "chat-gateway-models", "chat-gateway-semrouter-way-in",
                           "chat-gateway-semrouter", "qwen-7b", "qwen-32b"}
    first = {name[("Gateway", "chat-gateway")], name[("Backend", "chat-gateway-pools")],
             name[("Backend", "chat-gateway-semrouter")], name[("DirectResponse", "chat-gateway-unknown-model")],
             name[("TrafficPolicy", "chat-gateway-bbr")], name[("InferencePool", "qwen-7b")]}
    for route, after in routes.items():
        assert first <= after, route
        # a model's rollout holds no route back
        assert name[("Deployment", "qwen-7b")] not in after, route
    unknown = name[("HTTPRoute", "chat-gateway-unknown-model")]
    way_in = {name[("HTTPRoute", "chat-gateway-models")], name[("HTTPRoute", "chat-gateway-semrouter-way-in")]}
    for route in ("chat-gateway-models", "chat-gateway-semrouter-way-in"):
        assert unknown in routes[route] and not way_in & routes[route], route
    for route in ("qwen-7b", "qwen-32b", "chat-gateway-semrouter"):
        assert way_in | {unknown} <= routes[route], route
    assert not way_in & routes["chat-gateway-unknown-model"]
