"""The acceptance job of Slurm training fleets (issue 20): the model and its floor derived from published
nccl-tests runs (fleetform/acceptance.py, providers/aws/nccl-allreduce.json), the rules
(fleetform/rules/acceptance.py), and the rendered bin/acceptance run against recorded outputs
(tests/data/acceptance/README.md says where each comes from).

srun, dcgmi and all_reduce_perf are fakes first on PATH: srun runs its command once per node for a
per-node step (SLURMD_NODENAME set) and once for the all-reduce, dcgmi prints the recorded JSON chosen
per node, all_reduce_perf a recorded log; each logs its arguments.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT
from fleetform.acceptance import FLOOR_FRACTION, published_runs
from fleetform.pipeline import check
from fleetform.render import render

DATA = ROOT / "tests/data/acceptance"
REFERENCE = ROOT / "blueprints/reference.yaml"

FAKE_SRUN = r'''#!/usr/bin/env python3
import json, os, subprocess, sys
from pathlib import Path
fakes = Path(__file__).resolve().parent
args = sys.argv[1:]
with open(fakes / "calls.log", "a") as log:
    log.write(json.dumps(["srun"] + args) + "\n")
options = [a for a in args if a.startswith("--")]
command = args[len(options):]
nodes = int(next(a.split("=", 1)[1] for a in options if a.startswith("--nodes=")))
if "--ntasks-per-node=1" in options and os.environ.get("FAKE_SRUN_SAYS"):
    print(os.environ["FAKE_SRUN_SAYS"], file=sys.stderr)
    sys.exit(1)
nodelist = next((a.split("=", 1)[1] for a in options if a.startswith("--nodelist=")), None)
if nodelist:  # a pair's step: the tools answer per node list (all_reduce_perf@train-001,train-002)
    sys.exit(subprocess.run(command, env=dict(os.environ, SLURMD_NODENAME=nodelist)).returncode)
if "--ntasks-per-node=1" in options:
    reporting = int(os.environ.get("FAKE_NODES_REPORTING", nodes))
    rc = 0
    for i in range(1, reporting + 1):
        env = dict(os.environ, SLURMD_NODENAME=f"train-{i:03d}")
        rc = max(rc, subprocess.run(command, env=env).returncode)
    sys.exit(rc)
sys.exit(subprocess.run(command).returncode)
'''

FAKE_SCONTROL = r'''#!/usr/bin/env python3
import os, sys
# scontrol show hostnames LIST: one node name a line; the fake allocation is train-001..N
assert sys.argv[1:3] == ["show", "hostnames"], sys.argv
print("\n".join(f"train-{i:03d}" for i in range(1, int(os.environ["SLURM_JOB_NUM_NODES"]) + 1)))
'''

FAKE_TOOL = r'''#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
fakes = Path(__file__).resolve().parent
name = Path(sys.argv[0]).name
with open(fakes / "calls.log", "a") as log:
    log.write(json.dumps([name] + sys.argv[1:]) + "\n")
with open(fakes / "env.log", "a") as log:  # what NCCL would read (the all-reduce's NCCL_DEBUG)
    log.write(json.dumps([name, os.environ.get("NCCL_DEBUG"), os.environ.get("NCCL_DEBUG_SUBSYS")]) + "\n")
answers = json.loads((fakes / "answers.json").read_text())
key = name + "@" + os.environ.get("SLURMD_NODENAME", "")
text, rc = answers.get(key, answers.get(name, ["", 0]))
sys.stdout.write(text)
sys.exit(rc)
'''


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The reference blueprint's train fleet (6 x p5.48xlarge) rendered: its bin/ folder."""
    out = tmp_path_factory.mktemp("rendered")
    for name, data in render(check(REFERENCE).model).items():
        if name.startswith("train/slurm/bin/acceptance"):
            (out / Path(name).name).write_bytes(data)
    (out / "acceptance").chmod(0o755)
    return out


