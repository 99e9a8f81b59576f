"""Benchmark: the offline plan (the Pulumi program under mocks) of a training fleet of 10, 1,000 and
10,000 nodes: time, peak memory and resource count (which must not grow with the nodes).

    python benchmarks/plan.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from render import BLUEPRINT  # noqa: E402  (the same fleet the render benchmark uses)

CHILD = r"""
import json, resource, statistics, sys, time
t0 = time.perf_counter()
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.render import render
runs = []
for _ in range(3):
    start = time.perf_counter()
    model = check(sys.argv[1]).model
    resources = record(model, render(model))
    runs.append(time.perf_counter() - start)
print(json.dumps({"first": runs[0], "median": statistics.median(runs[1:]), "resources": len(resources),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    print(f"{'nodes':>7} {'first plan':>11} {'next plans':>11} {'peak RSS':>9} {'resources':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in (10, 1_000, 10_000):
            path = Path(tmp) / f"{nodes}.yaml"
            path.write_text(BLUEPRINT.format(nodes=nodes, static=nodes // 2).replace("nodes_per_switch: 32", "nodes_per_switch: 8"))
            out = subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, capture_output=True, text=True)
            d = json.loads(out.stdout.splitlines()[-1])
            print(f"{nodes:>7,} {d['first'] * 1000:>9.0f}ms {d['median'] * 1000:>9.0f}ms {d['rss']:>7.1f}MB "
                  f"{d['resources']:>10}")
    print("Validate + render + the Pulumi program under mocks; first run includes importing pulumi_aws.")


if __name__ == "__main__":
    main()
