from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TODAY = "2026-11-24"
"""The day the suite's EKS support dates are judged on (fleetform/rules/eks.py reads FLEETFORM_TODAY), so a
finding does not appear or vanish as the calendar moves; tests of the calendar set their own days."""
os.environ["FLEETFORM_TODAY"] = TODAY
EXAMPLES = sorted((ROOT / "blueprints").glob("*.yaml"))

AWS_TRAINING_HEAD = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {name: a, version: 1.0.0}
provider: {cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {cidr: 10.0.0.0/16}}
fleets:
  - name: train
    role: training
"""
"""The start of a small AWS blueprint whose one training fleet a test completes."""


def run_cli(*args: str, cwd: Path | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run the real `fleetform` CLI in a subprocess."""
    return subprocess.run([sys.executable, "-m", "fleetform", *args], cwd=cwd or ROOT, input=input,
                          capture_output=True, text=input is None, timeout=120)


def assert_render_check_sees(example: Path, old: str, new: str, stale: str, tmp_path: Path) -> None:
    """`fleetform render --check` accepts `example`'s own render, and reports `stale` (a rendered file's path)
    once `old` in the blueprint becomes `new`: a render holds what the blueprint says, and a change reaches it."""
    out = tmp_path / "out"
    assert run_cli("render", str(example), "-o", str(out)).returncode == 0
    assert run_cli("render", str(example), "-o", str(out), "--check").returncode == 0
    text = example.read_text()
    assert old in text, old
    changed = tmp_path / example.name
    changed.write_text(text.replace(old, new))
    result = run_cli("render", str(changed), "-o", str(out), "--check")
    assert result.returncode == 1 and stale in result.stdout, result.stdout


def require(program: str, package: str) -> str:
    """The path of a program a test runs. Missing, the test is skipped on a developer's machine and
    fails in CI (`CI` set), where .ci/run installs it: a CI run never passes by skipping."""
    path = shutil.which(program)
    if path is None:
        message = f"{program} is not installed (Debian package {package})"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run this test: .ci/run installs it")
        pytest.skip(message)
    return path


def check_text(text: str, tmp_path: Path):
    """The pipeline's check of a blueprint text, written to tmp_path/bp.yaml (findings carry that path)."""
    from fleetform.pipeline import check

    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return check(path)


def checked_model(text: str, tmp_path: Path):
    """The model of a blueprint text that must check without errors (the findings shown when it does not)."""
    result = check_text(text, tmp_path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return result.model


def rule_findings(text: str, tmp_path: Path, rule: str) -> list[str]:
    """The messages one rule gives on a blueprint text, in a whole check."""
    return [f.message for f in check_text(text, tmp_path).findings if f.rule == rule]


def rule_messages(rule: str, model) -> list[str]:
    """The messages of one registered rule run alone on a model (its negative controls need no whole check)."""
    from fleetform.rules import REGISTRY, Reporter

    reporter = Reporter()
    reporter.current = REGISTRY[rule]
    REGISTRY[rule].check(model, reporter)
    return [i.message for i in reporter.issues]


@pytest.fixture
def write(tmp_path):
    """Write a blueprint text to a file and return its path."""

    def _write(text: str | bytes, name: str = "bp.yaml") -> Path:
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    return _write


def _untracked() -> set[str]:
    """Files in the checkout that git neither tracks nor ignores."""
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True)
    return set(listed.stdout.splitlines()) if listed.returncode == 0 else set()


@pytest.fixture(scope="session", autouse=True)
def checkout_stays_clean():
    """No test writes into the checkout: a fake blkid once took `-o value` for an output file and
    left a file named `value` at its top, which got committed."""
    before = _untracked()
    yield
    added = _untracked() - before
    assert not added, f"the tests wrote into the checkout: {sorted(added)}"


def pytest_collection_modifyitems(config, items):
    """Tests marked aws_e2e (tests/test_aws_e2e.py: a deployed stack in a real AWS account) run only
    when the -m expression names them (`pytest -m aws_e2e`); otherwise they are deselected, not
    skipped: CI never runs them, and no test skips in CI (tests/test_skips.py)."""
    if "aws_e2e" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("aws_e2e") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
