"""fleetform diff on a real change: the reference training fleet from 6 x p5.48xlarge to
8 x p5en.48xlarge, between two files and between a git revision and a file."""

from __future__ import annotations

import json
import shutil
import subprocess


from conftest import ROOT, require, run_cli

REF = ROOT / "blueprints/reference.yaml"


def _changed(tmp_path):
    text = REF.read_text().replace("    instance_type: p5.48xlarge\n    nodes: 6 ", "    instance_type: p5en.48xlarge\n    nodes: 8 ", 1)
    assert text != REF.read_text()
    path = tmp_path / "reference.yaml"
    path.write_text(text)
    return path


def _variant(tmp_path, old: str, new: str, name: str = "bp.yaml"):
    text = REF.read_text()
    assert old in text, old
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


def _json(*args, code: int = 0) -> dict:
    result = run_cli("diff", *args, "--format", "json")
    assert result.returncode == code, result.stdout + result.stderr
    return json.loads(result.stdout)


def _by_name(data: dict) -> dict[str, dict]:
    return {c["name"]: c for c in data["resources"]}


def test_an_availability_zone_change_replaces_the_subnets_and_what_is_in_them(tmp_path):
    moved = _variant(tmp_path, "availability_zone: us-east-1a", "availability_zone: us-east-1b")
    data = _json(str(REF), str(moved), code=1)  # file system, controller, state volume replaced: not allowed
    assert sorted(f["message"].split(" ")[1] for f in data["findings_introduced"]
                  if f["rule"] == "replace-stateful") == ["storage-scratch", "train-controller", "train-controller-state"]
    changes = _by_name(data)
    subnet = changes["network-private"]
    assert subnet["action"] == "replace"
    assert {"path": "availabilityZone", "old": "us-east-1a", "new": "us-east-1b",
            "forces_replacement": True} in subnet["inputs"]
    # the cascade AWS would do: a new subnet id forces a new file system, NAT gateway, node group
    for name in ("storage-scratch", "network-nat", "serve-gpu"):
        assert changes[name]["action"] == "replace", name
    fsx = changes["storage-scratch"]
    assert any(i["path"] == "subnetIds" and i["via"] == "network-private" and i["forces_replacement"]
               for i in fsx["inputs"])
    effects = "\n".join(data["summary"]["effects"])
    assert "replaces LustreFileSystem storage-scratch: the data stored on it is lost" in effects
    assert "replaces all nodes of node group serve-gpu (1-10 x p5.48xlarge)" in effects
    assert data["summary"]["resources"]["replace"] >= 6
    # allowed in the blueprint, the change is no error, and the diff says so
    allowed = moved.read_text() + ("update_safety:\n  allow_replace:\n"
                                   "    - {part: storage/scratch, reason: scratch data is staged again from S3}\n"
                                   "    - {part: train/controller, reason: the queue is drained first}\n"
                                   "    - {part: train/state-volume, reason: the queue is drained first}\n")
    moved.write_text(allowed)
    data = _json(str(REF), str(moved))
    assert data["findings_introduced"] == []
    waived = {d["part"]: d["waived"] for d in data["disruptions"] if d.get("part")}
    assert waived == {"storage/scratch": True, "train/controller": True, "train/state-volume": True}


def test_a_change_of_instance_type_shows_cost_and_sizing_deltas_and_names_what_is_unpriced(tmp_path):
    data = _json(str(REF), str(_changed(tmp_path)))
    fleets = {f["fleet"]: f for f in data["cost"]["fleets"]}
    train = fleets["train"]
    assert (train["old"]["instance_type"], train["new"]["instance_type"]) == ("p5.48xlarge", "p5en.48xlarge")
    assert train["old"]["usd_per_month"] == [None, None]  # a Capacity Block has no list price
    sizing = {(d["fleet"], d["what"]): (d["old"], d["new"]) for d in data["sizing"]}
    assert ("train", "wall-clock time") in sizing and sizing[("train", "wall-clock time")][0] != \
        sizing[("train", "wall-clock time")][1]
    text = run_cli("diff", str(REF), str(_changed(tmp_path))).stdout
    assert "train: 6 x p5.48xlarge (not priced) -> 8 x p5en.48xlarge (not priced)" in text
    assert "not priced (both sides): fleet train: Capacity Block prices are set per reservation" in text


