"""The blueprints the benchmarks generate are valid: a benchmark of a blueprint that fails validation
times the printing of its findings, not the work it names (benchmarks/validate.py's large blueprint
broke that way when the min-nodes-hold rule came)."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT
from fleetform.findings import Severity
from fleetform.pipeline import check

sys.path.insert(0, str(ROOT / "benchmarks"))
from render import training_blueprint  # noqa: E402
from render_k8s import inference_blueprint  # noqa: E402
from validate import LARGEST_FLEET, large_blueprint  # noqa: E402

CASES = {
    "training 10 nodes": lambda: training_blueprint(10),
    f"training {LARGEST_FLEET} nodes": lambda: training_blueprint(LARGEST_FLEET),
    "training 100,000 nodes": lambda: training_blueprint(100_000),
    "inference 1 model": lambda: inference_blueprint(1),
    "inference 200 models": lambda: inference_blueprint(200),
    "10,000 nodes + 200 models": large_blueprint,
}


@pytest.mark.parametrize("make", CASES.values(), ids=CASES.keys())
def test_every_benchmark_blueprint_is_valid(make, tmp_path):
    path = tmp_path / "bench.yaml"
    path.write_text(make())
    result = check(path)
    assert [f.to_text() for f in result.findings if f.severity is Severity.ERROR] == []
    assert result.model is not None
