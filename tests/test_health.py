"""The node health check (issue 20): the model and rules (fleetform/health.py, fleetform/rules/health.py)
and the rendered bin/health run against recorded outputs (tests/data/health/README.md says what each
is): each gives the expected verdict, and the scontrol calls that drain, reboot or resume the node.

The programs bin/health calls are fakes first on PATH: each prints tests/data/health/<file> as the
test says and logs its arguments, `scontrol show node` answers with the node state the test sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT
from fleetform.health import REASON_PREFIX, SLURMD_KILL_S
from fleetform.pipeline import check
from fleetform.render import render

DATA = ROOT / "tests/data/health"
REFERENCE = ROOT / "blueprints/reference.yaml"

FAKE = r'''#!/usr/bin/env python3
import json, os, sys, time
from pathlib import Path
fakes = Path(__file__).resolve().parent
name = Path(sys.argv[0]).name
with open(fakes / "calls.log", "a") as log:
    log.write(json.dumps([name] + sys.argv[1:]) + "\n")
answers = json.loads((fakes / "answers.json").read_text())
key = name + ("-" + sys.argv[1] if len(sys.argv) > 1 and name + "-" + sys.argv[1] in answers else "")
text, rc, *hang = answers.get(key, ["", 0])
if hang:
    time.sleep(hang[0])
sys.stdout.write(text)
sys.exit(rc)
'''
PROGRAMS = ("nvidia-smi", "journalctl", "fi_info", "findmnt", "systemctl", "scontrol", "dcgmi", "hostname")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The reference blueprint's train fleet (p5.48xlarge, /fsx) rendered: its bin/ folder."""
    out = tmp_path_factory.mktemp("rendered")
    files = render(check(REFERENCE).model)
    for name, data in files.items():
        if name.startswith("train/slurm/bin/"):
            target = out / Path(name).name
            target.write_bytes(data)
    (out / "health").chmod(0o755)
    return out


