"""The loose ends of the Slurm health check (issue 20): an nvidia-smi without the remapped_rows
fields, a mount that does not answer, Xid 154's recovery action, a node that fails after every
reboot, and scontrol inside slurmd's 60 s. Same fakes and recorded outputs as tests/test_health.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fleetform.health import REASON_PREFIX, REBOOT_LIMIT, SLURMD_KILL_S
from test_health import DATA, Node, _blueprint, _findings, drained_with, rendered  # noqa: F401 (fixture)

FULL_QUERY = ("--query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
              "remapped_rows.pending,remapped_rows.failure")
SHORT_QUERY = "--query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending"


@pytest.fixture
def node(tmp_path, rendered) -> Node:  # noqa: F811
    return Node(tmp_path, rendered)


def timeouts(node: Node) -> dict:
    return json.loads((node.rendered / "health.json").read_text())["timeouts_s"]


def old_driver(node: Node, gpus_file: str) -> None:
    """nvidia-smi that refuses the remapped_rows fields and answers the query without them."""
    node.answers["nvidia-smi-" + FULL_QUERY] = [(DATA / "nvidia-smi-unknown-field.txt").read_text(), 2]
    node.answers["nvidia-smi-" + SHORT_QUERY] = [(DATA / gpus_file).read_text(), 0]


def test_a_driver_without_remapped_rows_fields_is_checked_without_them_not_drained(node):
    old_driver(node, "nvidia-smi-no-remap-fields-8-of-8.csv")
    done = node.run()
    assert done.returncode == 0, done.stderr
    assert node.updates() == []
    assert "remapped rows unknown" in done.stdout
    queries = [c[0] for c in node.calls("nvidia-smi") if c[0].startswith("--query-gpu=")]
    assert queries == [FULL_QUERY, SHORT_QUERY]


def test_the_fallback_query_still_counts_gpus(node):
    old_driver(node, "nvidia-smi-no-remap-fields-7-of-8.csv")
    assert node.run().returncode == 1
    assert drained_with(node) == "7 of 8 GPUs"


def test_another_nvidia_smi_failure_is_still_a_failure(node):
    node.answer("nvidia-smi", text="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
                rc=9)
    assert node.run().returncode == 1
    assert drained_with(node) == "nvidia-smi failed rc=9"
    assert len([c for c in node.calls("nvidia-smi") if c[0].startswith("--query-gpu=")]) == 1


def test_a_mount_that_does_not_answer_fails_within_the_probes_timeout(node):
    """A write that blocks (here the open of a FIFO no one reads, as a Lustre client blocks on a
    server that does not answer) must not hold the check past its budget."""
    os.mkfifo(node.root / "fsx/.fleetform-health.train-001")
    started = time.monotonic()
    done = node.run()
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    limit = timeouts(node)["probe"]
    assert drained_with(node) == f"mount /fsx did not answer in {limit}s"
    assert elapsed < limit + 8, elapsed


def test_the_write_probe_leaves_nothing_behind_and_reuses_a_stale_file(node):
    (node.root / "fsx/.fleetform-health.train-001").write_text("left by a probe that was killed\n")
    assert node.run().returncode == 0
    assert list((node.root / "fsx").iterdir()) == []


def test_xid_154_drains_with_the_drivers_recovery_action(node):
    node.answer("journalctl", "journal-xid-154-reboot.txt")
    assert node.run().returncode == 1
    reason = drained_with(node)
    assert reason == "xid 154 0000:53:00 Node Reboot Required"
    assert len(REASON_PREFIX + reason) <= 60


def test_xid_154_back_to_none_is_no_action(node):
    node.answer("journalctl", "journal-xid-154-none.txt")
    done = node.run()
    assert done.returncode == 0, done.stderr
    assert node.updates() == []


def test_xid_154_is_in_the_table_with_the_catalogs_note():
    table = json.loads((Path(__file__).parent.parent / "templates/slurm/bin/xid.json").read_text())
    row = table["xids"]["154"]
    assert (row["mnemonic"], row["nvidia_immediate"], row["action"]) == (
        "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "recovery-action")
    assert "Node Reboot Required" in table["actions"]["recovery-action"]


def test_reboots_stop_after_the_limit_and_the_reason_says_so(node):
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    for boot in range(1, REBOOT_LIMIT + 1):
        node.boot(f"boot-{boot}")
        for _ in range(2):  # the checks before the reboot happens repeat the request: one reboot
            assert node.run(on_failure="reboot").returncode == 1
            assert [u[0] for u in node.updates()] == ["update", "reboot"], node.updates()
    node.boot(f"boot-{REBOOT_LIMIT + 1}")
    assert node.run(on_failure="reboot").returncode == 1
    assert [u[0] for u in node.updates()] == ["update"]
    assert drained_with(node) == f"{REBOOT_LIMIT} reboots: 7 of 8 GPUs"


def test_reboots_older_than_the_window_do_not_count(node):
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    state = node.root / "var/lib/fleetform/health-reboots.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    window = json.loads((node.rendered / "health.json").read_text())["reboot_window_s"]
    old = time.time() - window - 60
    state.write_text(json.dumps({f"old-{i}": old for i in range(REBOOT_LIMIT)}))
    assert node.run(on_failure="reboot").returncode == 1
    assert [u[0] for u in node.updates()] == ["update", "reboot"]


def test_an_xid_drain_after_the_reboot_limit_still_waits_for_a_restart(node):
    node.answer("journalctl", "journal-xid-79.txt")
    state = node.root / "var/lib/fleetform/health-reboots.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({f"b{i}": time.time() for i in range(REBOOT_LIMIT)}))
    assert node.run(on_failure="reboot").returncode == 1
    reason = drained_with(node)
    assert reason == f"{REBOOT_LIMIT} reboots: xid 79 0000:53:00 RESTART_BM"
    node.answer("journalctl", "journal-quiet.txt")
    node.state("IDLE+DRAIN", REASON_PREFIX + reason)
    done = node.run(on_failure="reboot")
    assert done.returncode == 0 and "stays drained until it restarts" in done.stdout
    assert node.updates() == []


def test_a_hung_scontrol_is_bounded_by_its_own_budget(node):
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    node.answers["scontrol-update"] = ["", 0, 6]
    started = time.monotonic()
    done = node.run(timeouts_s={**timeouts(node), "scontrol": 1})
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    assert "did not answer in 1s" in done.stderr
    assert elapsed < 5, elapsed


def test_a_hung_scontrol_show_is_exit_2_and_changes_nothing(node):
    node.answer("nvidia-smi", "nvidia-smi-7-of-8.csv")
    node.answers["scontrol-show"] = ["", 0, 6]
    done = node.run(timeouts_s={**timeouts(node), "scontrol": 1})
    assert done.returncode == 2 and "did not answer" in done.stderr
    assert node.updates() == []


def test_scontrol_calls_count_in_the_60_s(tmp_path):
    """thorough on a p5 with /fsx: 55 s of checks, and a drain's two scontrol calls (59 s) fit;
    replace's four calls (63 s) do not."""
    assert _findings(_blueprint(tmp_path, "{suite: thorough}")) == {}
    found = _findings(_blueprint(tmp_path, "{suite: thorough, on_failure: replace}"))
    assert "health-time" in found and "4 scontrol calls" in found["health-time"], found
    assert f"after {SLURMD_KILL_S} s" in found["health-time"]


