"""Issue 17, item 4: a job's user cannot reach instance metadata (and so not the node role's
credentials, which read the munge key); root can, and on the controller SlurmUser too.

The judge is the kernel: bin/imds-access runs for real inside a network namespace the test makes
(`unshare -n`, as root), with an HTTP server on 169.254.169.254:80 in it; a process with another
uid is refused, root is answered. The negative control is the same namespace before the program
ran: every uid is answered. The bootstrap's part (apply before the daemons start, and a systemd unit
that applies it at every boot) is checked with the fake machine programs of test_bootstrap_machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import awslocal
from test_bootstrap_machine import FAKE, Machine

PROBE = r"""
import http.server, json, os, socket, subprocess, sys, threading

program, steps = sys.argv[1], json.loads(sys.argv[2])
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", "169.254.169.254/32", "dev", "lo"], check=True)
# the machine's own address, as an instance's interface has one: the source of every request, and where
# the kernel's answer to a rejected one (ICMP port unreachable) goes
subprocess.run(["ip", "addr", "add", "10.1.0.1/32", "dev", "lo"], check=True)

class Metadata(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"credentials")
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("169.254.169.254", 80), Metadata)
threading.Thread(target=server.serve_forever, daemon=True).start()

def reach(uid):
    # a child with this uid asks the metadata address; its exit code says what it got
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([]); os.setgid(uid); os.setuid(uid)
            with socket.create_connection(("169.254.169.254", 80), timeout=3, source_address=("10.1.0.1", 0)) as s:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                answer = b""
                while chunk := s.recv(4096):
                    answer += chunk
                os._exit(0 if b"credentials" in answer else 3)
        except ConnectionRefusedError:
            os._exit(1)
        except OSError as error:
            print(repr(error), file=sys.stderr)
            os._exit(2)
    return {0: "answered", 1: "refused", 2: "error", 3: "wrong answer"}[os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])]

out = []
for step in steps:
    if step[0] == "apply":
        done = subprocess.run([sys.executable, program, "apply", step[1]], capture_output=True, text=True)
        out.append({"apply": step[1], "rc": done.returncode, "stderr": done.stderr,
                    "rules": subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout})
    else:
        out.append({uid: reach(uid) for uid in step[1]})
server.shutdown()
print(json.dumps(out))
"""

NOBODY = 65534  # Debian's `nobody`: the stand-in for a job's user (and, allowed, for SlurmUser)


def _namespace(steps) -> list:
    if os.geteuid() != 0:
        awslocal.need("the network namespace test needs root (CI runs as root)")
    for program, package in (("iptables", "iptables"), ("unshare", "util-linux"), ("ip", "iproute2")):
        if shutil.which(program) is None:
            awslocal.need(f"{program} is not installed (Debian package {package})")
    program = Path(__file__).resolve().parents[1] / "templates" / "slurm" / "bin" / "imds-access"
    done = subprocess.run(["unshare", "-n", sys.executable, "-c", PROBE, str(program), json.dumps(steps)],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "unshare failed" in done.stderr:
        awslocal.need(f"cannot make a network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_only_root_reaches_instance_metadata_once_applied():
    before, applied, after, again, still = _namespace(
        [["reach", [0, NOBODY]], ["apply", "root"], ["reach", [0, NOBODY]], ["apply", "root"], ["reach", [0, NOBODY]]])
    assert before == {"0": "answered", str(NOBODY): "answered"}  # the negative control: open to all
    assert applied["rc"] == 0, applied["stderr"]
    assert after == {"0": "answered", str(NOBODY): "refused"}
    # applying again (every boot) replaces the chain: no second jump, no second rule
    assert again["rc"] == 0 and again["rules"] == applied["rules"], (applied["rules"], again["rules"])
    assert applied["rules"].count("-j FLEETFORM_IMDS\n") == 1 and still == after
    # a bridged container's packets are forwarded, with no uid to match: refused for everyone
    assert "-A FORWARD -d 169.254.169.254/32 -j FLEETFORM_IMDS_FORWARD\n" in applied["rules"]
    assert "-A FLEETFORM_IMDS_FORWARD -j REJECT" in applied["rules"]


def test_the_controllers_slurm_user_is_allowed_too():
    """On the controller slurmctld runs the Resume/Suspend programs as SlurmUser: they call EC2."""
    (applied, reached) = _namespace([["apply", "root,nobody"], ["reach", [0, NOBODY, NOBODY - 1]]])
    assert applied["rc"] == 0, applied["stderr"]
    assert reached == {"0": "answered", str(NOBODY): "answered", str(NOBODY - 1): "refused"}


def test_an_unknown_user_changes_nothing():
    (applied, reached) = _namespace([["apply", "root,no-such-user"], ["reach", [NOBODY]]])
    assert applied["rc"] == 1 and "no user 'no-such-user'" in applied["stderr"]
    assert "FLEETFORM_IMDS" not in applied["rules"] and reached == {str(NOBODY): "answered"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return awslocal.render_fleet(tmp_path_factory.mktemp("imds"), awslocal.blueprint("{min: 1, max: 2}"))


@pytest.mark.parametrize("users", [["root"], ["root", "slurm"]])
def test_the_bootstrap_applies_it_and_keeps_it_across_reboots(users, rendered, tmp_path):
    machine = Machine(rendered, tmp_path)
    for name in ("iptables", "iptables-restore"):
        (machine.fakes / name).write_text(FAKE)
        (machine.fakes / name).chmod(0o755)
    (machine.fakes / "python3").symlink_to(sys.executable)
    done = machine.step("lock_instance_metadata", users)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = machine.calls()
    allowed = ",".join(users)
    program = str(rendered / "bin" / "imds-access")
    assert calls[0] == ["iptables-restore", "-w", "--noflush", ""]
    assert calls[1][:3] == ["iptables", "-w", "-C"] and calls[1][3:7] == ["OUTPUT", "-d", "169.254.169.254/32", "-j"]
    assert calls[2][:3] == ["iptables", "-w", "-C"] and calls[2][3:6] == ["FORWARD", "-d", "169.254.169.254/32"]
    assert calls[-2:] == [["systemctl", "daemon-reload", ""], ["systemctl", "enable", "fleetform-imds.service", ""]]
    unit = (machine.root / "etc/systemd/system/fleetform-imds.service").read_text()
    assert f"ExecStart={sys.executable} {program} apply {allowed}\n" in unit
    assert "Before=network-pre.target slurmd.service slurmctld.service" in unit
    assert "WantedBy=multi-user.target" in unit


def test_the_bootstrap_installs_iptables_where_the_image_lacks_it(rendered, tmp_path):
    machine = Machine(rendered, tmp_path)
    done = machine.step("lock_instance_metadata", ["root"])
    # the fake apt-get installs nothing: imds-access then refuses, and the bootstrap stops
    assert done.returncode == 1 and "iptables is not installed" in done.stdout, done.stdout + done.stderr
    assert machine.calls()[:2] == [["apt-get", "update", "noninteractive"],
                                   ["apt-get", "install", "-y", "--no-install-recommends", "iptables", "noninteractive"]]
