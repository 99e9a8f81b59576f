"""Sizing and cost: each worked example of the mission's sources reproduced exactly, and the plan's
formats carrying the steps with their inputs."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_cli
from fleetform.catalog import load_catalog
from fleetform.pipeline import check
from fleetform.sizing import (HOURS_PER_MONTH, FleetSizing, cost, ring_allreduce_s, sizing, slo_gpus,
                              smallest_tensor_parallel, training_memory, training_time)

GPUS = load_catalog().gpus


def test_70b_training_memory():
    out = FleetSizing("train", "training")
    nodes_low, nodes_high = training_memory(70, "bf16", "adamw", GPUS["H100-80GB"].memory_gb, 8, out)
    results = [s.result for s in out.steps]
    assert results[:3] == ["280 GB", "140 GB", "560 GB to 1.12 TB"]  # FP32, BF16, with optimizer states
    assert nodes_low == 1 and results[3].endswith("at least 1 node of 8")  # so at least one node of 8 H100


def test_llama2_70b_gpu_hours_match_meta():
    gpu_hours, _ = training_time(70, 2000, 1, GPUS["A100-80GB"].bf16_dense_tflops, 0.435)
    assert gpu_hours == pytest.approx(1_720_320, rel=0.002)  # Meta published 1,720,320 GPU-hours


def test_70b_inference_needs_4_h100_or_2_h200():
    weights = 70 * 2  # GB in BF16
    assert smallest_tensor_parallel(weights, GPUS["H100-80GB"].memory_gb, 8, 0.9) == 4
    assert smallest_tensor_parallel(weights, GPUS["H200-141GB"].memory_gb, 8, 0.9) == 2


def test_slo_worked_example_step_by_step():
    assert slo_gpus(100, 30, 1, 0.5) == (4, 5, 8)  # 4 GPUs, N+1 makes 5, 50% headroom makes 8
    model = check(ROOT / "blueprints/reference.yaml").model
    serve = next(s for s in sizing(model) if s.fleet == "serve")
    steps = {s.what: s.result for s in serve.steps}
    assert steps["llama-70b: GPUs for the peak"] == "4 GPUs"
    assert steps["llama-70b: redundancy"] == "5 GPUs"
    assert steps["llama-70b: burst headroom"] == "8 GPUs"
    assert steps["llama-70b: replicas and nodes"] == "2 replicas on 1 node"


def test_ring_allreduce_and_its_sources():
    # 2 GPUs, 1 GB at 8 Gbit/s: 2(1)/2 x 1 s + 2 x alpha
    assert ring_allreduce_s(2, 1.0, 8.0, 10.0) == pytest.approx(1.0 + 20e-6)
    model = check(ROOT / "blueprints/reference.yaml").model
    train = next(s for s in sizing(model) if s.fleet == "train")
    step = next(s for s in train.steps if s.what.startswith("all-reduce"))
    assert step.formula == "2(48-1)/48 x 140 GB / 400 Gbit/s + 2(48-1) x 15 us" and step.result == "5.48 s per step"
    assert any("Shalev" in n and "3200 Gbit/s" in n for n in train.notes)  # bandwidth and latency name sources
    assert any("N-1 latency steps" in n for n in train.notes)
    assert any("95%" in n for n in train.notes)


def test_cost_at_min_and_max_and_what_is_not_priced():
    model = check(ROOT / "blueprints/reference.yaml").model
    fleets, unpriced = cost(model)
    serve = next(f for f in fleets if f.fleet == "serve")
    assert (serve.usd_hour_min, serve.usd_hour_max) == (55.04, 550.4)
    assert serve.usd_month_max == pytest.approx(550.4 * HOURS_PER_MONTH)
    train = next(f for f in fleets if f.fleet == "train")
    assert train.usd_hour_min is None and "Capacity Block" in train.note  # not guessed
    assert any("spot" in u for u in cost(_spot())[1])
    assert any(u.startswith("storage scratch") for u in unpriced)


def _spot():
    from dataclasses import replace

    model = check(ROOT / "blueprints/reference.yaml").model
    return replace(model, fleets=(replace(model.fleets[0], capacity_type="spot"),) + model.fleets[1:])


def test_plan_formats_carry_sizing_and_cost():
    data = json.loads(run_cli("plan", "blueprints/reference.yaml", "--format", "json").stdout)
    assert {"sizing", "cost", "resources", "findings", "blueprint"} <= set(data)
    assert data["cost"]["total_usd_per_hour"] == pytest.approx([55.04 + 27.44705, 550.4 + 27.44705])
    text = run_cli("plan", "blueprints/reference.yaml").stdout
    assert "weights in FP32: 70B params x 4 B = 280 GB" in text
    markdown = run_cli("plan", "blueprints/reference.yaml", "--format", "markdown").stdout
    assert markdown.startswith("### fleetform plan: llm-70b 1.0.0")
    assert "| serve | p5.48xlarge | 1-10 | $55.04 | $550.40 | $40,179.20 | $401,792.00 |" in markdown
    assert "\n\n**serve** (inference)" in markdown  # a blank line ends train's list, so fleets do not run together
