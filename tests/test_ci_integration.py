"""What users wire into their CI: the pre-commit hooks run the real commands, and the example
workflow is a well-formed GitHub Actions workflow that calls them."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import yaml

from conftest import ROOT


def _run(entry: str, files: list[str], cwd):
    command = shlex.split(entry)
    assert command[0] == "fleetform"
    return subprocess.run([sys.executable, "-m", "fleetform", *command[1:], *files], cwd=cwd, capture_output=True,
                          text=True)


def test_pre_commit_hooks_run_the_real_commands(tmp_path):
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"fleetform-validate", "fleetform-render-check"}
    shutil.copytree(ROOT / "blueprints", tmp_path / "blueprints")
    files = ["blueprints/reference.yaml", "blueprints/onprem-ib.yaml"]
    assert _run(hooks["fleetform-validate"]["entry"], files, tmp_path).returncode == 0
    stale = _run(hooks["fleetform-render-check"]["entry"], files, tmp_path)
    assert stale.returncode == 1 and "missing: rendered/llm-70b/manifest.json" in stale.stdout
    subprocess.run([sys.executable, "-m", "fleetform", "render", *files], cwd=tmp_path, check=True, capture_output=True)
    assert _run(hooks["fleetform-render-check"]["entry"], files, tmp_path).returncode == 0
    broken = tmp_path / "blueprints/reference.yaml"
    broken.write_text(broken.read_text().replace("nodes: 6 ", "nodes: 7 "))
    assert _run(hooks["fleetform-render-check"]["entry"], files, tmp_path).returncode == 1


def test_example_workflow_calls_the_commands():
    workflow = yaml.safe_load((ROOT / "examples/github-workflow.yml").read_text())
    steps = workflow["jobs"]["fleetform"]["steps"]
    scripts = "\n".join(step.get("run", "") for step in steps)
    for command in ("fleetform validate", "fleetform render --check", "fleetform diff", "--format markdown",
                    "gh pr comment"):
        assert command in scripts
    assert workflow["permissions"]["pull-requests"] == "write"
