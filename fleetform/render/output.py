"""Writing rendered files: deterministic bytes, a locked and atomic swap, and --check without writing.

A render is a mapping of relative POSIX paths to bytes. `write` puts it in a staging folder beside
the destination and swaps it into place:

- A lock: `.<name>.fleetform.lock` beside the output folder, held with flock(2) for the whole write.
  A second render (or `plan -o`) of the same folder stops with "locked by pid N" instead of racing.
  The lock goes away with its process, so a killed render never leaves the folder locked.
- The swap: on Linux, renameat2(2) with RENAME_EXCHANGE exchanges the staging folder and the output
  folder in one step (ext4, btrfs, tmpfs, xfs and more; see rename(2)), so at every instant the path
  holds the complete old render or the complete new one. Where the system cannot exchange (another
  OS, a file system without it) the old folder is renamed away and the new one in: two renames,
  between which the path is briefly absent.
- Clean-up: staging folders are named `.<name>.fleetform.new.<pid>.<hex>` (and `.old.` for the
  fallback). A render holding the lock removes every such folder of its output that a killed
  render left behind; nothing else beside the output is ever touched.
- Permissions: files are created 0666 and scripts (`#!`) 0777, less the umask, as any program's
  files are; folders 0777 less the umask. An output folder that already exists keeps its mode,
  and a symlink given as the output folder stays a symlink: the folder it leads to is replaced.

`compare` tells which files are stale, missing or extra without touching anything and without
following a symlink inside the output: a symlink, FIFO, device or empty folder where a rendered file
belongs is stale ("not a regular file"), and so is a file whose executable bits differ from the
render's (a script executable by every class that may read it, unless the umask masks that class's
x; any other file by none). An empty folder the render does not hold is extra (`path/`).

Every OSError becomes an `OutputError` that names the path and the system's reason; the commands
report it as a usage error (exit 2).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import os
import re
import secrets
import shutil
import stat
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping


class OutputError(Exception):
    """The output could not be written or read; the message names the path and the reason."""


def is_script(data: bytes) -> bool:
    """A rendered file is executable exactly when it starts with a shebang."""
    return data.startswith(b"#!")


@dataclass(frozen=True)
class Drift:
    stale: tuple[str, ...]  # present with other content, another mode, or not a regular file
    missing: tuple[str, ...]  # rendered but not on disk
    extra: tuple[str, ...]  # on disk but not rendered
    why: Mapping[str, str] = field(default_factory=dict)  # a stale path -> why, when not its content

    @property
    def clean(self) -> bool:
        return not (self.stale or self.missing or self.extra)


def _reason(err: OSError, path: Path | str, *named: Path | str) -> str:
    """`FILE: what went wrong`; only what went wrong when FILE is a path the message names already."""
    file = err.filename or path
    return f"{err.strerror or err}" if str(file) in {str(n) for n in named} else f"{file}: {err.strerror or err}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _scan(root: Path) -> tuple[dict[str, os.stat_result], dict[str, str]]:
    """(regular files, other entries -> kind) under root, by relative path. Never follows a symlink
    below root (root itself may be one: a folder the user linked). An empty folder below root is an
    entry of its own, `path/` -> "an empty folder": a render holds none, and replaces it."""
    regular: dict[str, os.stat_result] = {}
    other: dict[str, str] = {}
    if not root.is_dir():
        return regular, other
    pending = [("", str(root))]
    while pending:
        prefix, folder = pending.pop()
        empty = True
        with os.scandir(folder) as entries:
            for entry in entries:
                empty = False
                rel = prefix + entry.name
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    pending.append((rel + "/", entry.path))
                elif stat.S_ISREG(st.st_mode):
                    regular[rel] = st
                else:
                    other[rel] = _kind(st.st_mode)
        if empty and prefix:
            other[prefix] = "an empty folder"
    return regular, other


def umask() -> int:
    """The process's umask, read without changing it where Linux tells it (/proc/self/status,
    Linux 4.7 and later), else set and restored at once."""
    with suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii") as status:
            return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_problem(mode: int, script: bool, mask: int) -> str | None:
    """Why a file's mode is not the one a render writes, whatever umask wrote it: a script runs for
    every class (user, group, others) that may read it, unless the umask takes only that class's x
    away; a file that is not a script runs for none."""
    mode = stat.S_IMODE(mode)
    classes = (("user", stat.S_IRUSR, stat.S_IXUSR), ("group", stat.S_IRGRP, stat.S_IXGRP),
               ("others", stat.S_IROTH, stat.S_IXOTH))
    if script:
        lacking = [who for who, r, x in classes if mode & r and not mode & x and not mask & x]
        if not mode & stat.S_IXUSR:
            return f"mode {mode:04o} is not executable, and the rendered file is a script"
        if lacking:
            return f"mode {mode:04o} is not executable by {' or '.join(lacking)}, who may read it, and the " \
                   "rendered file is a script"
        return None
    if mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
        return f"mode {mode:04o} is executable, and the rendered file is not a script"
    return None


def read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of path if it is a regular file (not a symlink, FIFO or device), else None; at most
    limit + 1 bytes when a limit is given. Other OSErrors propagate."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            return None
        raise
    with open(fd, "rb", closefd=True) as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read() if limit is None else handle.read(limit + 1)


def compare(files: Mapping[str, bytes], root: Path, ignore: tuple[str, ...] = ()) -> Drift:
    mask = umask()
    try:
        regular, other = _scan(root)
        stale, why, missing = [], {}, []
        for path, data in sorted(files.items()):
            blocked = next((a for a in _ancestors(path) if a in regular or a in other), None)
            if path + "/" in other:  # an empty folder where the file belongs
                stale.append(path)
                why[path] = "not a regular file (an empty folder)"
            elif blocked is not None:
                stale.append(path)
                why[path] = f"not a regular file ({blocked} is {other.get(blocked, 'a file')}, not a folder)"
            elif path in other:
                stale.append(path)
                why[path] = f"not a regular file ({other[path]})"
            elif path not in regular:
                missing.append(path)
            elif regular[path].st_size != len(data) or read_regular(root / path, len(data)) != data:
                stale.append(path)
            elif (problem := _mode_problem(regular[path].st_mode, is_script(data), mask)) is not None:
                stale.append(path)
                why[path] = problem
    except OSError as err:
        raise OutputError(f"cannot read {_reason(err, root)}") from None
    on_disk = [p for p in regular if p not in ignore] + [p for p in other if p.rstrip("/") not in files]
    extra = tuple(sorted(p for p in on_disk if p not in files))
    return Drift(tuple(stale), tuple(missing), extra, why)


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


# --- the lock -------------------------------------------------------------------------------------

def lock_path(real: Path) -> Path:
    return real.parent / f".{real.name}.fleetform.lock"


@contextmanager
def locked(real: Path, display: Path | str) -> Iterator[None]:
    """Hold the lock of the output folder real (its resolved path) or raise OutputError naming the
    process that holds it. The lock file is removed on release, while still held; a process that
    opened it before then sees that the path now names another file (or none) and opens it again."""
    path = lock_path(real)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f"pid {holder}" if holder.isdigit() else "another process"
            raise OutputError(f"{display} is locked by {who}, which is writing it ({path}); "
                              "try again when it has finished") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(path, follow_symlinks=False)
            mine = os.fstat(fd)
            if (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)


# --- staging and the swap -------------------------------------------------------------------------

def _staging_pattern(name: str) -> re.Pattern:
    return re.compile(rf"^\.{re.escape(name)}\.fleetform\.(?:new|old)\.[0-9]+\.[0-9a-f]+$")


def _staging_name(name: str, kind: str) -> str:
    return f".{name}.fleetform.{kind}.{os.getpid()}.{secrets.token_hex(4)}"


def clean_stale(real: Path) -> None:
    """Remove the staging folders of this output that killed renders left. Call with the lock held:
    then no live fleetform process is using any of them."""
    pattern = _staging_pattern(real.name)
    with os.scandir(real.parent) as entries:
        leftovers = [e.path for e in entries if pattern.match(e.name) and e.is_dir(follow_symlinks=False)]
    for path in sorted(leftovers):
        try:
            shutil.rmtree(path)
        except OSError as err:
            raise OutputError(f"cannot remove {path}, which a stopped render left: {_reason(err, path, path)}; "
                              "remove it by hand") from None


_RENAME_EXCHANGE = 1 << 1  # <linux/fs.h>; util-linux's exch(1) defines it the same way
_AT_FDCWD = -100


@functools.lru_cache(maxsize=1)
def _renameat2():
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def exchange(a: Path, b: Path) -> bool:
    """Swap the names a and b in one step; False when this system or file system cannot."""
    function = _renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _write_file(staging: Path, rel: str, data: bytes) -> None:
    target = staging / rel
    target.parent.mkdir(parents=True, exist_ok=True)  # 0777 less the umask
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(target, flags, 0o777 if is_script(data) else 0o666)  # the kernel applies the umask
    with open(fd, "wb", closefd=True) as handle:
        handle.write(data)


def real_folder(root: Path) -> Path:
    """The folder a render of root replaces: root itself, or the folder a symlink at root leads to
    (the link is the user's and stays). Raises OutputError for a dangling link."""
    absolute = Path(os.path.abspath(root))
    real = Path(os.path.realpath(absolute))
    if absolute.is_symlink() and not os.path.lexists(real):
        raise OutputError(f"{root} is a symlink to {real}, which does not exist; create that folder or remove the link")
    return real


def _make_folder(folder: Path) -> None:
    """mkdir -p folder (0777 less the umask), or OutputError saying which part is in the way."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        existing = next((p for p in (folder, *folder.parents) if os.path.lexists(p)), None)
        if existing is not None and not existing.is_dir():
            raise OutputError(f"cannot create the folder {folder}: {existing} is not a folder") from None
        raise OutputError(f"cannot create the folder {_reason(err, folder)}") from None


Guard = Callable[[Path], tuple[str, ...]]
"""Called with the lock held and the folder as it is then: raises OutputError when the folder may
not be replaced (it is not fleetform's), else returns the names of its files to keep."""


def write(files: Mapping[str, bytes], root: Path, keep: tuple[str, ...] = (), guard: Guard | None = None) -> None:
    """Replace root with exactly these files (and whichever `keep` files it had as regular files).
    Whether the folder may be replaced is decided by `guard`, under the lock: a decision taken
    before it could be stale by the time the lock is held (another render, a user's files)."""
    real = real_folder(root)
    _make_folder(real.parent)
    try:
        with locked(real, root):
            _write_locked(files, real, keep, guard)
    except OSError as err:
        raise OutputError(f"cannot write {root}: {_reason(err, real, root, real)}") from None


def _write_locked(files: Mapping[str, bytes], real: Path, keep: tuple[str, ...], guard: Guard | None = None) -> None:
    clean_stale(real)
    try:
        before = os.stat(real, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    if before is not None and not stat.S_ISDIR(before.st_mode):
        raise OutputError(f"{real} exists and is not a folder")
    if guard is not None:
        keep = tuple(keep) + guard(real)
    kept = {}
    for name in keep:
        data = read_regular(real / name) if before is not None and name not in files else None
        if data is not None:
            kept[name] = data
    staging = real.parent / _staging_name(real.name, "new")
    os.mkdir(staging, 0o777)
    try:
        for rel, data in sorted({**files, **kept}.items()):
            _write_file(staging, rel, data)
        if before is not None:
            os.chmod(staging, stat.S_IMODE(before.st_mode))  # the user's folder keeps its mode
            if exchange(staging, real):
                old = staging  # now holds the previous render
            else:
                old = real.parent / _staging_name(real.name, "old")
                os.rename(real, old)  # the fallback's window: the path is absent until the next rename
                os.rename(staging, real)
        else:
            os.rename(staging, real)
            old = None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        try:
            shutil.rmtree(old)
        except OSError as err:
            raise OutputError(f"the new render is in place at {real}, but the previous one could not be removed: "
                              f"{_reason(err, old)}; remove {old} by hand (the next render retries)") from None


def write_into(files: Mapping[str, bytes], root: Path) -> None:
    """Add or replace these files inside the folder root (created if need be), each atomically by a
    rename, under the same lock as `write`: `plan -o` writes its files beside a render this way."""
    real = real_folder(root)
    _make_folder(real)
    try:
        with locked(real, root):
            for rel, data in sorted(files.items()):
                temporary = real / f".{rel}.fleetform.tmp"
                try:
                    os.unlink(temporary)  # a killed writer's leftover (we hold the lock)
                except FileNotFoundError:
                    pass
                try:
                    _write_file(real, temporary.name, data)
                    os.replace(temporary, real / rel)
                except BaseException:
                    with suppress(OSError):
                        os.unlink(temporary)  # nothing half-written stays
                    raise
    except OSError as err:
        raise OutputError(f"cannot write {root}: {_reason(err, real, root, real)}") from None