class Job:
    def __init__(self, tmp: Path, rendered: Path):
        self.rendered = rendered
        self.fakes = tmp / "fakes"
        self.fakes.mkdir()
        (self.fakes / "srun").write_text(FAKE_SRUN)
        (self.fakes / "tool").write_text(FAKE_TOOL)
        (self.fakes / "scontrol").write_text(FAKE_SCONTROL)
        for name in ("srun", "tool", "scontrol"):
            (self.fakes / name).chmod(0o755)
        for name in ("dcgmi", "all_reduce_perf"):
            (self.fakes / name).symlink_to("tool")
        self.answers = {"dcgmi": [(DATA / "dcgmi_diag_r2_pass.json").read_text(), 0],
                        "all_reduce_perf": [(DATA / "all_reduce_p5_2n_pass.log").read_text(), 0]}
        self.env = {"SLURM_JOB_NUM_NODES": "2"}

    def run(self) -> subprocess.CompletedProcess:
        (self.fakes / "answers.json").write_text(json.dumps(self.answers))
        env = dict(os.environ, PATH=f"{self.fakes}:{os.environ['PATH']}", **self.env)
        env.pop("ALL_REDUCE_PERF", None)
        return subprocess.run([sys.executable, str(self.rendered / "acceptance"), str(self.rendered / "acceptance.json")],
                              capture_output=True, text=True, env=env, timeout=60)

    def envs(self) -> list[list[str]]:
        return [json.loads(line) for line in (self.fakes / "env.log").read_text().splitlines()]

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in (self.fakes / "calls.log").read_text().splitlines()]


@pytest.fixture
def job(tmp_path, rendered) -> Job:
    return Job(tmp_path, rendered)


# ---------------------------------------------------------------- the floor and the model


def test_the_p5_floor_is_the_stated_fraction_of_the_published_mean():
    """The reference's p5.48xlarge fleet: 0.8 x the mean of the 6 busbw figures of the published 2-node run
    at 512 MiB, 1 GiB and 2 GiB (awsome-distributed-training nccl-tests README): 425.17 -> 340.1 GB/s."""
    run = published_runs()["p5.48xlarge"]
    assert run.url.startswith("https://github.com/aws-samples/awsome-distributed-training/blob/") and run.date
    assert run.mean_busbw_gbps == round((393.34 + 394.00 + 436.95 + 440.96 + 443.72 + 442.06) / 6, 2)
    a = check(REFERENCE).model.fleets[0].acceptance
    assert a.floor_gbps == round(run.mean_busbw_gbps * FLOOR_FRACTION, 1) == 340.1
    assert (a.nodes, a.gpus_per_node, a.tasks, a.all_reduce) == (6, 8, 16, "pairs")
    assert a.pair_floor_gbps == 340.1 and "2-node" in a.floor_source
    assert a.all_reduce_args == ("-b", "536870912", "-e", "2147483648", "-f", "2", "-g", "1")
    assert a.dcgm_level == 2 and run.url in a.floor_source


def _blueprint(tmp_path: Path, fleet_extra: str, instance: str = "p5.48xlarge", nodes: str = "2") -> Path:
    text = (ROOT / "tests/corpus/441-acceptance-floor.yaml").read_text()
    text = text.replace("instance_type: p4d.24xlarge", f"instance_type: {instance}").replace("nodes: 4", f"nodes: {nodes}")
    path = tmp_path / "bp.yaml"
    path.write_text(text + fleet_extra)
    return path


def _findings(path: Path) -> dict[str, str]:
    return {f.rule: f.message for f in check(str(path)).findings}


def test_no_published_run_means_no_floor_and_a_warning(tmp_path):
    result = check(str(_blueprint(tmp_path, "", instance="p4d.24xlarge")))
    assert result.model.fleets[0].acceptance.floor_gbps is None
    assert "acceptance-floor" in {f.rule for f in result.findings}
    assert json.loads(render(result.model)["train/slurm/bin/acceptance.json"])["floor_gbps"] is None


