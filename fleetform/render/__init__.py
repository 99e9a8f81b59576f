"""Render: the model -> the files of DESIGN.md's output layout, plus manifest.json.

Each output family has its own small module that turns one fleet of the model into files; this
module collects them and adds the manifest. Output is deterministic: bytes depend only on the
model (no time, no cwd, no locale), and paths are sorted.
"""

from __future__ import annotations

import hashlib
import json

from .. import __version__
from ..model import Blueprint
from . import k8s, kueue, nccl, prepull, ray, slinky, slurm


def render(bp: Blueprint) -> dict[str, bytes]:
    """All rendered files of a blueprint, by relative path, manifest.json included."""
    files: dict[str, bytes] = {}
    for fleet in bp.fleets:
        files.update(slurm.files(bp, fleet))
        files.update(nccl.files(bp, fleet))
        files.update(k8s.files(bp, fleet))
        files.update(kueue.files(bp, fleet))
        files.update(ray.files(bp, fleet))
        files.update(slinky.files(bp, fleet))
        files.update(prepull.files(bp, fleet))  # an inference node group's user data
    files["manifest.json"] = manifest(bp, files)
    return dict(sorted(files.items()))


def manifest(bp: Blueprint, files: dict[str, bytes]) -> bytes:
    data = {
        "blueprint": {"name": bp.name, "version": bp.version, "sha256": bp.sha256},
        "bases": [dict(b) for b in bp.bases],
        "tool": {"name": "fleetform", "version": __version__},
        "files": {path: hashlib.sha256(content).hexdigest() for path, content in sorted(files.items())},
    }
    return (json.dumps(data, indent=2, sort_keys=False) + "\n").encode("utf-8")
