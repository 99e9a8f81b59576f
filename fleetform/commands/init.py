"""fleetform init [DIR]: a starter blueprint, its JSON Schema and the files a blueprint repository needs to
run `pulumi up` (fleetform/starter.py says what each holds). All files or none: each is written to a
temporary file beside its place, and only when every one is written are they renamed into place."""

from __future__ import annotations

import os
from pathlib import Path

from ..starter import KINDS


def add_parser(sub) -> None:
    p = sub.add_parser("init",
                       description="Write a starter blueprint that validates, with comments, the JSON Schema its "
                                   "$schema line names, and the files of a blueprint repository that runs `pulumi "
                                   "up` (Pulumi.yaml, __main__.py, Pulumi.dev.yaml, requirements.txt, README.md). "
                                   "Existing files are never replaced without --force.")
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the folder to write into (default: .)")
    p.add_argument("--kind", choices=KINDS, default="both",
                   help="a training fleet (Slurm), an inference fleet (vLLM on EKS), or both (default: both)")
    p.add_argument("--region", required=True, metavar="REGION", help="the AWS region, e.g. us-east-1")
    p.add_argument("--gpu", required=True, metavar="GPU",
                   help="a GPU (h100, h200, b200, a100, l40s, l4, a10g), which picks the instance types, or an "
                        "instance type of `fleetform catalog`")
    p.add_argument("--zone", metavar="ZONE", help="the availability zone (default: REGION + 'a')")
    p.add_argument("--name", metavar="NAME",
                   help="the blueprint's name (metadata.name and the file NAME.yaml; default: DIR's name, or "
                        "'fleets' where that is no valid name)")
    p.add_argument("--force", action="store_true", help="replace files that exist")
    p.set_defaults(run=run)


def _default_name(folder: Path) -> str:
    from ..starter import NAME

    name = folder.resolve().name.lower()
    return name if NAME.match(name) and len(name) <= 40 else "fleets"


def run(args) -> int:
    from ..catalog import load_catalog
    from ..cli import UsageError
    from ..starter import InitError, files, starter

    folder = Path(args.dir)
    try:
        chosen = starter(load_catalog(), args.kind, args.region, args.gpu, args.name or _default_name(folder),
                         args.zone)
    except InitError as err:
        raise UsageError(str(err)) from None
    texts = files(chosen)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is not a folder")
    existing = [name for name in texts if os.path.lexists(folder / name)]
    if existing and not args.force:
        raise UsageError(f"{', '.join(str(folder / n) for n in existing)} already exist{'s' if len(existing) == 1 else ''}; "
                         "nothing was written (--force replaces them)")
    folders = [name for name in existing if (folder / name).is_dir() and not (folder / name).is_symlink()]
    if folders:  # a folder cannot be replaced by a file: found now, before any file is renamed into place
        raise UsageError(f"{', '.join(str(folder / n) for n in folders)}: a folder where init writes a file; "
                         "nothing was written")
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _write_all(folder, texts)
    except OSError as err:
        from ..cli import _MACHINE_ERRORS

        if created:
            try:
                folder.rmdir()  # the folder init made, empty again: as it was, absent
            except OSError:
                pass

        if err.errno in _MACHINE_ERRORS:  # a full disk and the like: the CLI reports the machine's errors
            raise
        raise UsageError(f"cannot write {err.filename or folder}: {err.strerror or err}; nothing was written") from None
    for name in texts:
        print(f"wrote {folder / name}")
    bp = folder / f"{chosen.name}.yaml"
    from ..starter import instance_types, offerings_command

    from ..starter import requirement

    line, portable = requirement()
    if not portable:
        print(f"check: requirements.txt names {line}, which installs only where your package index has fleetform "
              "(this one was installed from a local folder or file); name its source there (the file says how) "
              "before the first `pulumi preview`")
    guess = "" if args.zone else f"{chosen.zone} is a guess (zone letters name other places in other AWS accounts); "
    print(f"check: {guess}fleetform does not know which zones of {chosen.region} offer "
          f"{', '.join(instance_types(chosen))}: list them, and set provider.availability_zone to one that offers "
          f"all: {offerings_command(chosen)}")
    print(f"next: fleetform validate {bp}; fleetform plan {bp}; then `pulumi stack init dev` and `pulumi up` in "
          f"{folder} (README.md there)")
    return 0


def _write_all(folder: Path, texts: dict[str, str]) -> None:
    """Write every file to a temporary one beside it, then rename them all into place; a failure before the
    renames removes the temporary files and leaves the folder as it was."""
    staged: list[tuple[str, str]] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for name, text in texts.items():
            temp = str(folder / f".{name}.fleetform-init.{os.getpid()}")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~umask)
            staged.append((temp, str(folder / name)))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
    except BaseException:
        for temp, _ in staged:
            try:
                os.unlink(temp)
            except OSError:
                pass
        raise
    for temp, target in staged:
        os.replace(temp, target)
