"""The gateway proxy's replicas (fleetform/proxy.py): every request crosses the loopback Backend, whose cluster keeps
Envoy's default circuit breakers (tests/test_bbr_envoy.py reads 1,024 from a real Envoy), so the proxy runs replicas
enough for every sequence the models' replicas run at once, spread over zones and nodes behind a PodDisruptionBudget
that selects the pods kgateway v2.1.2's deployer renders (tests/data/kgateway/gwc-with-replicas-out.yaml)."""

from __future__ import annotations

import copy
import math

import pytest
import yaml

from conftest import ROOT, run_cli
from fleetform import proxy
from fleetform.changes import UPDATE, Change, InputChange, classify
from fleetform.pipeline import check
from test_gateway import EXAMPLE, _objects

DEPLOYER = ROOT / "tests/data/kgateway/gwc-with-replicas-out.yaml"


def _blueprint(tmp_path, edit, source=EXAMPLE):
    data = yaml.safe_load(source.read_text())
    edit(data)
    path = tmp_path / "bp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _fleet(path):
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return next(f for f in result.model.fleets if f.gateway is not None), result


def _kgateway_proxy():
    docs = [d for d in yaml.safe_load_all(DEPLOYER.read_text()) if d]
    return next(d for d in docs if d["kind"] == "Deployment"), {d["kind"] for d in docs}


def test_vllm_0_11_default_batch_follows_the_device_it_sees(tmp_path):
    """vLLM 0.11 `vllm serve` without --max-num-seqs: 1,024 on a device of 70 GiB or more that is not an A100, else 256
    (vllm/engine/arg_utils.py _set_default_args, the v0.11.0 wheel). vLLM reads the memory through NVML from the
    physical GPU's handle (vllm/platforms/cuda.py NvmlCudaPlatform.get_device_total_memory), so a MIG slice's vLLM
    sees the whole GPU's memory (or, where NVML refuses the aggregate, none: 256), never the slice's."""
    def on(instance, sharing=None, args=()):
        def edit(data):
            fleet = data["fleets"][0]
            fleet["instance_type"] = instance
            if sharing:
                fleet["gpu_sharing"] = sharing
            fleet["models"][0]["extra_args"] = list(args)
        fleet, _ = _fleet(_blueprint(tmp_path, edit))
        return proxy.max_num_seqs(fleet, fleet.models[0])

    assert on("p5.48xlarge")[0] == 1024  # H100 80 GB
    assert on("p5en.48xlarge")[0] == 1024  # H200
    assert on("p4de.24xlarge")[0] == 256  # A100 80 GB: vLLM excludes it by name
    assert on("g6e.12xlarge")[0] == 256  # L40S 48 GB
    assert on("p4de.24xlarge", {"strategy": "mig", "profile": "3g.40gb"})[0] == 256  # an A100 whatever its slice
    assert on("p5.48xlarge", {"strategy": "mig", "profile": "3g.40gb"}) == (
        1024, "vLLM 0.11's default --max-num-seqs on one 3g.40gb slice, which reads the whole H100-80GB's memory")
    assert on("p5.48xlarge", args=["--max-num-seqs", "64"]) == (64, "its --max-num-seqs")
    assert on("p5.48xlarge", args=["--max_num_seqs=48"])[0] == 48  # vLLM reads underscores as dashes
    assert on("p5.48xlarge", args=["--max-num-batched-tokens", "512"])[0] == 512


def test_the_proxy_replicas_carry_every_sequence_the_models_run(tmp_path):
    fleet, _ = _fleet(EXAMPLE)
    sizing = proxy.size(fleet)
    slots = sum(m.replicas.max * proxy.max_num_seqs(fleet, m)[0] for m in fleet.models)
    assert sizing.slots == slots and sizing.replicas == max(2, math.ceil(slots / 1024)) == 4
    _, _, objs = _objects()
    params = objs["GatewayParameters"]["chat-gateway"]["spec"]["kube"]
    assert params["deployment"]["replicas"] == 4

    # at the edge: 2,048 sequences fit two proxies, one more needs a third
    def seqs(n):
        def edit(data):
            for model in data["fleets"][0]["models"]:
                model["extra_args"] = ["--max-num-seqs", str(n)]
        return edit

    at, _ = _fleet(_blueprint(tmp_path, seqs(128)))  # 2 models x 8 replicas x 128 = 2,048
    assert (proxy.size(at).slots, proxy.size(at).replicas) == (2048, 2)
    past, _ = _fleet(_blueprint(tmp_path, seqs(129)))
    assert (proxy.size(past).slots, proxy.size(past).replicas) == (2064, 3)
    small, _ = _fleet(_blueprint(tmp_path, seqs(1)))
    assert proxy.size(small).replicas == 2  # never one: the proxy is the only way in


