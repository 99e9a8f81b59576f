"""The bootstrap's real-machine steps (the ones tests/test_cluster.py cannot take: it runs Debian's
daemons directly under FLEETFORM_ROOT), run for real but against fake machine programs.

How: a subprocess imports the rendered bootstrap with FLEETFORM_ROOT=<tmp> (so /etc, /run, /usr/...
files it writes land under the temp dir) and PATH = a folder of fake `apt-get`, `systemctl`, `curl`,
`gpg`, `mount` that record each call (argv and DEBIAN_FRONTEND) into calls.log and succeed (curl and
gpg write their -o file). The bootstrap's sbin search list is emptied in that process so that the
Slurm and munge installed on this test machine count as absent, as on AWS's DLAMI Base OSS Nvidia
Ubuntu 24.04, and the bootstrap's own ROOT is cleared so that its steps take the branch a real
machine takes (systemd, fstab, mount) while every file still goes under FLEETFORM_ROOT (path()). The
test then calls one real-machine step of the bootstrap and reads what it did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import awslocal

FAKES = ("apt-get", "systemctl", "curl", "gpg", "mount", "mountpoint", "blkid", "mkfs.ext4", "groupadd", "useradd",
         "usermod")
FAKE = f"""#!{sys.executable}
import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(repr([os.path.basename(sys.argv[0]), *args, os.environ.get("DEBIAN_FRONTEND", "")]) + "\\n")
if os.path.basename(sys.argv[0]) in ("curl", "gpg") and "-o" in args:  # their output file (blkid's -o is a format)
    open(args[args.index("-o") + 1], "w").write("fake\\n")
name = os.path.basename(sys.argv[0]).replace("-", "_").replace(".", "_")
sys.stdout.write(os.environ.get("FAKE_OUT_" + name, ""))
sys.exit(int(os.environ.get("FAKE_FAIL_" + name, "0")))
"""
DRIVER = """
import importlib.machinery, importlib.util, json, sys
from pathlib import Path
bin_dir, call = sys.argv[1], json.loads(sys.argv[2])
call = [Path(a["path"]) if isinstance(a, dict) and "path" in a else a for a in call]  # {"path": p}: a Path
sys.path.insert(0, bin_dir)
loader = importlib.machinery.SourceFileLoader("bootstrap", bin_dir + "/bootstrap")
bootstrap = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
loader.exec_module(bootstrap)
bootstrap.SBIN = ()  # only the fake PATH counts: this machine's own Slurm and munge are "not installed"
bootstrap.ROOT = ""  # the real-machine branch of steps that test ROOT; files still go under FLEETFORM_ROOT (path())
bootstrap.systemd_booted = lambda: True  # a real node boots with systemd; this test machine may not
try:
    getattr(bootstrap, call[0])(*call[1:])
except bootstrap.Failure as error:
    print("FAILURE:", error)
    sys.exit(1)
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return awslocal.render_fleet(tmp_path_factory.mktemp("machine"), awslocal.blueprint("{min: 1, max: 2}"))


