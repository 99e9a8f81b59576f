"""Benchmark: validate the reference blueprint and a generated large one; print time and peak memory.

    python benchmarks/validate.py

The large blueprint has a 10,000-node training fleet and an inference fleet serving 200 models.
Each case runs in a fresh process (so peak RSS is the case's own): the whole CLI (`fleetform
validate`, interpreter start included) and the pipeline in-process (median of 5 runs).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "blueprints" / "reference.yaml"


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
        f"    nodes: {{min: 1, max: {models * 2 // 8 + 1}}}",
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
import json, resource, statistics, sys, time
t0 = time.perf_counter()
from fleetform.pipeline import check
path = sys.argv[1]
runs = []
for _ in range(5):
    start = time.perf_counter()
    result = check(path)
    runs.append(time.perf_counter() - start)
assert result.ok, [f.to_text() for f in result.findings]
print(json.dumps({"median_s": statistics.median(runs), "first_s": runs[0],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def cli_run(path: Path) -> tuple[float, float]:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fleetform", "validate", str(path)], check=True, capture_output=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        large = Path(tmp) / "large.yaml"
        large.write_text(large_blueprint())
        cases = [("reference", REFERENCE), ("10,000 nodes + 200 models", large)]
        print(f"{'blueprint':28} {'size':>9} {'CLI wall':>9} {'pipeline':>9} {'first run':>9} {'peak RSS':>9}")
        for name, path in cases:
            walls = [cli_run(path)[0] for _ in range(3)]
            child = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
            data = json.loads(child.stdout)
            size = path.stat().st_size
            print(f"{name:28} {size / 1024:>7.1f}KB {statistics.median(walls) * 1000:>7.0f}ms "
                  f"{data['median_s'] * 1000:>7.1f}ms {data['first_s'] * 1000:>7.1f}ms {data['peak_rss_mb']:>7.1f}MB")
        print("CLI wall: median of 3 `fleetform validate` processes; pipeline: median of 5 in-process runs "
              "after imports; peak RSS of the in-process runner.")


if __name__ == "__main__":
    main()
