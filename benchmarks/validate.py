"""Benchmark: `fleetform validate` as a user waits for it, against its floors (issue 13, goals 1 and 3).

    python benchmarks/validate.py [--runs N]

Whole commands, each run a fresh process, all cases interleaved round by round:
- the reference blueprint against the import floor `python -c 'import yaml, jsonschema'` (goal 1:
  at most 1.2x; benchmarks/startup.py measures the same goal with more runs, and --help);
- 100,000 training nodes (two Slurm fleets of 50,000: one takes at most 65,536, Slurm's hostlist
  limit) against one fleet of 10 nodes (goal 3: at most 1.3x the CPU time, and at most 35 MiB peak
  RSS), and the largest single fleet, 65,536 nodes;
- a large mixed blueprint (10,000 training nodes and an inference fleet of 200 models), for scale.
In-process figures (the pipeline after imports, median of 5 runs after a warm-up) stand beside them:
they show how little of what a user waits for the checking itself is.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import FLEETFORM, PY, ROOT, header, interleaved, median, ratio, spread, verdict  # noqa: E402
from render import LARGEST_FLEET, training_blueprint  # noqa: E402  (the fleets the render benchmark uses)

REFERENCE = ROOT / "blueprints" / "reference.yaml"
GOAL_IMPORT_FLOOR, GOAL_NODES, GOAL_RSS_MIB = 1.2, 1.3, 35


def large_blueprint(nodes: int = 10_000, models: int = 200) -> str:
    lines = [
        "apiVersion: fleetform/v1",
        "kind: Blueprint",
        "metadata: {name: bench, version: 1.0.0}",
        "provider: {cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {cidr: 10.0.0.0/16}}",
        "storage:",
        "  - {name: scratch, type: fsx-lustre, capacity_gib: 48000, throughput_mb_per_tib: 250, mount_path: /fsx}",
        "  - {name: checkpoints, type: s3}",
        "fleets:",
        "  - name: train",
        "    role: training",
        "    instance_type: p5.48xlarge",
        f"    nodes: {nodes}",
        "    storage: [scratch, checkpoints]",
        "    scheduler:",
        "      type: slurm",
        "      partitions: [{name: gpu, default: true, max_time: 7-00:00:00}]",
        "      topology: {nodes_per_switch: 16}",
        "    checkpoint: {every_minutes: 30, path: /fsx/checkpoints}",
        "  - name: serve",
        "    role: inference",
        "    instance_type: p5.48xlarge",
        f"    nodes: {{min: {-(-models // 8)}, max: {models * 2 // 8 + 1}}}",  # min holds each model's minimum replica
        '    scheduler: {type: kubernetes, version: "1.33", namespace: serve, autoscaler: keda}',
        "    models:",
    ]
    for i in range(models):
        lines += [
            f"      - name: model-{i:03d}",
            "        image: vllm/vllm-openai:v0.11.0",
            f"        model: org/model-{i:03d}",
            "        model_params_billion: 8",
            "        precision: bf16",
            "        tensor_parallel: 1",
            "        max_model_len: 8192",
            "        replicas: {min: 1, max: 2}",
            "        autoscale: {metric: queue_depth, target_per_replica: 5}",
        ]
    return "\n".join(lines) + "\n"


CHILD = r"""
import json, statistics, sys, time
from fleetform.pipeline import check
runs = []
for _ in range(6):
    start = time.process_time()
    result = check(sys.argv[1])
    runs.append(time.process_time() - start)
assert result.model is not None, [f.to_text() for f in result.findings]
print(json.dumps({"median_s": statistics.median(runs[1:]), "first_s": runs[0]}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    header("validate: whole commands against their floors", args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        blueprints = {"reference": REFERENCE}
        for nodes in (10, LARGEST_FLEET, 100_000):
            blueprints[f"{nodes:,} nodes"] = Path(tmp) / f"{nodes}.yaml"
            blueprints[f"{nodes:,} nodes"].write_text(training_blueprint(nodes))
        blueprints["10,000 nodes + 200 models"] = Path(tmp) / "large.yaml"
        blueprints["10,000 nodes + 200 models"].write_text(large_blueprint())
        floor = "import yaml, jsonschema"
        cases = {floor: PY + ["-c", "import yaml, jsonschema"]}
        cases |= {name: FLEETFORM + ["validate", str(path)] for name, path in blueprints.items()}
        samples = interleaved(cases, args.runs)
        print(f"\n{'case':28} {'size':>8}  {'whole command, CPU':>24}  {'wall':>8}  {'peak RSS':>9}  "
              f"{'in-process':>10} {'first':>8}")
        print(f"{floor:28} {'':>8}  {spread(samples[floor]):>24}  {median(samples[floor], 'wall') * 1000:>5.0f} ms  "
              f"{median(samples[floor], 'rss_mib'):>5.1f} MiB")
        for name, path in blueprints.items():
            child = subprocess.run(PY + ["-c", CHILD, str(path)], capture_output=True, text=True, check=True)
            d = json.loads(child.stdout)
            print(f"{name:28} {path.stat().st_size / 1024:>6.1f}KB  {spread(samples[name]):>24}  "
                  f"{median(samples[name], 'wall') * 1000:>5.0f} ms  {median(samples[name], 'rss_mib'):>5.1f} MiB  "
                  f"{d['median_s'] * 1000:>7.1f} ms {d['first_s'] * 1000:>5.1f} ms")
    goal1 = ratio(samples["reference"], samples[floor])
    goal3 = ratio(samples["100,000 nodes"], samples["10 nodes"])
    rss = median(samples["100,000 nodes"], "rss_mib")
    print(f"\ngoal 1: validate of the reference takes {goal1:.2f}x the CPU time of `{floor}` "
          f"({verdict(goal1, GOAL_IMPORT_FLOOR)})")
    print(f"goal 3 (validate): 100,000 nodes (two fleets) take {goal3:.2f}x the CPU time of 10 nodes "
          f"({verdict(goal3, GOAL_NODES)}); peak RSS {rss:.1f} MiB ({verdict(rss, GOAL_RSS_MIB)}); one fleet of "
          f"{LARGEST_FLEET:,}: {ratio(samples[f'{LARGEST_FLEET:,} nodes'], samples['10 nodes']):.2f}x")
    print("in-process: CPU time of the pipeline after imports (median of 5 runs after the first; first run apart)")
    return 0 if goal1 <= GOAL_IMPORT_FLOOR and goal3 <= GOAL_NODES and rss <= GOAL_RSS_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