def test_a_floor_in_the_blueprint_wins_and_silences_the_warning(tmp_path):
    result = check(str(_blueprint(tmp_path, "    acceptance:\n      nccl_min_busbw_gbps: 60\n", instance="p4d.24xlarge")))
    a = result.model.fleets[0].acceptance
    assert a.floor_gbps == 60.0 and "nccl_min_busbw_gbps" in a.floor_source
    assert "acceptance-floor" not in {f.rule for f in result.findings}


def test_one_node_runs_a_single_node_all_reduce_and_refuses_a_multi_node_one(tmp_path):
    a = check(str(_blueprint(tmp_path, "", nodes="1"))).model.fleets[0].acceptance
    assert (a.all_reduce, a.tasks, a.floor_gbps) == ("single-node", 8, None)
    found = _findings(_blueprint(tmp_path, "    acceptance:\n      all_reduce: multi-node\n", nodes="1"))
    assert "acceptance-multi-node" in found and "NVLink" in found["acceptance-multi-node"]
    assert "acceptance-multi-node" not in _findings(_blueprint(tmp_path, "    acceptance:\n      all_reduce: multi-node\n"))


def test_dcgm_level_follows_the_thorough_health_suite(tmp_path):
    assert check(str(_blueprint(tmp_path, "    health:\n      suite: thorough\n      interval_s: 600\n"))
                 ).model.fleets[0].acceptance.dcgm_level == 3
    assert check(str(_blueprint(tmp_path, "    acceptance:\n      dcgm_level: 1\n"))).model.fleets[0].acceptance.dcgm_level == 1


