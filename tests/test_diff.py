"""fleetform diff on a real change: the reference training fleet from 6 x p5.48xlarge to
8 x p5en.48xlarge, between two files and between a git revision and a file."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import ROOT, run_cli

REF = ROOT / "blueprints/reference.yaml"


def _changed(tmp_path):
    text = REF.read_text().replace("    instance_type: p5.48xlarge\n    nodes: 6 ", "    instance_type: p5en.48xlarge\n    nodes: 8 ", 1)
    assert text != REF.read_text()
    path = tmp_path / "reference.yaml"
    path.write_text(text)
    return path


def test_diff_lists_files_resources_and_cost(tmp_path):
    result = run_cli("diff", str(REF), str(_changed(tmp_path)))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "== Rendered files: 3 changed" in out
    for path in ("train/slurm/gres.conf", "train/slurm/slurm.conf", "train/slurm/topology.conf"):
        assert f"~ {path}" in out
    assert "-NodeName=train-[001-006] Name=gpu Type=h100 File=/dev/nvidia[0-7]" in out
    assert "+NodeName=train-[001-008] Name=gpu Type=h200 File=/dev/nvidia[0-7]" in out
    assert "+SwitchName=leaf04 Nodes=train-[007-008]" in out
    assert "== Cloud resources: 0 to create, 0 to delete, 6 to change" in out
    assert "  ~ LaunchTemplate train-nodes (instanceType, networkInterfaces)" in out
    assert "Instance train-controller" not in out  # user data names no file content: no controller restart
    assert "  ~ Group train-static (desiredCapacity, maxSize, minSize)" in out
    assert ("  train: 6-6 x p5.48xlarge -> 8-8 x p5en.48xlarge; cost not priced "
            "(Capacity Block prices are set per reservation when it is bought)") in out
    assert "== Findings the change introduces: 0" in out


def test_diff_prices_an_on_demand_change(tmp_path):
    text = REF.read_text().replace("    nodes: {min: 1, max: 10}", "    nodes: {min: 2, max: 10}")
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    out = run_cli("diff", str(REF), str(path)).stdout
    assert "  serve: 1-10 x p5.48xlarge -> 2-10 x p5.48xlarge; $40,179-$401,792 -> $80,358-$401,792 a month " \
           "(+40,179 to +0)" in out


def test_diff_reports_introduced_findings_and_markdown(tmp_path):
    lines = [line for line in REF.read_text().splitlines(keepends=True) if "reservation_id:" not in line]
    text = "".join(lines).replace("      type: capacity-block ", "      type: spot ", 1)
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = run_cli("diff", str(REF), str(path), "--format", "markdown")
    assert result.returncode == 0
    assert result.stdout.startswith(f"### fleetform diff: {REF} -> {path}")
    assert "#### Findings the change introduces: 1" in result.stdout and "[spot-training]" in result.stdout
    assert "#### Rendered files: 0 changed" in result.stdout  # spot changes what is bought, not what nodes run
    # off the Capacity Block: market options change, and the fleet gets its own cluster placement group
    assert ("- `~ LaunchTemplate train-nodes (capacityReservationSpecification, instanceMarketOptions, placement)`"
            in result.stdout)
    assert "- `+ PlacementGroup train-placement`" in result.stdout


def test_markdown_folds_each_file_diff(tmp_path):
    result = run_cli("diff", str(REF), str(_changed(tmp_path)), "--format", "markdown")
    assert result.stdout.count("<details><summary>~ <code>") == 3 and "```diff" in result.stdout


def test_diff_against_a_git_revision(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "blueprints").mkdir(parents=True)
    shutil.copy(REF, repo / "blueprints/reference.yaml")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    (repo / "blueprints/reference.yaml").write_text(_changed(tmp_path).read_text())
    result = run_cli("diff", "HEAD:blueprints/reference.yaml", "blueprints/reference.yaml", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "== Rendered files: 3 changed" in result.stdout
    bad = run_cli("diff", "nope:blueprints/reference.yaml", "blueprints/reference.yaml", cwd=repo)
    assert bad.returncode == 2 and "cannot read nope:blueprints/reference.yaml from git" in bad.stderr
