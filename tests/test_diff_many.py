"""`fleetform diff --base REV BLUEPRINT...`: every blueprint of a pull request in one call, one report,
one exit code (issue 19). The repositories here are made by the tests: a base of their own that two
blueprints extend, on-prem blueprints (no Pulumi run, so each call stays short) and one AWS blueprint
where the cloud resources matter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

BASE = (ROOT / "blueprints/onprem-ib.yaml").read_text().replace("  name: dgx-onprem\n", "  name: base-only\n")
"""An on-prem base (a whole blueprint: bases merge under the blueprint that extends them)."""


def _extending(name: str) -> str:
    return (f"apiVersion: fleetform/v1\nkind: Blueprint\nextends: {{name: site, version: 1.0.0}}\n"
            f"metadata: {{name: {name}, version: 1.0.0}}\n")


def _git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout


def _diff(repo, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetform", "diff", *args], cwd=repo, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def repo(tmp_path):
    """main: a.yaml and b.yaml extend bases/site/1.0.0.yaml; c.yaml stands alone; gone.yaml is removed
    on the branch `pr`."""
    repo = tmp_path / "repo"
    (repo / "blueprints/bases/site").mkdir(parents=True)
    (repo / "blueprints/bases/site/1.0.0.yaml").write_text(BASE)
    for name in ("a", "b"):
        (repo / f"blueprints/{name}.yaml").write_text(_extending(name))
    (repo / "blueprints/c.yaml").write_text(BASE.replace("name: base-only", "name: c"))
    (repo / "blueprints/gone.yaml").write_text(BASE.replace("name: base-only", "name: gone"))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "checkout", "-qb", "pr")
    return repo


def test_a_base_change_shows_in_both_blueprints_that_extend_it(repo):
    base = repo / "blueprints/bases/site/1.0.0.yaml"
    base.write_text(base.read_text().replace("hosts: dgx-[01-06]", "hosts: dgx-[01-08]"))
    _git(repo, "commit", "-qam", "two more nodes in the site base")
    files = ["blueprints/a.yaml", "blueprints/b.yaml", "blueprints/c.yaml"]
    result = _diff(repo, "--base", "main", *files, "--format", "json", "--detailed-exitcode")
    assert result.returncode == 2, result.stdout + result.stderr
    data = json.loads(result.stdout)
    status = {s["blueprint"]: s["status"] for s in data["blueprints"]}
    assert status == {"blueprints/a.yaml": "changed", "blueprints/b.yaml": "changed", "blueprints/c.yaml": "unchanged"}
    assert data["summary"] == {"changed": 2, "unchanged": 1, "added": 0, "removed": 0, "failed": 0}
    for section in data["blueprints"][:2]:
        slurm = [f for f in section["diff"]["rendered_files"] if f["path"] == "train/slurm/slurm.conf"]
        assert slurm and "dgx-[01-08]" in slurm[0]["diff"]
    # each section as the two-file diff says it: the same facts as `diff main:a.yaml a.yaml`
    one = json.loads(_diff(repo, "main:blueprints/a.yaml", "blueprints/a.yaml", "--format", "json").stdout)
    assert data["blueprints"][0]["diff"] == one
    text = _diff(repo, "--base", "main", *files, "--format", "markdown")
    assert text.returncode == 0
    assert text.stdout.startswith("## fleetform diff against main: 2 changed, 1 unchanged\n")
    assert text.stdout.count("### fleetform diff: main:blueprints/") == 2
    assert "unchanged (nothing rendered, recorded, priced or found differs): `blueprints/c.yaml`" in text.stdout


def test_a_failing_blueprint_among_good_ones_is_reported_and_fails_the_call(repo):
    """The failure is in its own section; the others are still compared; exit 1 under
    --detailed-exitcode too (2 would read as "changes"), and without it."""
    (repo / "blueprints/a.yaml").write_text(_extending("a") + "fleets: [{name: train, nodez: 3}]\n")
    c = repo / "blueprints/c.yaml"
    c.write_text(c.read_text().replace("tokens_billion: 300", "tokens_billion: 600"))
    files = ["blueprints/a.yaml", "blueprints/b.yaml", "blueprints/c.yaml"]
    for extra in ([], ["--detailed-exitcode"]):
        result = _diff(repo, "--base", "main", *files, "--format", "markdown", *extra)
        assert result.returncode == 1, result.stdout + result.stderr
        out = result.stdout
        assert out.startswith("## fleetform diff against main: 1 failed, 1 changed, 1 unchanged\n")
        assert "### blueprints/a.yaml: failed" in out and "nodez" in out and "no diff: a side does not validate" in out
        assert "### fleetform diff: main:blueprints/c.yaml -> blueprints/c.yaml" in out
        assert "`blueprints/b.yaml`" in out
    data = json.loads(_diff(repo, "--base", "main", *files, "--format", "json").stdout)
    failed = [s for s in data["blueprints"] if s["status"] == "failed"]
    assert [s["blueprint"] for s in failed] == ["blueprints/a.yaml"] and "nodez" in failed[0]["error"]


def test_added_removed_and_unchanged_blueprints(repo):
    (repo / "blueprints/new.yaml").write_text(BASE.replace("name: base-only", "name: new"))
    _git(repo, "add", "blueprints/new.yaml")
    _git(repo, "rm", "-q", "blueprints/gone.yaml")
    _git(repo, "commit", "-qm", "one in, one out")
    files = ["blueprints/new.yaml", "blueprints/gone.yaml", "blueprints/c.yaml"]
    result = _diff(repo, "--base", "main", *files, "--format", "json", "--detailed-exitcode")
    assert result.returncode == 2, result.stdout + result.stderr
    data = json.loads(result.stdout)
    # removed before added: an added blueprint's whole plan is in the comment, and the comment
    # workflow cuts at GitHub's limit, which must not take a cluster's removal with it
    assert [(s["blueprint"], s["status"]) for s in data["blueprints"]] == [
        ("blueprints/gone.yaml", "removed"), ("blueprints/new.yaml", "added"), ("blueprints/c.yaml", "unchanged")]
    assert data["blueprints"][1]["plan"]["blueprint"]["name"] == "new"
    assert data["blueprints"][0]["side"] == "main:blueprints/gone.yaml"
    # the same blueprints at `--head pr`, read from git rather than the files
    _git(repo, "checkout", "-q", "main")
    again = _diff(repo, "--base", "main", "--head", "pr", *files, "--format", "json", "--detailed-exitcode")
    assert again.returncode == 2 and [s["status"] for s in json.loads(again.stdout)["blueprints"]] == [
        "removed", "added", "unchanged"]
    # nothing changed: 0
    same = _diff(repo, "--base", "main", "blueprints/c.yaml", "blueprints/a.yaml", "--detailed-exitcode")
    assert same.returncode == 0 and same.stdout.startswith("fleetform diff against main: 2 unchanged\n")


def test_usage_errors_of_the_many_form(repo):
    assert _diff(repo, "--base", "main").returncode == 2
    assert _diff(repo, "--base", "nosuchrev", "blueprints/c.yaml").returncode == 2
    assert _diff(repo, "--base", "nosuchrev", "blueprints/c.yaml", "--detailed-exitcode").returncode == 1
    assert _diff(repo, "--base", "--output=x", "blueprints/c.yaml").returncode == 2
    assert _diff(repo, "--head", "main", "blueprints/c.yaml", "blueprints/a.yaml").returncode == 2
    assert _diff(repo, "blueprints/c.yaml").returncode == 2  # OLD without NEW
    missing = _diff(repo, "--base", "main", "blueprints/nosuch.yaml", "blueprints/c.yaml", "--detailed-exitcode")
    assert missing.returncode == 1 and "blueprints/nosuch.yaml: no such blueprint at main" in missing.stdout
    assert not (repo / "x").exists()


def test_an_aws_blueprint_among_them_records_its_resources(repo):
    """Pulumi's program runs for every side of every AWS blueprint in the one process."""
    (repo / "blueprints/ref.yaml").write_text((ROOT / "blueprints/reference.yaml").read_text())
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "ref")
    ref = repo / "blueprints/ref.yaml"
    ref.write_text(ref.read_text().replace("nodes: 6 ", "nodes: 7 "))
    result = _diff(repo, "--base", "pr", "blueprints/ref.yaml", "blueprints/c.yaml", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    section = data["blueprints"][0]
    assert section["status"] == "changed" and section["diff"]["resources_not_recorded"] is None
    assert section["diff"]["summary"]["resources"] is not None
