"""Autoscaling on more than the queue (issue 23): KEDA triggers for vLLM's KV-cache use and the p90
time to first token against the SLO, the rule that keeps them to KEDA, and the cold-start budget of a
model that may scale to zero, at its edges."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import ROOT, assert_render_check_sees
from fleetform.gateway import cold_start
from fleetform.k8s import KV_CACHE_METRIC, LOAD_GB_PER_S, READY_OVERHEAD_S, TTFT_METRIC
from fleetform.pipeline import check
from fleetform.render import render

EXAMPLE = ROOT / "blueprints/inference-gateway.yaml"


def _check(text: str, tmp_path: Path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return check(path)


def _rules(result, rule: str) -> list[str]:
    return [f"{f.path}: {f.message}; {f.hint}" for f in result.findings if f.rule == rule]


def test_example_scales_on_queue_kv_cache_and_ttft():
    """The metric names are vLLM 0.11.0's own (vllm/v1/metrics/loggers.py: vllm:kv_cache_usage_perc,
    a 0-1 gauge; vllm:time_to_first_token_seconds, a histogram), labelled model_name as the queue is."""
    result = check(EXAMPLE)
    # its warning: waking llama-8b from zero behind kgateway is unproven (gateway-wake); the gateway's controllers are
    # installed by the Pulumi program (tests/test_gateway_install.py)
    assert result.model is not None and [f.rule for f in result.findings] == ["gateway-wake"]
    files = render(result.model)
    scaled = yaml.safe_load(files["chat/k8s/qwen-7b-scaledobject.yaml"])
    queue, kv, ttft = scaled["spec"]["triggers"]
    assert "name" not in queue and queue["metadata"]["threshold"] == "5"
    assert (kv["name"], kv["metricType"], kv["metadata"]["threshold"]) == ("kv-cache", "AverageValue", "0.8")
    assert kv["metadata"]["query"] == f'sum({KV_CACHE_METRIC}{{namespace="chat",model_name="qwen-7b"}})'
    assert (ttft["name"], ttft["metricType"], ttft["metadata"]["threshold"]) == ("ttft-p90", "Value", "1.5")
    assert ttft["metadata"]["query"] == (
        f'(histogram_quantile(0.9, sum by (le) (rate({TTFT_METRIC}_bucket{{namespace="chat",model_name="qwen-7b"}}[2m]))) > 0)'
        " or vector(0)")
    # llama-8b has a KV-cache target and no SLO: two triggers, and the gateway's wake trigger (it scales to 0)
    other = yaml.safe_load(files["chat/k8s/llama-8b-scaledobject.yaml"])
    assert [t.get("name") for t in other["spec"]["triggers"]] == [None, "kv-cache", "gateway-requests"]


def test_no_target_no_trigger():
    """The shipped blueprints without the new fields render the queue trigger alone, as before."""
    files = render(check(ROOT / "blueprints/reference.yaml").model)
    scaled = yaml.safe_load(files["serve/k8s/llama-70b-scaledobject.yaml"])
    assert len(scaled["spec"]["triggers"]) == 1


def test_triggers_need_keda(tmp_path):
    text = EXAMPLE.read_text().replace("autoscaler: keda", "autoscaler: hpa")
    result = _check(text, tmp_path)
    messages = _rules(result, "autoscale-triggers")
    assert len(messages) == 3, messages  # two kv_cache_target, one ttft_p90_s
    assert sum("kv_cache_target" in m.split(":")[0] for m in messages) == 2
    assert sum("ttft_p90_s" in m.split(":")[0] for m in messages) == 1


@pytest.mark.parametrize("latency, found", [(1.5, 0), (1.49, 1)])
def test_ttft_within_latency_edge(tmp_path, latency, found):
    text = EXAMPLE.read_text().replace("          ttft_p90_s: 1.5", f"          latency_s: {latency}\n          ttft_p90_s: 1.5")
    assert len(_rules(_check(text, tmp_path), "autoscale-triggers")) == found


ZERO = "        replicas: {min: 0, max: 8}\n        autoscale:\n          metric: queue_depth\n          target_per_replica: 5\n          kv_cache_target: 0.8"


def _zero(budget: str | None) -> str:
    text = EXAMPLE.read_text()
    old = "        replicas: {min: 1, max: 8}\n        autoscale:\n          metric: queue_depth\n          target_per_replica: 5\n          kv_cache_target: 0.8"
    assert old in text
    return text.replace(old, ZERO + (f"\n          cold_start_latency_s: {budget}" if budget else ""), 1)


def test_cold_start_estimate_is_weights_over_rate_plus_engine():
    """qwen-7b: 7.6 B parameters in bf16 = 15.2 GB from the Hub at 0.2 GB/s = 76 s, plus the 120 s
    engine start (load, torch.compile, CUDA graphs) that sizes the scale-up period too = 196 s, the
    period the example's ScaledObject renders."""
    model = check(EXAMPLE).model.fleets[0].models[0]
    estimate = cold_start(model)
    assert (estimate.source, estimate.weights_gb) == ("hub", 15.2)
    assert estimate.total_s == pytest.approx(15.2 / LOAD_GB_PER_S["hub"] + READY_OVERHEAD_S) == pytest.approx(196)
    assert "per 196 s" in render(check(EXAMPLE).model)["chat/k8s/qwen-7b-scaledobject.yaml"].decode()