class Node:
    """A node as bin/health sees it: the fakes' answers, its root folder, the calls made."""

    def __init__(self, tmp: Path, rendered: Path):
        self.tmp, self.rendered = tmp, rendered
        self.fakes = tmp / "fakes"
        self.fakes.mkdir()
        (self.fakes / "fake").write_text(FAKE)
        (self.fakes / "fake").chmod(0o755)
        for program in PROGRAMS:
            (self.fakes / program).symlink_to("fake")
        self.root = tmp / "root"
        (self.root / "fsx").mkdir(parents=True)
        (self.root / "proc/sys/kernel/random").mkdir(parents=True)
        self.boot("boot-1")
        self.answers = {
            "nvidia-smi": [(DATA / "nvidia-smi-8-of-8.csv").read_text(), 0],
            "nvidia-smi-nvlink": [(DATA / "nvlink-18-links-each.txt").read_text(), 0],
            "journalctl": [(DATA / "journal-quiet.txt").read_text(), 0],
            "fi_info": [(DATA / "fi_info-p5-32-of-32.txt").read_text(), 0],
            "findmnt": [(DATA / "findmnt-fsx-rw.txt").read_text(), 0],
            "systemctl": ["active\n", 0],
            "dcgmi": ["", 0],
            "scontrol-show": ["NodeName=train-001 Arch=x86_64 State=IDLE ThreadsPerCore=2\n", 0],
        }

    def boot(self, boot_id: str) -> None:
        (self.root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")

    def answer(self, program: str, file: str | None = None, text: str = "", rc: int = 0) -> None:
        self.answers[program] = [(DATA / file).read_text() if file else text, rc]

    def state(self, state: str, reason: str = "") -> None:
        reason = f" Reason={reason} [admin@2026-11-24T01:00:00]" if reason else ""
        self.answers["scontrol-show"] = [f"NodeName=train-001 Arch=x86_64 State={state} ThreadsPerCore=2{reason}\n", 0]

    def run(self, **config) -> subprocess.CompletedProcess:
        (self.fakes / "answers.json").write_text(json.dumps(self.answers))
        (self.fakes / "calls.log").write_text("")
        env = {"PATH": f"{self.fakes}:/usr/bin:/bin", "FLEETFORM_ROOT": str(self.root), "SLURMD_NODENAME": "train-001"}
        if config:
            data = {**json.loads((self.rendered / "health.json").read_text()), **config}
            (self.tmp / "health.json").write_text(json.dumps(data))
            env["FLEETFORM_HEALTH_CONFIG"] = str(self.tmp / "health.json")
        return subprocess.run([sys.executable, str(self.rendered / "health")], capture_output=True, text=True,
                              env=env, timeout=60)

    def calls(self, program: str = "scontrol") -> list[list[str]]:
        lines = (self.fakes / "calls.log").read_text().splitlines()
        return [call[1:] for call in map(json.loads, lines) if call[0] == program]

    def updates(self) -> list[list[str]]:
        return [c for c in self.calls() if c[0] != "show"]


@pytest.fixture
def node(tmp_path, rendered) -> Node:
    return Node(tmp_path, rendered)


def drained_with(node: Node) -> str:
    (update,) = node.updates()
    assert update[:3] == ["update", "nodename=train-001", "state=drain"], update
    assert update[3].startswith("reason=" + REASON_PREFIX), update
    return update[3][len("reason=" + REASON_PREFIX):]


def test_a_healthy_p5_node_passes_every_check_of_the_standard_suite(node):
    done = node.run()
    assert done.returncode == 0, done.stderr
    assert "train-001 healthy" in done.stdout
    assert node.updates() == []
    # every check ran, each with the arguments its parser reads
    assert node.calls("nvidia-smi")[0][0].startswith("--query-gpu=index,pci.bus_id,ecc.errors.uncorrected")
    assert ["nvlink", "-s"] in node.calls("nvidia-smi")
    assert node.calls("fi_info") == [["-p", "efa", "-t", "FI_EP_RDM"]]
    assert node.calls("systemctl") == [["is-active", "nvidia-fabricmanager"]]
    (journal,) = node.calls("journalctl")
    assert f"--cursor-file={node.root}/var/lib/fleetform/health-journal.cursor" in journal and "-k" in journal
    assert node.calls("findmnt")[0][-1] == "/fsx"
    assert list((node.root / "fsx").iterdir()) == []  # the write probe was removed


@pytest.mark.parametrize("file, reason", [
    ("nvidia-smi-7-of-8.csv", "7 of 8 GPUs"),
    ("nvidia-smi-retired-pages-pending.csv", "gpu3 reset pending"),
    ("nvidia-smi-ecc-errors.csv", "gpu5 2 uncorrected ECC"),
])
def test_nvidia_smi_failures_drain_the_node_with_a_reason(node, file, reason):
    node.answer("nvidia-smi", file)
    done = node.run()
    assert done.returncode == 1
    assert drained_with(node) == reason


def test_fields_a_gpu_does_not_report_are_not_failures(node):
    node.answer("nvidia-smi", "nvidia-smi-not-supported.csv")
    assert node.run().returncode == 0


def test_xid_79_drains_and_names_the_gpu_and_nvidias_action(node):
    node.answer("journalctl", "journal-xid-79.txt")
    assert node.run().returncode == 1
    assert drained_with(node) == "xid 79 0000:53:00 RESTART_BM"


def test_xid_13_and_31_are_the_applications_and_leave_the_node_in_service(node):
    node.answer("journalctl", "journal-xid-13-31.txt")
    done = node.run()
    assert done.returncode == 0, done.stderr
    assert node.updates() == []


def test_31_of_32_efa_devices_drain(node):
    node.answer("fi_info", "fi_info-p5-31-of-32.txt")
    assert node.run().returncode == 1
    assert drained_with(node) == "31 of 32 EFA devices"


def test_efa_devices_are_counted_in_fi_infos_long_form_too(node):
    node.answer("fi_info", "fi_info-p5-32-of-32-long.txt")
    assert node.run().returncode == 0


def test_efa_and_efa_direct_entries_of_one_device_count_once(node):
    """libfabric 2.x lists each EFA device twice for FI_EP_RDM, fabric `efa` and fabric `efa-direct`
    (fi_efa(7): "For reliable datagram (RDM) EP type, it supports two fabric names: efa and
    efa-direct"); the efa entry is a copy of the efa-direct one (prov/efa/src/efa_prov_info.c,
    efa_prov_info_alloc_for_rdm: fi_dupinfo(device->rdm_info)), so both name the same domain. 64
    entries are still the 32 devices of a p5.48xlarge."""
    one = (DATA / "fi_info-p5-32-of-32.txt").read_text()
    node.answer("fi_info", text=one + one.replace("    fabric: efa\n", "    fabric: efa-direct\n"))
    done = node.run()
    assert done.returncode == 0, done.stderr
    assert node.updates() == []


def test_an_inactive_nvlink_or_a_stopped_fabric_manager_drains(node):
    node.answer("nvidia-smi-nvlink", "nvlink-gpu2-link7-inactive.txt")
    assert node.run().returncode == 1
    assert drained_with(node) == "gpu2 nvlink 7 inactive"
    node.answer("nvidia-smi-nvlink", "nvlink-18-links-each.txt")
    node.answer("systemctl", text="inactive\n", rc=3)
    assert node.run().returncode == 1
    assert drained_with(node) == "fabric manager inactive"


def test_a_read_only_or_missing_mount_drains(node):
    node.answer("findmnt", "findmnt-fsx-ro.txt")
    assert node.run().returncode == 1
    assert drained_with(node) == "/fsx read-only"
    node.answer("findmnt", text="", rc=1)
    assert node.run().returncode == 1
    assert drained_with(node) == "/fsx not mounted"


def test_fi_info_is_found_where_the_efa_installer_puts_it_in_slurmds_bare_environment(rendered):
    """slurmd runs HealthCheckProgram with SLURMD_NODENAME as its whole environment (Slurm 22.05-24.11
    slurmd.c run_script_health_check: env_array_create, then SLURMD_NODENAME), so no PATH; AWS's EFA
    installer (and the DLAMI) puts fi_info in /opt/amazon/efa/bin, which only a login shell's
    profile.d adds. The program's own PATH must name it, or every EFA node drains `fi_info missing`."""
    probe = ("import importlib.machinery, importlib.util, os, sys\n"
             "loader = importlib.machinery.SourceFileLoader('health', sys.argv[1])\n"
             "loader.exec_module(importlib.util.module_from_spec(importlib.util.spec_from_loader('health', loader)))\n"
             "print(os.environ['PATH'])\n")
    done = subprocess.run([sys.executable, "-c", probe, str(rendered / "health")], capture_output=True, text=True,
                          env={"SLURMD_NODENAME": "train-001"}, timeout=30)
    assert done.returncode == 0, done.stderr
    path = done.stdout.strip().split(os.pathsep)
    assert "/opt/amazon/efa/bin" in path and "/usr/bin" in path, path


def test_a_missing_or_hung_tool_is_a_failure_not_a_pass(node):
    timeouts = json.loads((node.rendered / "health.json").read_text())["timeouts_s"]
    node.answers["fi_info"] = [(DATA / "fi_info-p5-32-of-32.txt").read_text(), 0, 5]
    done = node.run(timeouts_s={**timeouts, "efa": 1})
    assert done.returncode == 1
    assert drained_with(node) == "fi_info hung 1s"
    (node.fakes / "fi_info").unlink()
    assert node.run().returncode == 1
    assert drained_with(node) == "fi_info missing"
    (node.fakes / "nvidia-smi").unlink()
    assert node.run().returncode == 1
    assert drained_with(node) == "nvidia-smi missing"


def test_healthy_again_resumes_only_its_own_drain(node):
    node.state("IDLE+DRAIN", REASON_PREFIX + "7 of 8 GPUs")
    assert node.run().returncode == 0
    assert node.updates() == [["update", "nodename=train-001", "state=resume"]]

    node.state("IDLE+DRAIN", "bad DIMM, ticket 4711")  # a person's drain stays
    assert node.run().returncode == 0
    assert node.updates() == []


def test_an_xid_drain_stays_until_the_machine_restarts(node):
    node.answer("journalctl", "journal-xid-79.txt")
    assert node.run().returncode == 1
    reason = REASON_PREFIX + drained_with(node)
    node.answer("journalctl", "journal-quiet.txt")  # the Xid was read: the next pass sees nothing new
    node.state("IDLE+DRAIN", reason)
    done = node.run()
    assert done.returncode == 0 and "stays drained until it restarts" in done.stdout
    assert node.updates() == []
    node.boot("boot-2")  # restarted (on_failure: reboot, or a person): the next pass resumes it
    assert node.run().returncode == 0
    assert node.updates() == [["update", "nodename=train-001", "state=resume"]]


def test_a_later_failure_keeps_an_xid_drains_reason_so_a_later_pass_does_not_resume(node):
    """Xid 119 (GSP RPC timeout, RESET_GPU) drains; the next check finds nvidia-smi hanging. Were the
    reason rewritten to `nvidia-smi hung`, the first pass after nvidia-smi answers again would resume a
    node whose GPU was never reset."""
    node.answer("journalctl", text="kernel: NVRM: Xid (PCI:0000:53:00): 119, pid=1, Timeout after 6s of waiting "
                                   "for RPC response from GPU0 GSP\n")
    assert node.run().returncode == 1
    reason = REASON_PREFIX + drained_with(node)
    assert reason.startswith(REASON_PREFIX + "xid 119 "), reason
    node.answer("journalctl", "journal-quiet.txt")
    node.state("IDLE+DRAIN", reason)
    node.answers["nvidia-smi"] = [(DATA / "nvidia-smi-8-of-8.csv").read_text(), 0, 5]
    assert node.run(timeouts_s={**json.loads((node.rendered / "health.json").read_text())["timeouts_s"],
                                "gpus": 1}).returncode == 1
    assert node.updates() == []  # the Xid reason stays
    node.answer("nvidia-smi", "nvidia-smi-8-of-8.csv")
    assert node.run().returncode == 0 and node.updates() == []  # and with it the drain, until a restart


def test_a_failure_does_not_overwrite_a_persons_drain_reason(node):
    node.state("IDLE+DRAIN", "bad DIMM, ticket 4711")
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    assert node.run().returncode == 1
    assert node.updates() == []


def test_reboot_and_replace_follow_the_drain(node):
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    assert node.run(on_failure="reboot").returncode == 1
    drain, reboot = node.updates()
    assert reboot == ["reboot", "ASAP", "nextstate=RESUME", f"reason={REASON_PREFIX}7 of 8 GPUs", "train-001"]
    assert node.run(on_failure="replace").returncode == 1
    drain, down, undrain = node.updates()
    assert down == ["update", "nodename=train-001", "state=down", f"reason={REASON_PREFIX}7 of 8 GPUs"]
    # slurmctld keeps DRAIN on a drained node set DOWN (DOWN+DRAIN, seen with Debian's slurmctld 22.05;
    # node_mgr.c _make_node_down keeps the flags), and bin/keeper replaces only DOWN nodes not drained
    assert undrain == ["update", "nodename=train-001", "state=undrain"]
    node.state("MIXED")  # a node running a job is drained now and set down by a later pass
    assert node.run(on_failure="replace").returncode == 1
    assert [u[2] for u in node.updates()] == ["state=drain"]


def test_every_reason_fits_what_sinfo_shows_with_a_60_column_reason(node):
    node.answer("journalctl", "journal-xid-79.txt")
    node.run()
    (update,) = node.updates()
    assert len(update[3]) - len("reason=") <= 60


def test_the_thorough_suite_runs_dcgms_quick_level(node):
    node.answer("dcgmi", rc=226)
    checks = ["gpus", "xid", "mounts", "efa", "nvlink", "dcgm"]
    assert node.run(checks=checks).returncode == 1
    assert node.calls("dcgmi") == [["diag", "-r", "1"]]
    assert drained_with(node) == "dcgmi diag -r 1 rc=226"


def test_no_config_is_exit_2_and_touches_nothing(node, tmp_path):
    env = {"PATH": f"{node.fakes}:/usr/bin:/bin", "FLEETFORM_HEALTH_CONFIG": str(tmp_path / "absent.json")}
    (node.fakes / "answers.json").write_text(json.dumps(node.answers))
    done = subprocess.run([sys.executable, str(node.rendered / "health")], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "cannot check" in done.stderr
    assert not (node.fakes / "calls.log").exists() or node.updates() == []


# --- the model, the rendered lines and the rules ---------------------------------------------------


def test_reference_gets_health_checks_without_editing():
    model = check(REFERENCE).model
    h = model.fleets[0].health
    assert (h.suite, h.gpus, h.efa, h.nvswitch, h.mounts) == ("standard", 8, 32, True, ("/fsx",))
    conf = render(model)["train/slurm/slurm.conf"].decode()
    assert "HealthCheckProgram=/opt/fleetform/rendered/train/slurm/bin/health\n" in conf
    assert "HealthCheckInterval=300\nHealthCheckNodeState=ANY\n" in conf
    assert "RebootProgram" not in conf
    assert all(f.health is None for f in model.fleets[1:])  # inference fleets


def _blueprint(tmp_path, health: str, cloud: str = "aws") -> Path:
    text = REFERENCE.read_text().replace("    checkpoint:\n      every_minutes: 30\n",
                                         f"    health: {health}\n    checkpoint:\n      every_minutes: 30\n", 1)
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return path


def _findings(path: Path) -> dict[str, str]:
    return {f.rule: f"{f.path}: {f.message}" for f in check(path).findings if f.severity.value == "error"}


def test_a_declared_health_block_renders_its_values(tmp_path):
    result = check(_blueprint(tmp_path, "{suite: light, interval_s: 120, node_state: [idle, cycle], on_failure: reboot}"))
    assert result.ok, [str(f) for f in result.findings]
    conf = render(result.model)["train/slurm/slurm.conf"].decode()
    assert "HealthCheckInterval=120\nHealthCheckNodeState=IDLE,CYCLE\nRebootProgram=/usr/sbin/reboot\n" in conf
    health = json.loads(render(result.model)["train/slurm/bin/health.json"])
    assert health["checks"] == ["gpus", "xid", "mounts"] and health["on_failure"] == "reboot"


def test_health_interval_shorter_than_the_suite(tmp_path):
    found = _findings(_blueprint(tmp_path, "{interval_s: 20}"))
    assert "health-interval" in found and "34 s" in found["health-interval"], found


def test_health_time_beyond_what_slurmd_allows(tmp_path):
    mounts = "[" + ", ".join(f"/scratch{i}" for i in range(6)) + "]"
    found = _findings(_blueprint(tmp_path, f"{{suite: thorough, mounts: {mounts}}}"))
    assert "health-time" in found and f"after {SLURMD_KILL_S} s" in found["health-time"], found
    assert _findings(_blueprint(tmp_path, "{suite: thorough}")) == {}  # 53 s: fits


def test_health_replace_on_prem_has_no_program_to_replace(tmp_path):
    text = (ROOT / "blueprints/onprem-ib.yaml").read_text()
    assert "health" not in text
    marker = "    scheduler:\n"
    path = tmp_path / "onprem.yaml"
    path.write_text(text.replace(marker, "    health: {on_failure: replace}\n" + marker, 1))
    assert "health-action" in _findings(path)
    path.write_text(text.replace(marker, "    health: {on_failure: drain}\n" + marker, 1))
    assert _findings(path) == {}
    files = render(check(path).model)
    fleet = check(path).model.fleets[0].name
    assert f"{fleet}/slurm/bin/health" in files and f"{fleet}/slurm/bin/xid.json" in files  # on-prem ships it too


def test_health_on_an_inference_fleet_is_an_error(tmp_path):
    text = REFERENCE.read_text().replace("    models:\n      - name: llama-70b\n",
                                         "    health: {suite: light}\n    models:\n      - name: llama-70b\n", 1)
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    assert "health-scope" in _findings(path)


def test_xid_table_classifies_by_nvidias_immediate_action():
    table = json.loads((ROOT / "templates/slurm/bin/xid.json").read_text())
    assert "docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in table["source"]
    xids = table["xids"]
    assert {c for c, x in xids.items() if x["action"] == "drain"} >= {"48", "64", "74", "79", "95", "119", "120"}
    # every row of the catalog (spreadsheet of 2025-10-29) whose immediate action is RESET_GPU or RESTART_BM:
    # 46 62 64 79 95 109 119 120 140 143, and 110 SEC_FAULT_ERROR, 136 ALI_TRAINING_FAIL, 155
    # NVLINK_SW_DEFINED_ERROR, 156 RESOURCE_RETIREMENT_EVENT, 158 GPU_FATAL_TIMEOUT
    resets = {"46", "62", "64", "79", "95", "109", "110", "119", "120", "136", "140", "143", "155", "156", "158"}
    assert resets <= set(xids), sorted(resets - set(xids))
    assert {xids[c]["action"] for c in ("13", "31", "43", "63", "94")} == {"none"}
    for code, x in xids.items():  # the action follows the bucket, never a guess per Xid
        drains = x["nvidia_immediate"] in ("RESET_GPU", "RESTART_BM") or x["nvidia_immediate"].startswith(
            ("WORKFLOW_XID_48", "WORKFLOW_NVLINK"))
        assert (x["action"] == "drain") == drains, code


def test_interval_zero_is_described_as_off_as_slurmd_treats_it():
    """slurmd runs HealthCheckProgram, at its start too, only when HealthCheckInterval is not 0 (Slurm
    22.05-24.11 slurmd.c run_script_health_check: `if (health_check_program && health_check_interval)`;
    slurm.conf(5): "The default value is zero, which disables execution"). What a user reads (the
    schema's description, which `fleetform explain` prints) must say so."""
    schema = json.loads((ROOT / "blueprints/fleetform-v1.schema.json").read_text())
    text = schema["$defs"]["health"]["properties"]["interval_s"]["description"]
    assert "off" in text and "only when slurmd starts" not in text, text
