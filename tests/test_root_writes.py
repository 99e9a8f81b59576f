"""Issue 17, item 4: no root write into a path another user controls. The slurm user could make
root append to any file through a symlinked log: /var/log/fleetform was SlurmUser's and root's
bootstrap and keeper appended there; /var/log/slurm is the slurm user's (Debian's and Ubuntu's
slurmd postinst) and slurmd, root, appends SlurmdLogFile there.

Each test plants, as another uid (`nobody`), a symlink where root's log goes, pointing at a file
root must not touch, then runs the real program code as root and checks the file is unchanged
(and, where the bootstrap owns the folder, that the folder is root's again). They need root, as the
attack does: CI runs as root; elsewhere they skip.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import awslocal
from test_bootstrap_machine import Machine

NOBODY = 65534


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    if os.geteuid() != 0:
        awslocal.need("planting a file as another user and writing as root need root (CI runs as root)")
    return awslocal.render_fleet(tmp_path_factory.mktemp("writes"), awslocal.blueprint("{min: 1, max: 2}"))


@pytest.fixture
def tmp(rendered):
    """A temporary folder every user may traverse (pytest's are root's alone), so that `nobody` can
    reach the folders it plants in."""
    folder = Path(tempfile.mkdtemp(prefix="fleetform-root-writes-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def _plant(folder: Path, name: str, victim: Path) -> Path:
    """`folder` (made nobody's, as the package or an old bootstrap left it) with a symlink `name` in
    it to `victim`, made by nobody."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, NOBODY, NOBODY)
    os.chmod(folder, 0o755)
    link = folder / name
    pid = os.fork()
    if pid == 0:  # the other user makes the link
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.symlink(victim, link)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert link.is_symlink() and os.lstat(link).st_uid == NOBODY
    return link


LOG = """
import importlib.machinery, importlib.util, sys
sys.argv[0] = "keeper"
sys.path.insert(0, sys.argv[1])
import fleetform_node
fleetform_node.log("a line root writes")
"""


@pytest.mark.parametrize("folder_owner", ["nobody", "root"])
def test_roots_log_never_follows_a_planted_symlink(folder_owner, rendered, tmp):
    root, victim = tmp / "root", tmp / "shadow"
    victim.write_text("root's secret\n")
    folder = root / "var/log/fleetform"
    link = _plant(folder, "keeper.log", victim)
    if folder_owner == "root":  # the bootstrap's folder: root's, yet a link in it is still not followed
        os.chown(folder, 0, 0)
    done = subprocess.run([sys.executable, "-c", LOG, str(rendered / "bin")], capture_output=True, text=True,
                          env={**os.environ, "FLEETFORM_ROOT": str(root)}, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "a line root writes" in done.stderr  # it still reaches the journal
    assert victim.read_text() == "root's secret\n" and link.is_symlink()


def _conf(tmp_path: Path, root: Path) -> dict:
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"SlurmUser=nobody\nSlurmdLogFile={root}/var/log/slurm/slurmd.log\n")
    return {"path": str(conf)}


def test_the_node_bootstrap_takes_slurmds_log_folder_back_from_the_slurm_user(rendered, tmp):
    machine = Machine(rendered, tmp)
    victim = tmp / "shadow"
    victim.write_text("root's secret\n")
    link = _plant(machine.root / "var/log/slurm", "slurmd.log", victim)
    done = machine.step("slurmd_log_folder", _conf(tmp, machine.root))
    assert done.returncode == 0, done.stdout + done.stderr
    folder = os.lstat(machine.root / "var/log/slurm")
    assert (folder.st_uid, folder.st_mode & 0o777) == (0, 0o755)
    assert not link.exists() and not link.is_symlink() and victim.read_text() == "root's secret\n"


def test_the_controller_bootstrap_gives_root_its_log_folder_and_slurmuser_its_own(rendered, tmp):
    machine = Machine(rendered, tmp)
    victim = tmp / "shadow"
    victim.write_text("root's secret\n")
    _plant(machine.root / "var/log/fleetform", "bootstrap.log", victim)
    done = machine.step("log_folders", "nobody")
    assert done.returncode == 0, done.stdout + done.stderr
    mine = os.lstat(machine.root / "var/log/fleetform")
    theirs = os.lstat(machine.root / "var/log/fleetform/nobody")
    assert (mine.st_uid, mine.st_mode & 0o777) == (0, 0o755)
    assert (theirs.st_uid, theirs.st_mode & 0o777) == (NOBODY, 0o750)
    assert victim.read_text() == "root's secret\n"
    # a program slurmctld runs as SlurmUser (here nobody) logs into that user's own folder
    os.environ["FLEETFORM_ROOT"] = str(machine.root)
    sys.path.insert(0, str(rendered / "bin"))
    try:
        loader = importlib.machinery.SourceFileLoader("fleetform_node_writes", str(rendered / "bin/fleetform_node.py"))
        node = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
        loader.exec_module(node)
    finally:
        del os.environ["FLEETFORM_ROOT"]
        sys.path.remove(str(rendered / "bin"))
    node.PROGRAM = "resume"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            node.log("a line the slurm user writes")
            code = 0
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    written = machine.root / "var/log/fleetform/nobody/resume.log"
    assert "a line the slurm user writes" in written.read_text() and os.lstat(written).st_uid == NOBODY
    assert not (machine.root / "var/log/fleetform/resume.log").exists()