class Machine:
    def __init__(self, rendered: Path, tmp: Path):
        self.rendered, self.root, self.fakes = rendered, tmp / "root", tmp / "fakebin"
        self.log = tmp / "calls.log"
        self.fakes.mkdir()
        for name in FAKES:
            (self.fakes / name).write_text(FAKE)
            (self.fakes / name).chmod(0o755)
        (self.root / "etc").mkdir(parents=True)
        (self.root / "etc/os-release").write_text('NAME="Ubuntu"\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n')

    def step(self, *call, fail: tuple[str, ...] = (), out: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """One bootstrap function called with these arguments; the fakes named in `fail` exit 1,
        those in `out` print that."""
        env = {"PATH": str(self.fakes), "FLEETFORM_ROOT": str(self.root), "FAKE_LOG": str(self.log),
               "HOME": str(self.root)}
        for name in fail:
            env[f"FAKE_FAIL_{name.replace('-', '_').replace('.', '_')}"] = "1"
        for name, text in (out or {}).items():
            env[f"FAKE_OUT_{name.replace('-', '_').replace('.', '_')}"] = text
        return subprocess.run([sys.executable, "-c", DRIVER, str(self.rendered / "bin"), json.dumps(call)],
                              capture_output=True, text=True, env=env, timeout=60, cwd=self.root)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [eval(line) for line in self.log.read_text().splitlines()]  # noqa: S307 (our own repr lines)


@pytest.fixture
def machine(rendered, tmp_path):
    return Machine(rendered, tmp_path)


def test_bootstrap_installs_slurm_munge_and_the_lustre_client_the_image_lacks(machine):
    """The DLAMI has no Slurm, munge or Lustre client: the compute bootstrap installs slurmd, the
    client tools a batch script's srun needs (slurmd does not depend on slurm-client) and munge
    from Ubuntu's archive and the Lustre client for the running kernel from AWS's FSx repository
    (its key dearmored into a keyring the source names), non-interactively."""
    env = {"FLEETFORM_LUSTRE_MOUNTS": "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd=/fsx"}
    done = machine.step("install_packages", env, "slurmd")
    assert done.returncode == 0, done.stdout + done.stderr
    calls = machine.calls()
    kernel = os.uname().release
    assert calls[0][:2] == ["curl", "-fsSL"] and calls[0][-2] == (
        "https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc")
    assert calls[1][:4] == ["gpg", "--batch", "--yes", "--dearmor"]
    assert calls[2] == ["apt-get", "update", "noninteractive"]
    assert calls[3] == ["apt-get", "install", "-y", "--no-install-recommends", "slurmd", "slurm-client", "munge",
                        f"lustre-client-modules-{kernel}", "noninteractive"]
    source = (machine.root / "etc/apt/sources.list.d/fsxlustreclientrepo.list").read_text()
    assert source == ("deb [signed-by=/usr/share/keyrings/fsx-ubuntu-public-key.gpg] "
                      "https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu noble main\n")
    assert (machine.root / "usr/share/keyrings/fsx-ubuntu-public-key.gpg").exists()


def test_bootstrap_installs_slurmctld_on_the_controller_and_nothing_for_lustre_without_mounts(machine):
    done = machine.step("install_packages", {"FLEETFORM_LUSTRE_MOUNTS": ""}, "slurmctld")
    assert done.returncode == 0, done.stdout + done.stderr
    assert machine.calls() == [["apt-get", "update", "noninteractive"],
                               ["apt-get", "install", "-y", "--no-install-recommends", "slurmctld", "slurm-client",
                                "munge", "noninteractive"]]


def test_bootstrap_installs_nothing_when_the_image_brings_everything(machine):
    for name in ("slurmd", "srun", "munged", "mount.lustre"):
        (machine.fakes / name).write_text("#!/bin/sh\n")
        (machine.fakes / name).chmod(0o755)
    done = machine.step("install_packages", {"FLEETFORM_LUSTRE_MOUNTS": "fs@tcp:/x=/fsx"}, "slurmd")
    assert done.returncode == 0, done.stdout + done.stderr
    assert machine.calls() == []


def test_a_failed_install_stops_the_bootstrap(machine):
    done = machine.step("install_packages", {}, "slurmd", fail=("apt-get",))
    assert done.returncode == 1 and "FAILURE: apt-get update" in done.stdout


def test_slurmd_runs_under_the_stock_unit_with_its_name_in_etc_default(machine):
    """Slurm 23.11's slurmd.service is Type=notify and runs `slurmd --systemd $SLURMD_OPTIONS` from
    EnvironmentFile=-/etc/default/slurmd (SchedMD/slurm slurm-23-11-4-1 etc/slurmd.service.in);
    slurmd sends READY=1 only with --systemd, so the unit's ExecStart must stay: the node's name goes
    into /etc/default/slurmd, no drop-in replaces ExecStart, and slurmd is restarted (apt-get
    started it without the name)."""
    done = machine.step("systemd_slurmd", "train-001", "/etc/slurm/slurm.conf")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (machine.root / "etc/default/slurmd").read_text() == 'SLURMD_OPTIONS="-N train-001 -f /etc/slurm/slurm.conf"\n'
    assert not list(machine.root.rglob("slurmd.service.d")), "ExecStart must not be overridden"
    assert [c[:-1] for c in machine.calls()] == [["systemctl", "enable", "slurmd"], ["systemctl", "restart", "slurmd"]]


def test_munge_is_restarted_after_the_key_is_written(machine):
    """munge's package generates its own key and starts munged; `systemctl enable --now munge`
    leaves that munged running with the package key, so the cluster's key written by the bootstrap
    never takes effect. The real-machine path restarts munge."""
    done = machine.step("start_munge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c[:-1] for c in machine.calls()] == [["systemctl", "enable", "munge"], ["systemctl", "restart", "munge"]]


def test_lustre_fstab_entry_needs_no_unit_ubuntu_lacks(machine):
    """Ubuntu has no network.service: `x-systemd.requires=network.service` (AWS's Amazon Linux
    example) would leave the mount waiting on a unit that does not exist. `_netdev` alone orders it
    after network-online.target (systemd.mount(5))."""
    done = machine.step("lustre", {"FLEETFORM_LUSTRE_MOUNTS": "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd=/fsx"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (machine.root / "etc/fstab").read_text() == (
        "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd /fsx lustre defaults,relatime,flock,_netdev,x-systemd.automount 0 0\n")
    assert (machine.root / "fsx").is_dir()
    assert [c[:-1] for c in machine.calls()] == [["mount", "/fsx"]]


def state_volume(machine: Machine, *, fail: tuple[str, ...]) -> tuple[subprocess.CompletedProcess, Path]:
    (machine.root / "dev/disk/by-id").mkdir(parents=True)
    (machine.root / "dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0").touch()
    state = machine.root / "var/spool/slurmctld"
    conf = machine.root / "slurm.conf"
    conf.write_text(f"StateSaveLocation={state}\nSlurmUser=root\n")
    done = machine.step("state_volume", {"FLEETFORM_STATE_VOLUME": "vol-0123456789abcdef0"}, {"path": str(conf)},
                        fail=fail, out={"blkid": "0b1c-uuid"})
    return done, state


def test_a_state_volume_that_does_not_mount_stops_the_bootstrap(machine):
    """slurmctld's StateSaveLocation must be on the persistent EBS volume; a failed mount used to be
    ignored (check=False), and the state then silently lived on the root volume."""
    done, state = state_volume(machine, fail=("mountpoint", "mount"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAILURE: mount state volume vol-0123456789abcdef0 at {state}" in done.stdout
    assert (machine.root / "etc/fstab").read_text() == f"UUID=0b1c-uuid {state} ext4 defaults,nofail 0 2\n"


def test_a_state_volume_is_mounted_once(machine):
    done, state = state_volume(machine, fail=("mountpoint",))
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c[0] for c in machine.calls()] == ["blkid", "blkid", "mountpoint", "mount"]
    assert machine.calls()[-1][:-1] == ["mount", str(state)]


ZONE = "train.a-dev.fleetform.internal"


def test_search_domain_goes_into_resolv_conf_first(machine):
    """Without systemd-resolved: the fleet's zone becomes the first search domain of
    /etc/resolv.conf, the other domains and the nameserver stay."""
    resolv = machine.root / "etc/resolv.conf"
    resolv.write_text("nameserver 10.0.0.2\nsearch ec2.internal\noptions edns0\n")
    done = machine.step("search_domain", {"FLEETFORM_DNS_ZONE": ZONE})
    assert done.returncode == 0, done.stdout + done.stderr
    assert resolv.read_text() == f"search {ZONE} ec2.internal\nnameserver 10.0.0.2\noptions edns0\n"
    again = machine.step("search_domain", {"FLEETFORM_DNS_ZONE": ZONE})
    assert again.returncode == 0 and resolv.read_text().count(ZONE) == 1
    assert machine.calls() == []


def test_search_domain_with_systemd_resolved_is_a_drop_in(machine):
    """Ubuntu 24.04: /etc/resolv.conf is systemd-resolved's stub; the zone goes into a drop-in's
    Domains= (ParallelCluster's cookbook writes Domains= into resolved.conf) and resolved restarts."""
    resolv = machine.root / "etc/resolv.conf"
    resolv.symlink_to("/run/systemd/resolve/stub-resolv.conf")
    done = machine.step("search_domain", {"FLEETFORM_DNS_ZONE": ZONE})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (machine.root / "etc/systemd/resolved.conf.d/fleetform.conf").read_text().endswith(
        f"[Resolve]\nDomains={ZONE}\n")
    assert machine.calls() == [["systemctl", "restart", "systemd-resolved", ""]]


def test_no_zone_no_search_domain(machine):
    resolv = machine.root / "etc/resolv.conf"
    resolv.write_text("nameserver 10.0.0.2\n")
    assert machine.step("search_domain", {}).returncode == 0
    assert resolv.read_text() == "nameserver 10.0.0.2\n"


def test_controller_makes_the_checkpoint_directory_writable_by_every_job(tmp_path):
    """The reference writes checkpoints to /fsx/checkpoints. A new FSx file system's root is root's
    0755 and jobs run as users of the image with no shared group, so the controller's bootstrap
    makes the directory 1777 (sticky, like /tmp): every job writes, only an entry's owner removes it.
    A blueprint without a checkpoint path makes nothing (negative control)."""
    from conftest import ROOT

    slurm = awslocal.render_fleet(tmp_path, (ROOT / "blueprints/reference.yaml").read_text())
    assert json.loads((slurm / "bin/fleet.json").read_text())["checkpoint_dir"] == "/fsx/checkpoints"
    machine = Machine(slurm, tmp_path)
    done = machine.step("checkpoint_dir")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (machine.root / "fsx/checkpoints").stat().st_mode & 0o7777 == 0o1777
    (machine.root / "fsx/checkpoints").rmdir()
    bare = tmp_path / "bare"
    bare.mkdir()
    plain = awslocal.render_fleet(bare, awslocal.blueprint("2"))
    assert json.loads((plain / "bin/fleet.json").read_text())["checkpoint_dir"] is None
    again = Machine(plain, bare)
    assert again.step("checkpoint_dir").returncode == 0 and not (again.root / "fsx").exists()


def test_apt_waits_for_the_first_boot_dpkg_lock(machine):
    """apt-get at first boot fails at once while unattended-upgrades holds the dpkg lock: before its
    first apt-get the bootstrap configures apt to wait up to 10 minutes for the lock and to retry
    downloads (apt.conf.d, read by every apt-get: apt.conf(5))."""
    done = machine.step("install_packages", {"FLEETFORM_LUSTRE_MOUNTS": ""}, "slurmd")
    assert done.returncode == 0, done.stdout + done.stderr
    conf = (machine.root / "etc/apt/apt.conf.d/90fleetform").read_text()
    assert 'DPkg::Lock::Timeout "600";' in conf.splitlines() and 'Acquire::Retries "3";' in conf.splitlines()
    assert [c[:2] for c in machine.calls()] == [["apt-get", "update"], ["apt-get", "install"]]


USERS_BLUEPRINT = awslocal.blueprint("2").replace("fleets:\n", """\
storage:
  - {name: shared, type: fsx-lustre, capacity_gib: 1200, throughput_mb_per_tib: 125, mount_path: /fsx}
fleets:
""") + """\
    storage: [shared]
    login: {nodes: 1, access: {ssh_cidrs: [203.0.113.0/24]}}
    users:
      - {name: alice, uid: 52001, gid: 53000, group: mlteam}
      - {name: bob, uid: 52002, gid: 53000, group: mlteam, ssh_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG0 bob@laptop"]}
    home: {storage: shared}
"""
"""Ids no account of a test machine has (the bootstrap asks this machine's passwd and group files)."""


@pytest.fixture(scope="module")
def with_users(tmp_path_factory):
    return awslocal.render_fleet(tmp_path_factory.mktemp("users"), USERS_BLUEPRINT)


def test_accounts_makes_the_blueprints_users_with_their_ids_and_homes_on_the_shared_file_system(with_users, tmp_path):
    """Every role makes the groups, then the users with the blueprint's uid and gid (useradd, no home
    of useradd's: the home is made once, on the shared file system, 0700 and the user's); a login
    node also installs each user's keys where sshd reads them (root's file, not the user's home)."""
    machine = Machine(with_users, tmp_path)
    done = machine.step("accounts", "login")
    assert done.returncode == 0, done.stdout + done.stderr
    shell = "/bin/bash"
    assert machine.calls() == [
        ["groupadd", "--gid", "53000", "mlteam", ""],
        ["useradd", "--uid", "52001", "--gid", "53000", "--home-dir", "/fsx/home/alice", "--no-create-home",
         "--shell", shell, "alice", ""],
        ["useradd", "--uid", "52002", "--gid", "53000", "--home-dir", "/fsx/home/bob", "--no-create-home",
         "--shell", shell, "bob", ""],
        ["systemctl", "reload-or-restart", "ssh", ""]]
    for name, uid in (("alice", 52001), ("bob", 52002)):
        home = machine.root / "fsx/home" / name
        assert home.stat().st_mode & 0o777 == 0o700
        if os.geteuid() == 0:
            assert (home.stat().st_uid, home.stat().st_gid) == (uid, 53000)
    assert (machine.root / "fsx/home").stat().st_mode & 0o777 == 0o755
    assert (machine.root / "etc/fleetform/ssh/bob.keys").read_text() == \
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG0 bob@laptop\n"
    assert (machine.root / "etc/fleetform/ssh/alice.keys").read_text() == ""
    assert "AuthorizedKeysFile .ssh/authorized_keys /etc/fleetform/ssh/%u.keys" in \
        (machine.root / "etc/ssh/sshd_config.d/fleetform.conf").read_text()
    # day 2 (bin/update runs this step again): a user removed from the blueprint loses the keys the
    # blueprint gave them; sshd would otherwise still let them in with those keys
    (machine.root / "etc/fleetform/ssh/carol.keys").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1 carol@laptop\n")
    assert machine.step("accounts", "login").returncode == 0
    assert sorted(p.name for p in (machine.root / "etc/fleetform/ssh").iterdir()) == ["alice.keys", "bob.keys"]
    # a compute node: the same users, no sshd keys
    (machine.root / "fsx/home/alice").rmdir()
    machine.log.unlink()
    assert machine.step("accounts", "compute").returncode == 0
    assert [c[0] for c in machine.calls()] == ["groupadd", "useradd", "useradd"]
    assert (machine.root / "fsx/home/alice").is_dir()


@pytest.mark.parametrize("field, value, says", [
    ("users", [{"name": "root", "uid": 52001, "gid": 53000, "groups": [], "ssh_keys": []}], "user root is 0:0"),
    ("groups", [{"name": "root", "gid": 53000}], "group root has gid 0"),
    ("groups", [{"name": "mlteam", "gid": 0}], "gid 0 of group mlteam is group root"),
])
def test_accounts_stops_on_an_id_the_machine_gives_someone_else(with_users, tmp_path, field, value, says):
    """A user or group the image already has with other ids would make a job's files belong to
    different accounts on different machines: the bootstrap stops and says which."""
    import shutil

    copy = tmp_path / "slurm"
    shutil.copytree(with_users, copy)
    users = json.loads((copy / "bin/users.json").read_text())
    users[field] = value
    (copy / "bin/users.json").write_text(json.dumps(users))
    done = Machine(copy, tmp_path).step("accounts", "compute")
    assert done.returncode == 1 and says in done.stdout, done.stdout + done.stderr


def test_no_users_json_no_accounts(machine):
    assert machine.step("accounts", "compute").returncode == 0 and machine.calls() == []
