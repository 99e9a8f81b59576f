"""The plan's cost per 1,000 requests of each route (issue 23): a model's GPU-hours per request from the
throughput the blueprint sized it with, times the catalog's price of its fleet's GPUs."""

from __future__ import annotations

import json

from conftest import ROOT, run_cli
from fleetform.pipeline import check
from fleetform.sizing import sizing


def _steps(path, fleet):
    return {s.what: s for s in next(f for f in sizing(check(ROOT / path).model) if f.fleet == fleet).steps}


def test_reference_70b_route_costs_its_gpu_seconds_at_the_catalog_price():
    step = _steps("blueprints/reference.yaml", "serve")["llama-70b: cost per 1,000 requests"]
    # p5.48xlarge: $55.04/h for 8 H100s (catalog, AWS Price List API 2026-07-20); 30 QPS per GPU:
    # 1,000 requests hold 1,000 / (30 x 3,600) GPU-hours = 0.00926 GPU-h x $6.88 = $0.0637
    full = 1000 / (30 * 3600) * 55.04 / 8
    # sized: 100 QPS -> 4 GPUs + 1 spare, x 1.5 burst = 8 GPUs = 2 TP-4 replicas, 100 / (2 x 4 x 30) = 42% busy
    busy = 100 / (2 * 4 * 30)
    assert step.result == f"${full:.4f} at full throughput, ${full / busy:.4f} at the sized peak"
    assert step.result == "$0.0637 at full throughput, $0.1529 at the sized peak"
    assert "30 QPS per GPU" in step.formula and "$55.04/h / 8 x H100-80GB per instance" in step.formula


def test_a_shared_gpu_is_priced_per_device_the_slo_counts(tmp_path):
    """Under MIG the SLO's 'GPU' is the slice a pod gets (fleet.devices(), as `GPUs for the peak` counts it):
    a p4de has 8 A100s x 2 3g.40gb slices = 16 devices, each 1/16 of the price."""
    text = (ROOT / "blueprints/reference.yaml").read_text()
    old = "        hf_token_secret: hf-token   # Meta's models are gated: without a token the download gets HTTP 401"
    assert text.count(old) == 1
    text = text.replace(old, "        slo: {peak_qps: 10, qps_per_gpu: 5}\n" + old)
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    small = next(f for f in sizing(result.model) if f.fleet == "small-models")
    step = next(s for s in small.steps if s.what == "llama-8b: cost per 1,000 requests")
    price = result.model.fleets[2].instance.price_usd_hr
    # the plan names the device it divides by: a p4de has 8 GPUs, not 16; the 16 are MIG slices
    assert "16 x 3g.40gb MIG slice per instance" in step.formula and "16 GPUs" not in step.formula
    assert step.result.startswith(f"${1000 / (5 * 3600) * price / 16:.4f} at full throughput")


def test_no_price_or_no_throughput_gives_no_figure():
    # the gateway blueprint's llama-8b has no slo: nothing sized, nothing priced
    steps = _steps("blueprints/inference-gateway.yaml", "chat")
    assert "qwen-7b: cost per 1,000 requests" in steps
    assert "llama-8b: cost per 1,000 requests" not in steps
    from dataclasses import replace

    model = check(ROOT / "blueprints/reference.yaml").model
    spot = replace(model, fleets=tuple(replace(f, capacity_type="spot") if f.name == "serve" else f
                                       for f in model.fleets))
    serve = next(f for f in sizing(spot) if f.fleet == "serve")
    assert not [s for s in serve.steps if "cost per 1,000" in s.what]  # spot has no dated price: not guessed


def test_plan_json_carries_the_route_cost():
    data = json.loads(run_cli("plan", "blueprints/inference-gateway.yaml", "--format", "json").stdout)
    chat = next(s for s in data["sizing"] if s["fleet"] == "chat")
    (step,) = [s for s in chat["steps"] if s["what"] == "qwen-7b: cost per 1,000 requests"]
    assert step["result"].startswith(f"${1000 / (4 * 3600) * 10.4926 / 4:.4f}")
