"""The blueprints the benchmarks generate are valid: a benchmark of a blueprint that fails validation
times the printing of its findings, not the work it names (benchmarks/validate.py's large blueprint
broke that way when the min-nodes-hold rule came)."""

from __future__ import annotations

import re
import subprocess
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


def _benchmark(script: str, *args: str) -> str:
    """A benchmark script run briefly, as a user runs it: its figures are printed, never asserted (the
    machine is shared); a script that cannot run, or prints no result, fails here."""
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: a goal not met on this run
    return result.stdout


def test_the_plan_startup_benchmark_runs():
    out = _benchmark("plan_startup.py", "--runs", "1")
    assert re.search(r"^plan / importing what it uses, made and ended as fleetform makes and ends its imports: \d+\.\d\dx CPU", out, re.M), out
    assert re.search(r"^plan / importing pulumi and pulumi_aws: \d+\.\d\dx CPU", out, re.M), out
    assert re.search(r"the floor 'what it uses' imports \d+ modules", out), out


def test_the_diff_many_benchmark_runs():
    out = _benchmark("diff_many.py", "--runs", "1", "--blueprints", "2")
    assert re.search(r"^one call / 2 calls: \d+\.\d\dx CPU", out, re.M), out