def _live_process():
    """A process that stays alive for the test, as a child stuck in uninterruptible sleep would
    (one cannot be made here: it ignores SIGKILL until its system call ends)."""
    import subprocess
    import sys
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _start_time(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()[19]


def _remember(node: Node, key: str, pid: int, boot: str = "boot-1") -> None:
    state = node.root / "var/lib/fleetform/health-hung.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({key: {"pid": pid, "start": _start_time(pid), "boot": boot}}))


def test_a_probe_still_hung_from_an_earlier_check_is_not_started_again(node):
    """A hung Lustre mount leaves the killed probe in uninterruptible sleep: every later check must
    not add one more (one per check, 288 a day at the default interval, until the node restarts)."""
    stuck = _live_process()
    try:
        _remember(node, "probe /fsx", stuck.pid)
        done = node.run()
        assert done.returncode == 1, done.stderr
        assert drained_with(node) == f"mount /fsx did not answer in {timeouts(node)['probe']}s"
        assert "still hung" in done.stderr
        assert list((node.root / "fsx").iterdir()) == []  # no probe ran
    finally:
        stuck.kill()
        stuck.wait()
    # the hung child has ended (the mount answered): the next check probes again and passes
    assert node.run().returncode == 0


def test_nvidia_smi_still_hung_from_an_earlier_check_is_not_run_again(node):
    stuck = _live_process()
    try:
        _remember(node, " ".join(["nvidia-smi", FULL_QUERY, "--format=csv,noheader"]), stuck.pid)
        done = node.run()
        assert done.returncode == 1, done.stderr
        assert drained_with(node) == f"nvidia-smi hung {timeouts(node)['gpus']}s"
        assert [c for c in node.calls("nvidia-smi") if c[0].startswith("--query-gpu=")] == []
    finally:
        stuck.kill()
        stuck.wait()


def test_a_remembered_child_of_another_boot_or_a_reused_pid_does_not_count(node):
    stuck = _live_process()
    try:
        _remember(node, "probe /fsx", stuck.pid, boot="boot-0")  # pids start again after a restart
        assert node.run().returncode == 0
        state = node.root / "var/lib/fleetform/health-hung.json"
        entry = {"pid": stuck.pid, "start": "1", "boot": "boot-1"}  # the pid now names another process
        state.write_text(json.dumps({"probe /fsx": entry}))
        assert node.run().returncode == 0
    finally:
        stuck.kill()
        stuck.wait()


def test_a_child_that_outlives_its_kill_is_remembered(rendered, tmp_path, monkeypatch):  # noqa: F811
    """The other half: bounded() records a child that a kill did not end (here kill() is made a
    no-op, as SIGKILL is for a process in uninterruptible sleep), and forgets it once it has ended."""
    import importlib.machinery
    import importlib.util
    import subprocess
    import sys
    monkeypatch.setenv("PATH", os.environ["PATH"])  # the program appends the EFA folder on import
    loader = importlib.machinery.SourceFileLoader("fleetform_bin_health", str(rendered / "health"))
    health = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(health)

    class Unkillable(subprocess.Popen):
        def kill(self):
            pass

    monkeypatch.setattr(health.subprocess, "Popen", Unkillable)
    state = tmp_path / "health-hung.json"
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(subprocess.TimeoutExpired):
        health.bounded(argv, 0.5, key="probe /fsx", state=state)
    entry = json.loads(state.read_text())["probe /fsx"]
    try:
        assert health.still_hung(state, "probe /fsx")
        with pytest.raises(subprocess.TimeoutExpired):  # at once, without a second child
            health.bounded(["/nonexistent/not-started"], 0.5, key="probe /fsx", state=state)
    finally:
        os.kill(entry["pid"], 9)
        os.waitpid(entry["pid"], 0)
    assert not health.still_hung(state, "probe /fsx")


def test_a_node_drained_after_its_reboots_is_not_resumed_by_a_pass(node):
    """After the reboot limit the node is a person's: a flaky node that passes now and then would
    otherwise go back into service, take jobs and fail under them, again and again."""
    node.state("IDLE+DRAIN", f"{REASON_PREFIX}{REBOOT_LIMIT} reboots: 7 of 8 GPUs")
    done = node.run(on_failure="reboot")
    assert done.returncode == 0, done.stderr
    assert node.updates() == []
    assert "stays drained for a person" in done.stdout
    node.state("IDLE+DRAIN", f"{REASON_PREFIX}7 of 8 GPUs")  # an ordinary drain of its own still resumes
    assert node.run(on_failure="reboot").returncode == 0
    assert node.updates() == [["update", "nodename=train-001", "state=resume"]]