def test_the_batch_script_asks_for_every_node_exclusively_and_is_shellcheck_clean(tmp_path, rendered):
    script = (rendered / "acceptance.sbatch").read_text()
    for line in ("#SBATCH --nodes=6", "#SBATCH --ntasks-per-node=8", "#SBATCH --exclusive", "#SBATCH --time=50"):
        assert line + "\n" in script
    assert "exec python3 /opt/fleetform/rendered/train/slurm/bin/acceptance /opt/fleetform/rendered/train/slurm/bin/acceptance.json" in script
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is missing in CI")
        pytest.skip("shellcheck is not installed")
    done = subprocess.run(["shellcheck", "-s", "sh", str(rendered / "acceptance.sbatch")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# ---------------------------------------------------------------- bin/acceptance on recorded outputs


def test_healthy_nodes_pass(job):
    done = job.run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS dcgm train-001: dcgmi diag -r 2 passed" in done.stdout
    assert "PASS dcgm train-002: dcgmi diag -r 2 passed" in done.stdout
    assert "PASS all-reduce 2x8: avg bus bandwidth 425.172 GB/s >= floor 340.1 GB/s" in done.stdout
    assert "fleetform acceptance: PASSED (3 of 3 checks passed)" in done.stdout
    calls = job.calls()
    assert ["dcgmi", "diag", "-r", "2", "-j"] in calls
    assert ["srun", "--nodes=2", "--ntasks-per-node=8", "--mpi=pmix", "all_reduce_perf",
            "-b", "536870912", "-e", "2147483648", "-f", "2", "-g", "1"] in calls
    assert ["all_reduce_perf", "-b", "536870912", "-e", "2147483648", "-f", "2", "-g", "1"] in calls


def test_a_slow_network_fails_with_the_floor(job):
    job.answers["all_reduce_perf"] = [(DATA / "all_reduce_p5_2n_slow.log").read_text(), 0]
    done = job.run()
    assert done.returncode == 1
    assert "FAIL all-reduce 2x8: avg bus bandwidth 96.9183 GB/s is below the floor of 340.1 GB/s" in done.stdout
    assert "fleetform acceptance: FAILED (2 of 3 checks passed)" in done.stdout


def test_wrong_results_fail_however_fast(job):
    job.answers["all_reduce_perf"] = [(DATA / "all_reduce_p5_2n_wrong.log").read_text(), 1]
    done = job.run()
    assert done.returncode == 1 and "FAIL all-reduce 2x8: all_reduce_perf found 1 wrong results" in done.stdout


def test_a_crashed_all_reduce_fails(job):
    job.answers["all_reduce_perf"] = [(DATA / "all_reduce_crash.log").read_text(), 1]
    done = job.run()
    assert done.returncode == 1 and "printed no '# Avg bus bandwidth' line" in done.stdout


def test_a_failed_dcgm_test_names_the_node_the_gpu_and_the_test(job):
    job.answers["dcgmi@train-002"] = [(DATA / "dcgmi_diag_r2_fail.json").read_text(), 226]
    done = job.run()
    assert done.returncode == 1
    assert "PASS dcgm train-001" in done.stdout
    assert "FAIL dcgm train-002: memory gpu3: GPU 3 had uncorrectable memory errors" in done.stdout


def test_a_node_that_never_reports_fails(job):
    job.env["FAKE_NODES_REPORTING"] = "1"
    done = job.run()
    assert done.returncode == 1 and "FAIL dcgm: 1 of 2 nodes reported" in done.stdout


def test_missing_dcgmi_fails(job, tmp_path):
    (job.fakes / "dcgmi").unlink()
    done = job.run()
    assert done.returncode == 1 and "FAIL dcgm train-001: dcgmi missing" in done.stdout


# ---------------------------------------------------------------- the parser on published logs


def _program():
    import importlib.machinery
    import importlib.util
    path = ROOT / "templates/slurm/bin/acceptance"
    loader = importlib.machinery.SourceFileLoader("fleetform_acceptance_program", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_published_logs_with_rank_prefixes_parse():
    program = _program()
    mpijob = program.parse_nccl((DATA / "all_reduce_p5_2n_mpijob_readme.log").read_text())
    assert mpijob["avg_busbw_gbps"] == 52.9753 and mpijob["out_of_bounds"] == 0 and mpijob["wrong"] == 0
    assert mpijob["sizes"][-1] == 2147483648
    srun = program.parse_nccl((DATA / "all_reduce_p4de_2n_readme.log").read_text())
    assert len(srun["sizes"]) == 29 and srun["sizes"][0] == 8 and srun["avg_busbw_gbps"] is None
    assert program.nccl_verdict(srun, 60.0)[0] is False


def test_dcgm_parser_reads_only_failed_results():
    program = _program()
    assert program.parse_dcgm((DATA / "dcgmi_diag_r2_pass.json").read_text()) == []
    assert program.parse_dcgm((DATA / "dcgmi_diag_r2_fail.json").read_text()) == [
        "memory gpu3: GPU 3 had uncorrectable memory errors and row remapping failed. Run a field diagnostic on the GPU."]


def test_dcgm_parser_reads_dcgm_3_reports_and_refuses_other_documents():
    """DCGM 3.x (the key "DCGM GPU Diagnostic", results by gpu_id: NVIDIA/DCGM v3.3.9 dcgmi/Diag.cpp) is read,
    not taken for an empty pass; a document that is no dcgmi report, or one with a runtime_error, fails."""
    program = _program()
    v4 = json.loads((DATA / "dcgmi_diag_r2_fail.json").read_text())
    v3 = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "Memory", "results": [
        {"gpu_id": "3", "status": "Fail", "warnings": [{"warning": "GPU 3 had uncorrectable memory errors"}]},
        {"gpu_id": "0", "status": "Pass"}]}]}]}}
    assert program.parse_dcgm(json.dumps(v3)) == ["Memory gpu3: GPU 3 had uncorrectable memory errors"]
    with pytest.raises(ValueError):
        program.parse_dcgm(json.dumps({"Diagnostic": v4["DCGM Diagnostic"]}))
    no_engine = {"DCGM Diagnostic": {"version": "4.6.0", "runtime_error": "Unable to connect to host engine"}}
    assert program.parse_dcgm(json.dumps(no_engine)) == ["runtime error: Unable to connect to host engine"]