@pytest.mark.parametrize("budget, found", [("196", 0), ("195.9", 1), ("1000", 0), ("1", 1)])
def test_cold_start_budget_edges(tmp_path, budget, found):
    messages = _rules(_check(_zero(budget), tmp_path), "cold-start-budget")
    assert len(messages) == found, messages
    if found:
        assert messages[0].startswith("fleets[0].models[0].autoscale.cold_start_latency_s: ")
        assert "196 s" in messages[0] and f"{float(budget):g} s a cold request may wait" in messages[0]


def test_cold_start_budget_must_be_given(tmp_path):
    messages = _rules(_check(_zero(None), tmp_path), "cold-start-budget")
    assert len(messages) == 1 and messages[0].startswith("fleets[0].models[0].replicas.min: ")
    assert "no cold-start budget" in messages[0] and "at least 196" in messages[0]


def test_cold_start_from_s3_is_faster(tmp_path):
    """The same budget that the Hub download misses (196 s > 136 s) holds for the Run:ai streamer from S3:
    15.2 GB at 1 GB/s + 120 s = 135.2 s."""
    hub = _zero("136")
    s3 = hub.replace("weights: {revision: a09a35458c702b33eeacc393d103063234e8bc28}",
                     "weights: {source: s3, uri: s3://models/qwen/}", 1)
    assert len(_rules(_check(hub, tmp_path), "cold-start-budget")) == 1
    assert _rules(_check(s3, tmp_path), "cold-start-budget") == []


def test_diagram_names_every_trigger():
    """The plan's diagram says what the model scales on: the queue, and the KV cache and TTFT where set."""
    from fleetform import diagram

    text = diagram.mermaid(diagram.graph(check(EXAMPLE).model))
    assert "KEDA: queue_depth, target 5 per replica, KV cache 0.8, TTFT p90 1.5 s" in text
    assert "KEDA: queue_depth, target 5 per replica, KV cache 0.75" in text


def test_render_check_holds_the_render_and_sees_a_trigger_change(tmp_path):
    """`fleetform render --check` accepts the example's own render (tests/test_golden.py holds it equal to
    tests/golden/inference-gateway, which keeps the copied programs once, not per example), and reports the
    ScaledObject stale once the KV-cache target changes."""
    assert_render_check_sees(EXAMPLE, "kv_cache_target: 0.8 ", "kv_cache_target: 0.9 ",
                             "chat/k8s/qwen-7b-scaledobject.yaml", tmp_path)
