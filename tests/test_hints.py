"""Hints that work when followed (issue 19): each test applies what a finding's hint says to the
blueprint, as a user would, and checks that the finding is gone."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT
from fleetform.pipeline import check

REFERENCE = (ROOT / "blueprints" / "reference.yaml").read_text()


def _validate(path: Path, rule: str | None = None, field: str | None = None):
    found = check(path).findings
    return [f for f in found if (rule is None or f.rule == rule) and (field is None or f.path == field)]


def _replace_at(path: Path, line: int, column: int, old: str, new: str) -> None:
    """Replace `old`, written at line:column of the file, by `new`: what a user following the hint does."""
    lines = path.read_text().split("\n")
    text = lines[line - 1]
    assert text[column - 1:].startswith(old), (text, column, old)
    lines[line - 1] = text[:column - 1] + new + text[column - 1 + len(old):]
    path.write_text("\n".join(lines))


def test_an_unquoted_minor_version_is_quoted_as_written(tmp_path):
    # `version: 1.30` is the float 1.3 to YAML: quoting str(1.3) would ask for Kubernetes 1.3
    path = tmp_path / "bp.yaml"
    path.write_text(REFERENCE.replace('version: "1.33"', "version: 1.30", 1))
    (finding,) = _validate(path, "schema")
    assert finding.path == "fleets[1].scheduler.version"
    assert "1.30" in finding.message and "1.3)" in finding.message
    quoted = re.fullmatch(r'quote it to keep it text: (".*")', finding.hint).group(1)
    assert quoted == '"1.30"'
    _replace_at(path, finding.line, finding.column, "1.30", quoted)
    result = check(path)
    # the hint is followed: no schema finding is left there (1.30 is past EKS's extended support since
    # 2026-07-23, which the eks-version rule now says at the same path, about the version, not its type)
    assert [f for f in result.findings if f.path == finding.path and f.rule == "schema"] == []
    assert [f.rule for f in result.findings if f.path == finding.path] == ["eks-version"]
    assert result.document.data["fleets"][1]["scheduler"]["version"] == "1.30"


def test_the_written_text_survives_a_base(tmp_path):
    # a number written in the blueprint that extends a base keeps its text through the merge
    (tmp_path / ".git").mkdir()
    (tmp_path / "bases" / "k8s").mkdir(parents=True)
    (tmp_path / "bases" / "k8s" / "1.0.0.yaml").write_text(REFERENCE)
    path = tmp_path / "bp.yaml"
    path.write_text("apiVersion: fleetform/v1\nkind: Blueprint\nextends: {name: k8s, version: 1.0.0}\n"
                    "metadata: {name: child, version: 1.0.0}\nfleets:\n  - name: serve\n"
                    "    scheduler:\n      version: 1.20\n")
    (finding,) = _validate(path, "schema")
    assert (finding.file, finding.line, finding.hint) == (str(path), 8, 'quote it to keep it text: "1.20"')


def _hinted(hint: str) -> str:
    return re.search(r"did you mean '([^']+)'\?", hint).group(1)


def test_an_unknown_region_is_a_finding_of_its_own_and_its_hint_leads_to_a_valid_blueprint(tmp_path):
    # us-east-7 and eu-central-3 passed validation before: nothing checked the region but its pattern
    for region, meant in (("us-east-7", "us-east-"), ("eu-central-3", "eu-central-")):
        path = tmp_path / f"{region}.yaml"
        path.write_text(REFERENCE.replace("region: us-east-1", f"region: {region}")
                        .replace("availability_zone: us-east-1a", f"availability_zone: {region}a"))
        (finding,) = _validate(path, "unknown-region")
        assert (finding.path, finding.severity.value) == ("provider.region", "error")
        assert "us-east-1" in finding.hint if region.startswith("us") else "eu-west-1" in finding.hint
        fix = _hinted(finding.hint)
        assert fix.startswith(meant)
        _replace_at(path, finding.line, finding.column, region, fix)
        assert not _validate(path, "unknown-region")
        # the zone now lies in another region: that finding's own hint finishes the job
        (zone,) = _validate(path, "provider-fields")
        _replace_at(path, zone.line, zone.column, f"{region}a", re.search(r"e\.g\. (\S+)", zone.hint).group(1))
        assert check(path).ok


def test_every_known_region_passes():
    from fleetform.rules.regions import known_regions

    regions = known_regions()
    assert {"us-east-1", "eu-central-1", "ap-southeast-7", "us-gov-west-1", "cn-north-1"} <= set(regions)
    assert "us-east-7" not in regions


def test_an_unpinned_image_is_a_warning_whose_example_pins_it(tmp_path):
    # no tag was a schema error whose hint only showed an example; :latest passed without a word
    for image in ("vllm/vllm-openai", "vllm/vllm-openai:latest"):
        path = tmp_path / "bp.yaml"
        path.write_text(REFERENCE.replace("image: vllm/vllm-openai:v0.11.0", f"image: {image}"))
        found = _validate(path, "image-pinned")
        assert [(f.path, f.severity.value) for f in found] == [
            ("fleets[1].models[0].image", "warning"), ("fleets[2].models[0].image", "warning")]
        assert not _validate(path, "schema")
        for finding in found:
            pinned = re.search(r"e\.g\. (\S+?),? ", finding.hint).group(1)
            _replace_at(path, finding.line, finding.column, image, pinned)
        assert not _validate(path, "image-pinned")
        assert check(path).ok


def test_a_tag_a_digest_or_a_registry_port_reads_as_the_reference_grammar_says():
    from fleetform.rules.images import split_reference

    assert split_reference("registry.local:5000/vllm/vllm-openai") == ("registry.local:5000/vllm/vllm-openai", "", "")
    assert split_reference("registry.local:5000/vllm:v1") == ("registry.local:5000/vllm", "v1", "")
    assert split_reference("vllm/vllm-openai@sha256:" + "a" * 64)[2] == "sha256:" + "a" * 64


def _checkpoint_blueprint(path: Path, uri: str, fleet_storage: str = "[scratch, checkpoints]",
                          drop_bucket: bool = False) -> None:
    text = REFERENCE.replace("path: /fsx/checkpoints", f"path: {uri}")
    text = text.replace("storage: [scratch, checkpoints]", f"storage: {fleet_storage}")
    if drop_bucket:
        text = text.replace("  - name: checkpoints\n    type: s3\n    versioning: true\n    noncurrent_expiry_days: 30\n", "")
    path.write_text(text)


def test_a_checkpoint_uri_naming_a_bucket_the_fleet_lacks_is_an_error_whose_hint_names_the_buckets(tmp_path):
    # s3://nobucket/... was accepted: any bucket at all attached made any URI pass
    path = tmp_path / "bp.yaml"
    _checkpoint_blueprint(path, "s3://nobucket/run1/")
    (finding,) = _validate(path, "checkpoint-location")
    assert (finding.path, finding.severity.value, finding.line) == ("fleets[0].checkpoint.path", "error", 73)
    assert "'nobucket'" in finding.message and "'checkpoints' (s3://checkpoints/run1/)" in finding.hint
    _replace_at(path, finding.line, finding.column, "s3://nobucket/run1/", "s3://checkpoints/run1/")
    assert not _validate(path, "checkpoint-location")
    assert check(path).ok


def test_a_checkpoint_bucket_defined_but_not_attached_is_attached_by_following_the_hint(tmp_path):
    path = tmp_path / "bp.yaml"
    _checkpoint_blueprint(path, "s3://checkpoints/run1/", fleet_storage="[scratch]")
    (finding,) = _validate(path, "checkpoint-location")
    assert finding.hint == "attach 'checkpoints' in the fleet's storage list"
    path.write_text(path.read_text().replace("storage: [scratch]", "storage: [scratch, checkpoints]"))
    assert check(path).ok


def test_a_checkpoint_bucket_the_blueprint_does_not_define_is_defined_by_following_the_hint(tmp_path):
    path = tmp_path / "bp.yaml"
    _checkpoint_blueprint(path, "s3://ckpt/run1/", fleet_storage="[scratch]", drop_bucket=True)
    (finding,) = _validate(path, "checkpoint-location")
    entry = re.search(r"add `(\{.*\})` under storage", finding.hint).group(1)
    assert "'ckpt'" in finding.message and "does not define" in finding.message
    text = path.read_text().replace("\nfleets:\n", f"\n  - {entry}\n\nfleets:\n", 1)
    path.write_text(text.replace("storage: [scratch]", "storage: [scratch, ckpt]"))
    assert check(path).ok, check(path).findings


BASE_WITH_TYPO = REFERENCE.replace("instance_type: p4de.24xlarge", "instance_type: p4de.24xlarg")
CHILD = "apiVersion: fleetform/v1\nkind: Blueprint\nextends: {name: platform, version: 1.0.0}\n" \
        "metadata: {name: child, version: 1.0.0}\n"


def _team_repository(root: Path, git: bool) -> Path:
    """root/teams/llm.yaml extending root/teams/bases/platform/1.0.0.yaml, whose fleet has a typo."""
    if git:
        (root / ".git").mkdir(parents=True)
    (root / "teams" / "bases" / "platform").mkdir(parents=True)
    (root / "teams" / "bases" / "platform" / "1.0.0.yaml").write_text(BASE_WITH_TYPO)
    (root / "teams" / "llm.yaml").write_text(CHILD)
    return root / "teams" / "llm.yaml"


def _base_lines(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if "[instance-type]" in line]


def test_a_base_in_the_repository_is_named_from_the_repository_top_whatever_the_cwd(tmp_path):
    # before, a base was named by its absolute path: a CI annotation could not find it in the repository
    from conftest import run_cli

    blueprint = _team_repository(tmp_path / "repo", git=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd, arg in ((tmp_path / "repo", "teams/llm.yaml"), (blueprint.parent, "llm.yaml"),
                     (elsewhere, str(blueprint)), (elsewhere, "../repo/teams/llm.yaml")):
        result = run_cli("validate", arg, cwd=cwd)
        (line,) = _base_lines(result)
        assert line.startswith("teams/bases/platform/1.0.0.yaml:"), (cwd, arg, line)
        assert str(tmp_path) not in result.stdout


def test_outside_git_a_base_is_named_from_the_working_folder(tmp_path):
    from conftest import run_cli

    blueprint = _team_repository(tmp_path / "plain", git=False)
    (line,) = _base_lines(run_cli("validate", "teams/llm.yaml", cwd=tmp_path / "plain"))
    assert line.startswith("teams/bases/platform/1.0.0.yaml:")
    (line,) = _base_lines(run_cli("validate", "llm.yaml", cwd=blueprint.parent))
    assert line.startswith("bases/platform/1.0.0.yaml:")


def test_a_base_fleetform_ships_is_named_by_its_place_in_fleetform(tmp_path, monkeypatch):
    from importlib import resources

    from fleetform import bases

    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    shipped = Path(str(resources.files("fleetform.blueprints"))) / "bases" / "efa-training" / "1.0.0.yaml"
    assert bases._namer("llm.yaml", "llm.yaml")(shipped) == "fleetform:bases/efa-training/1.0.0.yaml"


def _two_children_of_one_base(root: Path, base_text: str) -> list[str]:
    """root/a.yaml and root/b.yaml, both extending root/bases/platform/1.0.0.yaml, in a git repository."""
    (root / ".git").mkdir(parents=True)
    (root / "bases" / "platform").mkdir(parents=True)
    (root / "bases" / "platform" / "1.0.0.yaml").write_text(base_text)
    for name in ("a", "b"):
        (root / f"{name}.yaml").write_text(CHILD.replace("name: child", f"name: child-{name}"))
    return ["a.yaml", "b.yaml"]


def test_a_warning_of_a_shared_base_is_printed_once_per_run(tmp_path):
    # validate, render and a failing diff each printed it once per blueprint: twice in one CI log
    from conftest import run_cli

    files = _two_children_of_one_base(tmp_path, REFERENCE)
    warning = "bases/platform/1.0.0.yaml:46:13: warning: fleets[0].capacity.type:"
    result = run_cli("validate", *files, cwd=tmp_path)
    assert result.stdout.count(warning) == 1, result.stdout
    assert result.stdout.splitlines()[-1] == "2 blueprints checked, valid: 0 errors, 4 warnings"
    for fmt in ("json", "github"):
        out = run_cli("validate", "--format", fmt, *files, cwd=tmp_path).stdout
        assert out.count("capacity-duration") == 1, out
    result = run_cli("render", *files, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(warning) == 1, result.stdout


def test_an_error_of_a_shared_base_is_printed_once_by_render_and_diff(tmp_path):
    from conftest import run_cli

    files = _two_children_of_one_base(tmp_path, BASE_WITH_TYPO)
    error = "bases/platform/1.0.0.yaml:109:20: error: fleets[2].instance_type:"
    result = run_cli("render", *files, cwd=tmp_path)
    assert result.returncode == 1 and result.stdout.count(error) == 1, result.stdout
    result = run_cli("diff", "--no-resources", *files, cwd=tmp_path)
    assert result.returncode == 1 and result.stdout.count(error) == 1, result.stdout
    assert result.stdout.splitlines()[-2:] == ["2 blueprints checked, invalid: 1 error, 4 warnings",
                                               "no diff: a side does not validate"]


SUMMARY = re.compile(r"^(\d+) blueprints? checked, (valid|invalid): (\d+) errors?, (\d+) warnings?( \(\d+ warnings? waived\))?$")


def test_validate_render_and_plan_end_their_findings_with_one_summary_line(tmp_path):
    # validate said "1 blueprint valid: no errors, no warnings", render and plan said nothing of the kind
    from conftest import run_cli

    reference = str(ROOT / "blueprints" / "reference.yaml")
    clean = str(ROOT / "blueprints" / "team-llm.yaml")
    assert run_cli("validate", clean).stdout.splitlines()[-1] == "1 blueprint checked, valid: 0 errors, 0 warnings"
    rendered = run_cli("render", reference, "-o", str(tmp_path / "out")).stdout.splitlines()
    assert rendered[-2] == "1 blueprint checked, valid: 0 errors, 4 warnings" and rendered[-1].startswith("rendered ")
    for fmt in ("text", "markdown"):
        lines = run_cli("plan", "--no-resources", "--format", fmt, reference).stdout.splitlines()
        assert lines[-1] == "1 blueprint checked, valid: 0 errors, 4 warnings", lines[-3:]
    for line in ("1 blueprint checked, valid: 0 errors, 0 warnings", "2 blueprints checked, invalid: 1 error, 1 warning",
                 "1 blueprint checked, valid: 0 errors, 0 warnings (1 warning waived)"):
        assert SUMMARY.match(line)


def test_costs_are_dollars_with_one_value_where_both_ends_are_equal():
    from conftest import run_cli

    out = run_cli("plan", "--no-resources", str(ROOT / "blueprints" / "reference.yaml")).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ") and "xlarge" in line}
    assert rows["small-models"][2:] == ["1", "$27.45", "$20,036.35"]  # was 1-1, $27.45, $27.45, ...
    assert rows["serve"][2:] == ["1-10", "$55.04-$550.40", "$40,179.20-$401,792.00"]
    from fleetform.commands.diff import _delta

    assert (_delta(0, 0), _delta(-24150.2, -241501), _delta(40179, 0)) == ("+$0", "-$24,150 to -$241,501", "+$40,179 to +$0")


def test_gpu_memory_is_in_gb_in_the_catalog_as_in_plan_sizing():
    # the catalog printed H100 memory as 80.0 GiB, plan's sizing as 85.9 GB: one quantity, two units
    from conftest import run_cli

    catalog = run_cli("catalog", "--gpu", "H100").stdout
    plan = run_cli("plan", "--no-resources", str(ROOT / "blueprints" / "reference.yaml")).stdout
    assert "GiB" not in catalog.split("MEM GiB")[0] and "GPU GB" in catalog
    assert "H100-80GB: 85.9 GB," in catalog and "/ 85.9 GB" in plan
    assert "3g.40gb (x2, 42.9 GB)" in catalog


def test_the_regions_are_botocores_partition_data_not_its_frozen_endpoint_file():
    # regions.json was read from botocore's endpoints.json, which no longer gains regions: Saudi Arabia
    # (me-west-1) and Chile (sa-west-1), in botocore 1.44.5's partitions.json, were unknown-region errors
    import json
    import os

    from fleetform.rules.regions import known_regions

    assert {"me-west-1", "sa-west-1"} <= set(known_regions())
    source = json.loads((ROOT / "providers" / "aws" / "regions.json").read_text())["source"]
    try:
        import botocore
    except ImportError:
        return
    if f"botocore {botocore.__version__} " not in source:
        return  # another botocore than the one the file was read from
    data = json.loads(open(os.path.join(os.path.dirname(botocore.__file__), "data", "partitions.json")).read())
    aws = next(p for p in data["partitions"] if p["id"] == "aws")
    shipped = json.loads((ROOT / "providers" / "aws" / "regions.json").read_text())["partitions"]["aws"]
    assert {r for r in aws["regions"] if not r.endswith("-global")} == set(shipped)


def test_a_region_of_another_partition_is_refused_with_the_reason(tmp_path):
    # us-gov-west-1 and cn-north-1 validated: fleetform writes arn:aws:... into IAM policies and role
    # attachments, which IAM refuses in aws-us-gov and aws-cn (MalformedPolicyDocument) at pulumi up
    for region in ("us-gov-west-1", "cn-north-1", "us-iso-east-1"):
        path = tmp_path / f"{region}.yaml"
        path.write_text(REFERENCE.replace("region: us-east-1", f"region: {region}")
                        .replace("availability_zone: us-east-1a", f"availability_zone: {region}a"))
        (finding,) = _validate(path, "unknown-region")
        assert "partition" in finding.message and "arn:aws:" in finding.message, finding.message
        assert finding.hint == "use a region of the aws partition, e.g. us-east-1"
    # an unknown region's hint lists only regions fleetform can build in
    path = tmp_path / "us-gov-west-7.yaml"
    path.write_text(REFERENCE.replace("region: us-east-1", "region: us-gov-west-7")
                    .replace("availability_zone: us-east-1a", "availability_zone: us-gov-west-7a"))
    (finding,) = _validate(path, "unknown-region")
    assert "us-gov" not in finding.hint and "us-west-2" in finding.hint, finding.hint


def test_an_alias_of_an_unquoted_minor_version_is_quoted_as_the_anchor_writes_it(tmp_path):
    # `version: *v` for `&v 1.30` was hinted as "1.3", the very hint the anchor's own line had lost
    path = tmp_path / "bp.yaml"
    text = REFERENCE.replace('version: "1.33"', "version: &v 1.30", 1).replace('version: "1.33"', "version: *v", 1)
    path.write_text(text)
    findings = _validate(path, "schema")
    assert [f.hint for f in findings] == ['quote it to keep it text: "1.30"'] * 2, findings


def test_an_unquoted_base_version_is_named_as_written(tmp_path):
    # `extends: {version: 1.10}` was reported as "1.1 is not an exact version"
    path = tmp_path / "bp.yaml"
    path.write_text("apiVersion: fleetform/v1\nkind: Blueprint\nextends: {name: vllm-serving, version: 1.10}\n"
                    "metadata: {name: x, version: 1.0.0}\n")
    (finding,) = _validate(path, "extends")
    assert finding.message.startswith("1.10 (a number) is not an exact version"), finding.message


def test_a_shipped_base_installed_in_a_venv_inside_the_repository_is_named_by_its_place_in_fleetform(
        tmp_path, monkeypatch):
    # `python -m venv .venv` in the blueprint repository put the installed bases under its git top level:
    # they were named .venv/lib/python3.11/site-packages/fleetform/..., a file no checkout has
    from fleetform import bases

    (tmp_path / ".git").mkdir()
    package = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "fleetform" / "blueprints"
    (package / "bases" / "efa-training").mkdir(parents=True)
    shipped = package / "bases" / "efa-training" / "1.0.0.yaml"
    shipped.write_text(REFERENCE)
    monkeypatch.setattr(bases.resources, "files", lambda name: package)
    monkeypatch.chdir(tmp_path)
    assert bases._namer("llm.yaml", "llm.yaml")(shipped) == "fleetform:bases/efa-training/1.0.0.yaml"


def test_a_tag_and_a_digest_together_is_an_image_reference_kubernetes_pulls(tmp_path):
    # name:tag@sha256:digest (distribution/reference: reference := name [ ":" tag ] [ "@" digest ], the
    # form Renovate pins images in) was a schema error; the digest is what is pulled, the tag is for people
    image = "vllm/vllm-openai:v0.11.0@sha256:" + "0" * 64
    path = tmp_path / "bp.yaml"
    path.write_text(REFERENCE.replace("image: vllm/vllm-openai:v0.11.0", f"image: {image}"))
    assert not _validate(path, "schema") and not _validate(path, "image-pinned")
    path.write_text(REFERENCE.replace("image: vllm/vllm-openai:v0.11.0", "image: vllm/vllm-openai@sha256:abc"))
    assert [f.path for f in _validate(path, "schema")] == ["fleets[1].models[0].image", "fleets[2].models[0].image"]


def test_plan_of_a_blueprint_that_does_not_validate_keeps_to_its_format(tmp_path):
    # `plan --format json` printed the text report for a blueprint with errors: a CI step parsing it failed
    import json

    from conftest import run_cli

    path = tmp_path / "bp.yaml"
    path.write_text(REFERENCE.replace("region: us-east-1", "region: us-east-7"))
    result = run_cli("plan", "--no-resources", "--format", "json", str(path))
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert "unknown-region" in {f["rule"] for f in data["findings"]} and data["summary"]["errors"] >= 1
