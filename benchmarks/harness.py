"""What the benchmarks share: whole commands timed as fresh processes, interleaved with their floor.

A case is a command line. `interleaved` runs every case of a comparison once per round, round after
round, so a busy machine (two cores shared with other work) slows the subject and its floor alike;
the figures that matter are ratios of medians measured in the same run. Each process is measured
by wait4's rusage: CPU time (user + system), wall time and peak RSS of that process alone.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = [sys.executable]
FLEETFORM = PY + ["-c", "from fleetform.cli import run; run()"]
"""What the installed `fleetform` script runs (pip's console-script wrapper is these two lines)."""

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Bytecode is written and read, as for an installed fleetform (pip compiles it at install time)."""


@dataclass(frozen=True)
class Sample:
    cpu: float  # seconds, user + system
    wall: float  # seconds
    rss_mib: float  # peak resident set of the process


def run(command: list[str], capture: bool = False, ok: tuple[int, ...] = (0,)) -> tuple[Sample, bytes]:
    """One fresh process; its stdout when `capture`. A failed command stops the benchmark with the end
    of what it printed (validate's findings are on stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT, env=ENV)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            printed = b""
            for stream in (out, err):
                stream.seek(0)
                printed += stream.read()
            raise SystemExit(f"{' '.join(command)} exited {code}:\n{printed.decode(errors='replace')[-2000:]}")
        out.seek(0)
        return Sample(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024), out.read() if capture else b""


def interleaved(cases: dict[str, list[str]], runs: int, warmup: int = 1) -> dict[str, list[Sample]]:
    """`runs` samples of each case, one case after the other in every round, after `warmup` rounds."""
    samples: dict[str, list[Sample]] = {name: [] for name in cases}
    for index in range(warmup + runs):
        for name, command in cases.items():
            sample, _ = run(command)
            if index >= warmup:
                samples[name].append(sample)
    return samples


def median(samples: list[Sample], field: str = "cpu") -> float:
    return statistics.median(getattr(s, field) for s in samples)


def spread(samples: list[Sample], field: str = "cpu", scale: float = 1000, unit: str = "ms") -> str:
    """`median (min-max)` of one field, e.g. `412 ms (398-430)`."""
    values = [getattr(s, field) * scale for s in samples]
    digits = 0 if statistics.median(values) >= 100 else 1
    return (f"{statistics.median(values):.{digits}f} {unit} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def ratio(subject: list[Sample], floor: list[Sample], field: str = "cpu") -> float:
    return median(subject, field) / median(floor, field)


def verdict(value: float, goal: float, below: bool = True) -> str:
    met = value <= goal if below else value >= goal
    return f"goal {'<=' if below else '>='} {goal:g}: {'met' if met else 'NOT MET'}"


def machine() -> str:
    nproc = shutil.which("nproc")
    cores = subprocess.run([nproc], capture_output=True, text=True).stdout.strip() if nproc else str(os.cpu_count())
    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.machine()}, nproc {cores}; "
            f"Python {platform.python_version()}")


def header(title: str, runs: int) -> None:
    print(f"{title}\n{machine()}; {runs} runs per case, interleaved; whole commands are fresh processes "
          "(CPU time user+system, median (min-max))")
