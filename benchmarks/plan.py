"""Benchmark: the offline plan (the Pulumi program under mocks) as a user waits for it (issue 13, goal 2).

    python benchmarks/plan.py [--runs N]

Whole command: `fleetform plan BP --format json`, a fresh process per run, the sizes interleaved.
- An inference fleet serving 20, 200 and 1,000 models: the CPU time per recorded resource at 1,000
  models against the same at 20 (the floor, measured in the same run) must be at most 1.2x (plan
  cost grows at most linearly with what truly is a resource), and plan at 200 models must stay
  under 300 MiB peak RSS.
- A training fleet of 10 and 10,000 nodes: the recorded resources must not grow with the nodes.
- `fleetform render` of 20 and 1,000 models in the same rounds, to show plan's own work apart from
  rendering (which grows with the models' files by design).
In-process (after imports; one warm-up, then the median of 2 runs) beside the whole command for the
smaller cases; the 1,000-model case is measured as a whole command only (it is the slow one).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import FLEETFORM, PY, header, interleaved, median, run, spread, verdict  # noqa: E402
from render import training_blueprint  # noqa: E402
from render_k8s import inference_blueprint  # noqa: E402

GOAL_PER_RESOURCE, GOAL_RSS_MIB = 1.2, 300

CHILD = r"""
import json, statistics, sys, time
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.render import render
runs = []
for _ in range(3):
    start = time.process_time()
    model = check(sys.argv[1]).model
    resources = record(model, render(model))
    runs.append(time.process_time() - start)
print(json.dumps({"first": runs[0], "median": statistics.median(runs[1:]), "resources": len(resources)}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    header("plan: the Pulumi program under mocks, whole commands", args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        blueprints = {}
        for models in (20, 200, 1_000):
            blueprints[f"{models:,} models"] = inference_blueprint(models)
        for nodes in (10, 10_000):  # one fleet each
            blueprints[f"{nodes:,} nodes"] = training_blueprint(nodes)
        cases, resources = {}, {}
        for name, text in blueprints.items():
            path = Path(tmp) / (name.replace(",", "").replace(" ", "-") + ".yaml")
            path.write_text(text)
            cases[name] = FLEETFORM + ["plan", str(path), "--format", "json"]
            _, out = run(cases[name], capture=True)  # the warm-up run, which also counts the resources
            resources[name] = len(json.loads(out)["resources"])
        for models in ("20 models", "1,000 models"):  # what rendering alone costs, to set plan's own work apart
            cases[f"render {models}"] = FLEETFORM + ["render", cases[models][-3], "-o", str(Path(tmp) / models)]
        samples = interleaved(cases, args.runs, warmup=0)
        print(f"\n{'blueprint':>13}  {'resources':>9}  {'whole command, CPU':>26}  {'per resource':>12}  "
              f"{'peak RSS':>10}  {'in-process':>10} {'first':>9}")
        for name, command in cases.items():
            if name.startswith("render "):
                continue
            inside = ""
            if name != "1,000 models":
                d = json.loads(subprocess.run(PY + ["-c", CHILD, command[-3]], check=True, capture_output=True,
                                              text=True).stdout)
                inside = f"{d['median'] * 1000:>7.0f} ms {d['first'] * 1000:>6.0f} ms"
            per = median(samples[name]) / resources[name]
            print(f"{name:>13}  {resources[name]:>9,}  {spread(samples[name], scale=1, unit='s'):>26}  "
                  f"{per * 1000:>9.2f} ms  {median(samples[name], 'rss_mib'):>6.0f} MiB  {inside}")
    per = {name: median(samples[name]) / resources[name] for name in resources}
    goal = per["1,000 models"] / per["20 models"]
    rss = median(samples["200 models"], "rss_mib")
    print(f"\ngoal 2: cost per recorded resource {per['20 models'] * 1000:.2f} ms at 20 models "
          f"({resources['20 models']} resources), {per['1,000 models'] * 1000:.2f} ms at 1,000 models "
          f"({resources['1,000 models']:,} resources): {goal:.2f}x ({verdict(goal, GOAL_PER_RESOURCE)})")
    print(f"goal 2: plan at 200 models peaks at {rss:.0f} MiB ({verdict(rss, GOAL_RSS_MIB)})")
    own = {m: median(samples[m]) - median(samples[f"render {m}"]) for m in ("20 models", "1,000 models")}
    print(f"plan beyond `fleetform render` of the same blueprint: {own['20 models']:.2f} s at 20 models, "
          f"{own['1,000 models']:.2f} s at 1,000 ({spread(samples['render 1,000 models'], scale=1, unit='s')} "
          "to render 1,000 models)")
    same = resources["10 nodes"] == resources["10,000 nodes"]
    print(f"training: {resources['10 nodes']} resources at 10 nodes, {resources['10,000 nodes']} at 10,000 nodes "
          f"({'do not grow with nodes' if same else 'GROW WITH NODES'})")
    print("whole command: includes importing pulumi and pulumi_aws; in-process: CPU time after imports")
    return 0 if goal <= GOAL_PER_RESOURCE and rss <= GOAL_RSS_MIB and same else 1


if __name__ == "__main__":
    sys.exit(main())
