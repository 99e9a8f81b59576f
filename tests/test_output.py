"""Output and file handling never crash fleetform or leave their place (issue 9, defects 7, 8, 9, 13):
symlinked blueprints and bases stay inside the repository, `render --check` follows no symlink and
sees modes, every folder error is a usage error, the swap is locked and atomic at every step, and
files honour the umask and the user's folder.

The tests run as root here, and root ignores permission bits: a "read-only" situation is either one
that binds root too (a path under a regular file, /proc) or an OSError injected at the os call."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from fleetform.cli import main
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.render import output
from variants import VARIANTS

REF = ROOT / "blueprints/reference.yaml"
SECRET = "hunter2-do-not-print"
HEAD = "apiVersion: fleetform/v1\nkind: Blueprint\n"


@pytest.fixture(scope="module")
def elastic(tmp_path_factory):
    """The files of a blueprint whose render holds scripts (resume/suspend programs)."""
    source = tmp_path_factory.mktemp("elastic") / "bp.yaml"
    source.write_text(VARIANTS["elastic"])
    return source, render(check(source).model)


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every regular file under root with its mode; a symlink or another non-regular file fails."""
    files = {}
    for path in root.rglob("*"):
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode):
            continue
        assert stat.S_ISREG(st.st_mode), f"{path} is not a regular file"
        files[path.relative_to(root).as_posix()] = (path.read_bytes(), stat.S_IMODE(st.st_mode))
    return files


def _contents(root: Path) -> dict[str, bytes]:
    return {p: data for p, (data, _mode) in _tree(root).items()}


# --- 7. symlinks: blueprints and bases stay in the repository ---------------------------------------

@pytest.fixture
def repo(tmp_path):
    """tmp/repo (a git top level) beside tmp/secret.txt, a file the blueprint's findings must never quote."""
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    return top


def _extending(top: Path, base_target: str | None = None) -> Path:
    blueprint = top / "bp.yaml"
    blueprint.write_text(HEAD + "extends: {name: platform, version: 1.0.0}\n"
                         + REF.read_text().split("kind: Blueprint\n", 1)[1])
    base = top / "bases/platform/1.0.0.yaml"
    base.parent.mkdir(parents=True)
    if base_target is None:
        base.write_text(SECRET + "\n")
    else:
        base.symlink_to(base_target)
    return blueprint


def test_a_base_linked_to_a_file_outside_its_folder_is_an_error_that_quotes_nothing(repo):
    blueprint = _extending(repo, "../../../secret.txt")
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{blueprint}:1:" in result.stdout or f"{blueprint}:3:" in result.stdout
    assert "is a symlink that leads outside" in result.stdout and "[extends]" in result.stdout
    assert SECRET not in result.stdout + result.stderr


def test_negative_control_a_base_that_is_the_secret_itself_is_quoted(repo):
    """Why the test above matters: a finding on a base quotes its value, so a link would leak it."""
    blueprint = _extending(repo)
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 1 and SECRET in result.stdout


def test_a_base_linked_inside_its_folder_is_read(repo):
    blueprint = _extending(repo, "1.0.0-real.yaml")
    (repo / "bases/platform/1.0.0-real.yaml").write_text(HEAD + "metadata: {labels: {platform: x}}\n")
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 0, result.stdout


def test_a_bases_folder_linked_outside_the_repository_is_refused(tmp_path, repo):
    shared = tmp_path / "shared/platform"
    shared.mkdir(parents=True)
    (shared / "1.0.0.yaml").write_text(SECRET + "\n")
    blueprint = repo / "bp.yaml"
    blueprint.write_text(HEAD + "extends: {name: platform, version: 1.0.0}\n" + "metadata: {name: a, version: 1.0.0}\n")
    (repo / "bases").symlink_to(tmp_path / "shared")
    result = run_cli("validate", str(blueprint))
    assert result.returncode == 1 and f"leads outside {repo}" in result.stdout
    assert SECRET not in result.stdout + result.stderr


