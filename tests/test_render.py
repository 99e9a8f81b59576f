"""`fleetform render`: deterministic, atomic, --check, manifest, and a Jinja environment that
refuses what it must."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace

import jinja2
import pytest

from conftest import ROOT, run_cli
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.render import output
from fleetform.render.jinja import RenderError, environment

REF = ROOT / "blueprints/reference.yaml"


def test_render_writes_the_layout_of_the_design(tmp_path):
    result = run_cli("render", str(REF), cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.endswith("[hf-revision-unpinned]\n1 blueprint checked, valid: 0 errors, 4 warnings\n"
                                                     "rendered 61 files to rendered/llm-70b/\n")
    files = sorted(p.relative_to(tmp_path / "rendered/llm-70b").as_posix()
                   for p in (tmp_path / "rendered/llm-70b").rglob("*") if p.is_file())
    assert [f for f in files if not f.startswith(("serve/", "small-models/"))] == [
        "manifest.json", "train/nccl.env", "train/slurm/bin/acceptance", "train/slurm/bin/acceptance.json",
        "train/slurm/bin/acceptance.sbatch", "train/slurm/bin/bootstrap", "train/slurm/bin/epilog",
        "train/slurm/bin/fleet.json", "train/slurm/bin/fleetform_dns.py", "train/slurm/bin/fleetform_jobcheck.py",
        "train/slurm/bin/fleetform_monitoring.py",
        "train/slurm/bin/fleetform_node.py", "train/slurm/bin/health", "train/slurm/bin/health.json",
        "train/slurm/bin/imds-access", "train/slurm/bin/keeper", "train/slurm/bin/monitoring-targets",
        "train/slurm/bin/monitoring.json", "train/slurm/bin/prolog", "train/slurm/bin/resume",
        "train/slurm/bin/resume-fail", "train/slurm/bin/suspend", "train/slurm/bin/task-prolog",
        "train/slurm/bin/topology", "train/slurm/bin/update", "train/slurm/bin/xid.json", "train/slurm/cgroup.conf", "train/slurm/gres.conf",
        "train/slurm/monitoring/prometheus.yml", "train/slurm/slurm.conf",
        "train/slurm/topology.conf"]
    assert [f for f in files if f.startswith("serve/")] == [
        "serve/acceptance/accept-models", "serve/acceptance/models.json", "serve/gpu-operator-values.yaml", "serve/k8s/dcgm-servicemonitor.yaml", "serve/k8s/kustomization.yaml",
        "serve/k8s/llama-70b-deployment.yaml", "serve/k8s/llama-70b-pdb.yaml", "serve/k8s/llama-70b-scaledobject.yaml",
        "serve/k8s/llama-70b-service.yaml", "serve/k8s/llama-70b-servicemonitor.yaml", "serve/k8s/namespace.yaml",
        "serve/k8s/networkpolicy.yaml", "serve/k8s/priorityclass.yaml", "serve/node/user-data"]
    # an HPA fleet also gets the Prometheus adapter's values (the rule its metric needs)
    assert "small-models/prometheus-adapter-values.yaml" in files and "serve/prometheus-adapter-values.yaml" not in files


def test_manifest_records_blueprint_tool_and_every_file(tmp_path):
    out = tmp_path / "out"
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["blueprint"] == {"name": "llm-70b", "version": "1.0.0",
                                     "sha256": hashlib.sha256(REF.read_bytes()).hexdigest()}
    assert manifest["tool"]["name"] == "fleetform" and manifest["bases"] == []
    for path, digest in manifest["files"].items():
        assert hashlib.sha256((out / path).read_bytes()).hexdigest() == digest
    assert len(manifest["files"]) == 60


def test_output_is_byte_identical_whatever_the_cwd_locale_and_time_zone(tmp_path):
    digests = set()
    for i, env in enumerate([{"TZ": "UTC", "LC_ALL": "C"}, {"TZ": "Asia/Kolkata", "LC_ALL": "C.UTF-8"}]):
        cwd = tmp_path / f"cwd{i}"
        cwd.mkdir()
        subprocess.run([sys.executable, "-m", "fleetform", "render", str(REF), "-o", "out"], cwd=cwd, check=True,
                       env={**os.environ, **env}, capture_output=True)
        digests.add(tuple(sorted((p.relative_to(cwd).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest())
                                 for p in (cwd / "out").rglob("*") if p.is_file())))
    assert len(digests) == 1


def test_check_lists_stale_missing_and_extra_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0
    assert run_cli("render", str(REF), "-o", str(out), "--check").returncode == 0
    (out / "train/nccl.env").write_text("NCCL_DEBUG=INFO\n")
    (out / "train/slurm/gres.conf").unlink()
    (out / "notes.txt").write_text("mine\n")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    result = run_cli("render", str(REF), "-o", str(out), "--check")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[lines.index("1 blueprint checked, valid: 0 errors, 4 warnings") + 1:][:3] == [
        f"stale: {out}/train/nccl.env", f"missing: {out}/train/slurm/gres.conf",
                                              f"extra: {out}/notes.txt"]
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_check_of_a_folder_that_does_not_exist(tmp_path):
    result = run_cli("render", str(REF), "-o", str(tmp_path / "none"), "--check")
    assert result.returncode == 1 and result.stdout.count("missing: ") == 61
    assert not (tmp_path / "none").exists()


def test_a_failed_render_leaves_the_previous_output_whole(tmp_path, monkeypatch):
    out = tmp_path / "out"
    files = render(check(REF).model)
    output.write(files, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    calls = []
    real_open = os.open

    def failing_open(path, flags, mode=0o777, **kwargs):  # the third rendered file fails: the disk is full
        if flags & os.O_EXCL:
            calls.append(path)
            if len(calls) == 3:
                raise OSError(28, "No space left on device", str(path))
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    changed = dict(files, **{"train/nccl.env": b"NCCL_DEBUG=INFO\n"})
    with pytest.raises(output.OutputError, match="No space left on device"):
        output.write(changed, out)
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder left behind


def test_a_bad_blueprint_renders_nothing(write, tmp_path):
    bad = write(REF.read_text().replace("instance_type: p5.48xlarge\n    nodes: 6", "instance_type: p5.48xlarg\n    nodes: 6"))
    result = run_cli("render", str(bad), "-o", str(tmp_path / "out"))
    assert result.returncode == 1 and "instance-type" in result.stdout and "Traceback" not in result.stderr
    assert result.stdout.splitlines()[-1] == "nothing rendered: fix the errors above"
    assert not (tmp_path / "out").exists()


def test_values_that_could_inject_lines_are_refused():
    model = check(REF).model
    fleet = model.fleets[0]
    hostile = replace(model, fleets=(replace(fleet, slurm=replace(fleet.slurm, cluster_name="x\nAuthType=auth/none")),)
                      + model.fleets[1:])
    with pytest.raises(RenderError, match="line break"):
        render(hostile)
    templated = replace(model, fleets=(replace(fleet, slurm=replace(fleet.slurm, cluster_name="{{ 7*7 }}")),)
                        + model.fleets[1:])
    with pytest.raises(RenderError, match="template delimiter"):
        render(templated)


def test_a_misspelt_template_variable_is_an_error_not_an_empty_string():
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("ClusterName={{ c.clustr_name }}").render(c={})


def test_keys_a_newer_slurm_removed_are_not_written_for_it(tmp_path):
    from variants import VARIANTS

    def cgroup(text):
        source = tmp_path / "bp.yaml"
        source.write_text(text)
        return render(check(source).model)["train/slurm/cgroup.conf"].decode()

    def conf(text):
        source = tmp_path / "bp.yaml"
        source.write_text(text)
        return render(check(source).model)["train/slurm/slurm.conf"].decode()

    from variants import aws

    older = aws("older", nodes="8", scheduler='      slurm_version: "23.02"', image="/acme/images/slurm-23.02/ami-id")
    assert "CgroupAutomount=yes" in cgroup(older)
    assert "SlurmctldParameters=cloud_reg_addrs," in conf(older)
    # SchedMD CHANGELOG/slurm-23.11.md: "Remove CgroupAutomount= option from cgroup.conf",
    # "Remove cloud_reg_addrs and make it default behavior"
    assert "CgroupAutomount" not in cgroup(VARIANTS["partitions"])  # default target 23.11
    assert "cloud_reg_addrs" not in conf(VARIANTS["partitions"])
    assert "CgroupAutomount" not in cgroup(VARIANTS["p4d-slurm-2405"])
    # SchedMD CHANGELOG/slurm-23.02.md: "Change cloud nodes to show by default. PrivateData=cloud is
    # no longer needed."
    oldest = aws("oldest", nodes="8", scheduler='      slurm_version: "22.05"', image="/acme/images/slurm-22.05/ami-id")
    assert "PrivateData=cloud" in conf(oldest).splitlines()
    assert "PrivateData" not in conf(older) and "PrivateData" not in conf(VARIANTS["partitions"])


def test_slurmctld_refuses_root_jobs(tmp_path):
    """Issue 17, item 4: no root job (slurm.conf(5) DisableRootJobs); fleetform's root work runs
    outside Slurm. slurmctld's parse of the rendered files is tests/test_slurmctld.py's."""
    from variants import VARIANTS

    for text in (VARIANTS["partitions"], (ROOT / "blueprints/onprem-ib.yaml").read_text()):
        source = tmp_path / "bp.yaml"
        source.write_text(text)
        assert "DisableRootJobs=YES" in render(check(source).model)["train/slurm/slurm.conf"].decode().splitlines()


def test_slurm_conf_stays_small_at_10000_nodes(tmp_path):
    from variants import VARIANTS

    source = tmp_path / "bp.yaml"
    source.write_text(VARIANTS["10000-nodes"])
    files = render(check(source).model)
    conf = files["train/slurm/slurm.conf"].decode()
    # as many lines as the same fleet of 64 nodes: one NodeName and one PartitionName line, whatever the count
    small = tmp_path / "small.yaml"
    small.write_text(VARIANTS["10000-nodes"].replace("    nodes: 10000\n", "    nodes: 64\n"))
    assert small.read_text() != source.read_text()
    small_conf = render(check(small).model)["train/slurm/slurm.conf"].decode()
    assert len(conf.splitlines()) == len(small_conf.splitlines()) < 80
    assert "NodeName=train-[00001-10000] " in conf
    # on AWS topology.conf is not invented from nodes_per_switch: one switch until EC2 says more
    assert files["train/slurm/topology.conf"].decode().splitlines()[-1] == "SwitchName=ec2 Nodes=train-[00001-10000]"


def test_plan_files_live_beside_the_rendered_ones(tmp_path):
    out = tmp_path / "out"
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0
    assert run_cli("plan", str(REF), "-o", str(out)).returncode == 0
    assert json.loads((out / "plan.json").read_text())["blueprint"]["name"] == "llm-70b"
    assert (out / "plan.md").read_text().startswith("### fleetform plan: llm-70b 1.0.0")
    assert run_cli("render", str(REF), "-o", str(out), "--check").returncode == 0  # plan files are not "extra"
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0
    assert (out / "plan.json").exists() and (out / "plan.md").exists()  # a re-render keeps them


def test_several_blueprints_render_each_to_its_folder(tmp_path):
    result = run_cli("render", str(REF), str(ROOT / "blueprints/onprem-ib.yaml"), cwd=tmp_path)
    assert result.returncode == 0 and sorted(p.name for p in (tmp_path / "rendered").iterdir()) == ["dgx-onprem", "llm-70b"]
    assert run_cli("render", str(REF), str(REF), "-o", "x", cwd=tmp_path).returncode == 2


def test_render_never_replaces_a_folder_it_did_not_render(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "notes.txt").write_text("mine\n")
    result = run_cli("render", str(REF), "-o", str(tmp_path))
    assert result.returncode == 2 and "holds files fleetform did not render" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git", "notes.txt"]
    other = tmp_path / "other"
    assert run_cli("render", str(ROOT / "blueprints/onprem-ib.yaml"), "-o", str(other)).returncode == 0
    assert run_cli("render", str(REF), "-o", str(other)).returncode == 2  # another blueprint's folder


def test_two_blueprints_with_one_name_render_nothing(tmp_path):
    copy = tmp_path / "copy.yaml"
    copy.write_text(REF.read_text())
    result = run_cli("render", str(REF), str(copy), cwd=tmp_path)
    assert result.returncode == 2 and "both render to rendered/llm-70b/" in result.stderr
    assert not (tmp_path / "rendered").exists()


def test_a_plan_of_an_older_blueprint_is_stale(tmp_path):
    source = tmp_path / "bp.yaml"
    source.write_text(REF.read_text())
    out = tmp_path / "out"
    assert run_cli("render", str(source), "-o", str(out)).returncode == 0
    assert run_cli("plan", str(source), "-o", str(out)).returncode == 0
    source.write_text(REF.read_text().replace("nodes: 6 ", "nodes: 8 "))
    check_result = run_cli("render", str(source), "-o", str(out), "--check")
    assert check_result.returncode == 1 and f"extra: {out}/plan.json" in check_result.stdout
    assert run_cli("render", str(source), "-o", str(out)).returncode == 0
    assert not (out / "plan.json").exists()  # dropped with the render it no longer describes


def test_the_q_filter_is_read_back_by_json_and_yaml_beyond_the_basic_plane():
    """templates' `q` writes strings JSON files and YAML files both read: json.dumps alone escaped an emoji as a
    surrogate pair, which YAML refuses (the schema sweep found it in a semantic-routing example prompt)."""
    import json

    import yaml

    from fleetform.render.jinja import quote

    for value in ("plain", "easy 😀 prompt", 'a"b\\c\u0085\u2028\t', "𝔘𝔫𝔦"):
        text = quote(value)
        assert json.loads(text) == value
        assert yaml.safe_load(f"key: {text}\n")["key"] == value