def test_on_prem_fleets_get_no_floor_and_no_warning():
    """onprem-ib (DGX H100 over InfiniBand): no instance type to look a published run up by; the site's floor."""
    result = check(ROOT / "blueprints/onprem-ib.yaml")
    a = result.model.fleets[0].acceptance
    assert a.floor_gbps is None and a.all_reduce == "multi-node" and a.program == "/opt/fleetform/slurm/bin/acceptance"
    assert "acceptance-floor" not in {f.rule for f in result.findings}


def test_srun_s_own_error_in_the_dcgm_step_is_shown(job):
    """A DCGM step srun could not start: its message is in the job's output, not only '0 of 2 nodes reported'."""
    job.env["FAKE_SRUN_SAYS"] = "srun: error: Unable to create step for job 7: Requested node configuration is not available"
    done = job.run()
    assert done.returncode == 1
    assert "srun: error: Unable to create step for job 7" in done.stdout
    assert "FAIL dcgm: 0 of 2 nodes reported (srun rc=1)" in done.stdout


def test_the_job_asks_for_its_gpus_by_name(rendered):
    """srun(1), --gres (Slurm 22.05 to 25.x): "By default, a job step is allocated all of the generic resources
    that have been requested by the job, except those implicitly requested when a job is exclusive." With only
    --exclusive the all_reduce_perf step's tasks get no GPU (ConstrainDevices=yes hides /dev/nvidia*), so the
    batch script names them; the steps then inherit them."""
    sbatch = (rendered / "acceptance.sbatch").read_text()
    assert "#SBATCH --exclusive\n" in sbatch and "#SBATCH --gres=gpu:8\n" in sbatch


def test_tasks_that_each_ran_alone_fail(job):
    """all_reduce_perf built without MPI (or an MPI srun's PMIx did not reach) runs once per task, each a
    1-GPU "all-reduce", and each prints its own footer: only rank 0 of one MPI job prints (nccl-tests
    src/common.h: PRINT if (is_main_thread), set for rank 0). A fleet without a floor passed such a run."""
    single = (DATA / "all_reduce_p5_2n_pass.log").read_text().replace("425.172", "0")
    job.answers["all_reduce_perf"] = [single * 3, 0]
    done = job.run()
    assert done.returncode == 1
    assert "FAIL all-reduce 2x8: 3 separate all_reduce_perf runs, not one across the tasks" in done.stdout


# ---------------------------------------------------------------- pairs (issue 20): the 2-node floor on more nodes


def _pair_calls(job) -> list[str]:
    return [a.split("=", 1)[1] for c in job.calls() if c[0] == "srun" for a in c if a.startswith("--nodelist=")]


def test_pairs_is_the_default_beyond_two_nodes_with_a_2_node_published_run(tmp_path):
    """The published floors are of 2-node runs (providers/aws/nccl-allreduce.json 'nodes'); on more nodes the
    fleet is tested as 2-node pairs. A run whose node count is unknown (p5en) gives no floor and the warning."""
    a = check(str(_blueprint(tmp_path, "", nodes="4"))).model.fleets[0].acceptance
    assert (a.all_reduce, a.floor_gbps, a.pair_floor_gbps) == ("pairs", 340.1, 340.1)
    assert check(str(_blueprint(tmp_path, ""))).model.fleets[0].acceptance.all_reduce == "multi-node"
    assert published_runs()["p5en.48xlarge"].nodes is None
    result = check(str(_blueprint(tmp_path, "", instance="p5en.48xlarge", nodes="4")))
    a = result.model.fleets[0].acceptance
    assert (a.all_reduce, a.floor_gbps, a.pair_floor_gbps) == ("multi-node", None, None)
    found = {f.rule: f.message for f in result.findings}
    assert "does not state its nodes" in found["acceptance-floor"]


