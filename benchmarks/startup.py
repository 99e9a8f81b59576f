"""Start-up cost of the commands a user waits for, as whole processes against their import floor.

Each figure is the CPU time (user + system, from wait4's rusage) of a fresh process, several runs
interleaved with the floor's runs so that a busy machine slows both alike; the ratio of the medians
is what issue 13 sets goals for:

- `fleetform validate blueprints/reference.yaml` at most 1.2x `python -c 'import yaml, jsonschema'`
- `fleetform --help` at most 1.1x `python -c 'import argparse'` (the bare interpreter plus argparse)

and, beside each, what fleetform itself adds: the ratio to the same imports made and ended the way
the `fleetform` script makes and ends its own (see CASES).

Run: .venv/bin/python benchmarks/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "blueprints/reference.yaml"

PY = [sys.executable]
FLEETFORM = PY + ["-c", "from fleetform.cli import run; run()"]
"""What the installed `fleetform` script runs (pip's console-script wrapper is these two lines)."""

def _as_fleetform_exits(imports: str) -> list[str]:
    """The floor's imports made the way the `fleetform` script makes its own (the collector off, then
    frozen) and its exit without the interpreter's teardown (fleetform.cli.run)."""
    return PY + ["-c", f"import gc, os; gc.disable(); import {imports}; gc.freeze(); gc.enable(); os._exit(0)"]


CASES = [
    # (name, command, floor name, floor imports, goal)
    ("validate reference", FLEETFORM + ["validate", str(REFERENCE)], "import yaml, jsonschema", "yaml, jsonschema",
     1.2),
    ("--help", FLEETFORM + ["--help"], "import argparse", "argparse", 1.1),
]
"""Each goal is the ratio to the floor as issue 13 defines it: a process that imports the libraries
and exits as Python does. Beside it, for what fleetform itself adds, the ratio to the same imports
made and ended the way fleetform makes and ends its own (not a goal: the cost of fleetform's own
modules and checking, without what its way of starting and exiting saves on the libraries)."""


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Bytecode is written and read, as for an installed fleetform (pip compiles it at install time);
otherwise fleetform would be compiled in every run while the floor's libraries are not."""


def cpu_seconds(command: list[str]) -> float:
    """CPU time of one fresh process (user + system), its output discarded."""
    with open(os.devnull, "wb") as devnull:
        process = subprocess.Popen(command, stdout=devnull, stderr=devnull, cwd=ROOT, env=ENV)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def measure(commands: list[list[str]], runs: int) -> list[list[float]]:
    """CPU seconds of each command, `runs` times, interleaved round by round."""
    for command in commands:
        cpu_seconds(command)  # warm the file cache and write the .pyc files
    samples: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for command, out in zip(commands, samples, strict=True):
            out.append(cpu_seconds(command))
    return samples


def describe(samples: list[float]) -> str:
    quartiles = statistics.quantiles(samples, n=4)
    return (f"median {statistics.median(samples) * 1000:6.1f} ms  "
            f"(IQR {quartiles[0] * 1000:.1f}-{quartiles[2] * 1000:.1f}, "
            f"min {min(samples) * 1000:.1f}, max {max(samples) * 1000:.1f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="fresh processes per command and per floor")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Python {platform.python_version()}; "
          f"{platform.machine()}, {os.cpu_count()} CPUs; {args.runs} runs each, CPU time of whole processes")
    failed = False
    for name, command, floor_name, imports, goal in CASES:
        ours, base, same = measure([command, PY + ["-c", f"import {imports}"], _as_fleetform_exits(imports)],
                                   args.runs)
        ratio = statistics.median(ours) / statistics.median(base)
        ratios = sorted(o / b for o, b in zip(ours, base, strict=True))
        print(f"\n{name}\n  fleetform  {describe(ours)}\n  floor      {describe(base)}   [{floor_name}]")
        print(f"  ratio      {ratio:.2f}x the floor (goal <= {goal}x; run by run "
              f"{ratios[len(ratios) // 4]:.2f}-{ratios[3 * len(ratios) // 4]:.2f}x IQR)"
              + ("" if ratio <= goal else "  ABOVE GOAL"))
        print(f"  own share  {statistics.median(ours) / statistics.median(same):.2f}x the floor imported and exited "
              f"as fleetform does ({statistics.median(same) * 1000:.1f} ms; not a goal)")
        failed = failed or ratio > goal
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