def test_an_on_demand_change_is_priced_on_both_sides(tmp_path):
    path = _variant(tmp_path, "    nodes: {min: 1, max: 10}", "    nodes: {min: 2, max: 10}")
    out = run_cli("diff", str(REF), str(path)).stdout
    assert ("serve: 1-10 x p5.48xlarge ($40,179-$401,792 a month) -> 2-10 x p5.48xlarge ($80,358-$401,792 a "
            "month), +$40,179 to +$0 a month") in out
    assert "replicas" not in out or "Sizing" in out


def test_diff_reports_introduced_findings_and_markdown(tmp_path):
    lines = [line for line in REF.read_text().splitlines(keepends=True) if "reservation_id:" not in line]
    text = "".join(lines).replace("      type: capacity-block ", "      type: spot ", 1)
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = run_cli("diff", str(REF), str(path), "--format", "markdown")
    assert result.returncode == 0
    out = result.stdout
    assert out.startswith(f"### fleetform diff: {REF} -> {path}")
    assert "#### Findings the change introduces: 1" in out and "[spot-training]" in out
    # what costs money or loses data leads; the rendered files come last
    assert out.index("#### What this change does") < out.index("#### Cost per month") < \
        out.index("#### Cloud resources") < out.index("#### Rendered files")


def test_markdown_folds_each_file_diff(tmp_path):
    result = run_cli("diff", str(REF), str(_changed(tmp_path)), "--format", "markdown")
    assert result.stdout.count("<details><summary>~ <code>") >= 3 and "```diff" in result.stdout


def test_markdown_stays_within_githubs_comment_limit(tmp_path):
    from fleetform.commands.diff import GITHUB_COMMENT_LIMIT, _fit_comment

    files = [{"path": f"f{i}.conf", "change": "~", "diff": "+" + "x" * 5000 + "\n"} for i in range(40)]
    text = _fit_comment(["### lead", "", "- what costs money"], files)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert text.startswith("### lead") and "more changed files are not shown here" in text
    assert "`f39.conf`" in text  # the files left out are named


def test_detailed_exitcode(tmp_path):
    same = run_cli("diff", str(REF), str(REF), "--detailed-exitcode")
    assert same.returncode == 0, same.stdout
    changed = run_cli("diff", str(REF), str(_changed(tmp_path)), "--detailed-exitcode")
    assert changed.returncode == 2
    plain = run_cli("diff", str(REF), str(_changed(tmp_path)))
    assert plain.returncode == 0


def _git_repo(tmp_path):
    """A git repository whose one commit holds the reference blueprint."""
    require("git", "git")
    repo = tmp_path / "repo"
    (repo / "blueprints").mkdir(parents=True)
    shutil.copy(REF, repo / "blueprints/reference.yaml")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    return repo, git