def test_all_pairs_pass_and_run_as_disjoint_2_node_steps(job):
    job.env["SLURM_JOB_NUM_NODES"] = "6"
    done = job.run()
    assert done.returncode == 0, done.stdout + done.stderr
    for pair in ("train-001,train-002", "train-003,train-004", "train-005,train-006"):
        assert f"PASS all-reduce pair {pair}: avg bus bandwidth 425.172 GB/s >= floor 340.1 GB/s" in done.stdout
    # the steps start at once: their order in the log is the order they reached srun
    assert sorted(_pair_calls(job)) == ["train-001,train-002", "train-003,train-004", "train-005,train-006"]
    assert ["srun", "--nodes=2", "--nodelist=train-003,train-004", "--ntasks-per-node=8", "--mpi=pmix",
            "all_reduce_perf", "-b", "536870912", "-e", "2147483648", "-f", "2", "-g", "1"] in job.calls()
    assert not [c for c in job.calls() if c[0] == "srun" and "--nodes=6" in c and "all_reduce_perf" in c]
    assert "fleetform acceptance: PASSED (9 of 9 checks passed)" in done.stdout


def test_one_slow_pair_is_named(job):
    job.env["SLURM_JOB_NUM_NODES"] = "6"
    job.answers["all_reduce_perf@train-003,train-004"] = [(DATA / "all_reduce_p5_2n_slow.log").read_text(), 0]
    done = job.run()
    assert done.returncode == 1
    assert "FAIL all-reduce pair train-003,train-004: avg bus bandwidth 96.9183 GB/s is below the floor of 340.1 GB/s" \
        in done.stdout
    assert "PASS all-reduce pair train-001,train-002" in done.stdout and "PASS all-reduce pair train-005,train-006" in done.stdout
    assert "fleetform acceptance: FAILED (8 of 9 checks passed)" in done.stdout


def test_an_odd_node_out_pairs_with_a_tested_node_after_the_others(job):
    job.env["SLURM_JOB_NUM_NODES"] = "5"
    job.answers["all_reduce_perf@train-005,train-001"] = [(DATA / "all_reduce_p5_2n_slow.log").read_text(), 0]
    done = job.run()
    assert done.returncode == 1
    calls = _pair_calls(job)
    assert sorted(calls[:2]) == ["train-001,train-002", "train-003,train-004"] and calls[2] == "train-005,train-001"
    assert "FAIL all-reduce pair train-005,train-001: avg bus bandwidth 96.9183 GB/s" in done.stdout
    program = _program()
    assert program.pairs_of(["a", "b", "c"]) == ([["a", "b"]], ["c", "a"])
    assert program.pairs_of(["a", "b", "c", "d"]) == ([["a", "b"], ["c", "d"]], None)


def test_multi_node_beyond_two_nodes_runs_the_pairs_then_the_fleet_as_information(tmp_path):
    result = check(str(_blueprint(tmp_path, "    acceptance:\n      all_reduce: multi-node\n", nodes="4")))
    a = result.model.fleets[0].acceptance
    assert (a.all_reduce, a.floor_gbps, a.pair_floor_gbps) == ("multi-node", None, 340.1)
    assert "acceptance-floor" not in {f.rule for f in result.findings}
    out = tmp_path / "bin"
    out.mkdir()
    for name, data in render(result.model).items():
        if name.startswith("train/slurm/bin/acceptance"):
            (out / Path(name).name).write_bytes(data)
    (out / "acceptance").chmod(0o755)
    job = Job(tmp_path, out)
    job.env["SLURM_JOB_NUM_NODES"] = "4"
    job.answers["all_reduce_perf"] = [(DATA / "all_reduce_p5_2n_slow.log").read_text(), 0]
    job.answers["all_reduce_perf@train-001,train-002"] = [(DATA / "all_reduce_p5_2n_pass.log").read_text(), 0]
    job.answers["all_reduce_perf@train-003,train-004"] = [(DATA / "all_reduce_p5_2n_pass.log").read_text(), 0]
    done = job.run()
    assert done.returncode == 0, done.stdout
    assert "PASS all-reduce 4x8: avg bus bandwidth 96.9183 GB/s (no floor known: not judged)" in done.stdout
    assert "PASS all-reduce pair train-003,train-004" in done.stdout


