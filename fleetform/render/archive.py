"""The rendered files as one deterministic archive: what the Pulumi program uploads as a single S3
object and what every node downloads and checks against manifest.json.

Entries sorted, manifest.json among them at the root; modes as `fleetform render` writes them
(0755 for a script, 0644 for data); owner 0:0 without names; mtime 0; gzip without a file name or
a time. The same files give the same bytes on every machine and every run, so an unchanged render
is an unchanged object.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from typing import Mapping

from .output import is_script


def mode_of(data: bytes) -> int:
    return 0o755 if is_script(data) else 0o644


def archive(files: Mapping[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), mode_of(data), 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()
