"""bin/prolog and bin/epilog's node checks (fleetform_jobcheck.py, issue 20), with bin/health's fakes:
before a job every GPU present and no new fatal Xid, else the node is drained `fleetform-prolog: ...`
and the Prolog exits non-zero (slurm.conf(5) of 22.05, Prolog: the node drains and the job is requeued
held); after a job no GPU process left and no new fatal Xid, else `fleetform-epilog: ...`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_health import DATA, Node, rendered  # noqa: F401  (rendered is a fixture)

APPS = "nvidia-smi---query-compute-apps=pid,process_name,used_memory"
UPDATE = "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/update.log\"\n"


@pytest.fixture
def node(tmp_path, rendered):  # noqa: F811
    """The rendered bin/ copied, its bin/update replaced by a recorder (the prolog's second step)."""
    bin_dir = tmp_path / "bin"
    shutil.copytree(rendered, bin_dir)
    (bin_dir / "update").write_text(UPDATE)
    (bin_dir / "update").chmod(0o755)
    n = Node(tmp_path, bin_dir)
    n.answers[APPS] = ["", 0]
    return n


def run(node: Node, program: str, **config) -> subprocess.CompletedProcess:
    (node.fakes / "answers.json").write_text(json.dumps(node.answers))
    (node.fakes / "calls.log").write_text("")
    data = {**json.loads((node.rendered / "health.json").read_text()), "epilog_settle_s": 0, **config}
    (node.rendered / "health.json").write_text(json.dumps(data))
    env = {"PATH": f"{node.fakes}:/usr/bin:/bin", "FLEETFORM_ROOT": str(node.root), "SLURMD_NODENAME": "train-001",
           "SLURM_JOB_ID": "42"}
    return subprocess.run([sys.executable, str(node.rendered / program)], capture_output=True, text=True, env=env,
                          timeout=60)


def drains(node: Node) -> list[str]:
    return [c[3] for c in node.updates() if c[:3] == ["update", "nodename=train-001", "state=drain"]]


def updated(node: Node) -> bool:
    return (node.rendered / "update.log").exists()


def test_prolog_on_a_healthy_node_goes_on_to_pin_the_job(node):
    done = run(node, "prolog")
    assert done.returncode == 0, done.stderr
    assert drains(node) == []
    assert (node.rendered / "update.log").read_text() == "--job 42\n"
    # the light checks only: no fi_info, nvlink, findmnt or dcgmi before a job
    assert node.calls("fi_info") == [] and node.calls("findmnt") == [] and node.calls("dcgmi") == []


def test_prolog_with_7_of_8_gpus_drains_with_its_reason_and_fails_the_job_start(node):
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    done = run(node, "prolog")
    assert done.returncode == 1
    assert drains(node) == ["reason=fleetform-prolog: 7 of 8 GPUs"]
    assert not updated(node)


def test_prolog_drains_on_a_new_fatal_xid(node):
    node.answer("journalctl", "journal-xid-79.txt")
    done = run(node, "prolog")
    assert done.returncode == 1
    (reason,) = drains(node)
    assert reason.startswith("reason=fleetform-prolog: xid 79 ")


def test_prolog_gives_nvidia_smi_the_tight_budget(node):
    node.answers["nvidia-smi"] = [(DATA / "nvidia-smi-8-of-8.csv").read_text(), 0, 30]
    done = run(node, "prolog")
    assert done.returncode == 1
    assert drains(node) == ["reason=fleetform-prolog: nvidia-smi hung 4s"]


def test_prolog_off_checks_nothing(node):
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    done = run(node, "prolog", prolog=False)
    assert done.returncode == 0 and drains(node) == [] and updated(node)
    assert node.calls("nvidia-smi") == []


def test_epilog_drains_a_node_with_a_process_left_on_a_gpu(node):
    node.answer(APPS, "nvidia-smi-compute-apps-1-left.csv")
    done = run(node, "epilog")
    assert done.returncode == 0, done.stderr
    assert drains(node) == ["reason=fleetform-epilog: 1 GPU process(es) left: 12345 python3"]


def test_epilog_waits_for_the_jobs_processes_before_counting_them(node):
    node.answer(APPS, "nvidia-smi-compute-apps-1-left.csv")
    run(node, "epilog", epilog_settle_s=2)
    assert len(node.calls("nvidia-smi")) >= 2


def test_epilog_on_a_clean_node_drains_nothing_and_reads_new_xids(node):
    done = run(node, "epilog")
    assert done.returncode == 0 and drains(node) == []
    node.answer("journalctl", "journal-xid-79.txt")
    run(node, "epilog")
    (reason,) = drains(node)
    assert reason.startswith("reason=fleetform-epilog: xid 79 ")


def test_every_job_check_reason_fits_sinfos_60_columns(node):
    node.answer(APPS, text="".join(f"{1000 + i}, /opt/some/very/long/path/to/a/training/binary_name_{i}, 1 MiB\n"
                                   for i in range(20)))
    run(node, "epilog")
    (reason,) = drains(node)
    assert len(reason) - len("reason=") <= 60


def _onprem(tmp_path, health: str) -> dict[str, bytes]:
    from conftest import ROOT
    from fleetform.pipeline import check
    from fleetform.render import render
    from test_health import _findings

    marker = "    scheduler:\n"
    path = tmp_path / "onprem.yaml"
    path.write_text((ROOT / "blueprints/onprem-ib.yaml").read_text().replace(marker, health + marker, 1))
    assert "health-scope" not in _findings(path)
    return render(check(path).model)


def test_an_on_prem_fleet_names_the_checking_prolog_and_epilog_beside_its_health_check(tmp_path):
    files = _onprem(tmp_path, "")
    conf = files["train/slurm/slurm.conf"].decode()
    assert "\nProlog=/opt/fleetform/slurm/bin/prolog\nEpilog=/opt/fleetform/slurm/bin/epilog\n" in conf
    assert "HealthCheckProgram=/opt/fleetform/slurm/bin/health\n" in conf and "TaskProlog" not in conf
    assert {"train/slurm/bin/prolog", "train/slurm/bin/epilog", "train/slurm/bin/fleetform_jobcheck.py"} <= set(files)
    assert "train/slurm/bin/update" not in files and "train/slurm/bin/fleet.json" not in files
    # `prolog: false` leaves slurm.conf without them, as it leaves an AWS fleet's Prolog without the check
    off = _onprem(tmp_path, "    health: {prolog: false}\n")
    assert "Prolog=" not in off["train/slurm/slurm.conf"].decode().replace("TaskProlog=", "")
    assert "Epilog=" not in off["train/slurm/slurm.conf"].decode()
    assert "train/slurm/bin/prolog" not in off and "train/slurm/bin/health" in off


@pytest.fixture
def onprem_node(tmp_path):
    """An on-prem node's bin/ as the site installs it: no bin/update, no bin/fleet.json."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, data in _onprem(tmp_path, "").items():
        if name.startswith("train/slurm/bin/"):
            (bin_dir / Path(name).name).write_bytes(data)
    n = Node(tmp_path, bin_dir)
    n.answers[APPS] = ["", 0]
    return n


def test_an_on_prem_prolog_checks_the_node_and_pins_nothing(onprem_node):
    done = run(onprem_node, "prolog")
    assert done.returncode == 0 and drains(onprem_node) == [], done.stderr
    onprem_node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    done = run(onprem_node, "prolog")
    assert done.returncode == 1 and drains(onprem_node) == ["reason=fleetform-prolog: 7 of 8 GPUs"]


def test_an_on_prem_epilog_checks_the_node_without_an_aws_fleets_files(onprem_node):
    done = run(onprem_node, "epilog")
    assert done.returncode == 0 and drains(onprem_node) == [], done.stderr
    onprem_node.answer(APPS, "nvidia-smi-compute-apps-1-left.csv")
    run(onprem_node, "epilog")
    (reason,) = drains(onprem_node)
    assert reason.startswith("reason=fleetform-epilog: "), reason