# ---------------------------------------------------------------- the EFA environment and the net plugin (issue 20)


def _render_bin(tmp_path: Path, blueprint: Path) -> Path:
    out = tmp_path / "bin"
    out.mkdir()
    for name, data in render(check(str(blueprint)).model).items():
        if name.startswith("train/slurm/bin/acceptance"):
            (out / Path(name).name).write_bytes(data)
    (out / "acceptance").chmod(0o755)
    return out


def _without_network_lines(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if "NCCL INFO Using network" not in line)


def test_the_efa_all_reduce_runs_with_nccl_debug_info_over_nccl_env_s_level(job):
    """nccl.env (sourced by the batch script) sets NCCL_DEBUG=WARN; bin/task-prolog exports a variable only where
    the task has none, so the step's own NCCL_DEBUG=INFO (subsystems INIT,NET) is what NCCL reads."""
    job.env["NCCL_DEBUG"] = "WARN"
    done = job.run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert ["all_reduce_perf", "INFO", "INIT,NET"] in job.envs()
    assert ["dcgmi", "WARN", None] in job.envs()  # the DCGM step keeps the job's environment
    assert "PASS all-reduce 2x8: avg bus bandwidth 425.172 GB/s >= floor 340.1 GB/s" in done.stdout


def test_an_efa_fleet_s_all_reduce_over_sockets_fails_even_without_a_floor(job, tmp_path):
    """NCCL falls back to its Socket transport when aws-ofi-nccl or libfabric is not found: correct results,
    slower. On p4d.24xlarge (no published run, no floor) such a run passed; it fails now with the reason."""
    job.answers["all_reduce_perf"] = [(DATA / "all_reduce_p5_2n_socket.log").read_text(), 0]
    done = job.run()
    assert done.returncode == 1
    assert ("FAIL all-reduce 2x8: NCCL used network Socket, not EFA's aws-ofi-nccl plugin (Libfabric or AWS "
            "Libfabric or OFI)") in done.stdout
    (tmp_path / "p4d").mkdir()
    p4d = Job(tmp_path / "p4d", _render_bin(tmp_path, _blueprint(tmp_path, "", instance="p4d.24xlarge")))
    p4d.answers["all_reduce_perf"] = [(DATA / "all_reduce_p5_2n_socket.log").read_text(), 0]
    done = p4d.run()
    assert done.returncode == 1 and "FAIL all-reduce 2x8: NCCL used network Socket" in done.stdout


def test_an_efa_fleet_s_all_reduce_without_the_network_line_fails(job):
    job.env["SLURM_JOB_NUM_NODES"] = "6"
    job.answers["all_reduce_perf@train-003,train-004"] = [
        _without_network_lines((DATA / "all_reduce_p5_2n_pass.log").read_text()), 0]
    done = job.run()
    assert done.returncode == 1
    assert "FAIL all-reduce pair train-003,train-004: NCCL printed no 'Using network' line" in done.stdout
    assert "PASS all-reduce pair train-001,train-002" in done.stdout


