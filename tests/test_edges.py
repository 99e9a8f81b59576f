"""Tests at the edges (issue 24 item 6): the derived Slurm facts as values of their own, not only as
bytes of a golden file a regeneration could accept unread; and the numeric rules and limits on
both sides of their edge (a value exactly at a limit or a step, a minimum equal to its maximum).

Each expected number is worked out here from the instance's catalog facts
(providers/aws/instances.json: p5.48xlarge 2048 GiB, 8 GPUs, 192 vCPUs; g6.12xlarge 192 GiB, 4 GPUs,
48 vCPUs; g6.xlarge 16 GiB, 1 GPU, 4 vCPUs) and fleetform's documented shares (fleetform/slurm.py:
RealMemory 95% of the memory, MemSpecLimit 2% of it but at least 2048 MiB), so a changed share, a
lost floor or a rounding that moved is a failure here, whatever the golden files say.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AWS_TRAINING_HEAD
from fleetform.pipeline import check
from fleetform.render import render


def _model(text: str, tmp_path: Path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return result.model


def _training(instance: str, nodes: str, tmp_path: Path):
    return _model(AWS_TRAINING_HEAD + f"    instance_type: {instance}\n    nodes: {nodes}\n    scheduler: {{type: slurm}}\n",
                  tmp_path)


# --- the derived Slurm facts ------------------------------------------------------------------------

SLURM_FACTS = {
    # instance: (RealMemory, MemSpecLimit, DefMemPerGPU, DefCpuPerGPU, CPUs)
    # 2048 GiB = 2097152 MiB: x 0.95 = 1992294.4; x 0.02 = 41943.04 (above the 2048 floor);
    # (1992294 - 41943) / 8 = 243793.9; 192 / 8 = 24
    "p5.48xlarge": (1992294, 41943, 243793, 24, 192),
    # 192 GiB = 196608 MiB: x 0.95 = 186777.6; x 0.02 = 3932.16; (186777 - 3932) / 4 = 45711.25; 48 / 4 = 12
    "g6.12xlarge": (186777, 3932, 45711, 12, 48),
    # 16 GiB = 16384 MiB: x 0.95 = 15564.8; x 0.02 = 327.68, below the floor: 2048; 15564 - 2048 = 13516
    "g6.xlarge": (15564, 2048, 13516, 4, 4),
}


@pytest.mark.parametrize("instance", list(SLURM_FACTS))
def test_slurm_memory_facts_are_these_values(instance, tmp_path):
    real, spec, per_gpu, cpu_per_gpu, cpus = SLURM_FACTS[instance]
    model = _training(instance, "2", tmp_path)
    slurm = model.fleets[0].slurm
    (line,) = slurm.nodes
    assert (line.real_memory_mib, line.mem_spec_limit_mib, line.cpus) == (real, spec, cpus)
    assert (slurm.def_mem_per_gpu_mib, slurm.def_cpu_per_gpu) == (per_gpu, cpu_per_gpu)
    conf = render(model)["train/slurm/slurm.conf"].decode().splitlines()
    (node,) = [x for x in conf if x.startswith("NodeName=")]
    assert f" CPUs={cpus} " in node and f" RealMemory={real} MemSpecLimit={spec} " in node
    assert f"DefMemPerGPU={per_gpu}" in conf and f"DefCpuPerGPU={cpu_per_gpu}" in conf
    # what jobs may use is what the per-GPU default hands out, never more than the node has
    gpus = int(line.gres.rsplit(":", 1)[1])
    assert per_gpu * gpus <= real - spec < (per_gpu + 1) * gpus


def test_static_nodes_weigh_less_than_cloud_nodes(tmp_path):
    """Slurm allocates the lowest Weight first (slurm.conf(5) Weight): the nodes kept running (the
    fleet's minimum) weigh 1, those powered up on demand 100, so a job lands on a running node."""
    model = _training("p5.48xlarge", "{min: 2, max: 4}", tmp_path)
    lines = [(n.names, n.weight, n.state) for n in model.fleets[0].slurm.nodes]
    assert lines == [("train-[001-002]", 1, "CLOUD"), ("train-[003-004]", 100, "CLOUD")]
    conf = render(model)["train/slurm/slurm.conf"].decode()
    assert "NodeName=train-[001-002] " in conf and " Weight=1 State=CLOUD\n" in conf
    assert " Weight=100 State=CLOUD\n" in conf and "SuspendExcNodes=train-[001-002]" in conf
    # a minimum equal to the maximum: every node is static, none weighs 100
    fixed = _training("p5.48xlarge", "{min: 3, max: 3}", tmp_path)
    assert [(n.names, n.weight) for n in fixed.fleets[0].slurm.nodes] == [("train-[001-003]", 1)]


def test_on_prem_static_nodes_are_not_cloud_nodes(tmp_path):
    from variants import VARIANTS

    model = _model(VARIANTS["onprem-tcp"], tmp_path)
    assert [(n.names, n.weight, n.state) for n in model.fleets[0].slurm.nodes] == [("node[1-3]", 1, None)]


DRIVER = """
import importlib.machinery, importlib.util, json, sys
bin_dir, env = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, bin_dir)
loader = importlib.machinery.SourceFileLoader("bootstrap", bin_dir + "/bootstrap")
bootstrap = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
loader.exec_module(bootstrap)
bootstrap.hosts_entry(env)
"""


def test_the_bootstrap_writes_the_controllers_host_entry_once(tmp_path):
    """Every machine resolves the controller's name: bootstrap's hosts_entry appends `ADDR NAME` to
    /etc/hosts (under FLEETFORM_ROOT here), keeps what was there, and adds nothing the second time."""
    import awslocal

    slurm = awslocal.render_fleet(tmp_path, awslocal.blueprint("2"))
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/hosts").write_text("127.0.0.1 localhost")  # no final newline

    def step():
        done = subprocess.run([sys.executable, "-c", DRIVER, str(slurm / "bin"),
                               json.dumps({"FLEETFORM_CONTROLLER_ADDR": "10.0.0.10"})],
                              capture_output=True, text=True, timeout=60,
                              env={"FLEETFORM_ROOT": str(root), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stdout + done.stderr

    step()
    assert (root / "etc/hosts").read_text() == "127.0.0.1 localhost\n10.0.0.10 train-controller\n"
    step()
    assert (root / "etc/hosts").read_text() == "127.0.0.1 localhost\n10.0.0.10 train-controller\n"