def test_diff_against_a_git_revision(tmp_path):
    repo, git = _git_repo(tmp_path)
    (repo / "blueprints/reference.yaml").write_text(_changed(tmp_path).read_text())
    result = run_cli("diff", "HEAD:blueprints/reference.yaml", "blueprints/reference.yaml", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "== Rendered files: 8 changed" in result.stdout  # three Slurm files, bin/fleet.json, bin/health.json, bin/acceptance.json and .sbatch, manifest.json
    bad = run_cli("diff", "nope:blueprints/reference.yaml", "blueprints/reference.yaml", cwd=repo)
    assert bad.returncode == 2 and "cannot read nope:blueprints/reference.yaml from git" in bad.stderr
    # a revision that git would read as an option: `--output=FILE` made git archive truncate FILE
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    for rev in (f"--output={victim}", "-o" + str(victim), "--remote=ext::sh -c touch% /tmp/fleetform-pwned", ""):
        evil = run_cli("diff", "--", f"{rev}:blueprints/reference.yaml", "blueprints/reference.yaml", cwd=repo)
        assert evil.returncode == 2 and "is not a git revision" in evil.stderr, evil.stderr
        assert "Traceback" not in evil.stderr
    assert victim.read_text() == "precious\n"
    # a folder whose name starts with '-' is a path, not an option, after --end-of-options
    (repo / "-x").mkdir()
    shutil.copy(REF, repo / "-x/bp.yaml")
    subprocess.run(git + ["add", "--", "-x"], check=True)
    subprocess.run(git + ["commit", "-qm", "dash"], check=True)
    dashed = run_cli("diff", "--no-resources", "--", "HEAD:-x/bp.yaml", "-x/bp.yaml", cwd=repo)
    assert dashed.returncode == 0, dashed.stderr
    assert "== Rendered files: 0 changed" in dashed.stdout


def test_a_finding_whose_figures_change_is_changed_not_new(tmp_path):
    """The reference's capacity-duration warning goes from 512 to 384 days with 8 nodes: the same
    rule at the same path, so it is a changed finding, not one the change introduces. (p5en's one published
    nccl-tests figure does not say on how many nodes it ran, so the move to p5en does introduce acceptance-floor.)"""
    data = _json(str(REF), str(_changed(tmp_path)))
    assert [f["rule"] for f in data["findings_introduced"]] == ["acceptance-floor"]
    (changed,) = data["findings_changed"]
    assert changed["old"]["rule"] == changed["new"]["rule"] == "capacity-duration"
    assert "512 days" in changed["old"]["message"] and "512 days" not in changed["new"]["message"]


def test_findings_of_a_git_revision_name_the_revision(tmp_path):
    repo, _ = _git_repo(tmp_path)
    (repo / "blueprints/reference.yaml").write_text(REF.read_text().replace("nodes: 6 ", "nodes: 5 ", 1))
    out = run_cli("diff", "blueprints/reference.yaml", "HEAD:blueprints/reference.yaml", cwd=repo).stdout
    assert "HEAD:blueprints/reference.yaml:" in out and "fleetform-diff-" not in out


def _team_repo(tmp_path, base_name: str = "platform"):
    """A team's repository: a blueprint that extends a base kept in the repository's own bases/ (the
    shipped efa-training base copied under `base_name` with 2 nodes instead of 4), one commit."""
    require("git", "git")
    repo = tmp_path / "team"
    bases = repo / "blueprints/bases" / base_name
    bases.mkdir(parents=True)
    shipped = (ROOT / "blueprints/bases/efa-training/1.0.0.yaml").read_text()
    assert "    nodes: 4\n" in shipped
    (bases / "1.0.0.yaml").write_text(shipped.replace("    nodes: 4\n", "    nodes: 2\n", 1)
                                      .replace("../../fleetform-v1", "../../../fleetform-v1"))
    (repo / "blueprints/bp.yaml").write_text(
        f"apiVersion: fleetform/v1\nkind: Blueprint\nextends: {{name: {base_name}, version: 1.0.0}}\n"
        "metadata: {name: team, version: 1.0.0}\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    return repo, git


def test_a_git_revision_resolves_the_bases_kept_in_its_own_repository(tmp_path):
    """Issue 19, review defect 1: bases were looked for beside the label HEAD:blueprints/..."""
    repo, _ = _team_repo(tmp_path)
    path = repo / "blueprints/bp.yaml"
    path.write_text(path.read_text() + "fleets: [{name: train, nodes: 3}]\n")
    result = run_cli("diff", "--no-resources", "--format", "json", "HEAD:blueprints/bp.yaml", "blueprints/bp.yaml",
                     cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    (train,) = json.loads(result.stdout)["cost"]["fleets"]
    assert (train["old"]["nodes"], train["new"]["nodes"]) == ([2, 2], [3, 3])
    # a finding inside the revision's base names it as REV:path, never the exported copy
    base = repo / "blueprints/bases/platform/1.0.0.yaml"
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "x"],
                   check=True)
    base.write_text(base.read_text().replace("instance_type: p5.48xlarge", "instance_type: p5.49xlarge", 1))
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "y"],
                   check=True)
    bad = run_cli("diff", "--no-resources", "HEAD:blueprints/bp.yaml", "HEAD~1:blueprints/bp.yaml", cwd=repo)
    assert bad.returncode == 1
    assert "HEAD:blueprints/bases/platform/1.0.0.yaml:" in bad.stdout and "fleetform-diff-" not in bad.stdout