def test_the_older_plugin_name_passes_and_other_networks_do_not():
    """aws-ofi-nccl 1.11.0 and before named itself "AWS Libfabric", later "Libfabric" ("OFI" with NCCL_NET=OFI):
    src/nccl_ofi_interface_nvidia.cpp nvidia_plugin_name_fixup. The prefix is NCCL's (src/debug.cc)."""
    program = _program()
    log = (DATA / "all_reduce_p5_2n_pass.log").read_text()
    wanted = ["Libfabric", "AWS Libfabric", "OFI"]
    for name, ok in (("AWS Libfabric", True), ("OFI", True), ("IB", False), ("Socket", False)):
        result = program.parse_nccl(log.replace("Using network Libfabric", f"Using network {name}"))
        assert result["networks"] == [name]
        assert program.nccl_verdict(result, 340.1, wanted)[0] is ok, name
    assert program.nccl_verdict(program.parse_nccl(_without_network_lines(log)), 340.1, [])[0] is True


def test_a_tcp_fleet_needs_no_net_plugin_line_and_gets_no_efa_environment(tmp_path):
    bp = _blueprint(tmp_path, "    interconnect:\n      fabric: tcp\n", instance="p4d.24xlarge")
    a = check(str(bp)).model.fleets[0].acceptance
    assert (a.efa, a.fi_provider, a.library_path, a.networks, a.net_debug_env) == (False, None, (), (), ())
    out = _render_bin(tmp_path, bp)
    script = (out / "acceptance.sbatch").read_text()
    assert "FI_PROVIDER" not in script and "LD_LIBRARY_PATH" not in script and "/etc/fleetform/nccl.env" in script
    job = Job(tmp_path, out)
    job.env["NCCL_DEBUG"] = "WARN"
    job.answers["all_reduce_perf"] = [_without_network_lines((DATA / "all_reduce_p5_2n_pass.log").read_text()), 0]
    done = job.run()
    assert done.returncode == 0, done.stdout
    assert "PASS all-reduce 2x8: avg bus bandwidth 425.172 GB/s (no floor known: not judged)" in done.stdout
    assert ["all_reduce_perf", "WARN", None] in job.envs()


def test_the_batch_script_sources_nccl_env_and_sets_the_efa_environment(tmp_path, rendered):
    """The rendered acceptance.sbatch run by sh with the node's paths moved under tmp_path and a python3 that
    prints its environment: nccl.env's variables are exported, FI_PROVIDER=efa, and LD_LIBRARY_PATH starts with
    the EFA directories that exist, in the order of the DLAMI's nccl-tests recipe."""
    script = (rendered / "acceptance.sbatch").read_text()
    node = tmp_path / "node"
    for d in ("opt/amazon/efa/lib", "opt/amazon/ofi-nccl/lib", "etc/fleetform", "run/fleetform/jobs/7"):
        (node / d).mkdir(parents=True)  # no /opt/amazon/openmpi/lib on this node
    (node / "etc/fleetform/nccl.env").write_text("# the node's\nNCCL_DEBUG=WARN\n")
    for path in ("/opt/amazon/", "/etc/fleetform/", "/run/fleetform/"):
        script = script.replace(" " + path, f" {node}{path}").replace("=" + path, f"={node}{path}")
    (tmp_path / "acceptance.sbatch").write_text(script)
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\nenv\n")
    (fake / "python3").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64"}
    done = subprocess.run(["sh", str(tmp_path / "acceptance.sbatch")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    got = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert got["NCCL_DEBUG"] == "WARN" and got["FI_PROVIDER"] == "efa"
    assert got["LD_LIBRARY_PATH"] == f"{node}/opt/amazon/efa/lib:{node}/opt/amazon/ofi-nccl/lib:/usr/local/cuda/lib64"
    # the job's pinned nccl.env (bin/prolog) wins over the node's
    (node / "run/fleetform/jobs/7/nccl.env").write_text("NCCL_DEBUG=VERSION\n")
    done = subprocess.run(["sh", str(tmp_path / "acceptance.sbatch")], capture_output=True, text=True, env=env)
    assert "NCCL_DEBUG=VERSION" in done.stdout.splitlines()
