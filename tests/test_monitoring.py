"""Monitoring of Slurm training fleets on AWS (fleetform/monitoring.py, docs/monitoring.md).

The rendered prometheus.yml is judged by Prometheus' own `promtool check config` (Debian's prometheus
package; CI installs it), with the file_sd file the controller's bin/monitoring-targets writes from a
recorded `sinfo -h -N -o "%N %t"` (format and state suffixes: sinfo(1) of slurm-wlm 22.05, OUTPUT
FORMAT %N/%t and NODE STATE CODES). What only a real fleet proves: that Ubuntu 24.04's packages start
their exporters, that dcgm-exporter's container sees the GPUs (docker --gpus needs the NVIDIA container
toolkit of the DLAMI), and that Prometheus reaches the nodes through the zone's names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, require, run_cli
from fleetform import monitoring

REFERENCE = ROOT / "blueprints" / "reference.yaml"
# sinfo -h -N -o "%N %t" on a fleet with two partitions: train-001 and train-002 run (train-002 in both
# partitions), train-003 does not respond (*), train-004 is powered off (~), train-005 is powering up
# (#), train-006 powering down (%), train-007 drained but its machine runs
SINFO = """train-001 alloc
train-002 idle
train-002 idle
train-003 idle*
train-004 idle~
train-005 alloc#
train-006 idle%
train-007 drain
"""
UP = ["train-001", "train-002", "train-003", "train-007"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("monitoring") / "out"
    result = run_cli("render", str(REFERENCE), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out / "train" / "slurm"


def test_slurm_fleets_get_monitoring_and_an_eks_fleet_does_not(rendered, tmp_path):
    """A fleet on EKS has kube-prometheus-stack; on-prem the site runs the exporters and Prometheus, and gets the
    scrape configuration with every node in its file_sd file, but no program (nothing of ours runs there)."""
    assert (rendered / "bin" / "monitoring.json").is_file()
    out = tmp_path / "train-eks"
    assert run_cli("render", str(ROOT / "blueprints" / "train-eks.yaml"), "-o", str(out)).returncode == 0
    assert not [p for p in out.rglob("*") if "monitoring" in p.name]
    out = tmp_path / "onprem-ib"
    assert run_cli("render", str(ROOT / "blueprints" / "onprem-ib.yaml"), "-o", str(out)).returncode == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if "monitoring" in p.as_posix() and p.is_file()) \
        == ["train/slurm/monitoring/nodes.json", "train/slurm/monitoring/prometheus.yml"]


def test_an_on_prem_fleets_scrape_configuration_names_every_node_and_passes_promtool(tmp_path):
    out = tmp_path / "onprem-ib"
    assert run_cli("render", str(ROOT / "blueprints" / "onprem-ib.yaml"), "-o", str(out)).returncode == 0
    folder = out / "train" / "slurm" / "monitoring"
    groups = json.loads((folder / "nodes.json").read_text())
    assert [g["targets"] for g in groups] == [[f"dgx-0{i}"] for i in range(1, 7)]  # hosts: dgx-[01-06]
    assert groups[0]["labels"] == {"node": "dgx-01", "cluster": "train"}
    text = (folder / "prometheus.yml").read_text()
    assert 'targets: ["slurm-ctl:9100"]' in text and 'targets: ["localhost:9100"]' not in text  # not on the controller
    config = tmp_path / "prometheus.yml"
    config.write_text(text.replace(monitoring.TARGETS_FILE, str(folder / "nodes.json")))
    result = promtool(config)
    assert result.returncode == 0 and "does not exist" not in result.stdout + result.stderr, result.stdout


def promtool(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([require("promtool", "prometheus"), "check", "config", str(config)], capture_output=True,
                          text=True, timeout=60)


def run_targets(rendered: Path, tmp: Path, sinfo: str, zone: str = "a-dev-train.fleetform.internal") -> Path:
    """bin/monitoring-targets as the controller's timer runs it, its sinfo a recorded answer."""
    fake = tmp / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "sinfo").write_text(f"#!/bin/sh\n[ \"$*\" = '-h -N -o %N %t' ] || exit 9\ncat <<'EOF'\n{sinfo}EOF\n")
    (fake / "sinfo").chmod(0o755)
    env_file = tmp / "cluster.env"
    env_file.write_text(f"FLEETFORM_ROLE=controller\nFLEETFORM_CLUSTER=llm-70b_dev\nFLEETFORM_FLEET=train\n"
                        f"FLEETFORM_REGION=us-east-1\nFLEETFORM_DNS_ZONE={zone}\n")
    result = subprocess.run([sys.executable, str(rendered / "bin" / "monitoring-targets")], capture_output=True,
                            text=True, timeout=60, env={"PATH": f"{fake}:{os.environ['PATH']}", "HOME": str(tmp),
                                                        "FLEETFORM_ENV_FILE": str(env_file),
                                                        "FLEETFORM_ROOT": str(tmp / "root")})
    assert result.returncode == 0, result.stderr
    return tmp / "root" / monitoring.TARGETS_FILE.lstrip("/")