def test_a_local_base_named_like_a_shipped_one_is_the_one_both_sides_use(tmp_path):
    """Issue 19, review defect 2: the old side resolved the shipped efa-training (4 nodes), the new
    side the repository's own (2 nodes): an unchanged blueprint showed a cost change."""
    repo, _ = _team_repo(tmp_path, "efa-training")
    same = run_cli("diff", "--no-resources", "--detailed-exitcode", "HEAD:blueprints/bp.yaml", "blueprints/bp.yaml",
                   cwd=repo)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "train: 2 x" not in same.stdout
    validated = run_cli("plan", "--no-resources", "--format", "json", "blueprints/bp.yaml", cwd=repo)
    (fleet,) = json.loads(validated.stdout)["cost"]["fleets"]
    assert fleet["nodes"] == [2, 2]  # what validate/plan of the checkout resolves


def test_an_absolute_symlink_in_the_blueprints_folder_does_not_break_diff(tmp_path):
    """Issue 19, review defect 3: tarfile's data filter refused the link and diff exited 3."""
    repo, git = _team_repo(tmp_path)
    (repo / "blueprints/latest").symlink_to("/etc")
    (repo / "blueprints/escape").symlink_to("../../..")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "links"], check=True)
    result = run_cli("diff", "--no-resources", "--detailed-exitcode", "HEAD:blueprints/bp.yaml", "blueprints/bp.yaml",
                     cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    # a blueprint that is such a link is judged as validate judges it: a finding, not a crash
    (repo / "blueprints/linked.yaml").symlink_to("/etc/hostname")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "linked"], check=True)
    linked = run_cli("diff", "--no-resources", "HEAD:blueprints/linked.yaml", "blueprints/bp.yaml", cwd=repo)
    assert linked.returncode in (1, 2) and "Traceback" not in linked.stderr, linked.stderr


def test_no_resources_claims_no_resource_counts(tmp_path):
    """Issue 19, review defect 7: `--no-resources` printed "0 to delete" for what it never compared."""
    result = run_cli("diff", "--no-resources", str(REF), str(_changed(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "to delete" not in result.stdout and "to replace" not in result.stdout
    assert "cloud resources not compared (left out (--no-resources))" in result.stdout
    # what the rendered files do is still said, and that it is all that was compared
    # p5 -> p5en changes the node generation in fleet.json: a node roll, seen without the resources too
    assert "most disruptive: node roll (of the rendered files: the cloud resources were not compared)" in result.stdout
    data = _json("--no-resources", str(REF), str(_changed(tmp_path)))
    assert data["summary"]["resources"] is None and data["resources_not_recorded"]


def test_a_git_revision_path_never_reads_a_file_outside_the_revision(tmp_path):
    """`HEAD:/abs/path` joined to the exported tree is the absolute path itself: diff compared a
    file of the working machine as if it were the revision's (exit 0). A path that climbs out of
    the repository through a folder (`dir/../../x`) is refused as `../x` is."""
    repo, _ = _git_repo(tmp_path)
    outside = tmp_path / "outside.yaml"
    shutil.copy(REF, outside)
    for spec in (f"HEAD:{outside}", "HEAD:blueprints/../../outside.yaml"):
        result = run_cli("diff", "--no-resources", spec, "blueprints/reference.yaml", cwd=repo)
        assert result.returncode == 2, (spec, result.stdout, result.stderr)
        assert "outside the repository" in result.stderr
        assert "Traceback" not in result.stderr