def test_the_pdb_and_spread_select_the_pods_kgateways_deployer_renders():
    deployment, kinds = _kgateway_proxy()
    assert "PodDisruptionBudget" not in kinds  # kgateway v2.1 renders none: fleetform's is the only one
    gateway = deployment["metadata"]["name"]  # the deployer names the proxy after its Gateway ("gw")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 2  # from the input's GatewayParameters kube.deployment.replicas

    _, _, objs = _objects()
    pdb = objs["PodDisruptionBudget"]["chat-gateway"]["spec"]
    params = objs["GatewayParameters"]["chat-gateway"]["spec"]["kube"]
    spreads = params["podTemplate"]["topologySpreadConstraints"]
    assert pdb["maxUnavailable"] == 1
    for selector in [pdb["selector"]["matchLabels"]] + [s["labelSelector"]["matchLabels"] for s in spreads]:
        # fleetform's selector, with kgateway's test Gateway's name in place of ours, selects kgateway's proxy pods
        theirs = {k: (gateway if v == "chat-gateway" else v) for k, v in selector.items()}
        assert theirs.items() <= pod_labels.items(), (selector, pod_labels)
    assert [s["topologyKey"] for s in spreads] == ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
    assert {s["whenUnsatisfiable"] for s in spreads} == {"ScheduleAnyway"}
    # and no model's objects select the proxy's pods, nor the proxy's PDB a model's
    for name, other in objs["PodDisruptionBudget"].items():
        if name != "chat-gateway":
            assert not other["spec"]["selector"]["matchLabels"].items() <= pdb["selector"]["matchLabels"].items()


def test_fewer_proxy_replicas_than_the_sequences_need_is_a_warning(tmp_path):
    def asked(n):
        def edit(data):
            data["fleets"][0]["gateway"]["proxy_replicas"] = n
        return edit

    _, result = _fleet(_blueprint(tmp_path, asked(3)))
    (finding,) = [f for f in result.findings if f.rule == "gateway-capacity"]
    assert finding.severity.value == "warning" and finding.path.endswith("gateway.proxy_replicas")
    assert "3,072 requests in flight" in finding.message and "4,096 sequences" in finding.message
    assert "set proxy_replicas to 4" in finding.hint
    fleet, result = _fleet(_blueprint(tmp_path, asked(4)))
    assert not [f for f in result.findings if f.rule == "gateway-capacity"]
    fleet, result = _fleet(_blueprint(tmp_path, asked(9)))
    assert proxy.size(fleet).replicas == 9  # more than needed is the user's to ask
    files = run_cli("render", str(tmp_path / "bp.yaml"), "--out", str(tmp_path / "out"))
    assert files.returncode == 0, files.stderr
    params = yaml.safe_load((tmp_path / "out/chat/k8s/gatewayparameters.yaml").read_text())
    assert params["spec"]["kube"]["deployment"]["replicas"] == 9


def test_the_plan_shows_the_proxy_sum():
    out = run_cli("plan", str(EXAMPLE)).stdout
    line = next(x for x in out.splitlines() if "gateway: proxy replicas" in x)
    assert "qwen-7b 8 replicas x 256 (vLLM 0.11's default --max-num-seqs on one L40S)" in line
    assert line.endswith("= 4,096 sequences at once / 1,024 requests in flight per proxy (the loopback Backend keeps "
                         "Envoy's default circuit breakers), at least 2 = 4 proxy replicas"), line


@pytest.mark.parametrize(("path", "old", "new", "cls", "how"), [
    ("spec.kube.deployment.replicas", 2, 3, "in place", "more proxy replicas"),
    ("spec.kube.deployment.replicas", 4, 2, "rolling", "fewer proxy replicas"),
    ("spec.kube.podTemplate.topologySpreadConstraints", None, [{"maxSkew": 1}], "rolling", "pod template changed"),
    ("spec.kube.service.type", "ClusterIP", "LoadBalancer", "in place", None),
])
def test_diff_says_what_a_gateway_parameters_change_does_to_the_proxies(path, old, new, cls, how):
    change = Change(UPDATE, "kubernetes:gateway.kgateway.dev/v1alpha1:GatewayParameters", "chat-gateway",
                    inputs=[InputChange(path, copy.deepcopy(old), copy.deepcopy(new), False)])
    got = classify(change, ("", ""))
    assert got.cls == cls, got
    assert how is None and "proxy" not in got.how or how in got.how, got