def test_rendered_prometheus_yml_passes_promtool(rendered, tmp_path):
    config = rendered / "monitoring" / "prometheus.yml"
    result = promtool(config)
    assert result.returncode == 0, result.stdout + result.stderr
    # negative control: promtool is a judge that refuses a broken scrape configuration
    broken = tmp_path / "prometheus.yml"
    broken.write_text(config.read_text().replace("target_label: __address__", "target_label: 1bad"))
    assert promtool(broken).returncode != 0


def test_targets_are_the_nodes_slurm_has_up_and_promtool_reads_them(rendered, tmp_path):
    targets = run_targets(rendered, tmp_path, SINFO)
    groups = json.loads(targets.read_text())
    assert [g["labels"]["node"] for g in groups] == UP
    assert groups[0] == {"targets": ["train-001.a-dev-train.fleetform.internal"],
                         "labels": {"node": "train-001", "cluster": "train"}}
    # the rendered configuration, reading this file: promtool parses file_sd files it finds
    config = tmp_path / "prometheus.yml"
    config.write_text((rendered / "monitoring" / "prometheus.yml").read_text().replace(
        monitoring.TARGETS_FILE, str(targets)))
    result = promtool(config)
    assert result.returncode == 0 and "does not exist" not in result.stdout + result.stderr, result.stdout
    targets.write_text('[{"targets": "not a list"}]')
    assert promtool(config).returncode != 0  # negative control: a bad file_sd file is refused


def test_targets_follow_nodes_powered_down_and_up(rendered, tmp_path):
    run_targets(rendered, tmp_path, SINFO)
    later = run_targets(rendered, tmp_path, "train-001 idle~\ntrain-004 alloc\n", zone="")
    assert json.loads(later.read_text()) == [{"targets": ["train-004"], "labels": {"node": "train-004",
                                                                                   "cluster": "train"}}]


def test_exporter_ports_and_retention_fit_the_controller():
    from fleetform.providers.aws.training import CONTROLLER_ROOT_GIB  # noqa: PLC0415

    assert (monitoring.NODE_EXPORTER_PORT, monitoring.DCGM_EXPORTER_PORT) == (9100, 9400)
    # Prometheus' blocks and its WAL on the controller's root volume next to the OS and Slurm's logs
    assert monitoring.RETENTION_SIZE_GB * 1e9 <= CONTROLLER_ROOT_GIB * 2**30 / 2


def test_dcgm_exporter_is_the_gpu_operators_pinned_tag():
    """Slurm fleets export the metrics Kubernetes fleets do: the same dcgm-exporter release."""
    import yaml

    chart = yaml.safe_load((ROOT / "tests" / "data" / "charts" / "gpu-operator-v26.7.0-dcgm-values.yaml").read_text())
    block = chart["dcgmExporter"]
    assert monitoring.DCGM_EXPORTER_IMAGE == f"{block['repository']}/{block['image']}:{block['version']}"


def setup_role(rendered: Path, tmp: Path, role: str) -> Path:
    """fleetform_monitoring.setup as the bootstrap calls it, its files under FLEETFORM_ROOT (nothing is
    installed or started there)."""
    root = tmp / role
    code = f"import sys; sys.path.insert(0, {str(rendered / 'bin')!r}); import fleetform_monitoring as m; " \
           f"m.setup({role!r}, systemd=False)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={"PATH": os.environ["PATH"], "FLEETFORM_ROOT": str(root), "HOME": str(tmp)})
    assert result.returncode == 0, result.stderr
    return root


def test_compute_node_runs_dcgm_exporter_from_the_pinned_image(rendered, tmp_path):
    root = setup_role(rendered, tmp_path, "compute")
    unit = (root / "etc/systemd/system/fleetform-dcgm-exporter.service").read_text()
    # NVIDIA/dcgm-exporter README: docker run -d --gpus all --cap-add SYS_ADMIN --rm -p 9400:9400 <image>
    start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert start.split()[-1] == monitoring.DCGM_EXPORTER_IMAGE
    assert "--gpus all" in start and "--cap-add SYS_ADMIN" in start and "-p 9400:9400" in start
    assert not (root / "etc/prometheus").exists()  # Prometheus runs on the controller only


