"""Files outside their place are never read or quoted (issue 9, defect 7): a blueprint or base that
is a symlink stays inside the blueprint's repository and a base inside its bases folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, run_cli

REF = ROOT / "blueprints/reference.yaml"
SECRET = "hunter2-do-not-print"
HEAD = "apiVersion: fleetform/v1\nkind: Blueprint\n"


# --- 7. symlinks: blueprints and bases stay in the repository ---------------------------------------

@pytest.fixture
def repo(tmp_path):
    """tmp/repo (a git top level) beside tmp/secret.txt, a file the blueprint's findings must never quote."""
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    return top


def _extending(top: Path, base_target: str | None = None) -> Path:
    blueprint = top / "bp.yaml"
    blueprint.write_text(HEAD + "extends: {name: platform, version: 1.0.0}\n"
                         + REF.read_text().split("kind: Blueprint\n", 1)[1])
    base = top / "bases/platform/1.0.0.yaml"
    base.parent.mkdir(parents=True)
    if base_target is None:
        base.write_text(SECRET + "\n")
    else:
        base.symlink_to(base_target)
    return blueprint


def test_a_base_linked_to_a_file_outside_its_folder_is_an_error_that_quotes_nothing(repo):
    blueprint = _extending(repo, "../../../secret.txt")
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{blueprint}:1:" in result.stdout or f"{blueprint}:3:" in result.stdout
    assert "is a symlink that leads outside" in result.stdout and "[extends]" in result.stdout
    assert SECRET not in result.stdout + result.stderr


def test_negative_control_a_base_that_is_the_secret_itself_is_quoted(repo):
    """Why the test above matters: a finding on a base quotes its value, so a link would leak it."""
    blueprint = _extending(repo)
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 1 and SECRET in result.stdout


def test_a_base_linked_inside_its_folder_is_read(repo):
    blueprint = _extending(repo, "1.0.0-real.yaml")
    (repo / "bases/platform/1.0.0-real.yaml").write_text(HEAD + "metadata: {labels: {platform: x}}\n")
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 0, result.stdout


def test_a_bases_folder_linked_outside_the_repository_is_refused(tmp_path, repo):
    shared = tmp_path / "shared/platform"
    shared.mkdir(parents=True)
    (shared / "1.0.0.yaml").write_text(SECRET + "\n")
    blueprint = repo / "bp.yaml"
    blueprint.write_text(HEAD + "extends: {name: platform, version: 1.0.0}\n" + "metadata: {name: a, version: 1.0.0}\n")
    (repo / "bases").symlink_to(tmp_path / "shared")
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 1 and f"leads outside {repo}" in result.stdout
    assert SECRET not in result.stdout + result.stderr


def test_a_blueprint_linked_outside_its_repository_is_refused_without_quoting_it(tmp_path, repo):
    link = repo / "bp.yaml"
    link.symlink_to(tmp_path / "secret.txt")
    for command in ("validate", "render", "plan"):
        result = run_cli(command, str(link), cwd=tmp_path)
        assert result.returncode == 1 and "Traceback" not in result.stderr, (command, result.stderr)
        assert f"{link}:1:1: error: the file is a symlink that leads outside its repository {repo}" in result.stdout
        assert SECRET not in result.stdout + result.stderr
    assert not (tmp_path / "rendered").exists()


def test_the_repository_is_the_git_top_level_else_the_blueprints_folder(tmp_path):
    top = tmp_path / "top"
    (top / "blueprints").mkdir(parents=True)
    (top / "shared").mkdir()
    (top / "shared/real.yaml").write_text(REF.read_text())
    link = top / "blueprints/bp.yaml"
    link.symlink_to("../shared/real.yaml")
    outside = run_cli("validate", str(link))  # no .git: the repository is top/blueprints
    assert outside.returncode == 1 and f"outside its repository {top / 'blueprints'}" in outside.stdout
    (top / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git is a file
    assert run_cli("validate", str(link)).returncode == 0
