"""Writing rendered files: deterministic bytes, atomic replacement, and --check without writing.

A render is a mapping of relative POSIX paths to bytes. `write` puts it in a temporary folder
beside the destination and swaps it into place, so a failure leaves the previous output whole.
`compare` tells which files are stale, missing or extra without touching anything.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


@dataclass(frozen=True)
class Drift:
    stale: tuple[str, ...]  # present with other content
    missing: tuple[str, ...]  # rendered but not on disk
    extra: tuple[str, ...]  # on disk but not rendered

    @property
    def clean(self) -> bool:
        return not (self.stale or self.missing or self.extra)


def _existing(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def compare(files: Mapping[str, bytes], root: Path, ignore: tuple[str, ...] = ()) -> Drift:
    on_disk = {p: f for p, f in _existing(root).items() if p not in ignore}
    stale = tuple(sorted(p for p in files if p in on_disk and on_disk[p].read_bytes() != files[p]))
    missing = tuple(sorted(p for p in files if p not in on_disk))
    extra = tuple(sorted(p for p in on_disk if p not in files))
    return Drift(stale, missing, extra)


def write(files: Mapping[str, bytes], root: Path, keep: tuple[str, ...] = ()) -> None:
    """Replace root with exactly these files (and whichever `keep` files it had), atomically as far
    as the file system allows."""
    root = root.resolve()
    kept = {name: (root / name).read_bytes() for name in keep if (root / name).is_file() and name not in files}
    files = {**files, **kept}
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        for rel, data in sorted(files.items()):
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if data.startswith(b"#!"):
                target.chmod(0o755)
            else:
                target.chmod(0o644)
        staging.chmod(0o755)
        if root.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{root.name}.old.", dir=root.parent))
            os.rmdir(old)
            os.replace(root, old)  # two renames: the window without root is two syscalls wide
            os.replace(staging, root)
            shutil.rmtree(old)
        else:
            os.replace(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