def test_controller_runs_prometheus_on_the_rendered_configuration(rendered, tmp_path):
    root = setup_role(rendered, tmp_path, "controller")
    assert (root / "etc/prometheus/prometheus.yml").read_bytes() == \
        (rendered / "monitoring" / "prometheus.yml").read_bytes()
    args = (root / "etc/default/prometheus").read_text()
    assert "--storage.tsdb.retention.time=15d" in args and "--storage.tsdb.retention.size=40GB" in args
    timer = (root / "etc/systemd/system/fleetform-monitoring-targets.timer").read_text()
    service = (root / "etc/systemd/system/fleetform-monitoring-targets.service").read_text()
    assert "OnUnitActiveSec=1min" in timer and str(rendered / "bin" / "monitoring-targets") in service
    assert not (root / "etc/systemd/system/fleetform-dcgm-exporter.service").exists()


@pytest.fixture(scope="module")
def reference_plan(tmp_path_factory):
    from fleetform.pipeline import check
    from fleetform.plan import record
    from fleetform.render import render

    result = check(REFERENCE)
    assert result.model is not None
    return result.model, record(result.model, render(result.model))


INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def test_only_the_fleets_own_group_reaches_the_exporters(reference_plan):
    """The controller scrapes the nodes through the fleet group's rule for its own members (all
    protocols: EFA needs it): the controller's interface and every node interface carry that group,
    and no rule admits an address range to 9100, 9400 or 9090."""
    from fleetform.policies import check as check_policies

    model, resources = reference_plan
    (eni,) = [r for r in resources if r["type"] == "aws:ec2/networkInterface:NetworkInterface"
              and r["name"] == "train-controller"]
    (template,) = [r for r in resources if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"
                   and r["name"] == "train-nodes"]
    (group,) = eni["inputs"]["securityGroups"]
    assert {g for i in template["inputs"]["networkInterfaces"] for g in i["securityGroups"]} == {group}
    self_rules = [r["inputs"] for r in resources if r["type"] == INGRESS
                  and r["inputs"]["securityGroupId"] == group == r["inputs"].get("referencedSecurityGroupId")
                  and r["inputs"]["ipProtocol"] == "-1"]
    assert self_rules
    assert [v for v in check_policies(resources, model) if v[0] == "monitoring-ports-private"] == []


@pytest.mark.parametrize("rule", [
    {"ipProtocol": "tcp", "fromPort": 9100, "toPort": 9100, "cidrIpv4": "10.0.0.0/8"},
    {"ipProtocol": "tcp", "fromPort": 9000, "toPort": 9500, "cidrIpv4": "192.168.1.0/24"},
    {"ipProtocol": "-1", "cidrIpv6": "::/0"},
])
def test_an_address_range_on_an_exporter_port_is_a_violation(reference_plan, rule):
    """Negative controls of monitoring-ports-private."""
    from fleetform.policies import check as check_policies

    model, resources = reference_plan
    leak = {"type": INGRESS, "name": "leak", "parent": "train", "inputs": {"securityGroupId": "sg-x", **rule}}
    assert [v[0] for v in check_policies(resources + [leak], model)
            if v[0] == "monitoring-ports-private"] == ["monitoring-ports-private"]


@pytest.fixture(scope="module")
def machine_rendered(tmp_path_factory):
    import awslocal

    return awslocal.render_fleet(tmp_path_factory.mktemp("machine"), awslocal.blueprint("{min: 1, max: 2}"))


def test_bootstrap_installs_and_starts_the_exporters_on_a_compute_node(machine_rendered, tmp_path):
    """The bootstrap's monitoring step as on a real node (tests/test_bootstrap_machine.py's fake apt-get
    and systemctl): Ubuntu's node exporter package installed, both units enabled and started."""
    from test_bootstrap_machine import Machine

    machine = Machine(machine_rendered, tmp_path)
    done = machine.step("monitoring", "compute")
    assert done.returncode == 0, done.stdout + done.stderr
    calls = machine.calls()
    assert ["apt-get", "install", "-y", "--no-install-recommends", "prometheus-node-exporter", "noninteractive"] in calls
    assert ["systemctl", "enable", "--now", "prometheus-node-exporter", ""] in calls
    assert ["systemctl", "enable", "--now", "fleetform-dcgm-exporter.service", ""] in calls
    assert not [c for c in calls if "prometheus" in c and c[0] == "apt-get"]  # Prometheus: the controller's


def test_a_monitoring_failure_does_not_fail_the_bootstrap(machine_rendered, tmp_path):
    """A compute node whose bootstrap fails powers itself off: a failed exporter install must not."""
    from test_bootstrap_machine import Machine

    machine = Machine(machine_rendered, tmp_path)
    done = machine.step("monitoring", "compute", fail=("apt-get",))
    assert done.returncode == 0 and "monitoring not set up" in done.stderr, done.stdout + done.stderr
    assert not [c for c in machine.calls() if c[0] == "systemctl"]
