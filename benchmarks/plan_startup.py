"""Benchmark: `fleetform plan` of the reference blueprint against the cost of importing what it uses
(issue 19, "Speed").

    python benchmarks/plan_startup.py [--runs N] [--blueprint PATH]

Four fresh processes per round, interleaved round by round (benchmarks/harness.py), CPU time
(user + system from wait4) the figure, wall time beside it:

- subject: `fleetform plan BLUEPRINT --format json`, as the installed script runs it;
- floor "what it uses": a process that imports exactly the library modules that plan leaves loaded
  (every module in sys.modules after an in-process `fleetform plan` of the same blueprint, fleetform's
  own modules left out, and the lazily registered stubs of pulumi_aws and pulumi_kubernetes that plan
  never touches left out too: importing those would load hundreds of unused modules), each made to
  load (an attribute read loads a lazy module), in the order plan loaded them. Measured twice: made
  and ended as fleetform makes and ends its imports (the cyclic collector off while importing, no
  interpreter teardown at exit: the goal's floor, so that what plan adds is fleetform's own modules
  and work), and as Python makes and ends them (`python -c 'import ...'`);
- floor "pulumi, pulumi_aws": `python -c 'import pulumi, pulumi_aws'`, the figure issue 19 started from.

The goal is plan at most 1.5x the floor "what it uses" made and ended as fleetform does (ratio of the
medians). Exit 1 when not met.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import FLEETFORM, PY, ROOT, header, interleaved, median, ratio, spread, verdict  # noqa: E402

GOAL = 1.5

LIST_MODULES = r"""
import contextlib, io, json, sys
from fleetform.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["plan", sys.argv[1], "--format", "json"])
names = [name for name, module in list(sys.modules.items())
         if name != "__main__" and name.split(".")[0] != "fleetform" and type(module).__name__ != "_LazyModule"]
print(json.dumps({"code": code, "modules": names}))
"""
"""Run plan in-process, then list what it loaded. A module pulumi registered lazily and plan never used
is still a _LazyModule (pulumi._utils.lazy_import, a copy of importlib.util.LazyLoader, turns it into a
plain module on its first attribute read; type() reads no attribute), so it is left out."""

FLOOR = r"""
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    getattr(module, "__name__")  # a lazily registered module loads here, as plan's first use loaded it
"""
FLOOR_AS_FLEETFORM = ("import gc, os; gc.disable()\n" + FLOOR + "gc.freeze(); gc.enable(); os._exit(0)\n")
"""The same imports made the way the `fleetform` script and plan make theirs (the cyclic collector
off) and ended the way the script ends (no teardown of the interpreter): what is left of plan beyond
it is fleetform's own work and modules (benchmarks/startup.py's "own share")."""


def used_modules(blueprint: str) -> list[str]:
    out = subprocess.run(PY + ["-c", LIST_MODULES, blueprint], check=True, capture_output=True, text=True,
                         cwd=ROOT).stdout
    data = json.loads(out)
    if data["code"] not in (0,):
        raise SystemExit(f"fleetform plan {blueprint} exited {data['code']}: the benchmark needs a plan that passes")
    return data["modules"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--blueprint", default=str(ROOT / "blueprints/reference.yaml"))
    parser.add_argument("--before", metavar="PYTHON",
                        help="also time the plan of another fleetform, the one PYTHON imports (an environment "
                             "with a checkout from before a change), in the same rounds")
    args = parser.parse_args()
    header(f"plan of {Path(args.blueprint).name} against the import floors", args.runs)
    modules = used_modules(args.blueprint)
    libraries = sorted({m.split(".")[0] for m in modules if m.split(".")[0] in
                        ("pulumi", "pulumi_aws", "pulumi_kubernetes", "pulumi_command", "yaml", "jsonschema",
                         "jinja2", "grpc", "google")})
    cases = {
        "plan": FLEETFORM + ["plan", args.blueprint, "--format", "json"],
        "floor: what it uses": PY + ["-c", FLOOR, json.dumps(modules)],
        "floor: pulumi, pulumi_aws": PY + ["-c", "import pulumi, pulumi_aws"],
        "floor as fleetform imports": PY + ["-c", FLOOR_AS_FLEETFORM, json.dumps(modules)],
    }
    if args.before:  # sys.path's first entry, the current folder, would be this checkout's fleetform
        cases["plan (before)"] = [args.before, "-c", "import sys; del sys.path[0]; from fleetform.cli import run; run()",
                                  "plan", args.blueprint, "--format", "json"]
    samples = interleaved(cases, args.runs)
    print(f"\nthe floor 'what it uses' imports {len(modules)} modules ({', '.join(libraries)} among them)\n")
    print(f"{'case':>27}  {'CPU':>24}  {'wall':>24}  {'peak RSS':>9}")
    for name, got in samples.items():
        print(f"{name:>27}  {spread(got):>24}  {spread(got, 'wall'):>24}  {median(got, 'rss_mib'):>5.0f} MiB")
    used = ratio(samples["plan"], samples["floor: what it uses"])
    bare = ratio(samples["plan"], samples["floor: pulumi, pulumi_aws"])
    own = ratio(samples["plan"], samples["floor as fleetform imports"])
    print(f"\nplan / importing what it uses, made and ended as fleetform makes and ends its imports: {own:.2f}x CPU "
          f"({ratio(samples['plan'], samples['floor as fleetform imports'], 'wall'):.2f}x wall) ({verdict(own, GOAL)})")
    print(f"plan / importing what it uses: {used:.2f}x CPU "
          f"({ratio(samples['plan'], samples['floor: what it uses'], 'wall'):.2f}x wall) (as Python imports and exits; "
          "not a goal)")
    print(f"plan / importing pulumi and pulumi_aws: {bare:.2f}x CPU "
          f"({ratio(samples['plan'], samples['floor: pulumi, pulumi_aws'], 'wall'):.2f}x wall) (not a goal)")
    if args.before:
        print(f"plan / plan (before): {ratio(samples['plan'], samples['plan (before)']):.2f}x CPU")
    return 0 if own <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