def test_a_blueprint_linked_outside_its_repository_is_refused_without_quoting_it(tmp_path, repo):
    link = repo / "bp.yaml"
    link.symlink_to(tmp_path / "secret.txt")
    for command in ("validate", "render", "plan"):
        result = run_cli(command, str(link), cwd=tmp_path)
        assert result.returncode == 1 and "Traceback" not in result.stderr, (command, result.stderr)
        assert f"{link}:1:1: error: the file is a symlink that leads outside its repository {repo}" in result.stdout
        assert SECRET not in result.stdout + result.stderr
    assert not (tmp_path / "rendered").exists()


def test_the_repository_is_the_git_top_level_else_the_blueprints_folder(tmp_path):
    top = tmp_path / "top"
    (top / "blueprints").mkdir(parents=True)
    (top / "shared").mkdir()
    (top / "shared/real.yaml").write_text(REF.read_text())
    link = top / "blueprints/bp.yaml"
    link.symlink_to("../shared/real.yaml")
    outside = run_cli("validate", str(link))  # no .git: the repository is top/blueprints
    assert outside.returncode == 1 and f"outside its repository {top / 'blueprints'}" in outside.stdout
    (top / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git is a file
    assert run_cli("validate", str(link)).returncode == 0


# --- 7. render --check follows no symlink and sees modes --------------------------------------------

def _drift(stdout: str) -> list[str]:
    """The lines of `render --check` about files, without the blueprint's findings (the reference
    blueprint has a warning: its run outlasts a Capacity Block)."""
    return [line for line in stdout.splitlines() if line.startswith(("stale: ", "missing: ", "extra: "))]


def _rendered(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0
    return out


@pytest.mark.parametrize("target", ["/dev/zero", "dangling", "copy"])
def test_check_reports_a_symlink_where_a_rendered_file_belongs(tmp_path, target):
    out = _rendered(tmp_path)
    env = out / "train/nccl.env"
    copy = tmp_path / "copy.env"
    copy.write_bytes(env.read_bytes())
    env.unlink()
    env.symlink_to({"/dev/zero": "/dev/zero", "dangling": str(tmp_path / "none"), "copy": str(copy)}[target])
    started = time.monotonic()
    result = run_cli("render", str(REF), "-o", str(out), "--check")
    assert time.monotonic() - started < 60
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert _drift(result.stdout)[0] == f"stale: {env}: not a regular file (a symlink)"


def test_check_does_not_open_a_fifo_or_enter_a_linked_folder(tmp_path):
    out = _rendered(tmp_path)
    (out / "train/nccl.env").unlink()
    os.mkfifo(out / "train/nccl.env")
    shutil.copytree(out / "serve", tmp_path / "serve-copy")
    shutil.rmtree(out / "serve")
    (out / "serve").symlink_to(tmp_path / "serve-copy")
    result = run_cli("render", str(REF), "-o", str(out), "--check")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert f"stale: {out}/train/nccl.env: not a regular file (a FIFO)" in lines
    assert f"stale: {out}/serve/k8s/namespace.yaml: not a regular file (serve is a symlink, not a folder)" in lines
    assert f"extra: {out}/serve" in lines


def test_check_reports_a_script_that_lost_its_executable_bit(tmp_path, elastic):
    source, files = elastic
    out = tmp_path / "out"
    assert run_cli("render", str(source), "-o", str(out)).returncode == 0
    assert run_cli("render", str(source), "-o", str(out), "--check").returncode == 0
    (out / "train/slurm/bin/resume").chmod(0o644)
    (out / "train/slurm/gres.conf").chmod(0o755)
    result = run_cli("render", str(source), "-o", str(out), "--check")
    assert result.returncode == 1
    assert _drift(result.stdout)[:2] == [
        f"stale: {out}/train/slurm/bin/resume: mode 0644 is not executable, and the rendered file is a script",
        f"stale: {out}/train/slurm/gres.conf: mode 0755 is executable, and the rendered file is not a script"]


def test_check_reports_a_script_executable_by_its_user_only(tmp_path, elastic, monkeypatch):
    """Issue 24 item 5: 0755 -> 0744 left the user's x bit, and --check said "up to date" although group
    and others may read the program and no longer run it. Whatever umask wrote the render, a render
    and its check agree: a class whose x bit the umask masks is not asked to have it."""
    source, files = elastic
    out = tmp_path / "out"
    monkeypatch.setattr(os, "umask", os.umask)  # restored after the test
    previous = os.umask(0o022)
    try:
        assert main(["render", str(source), "-o", str(out)]) == 0
        (out / "train/slurm/bin/resume").chmod(0o744)
        (out / "train/slurm/gres.conf").chmod(0o645)  # executable by others only
        drift = output.compare(files, out)
        assert drift.stale == ("train/slurm/bin/resume", "train/slurm/gres.conf")
        assert drift.why == {
            "train/slurm/bin/resume": "mode 0744 is not executable by group or others, who may read it, and the "
                                      "rendered file is a script",
            "train/slurm/gres.conf": "mode 0645 is executable, and the rendered file is not a script"}
        (out / "train/slurm/bin/resume").chmod(0o711)  # readable by its user only: nothing else may run it
        (out / "train/slurm/gres.conf").chmod(0o644)
        assert output.compare(files, out).clean
        for mask, mode in ((0o077, 0o700), (0o027, 0o750), (0o011, 0o766)):  # each umask's own render is clean
            os.umask(mask)
            shutil.rmtree(out)
            assert main(["render", str(source), "-o", str(out)]) == 0
            assert stat.S_IMODE((out / "train/slurm/bin/resume").stat().st_mode) == mode
            assert output.compare(files, out).clean, oct(mask)
    finally:
        os.umask(previous)


def test_check_reports_an_extra_empty_folder(tmp_path):
    """Issue 24 item 5: an empty folder left in the output was not reported; a render removes it."""
    out = _rendered(tmp_path)
    (out / "old-fleet/k8s").mkdir(parents=True)
    (out / "serve/k8s/empty").mkdir()
    (out / "train/nccl.env").unlink()
    (out / "train/nccl.env").mkdir()  # an empty folder where a rendered file belongs
    result = run_cli("render", str(REF), "-o", str(out), "--check")
    assert result.returncode == 1
    assert _drift(result.stdout) == [f"stale: {out}/train/nccl.env: not a regular file (an empty folder)",
                                     f"extra: {out}/old-fleet/k8s/", f"extra: {out}/serve/k8s/empty/"]
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0
    assert run_cli("render", str(REF), "-o", str(out), "--check").returncode == 0
    assert not (out / "old-fleet").exists()


@pytest.mark.parametrize("who", ["a user's own folder", "another blueprint's render"])
def test_whether_a_folder_may_be_replaced_is_decided_under_its_lock(tmp_path, monkeypatch, who):
    """Issue 24 item 4: render decided the folder was its own, then took the lock; in between the folder
    could become a user's (or another render's, of another blueprint), and render replaced it. The
    folder changes here while the lock is being taken: render must see it and refuse."""
    out = tmp_path / "out"
    out.mkdir()  # empty: render may use it, before the lock
    taking = output.locked

    @contextlib.contextmanager
    def locked_after_a_change(real, display):
        if who == "a user's own folder":
            (real / "thesis.tex").write_text("years of work\n")
        else:
            (real / "manifest.json").write_text('{"blueprint": {"name": "someone-else"}, "tool": {"name": "fleetform"}}')
        with taking(real, display):
            yield

    monkeypatch.setattr(output, "locked", locked_after_a_change)
    assert main(["render", str(REF), "-o", str(out)]) == 2
    left = sorted(p.name for p in out.iterdir())
    assert left == (["thesis.tex"] if who == "a user's own folder" else ["manifest.json"])
    assert not output.lock_path(out).exists()


def test_a_manifest_that_is_a_link_to_dev_zero_is_not_fleetforms(tmp_path):
    out = _rendered(tmp_path)
    (out / "manifest.json").unlink()
    (out / "manifest.json").symlink_to("/dev/zero")
    result = run_cli("render", str(REF), "-o", str(out))
    assert result.returncode == 2 and "holds files fleetform did not render" in result.stderr


def test_plan_files_kept_by_a_render_are_only_regular_files(tmp_path):
    out = _rendered(tmp_path)
    assert run_cli("plan", str(REF), "-o", str(out)).returncode == 0
    (out / "plan.md").unlink()
    (out / "plan.md").symlink_to("/dev/zero")
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0
    assert (out / "plan.json").is_file() and not os.path.lexists(out / "plan.md")


# --- 8. folder errors are usage errors (exit 2) naming the path and the reason --------------------

def _cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    return code, captured.err


def test_output_under_a_regular_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x\n")
    for command in ("render", "plan"):
        code, err = _cli(capsys, command, str(REF), "-o", str(tmp_path / "file/out"))
        assert code == 2 and f"{tmp_path / 'file'} is not a folder" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_output_in_proc(capsys):
    """/proc refuses new folders even to root."""
    code, err = _cli(capsys, "render", str(REF), "-o", "/proc/fleetform-out")
    assert code == 2 and "/proc" in err and ("No such file" in err or "denied" in err or "not permitted" in err), err
    code, err = _cli(capsys, "plan", str(REF), "-o", "/proc/fleetform-out")
    assert code == 2 and "/proc" in err


def _inject(monkeypatch, call: str, code: int, when) -> None:
    """Make os.<call> fail with errno code when when(*args) holds: the read-only folder or full disk
    that root, who ignores permission bits, cannot otherwise meet in a temporary folder."""
    real = getattr(os, call)

    def failing(*args, **kwargs):
        if when(*args):
            raise OSError(code, os.strerror(code), str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, call, failing)


@pytest.mark.parametrize("call", ["mkdir", "open"])
def test_a_read_only_parent_is_a_usage_error_and_leaves_nothing(tmp_path, capsys, monkeypatch, call):
    """EROFS injected at os.mkdir (the staging folder) or at os.open (the first rendered file)."""
    _inject(monkeypatch, call, errno.EROFS,
            lambda path, *args: ".fleetform.new." in str(path) and (call == "mkdir" or args[0] & os.O_EXCL))
    code, err = _cli(capsys, "render", str(REF), "-o", str(tmp_path / "out"))
    assert code == 2 and err.startswith(f"fleetform: error: cannot write {tmp_path / 'out'}: ")
    assert "Read-only file system" in err
    assert list(tmp_path.iterdir()) == []  # no staging folder, no lock file


def test_plan_into_a_read_only_folder(tmp_path, capsys, monkeypatch):
    """EACCES injected at os.open of plan.json's temporary file."""
    _inject(monkeypatch, "open", errno.EACCES, lambda path, *args: str(path).endswith(".fleetform.tmp"))
    code, err = _cli(capsys, "plan", str(REF), "-o", str(tmp_path))
    assert code == 2 and "Permission denied" in err and str(tmp_path / ".plan.json.fleetform.tmp") in err
    assert list(tmp_path.iterdir()) == []


def test_plan_on_a_full_disk_leaves_no_half_written_file(tmp_path, capsys, monkeypatch):
    """ENOSPC injected at the rename of plan.md's temporary file, after it was written whole: plan.json
    is in place, plan.md is not, and no temporary file stays."""
    _inject(monkeypatch, "replace", errno.ENOSPC, lambda source, target, *args: str(target).endswith("plan.md"))
    code, err = _cli(capsys, "plan", str(REF), "-o", str(tmp_path))
    assert code == 2 and "No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_a_previous_render_that_cannot_be_removed(tmp_path, capsys, monkeypatch):
    """The new render is in place, the exit is 2 with the leftover named, and the next render removes it."""
    out = tmp_path / "out"
    assert _cli(capsys, "render", str(REF), "-o", str(out))[0] == 0
    real_rmtree = shutil.rmtree

    def busy(path, *args, **kwargs):
        if kwargs.get("ignore_errors"):
            return real_rmtree(path, *args, **kwargs)
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))

    monkeypatch.setattr(shutil, "rmtree", busy)
    source = tmp_path / "bp.yaml"
    source.write_text(REF.read_text().replace("nodes: 6 ", "nodes: 8 "))
    code, err = _cli(capsys, "render", str(source), "-o", str(out))
    assert code == 2 and "the new render is in place" in err and "Device or resource busy" in err
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.fleetform.")]
    assert len(leftovers) == 1 and leftovers[0] in err
    assert _contents(out) == render(check(source).model)
    monkeypatch.undo()
    assert _cli(capsys, "render", str(source), "-o", str(out))[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bp.yaml", "out"]


# --- 9. the lock, stale staging folders, and a swap that is whole at every instant ----------------

def test_a_second_render_of_a_locked_folder_exits_2_naming_the_holder(tmp_path):
    out = tmp_path / "out"
    with output.locked(out, out):
        for command in ("render", "plan"):
            result = run_cli(command, str(REF), "-o", str(out))
            assert result.returncode == 2, result.stderr
            assert f"{out} is locked by pid {os.getpid()}, which is writing it" in result.stderr
    assert not (tmp_path / ".out.fleetform.lock").exists()  # released and removed
    assert run_cli("render", str(REF), "-o", str(out)).returncode == 0


def _slow(function):
    def wrapper(*args, **kwargs):
        time.sleep(0.3)
        return function(*args, **kwargs)
    return wrapper


def test_concurrent_renders_of_one_folder_both_end_correctly(tmp_path):
    """Forked renders released together by a pipe, with slow renames, so they do collide: each ends
    with 0, or 2 and "locked by pid N"; the folder holds one whole render and nothing is beside it."""
    out = tmp_path / "out"
    expected = render(check(REF).model)
    for round_ in range(5):
        read_end, write_end = os.pipe()
        children = []
        for i in range(4):
            log = tmp_path / f"log{round_}.{i}"
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 3
                try:
                    os.close(write_end)
                    sys.stdout = sys.stderr = open(log, "w")
                    for name in ("rename", "replace"):  # slow swaps: the renders overlap there
                        setattr(os, name, _slow(getattr(os, name)))
                    os.read(read_end, 1)  # wait for the start
                    code = main(["render", str(REF), "-o", str(out)])
                    sys.stderr.flush()
                finally:
                    os._exit(code)
            children.append((pid, log))
        os.close(read_end)
        os.close(write_end)  # every child's read returns now
        codes = []
        for pid, log in children:
            _, status = os.waitpid(pid, 0)
            code, text = os.waitstatus_to_exitcode(status), log.read_text()
            # "locked by pid N", or "by another process" when the holder has not written its pid yet
            assert code == 0 or (code == 2 and "is locked by " in text), text
            codes.append(code)
            log.unlink()
        assert 0 in codes
        assert _contents(out) == expected
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_stale_staging_folders_of_fleetforms_naming_are_removed(tmp_path):
    out = tmp_path / "out"
    for name in (".out.fleetform.new.4242.0badcafe", ".out.fleetform.old.4242.12345678"):
        (tmp_path / name / "train").mkdir(parents=True)
        (tmp_path / name / "train/nccl.env").write_text("half\n")
    (tmp_path / ".out.mine").mkdir()  # not fleetform's naming: kept
    (tmp_path / ".other.fleetform.new.1.ab").mkdir()  # another output's: kept
    output.write(render(check(REF).model), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.fleetform.new.1.ab", ".out.mine", "out"]


_STEPS = ("mkdir", "open", "chmod", "rename", "replace", "unlink", "rmdir", "scandir")


def _killed_at(step: int, files: dict[str, bytes], out: Path, exchange: bool) -> bool:
    """Render files to out in a forked child that dies (os._exit, like SIGKILL: no clean-up runs)
    just before its step-th call of an os function of the write (or of the exchange). True if the
    child got that far and died, False if it finished first."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            count = [0]

            def trap(function):
                def wrapper(*args, **kwargs):
                    count[0] += 1
                    if count[0] == step:
                        os._exit(9)
                    return function(*args, **kwargs)
                return wrapper

            for name in _STEPS:
                setattr(os, name, trap(getattr(os, name)))
            output.exchange = trap(output.exchange if exchange else lambda a, b: False)
            output.write(files, out)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 9


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "fallback"])
def test_a_kill_at_any_step_of_the_swap_leaves_a_whole_render(tmp_path, elastic, exchange):
    _source, new = elastic
    old = render(check(REF).model)
    step, absent = 0, []
    while True:
        step += 1
        case = tmp_path / str(step)
        out = case / "out"
        output.write(old, out)
        if not _killed_at(step, new, out, exchange):
            break
        if out.exists():
            assert _contents(out) in (old, new), f"killed before step {step}: a mixed render"
        else:
            absent.append(step)
            leftovers = [p for p in case.iterdir() if ".fleetform.old." in p.name]
            assert len(leftovers) == 1 and _contents(leftovers[0]) == old
        output.write(new, out)  # a following render cleans up what the kill left
        assert _contents(out) == new
        assert sorted(p.name for p in case.iterdir()) == ["out"]
        shutil.rmtree(case)
    assert step > 20  # every step of the write was a kill point
    if exchange:
        assert absent == []  # renameat2(RENAME_EXCHANGE): the path is never without a render
    else:
        assert len(absent) == 1  # the fallback's one window: between its two renames


def test_the_exchange_swaps_two_folders_in_one_step(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "one").write_text("a\n")
    assert output.exchange(a, b) is True  # Linux with glibc >= 2.28 on a local file system
    assert (b / "one").read_text() == "a\n" and not (a / "one").exists()


def test_a_file_system_without_exchange_takes_the_fallback(monkeypatch):
    """renameat2 failing with EINVAL (the file system has no RENAME_EXCHANGE) or ENOSYS means "use the
    two renames"; any other error (EBUSY: a mount point) is the write's error."""
    def failing(code):
        def renameat2(*args):
            ctypes.set_errno(code)
            return -1
        return renameat2

    for code, swapped in ((errno.EINVAL, False), (errno.ENOSYS, False)):
        monkeypatch.setattr(output, "_renameat2", lambda code=code: failing(code))
        assert output.exchange(Path("a"), Path("b")) is swapped
    monkeypatch.setattr(output, "_renameat2", lambda: failing(errno.EBUSY))
    with pytest.raises(OSError, match="Device or resource busy"):
        output.exchange(Path("a"), Path("b"))


# --- 13. the umask and the user's folder ------------------------------------------------------------

def test_files_and_folders_follow_the_umask(tmp_path, elastic):
    source, files = elastic
    out = tmp_path / "out"
    result = subprocess.run(["sh", "-c", f'umask 027 && exec "{sys.executable}" -m fleetform render "{source}" -o "{out}"'],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    modes = {p: mode for p, (_data, mode) in _tree(out).items()}
    assert modes["train/slurm/bin/resume"] == 0o750 and modes["train/slurm/slurm.conf"] == 0o640
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.rglob("*") if p.is_dir()} == {0o750}
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert run_cli("render", str(source), "-o", str(out), "--check").returncode == 0  # modes differ, +x agrees


def test_a_symlinked_empty_0700_folder_keeps_its_link_and_mode(tmp_path):
    target = tmp_path / "private"
    target.mkdir(mode=0o700)
    target.chmod(0o700)
    link = tmp_path / "out"
    link.symlink_to(target)
    for _ in range(2):  # the first render and the one that replaces it
        assert run_cli("render", str(REF), "-o", str(link)).returncode == 0
        assert link.is_symlink() and os.readlink(link) == str(target)
        assert stat.S_IMODE(target.stat().st_mode) == 0o700
        assert (target / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "private"]
    assert run_cli("render", str(REF), "-o", str(link), "--check").returncode == 0


def test_a_dangling_symlink_as_output_is_a_usage_error(tmp_path):
    (tmp_path / "out").symlink_to(tmp_path / "gone/deeper")
    result = run_cli("render", str(REF), "-o", str(tmp_path / "out"))
    assert result.returncode == 2 and "which does not exist" in result.stderr
    assert not (tmp_path / "gone").exists()


def test_a_symlink_loop_as_output_is_a_usage_error(tmp_path):
    """Path.resolve() raises RuntimeError on a loop (exit 3 before); the loop is now the write's to report."""
    (tmp_path / "loop").symlink_to("loop")
    for out in ("loop", "loop/x"):
        result = run_cli("render", str(REF), "-o", str(tmp_path / out))
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"{tmp_path / 'loop'}" in result.stderr and "is not a folder" in result.stderr
        assert run_cli("render", str(REF), "-o", str(tmp_path / out), "--check").returncode == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop"]
