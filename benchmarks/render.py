"""Benchmark: render a training fleet of 100, 1,000 and 10,000 nodes; print time, peak memory and
the size of slurm.conf (which must stay under 60 lines: node names are hostlist ranges).

    python benchmarks/render.py

Each size runs in a fresh process so its peak RSS is its own: validate + resolve (the pipeline)
and render are timed separately, median of 5 runs after one warm-up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

BLUEPRINT = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: bench, version: 1.0.0}}
provider: {{cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {{cidr: 10.0.0.0/16}}}}
storage:
  - {{name: scratch, type: fsx-lustre, capacity_gib: 48000, throughput_mb_per_tib: 250, mount_path: /fsx}}
  - {{name: checkpoints, type: s3}}
fleets:
  - name: train
    role: training
    instance_type: p5.48xlarge
    nodes: {{min: {static}, max: {nodes}}}
    storage: [scratch, checkpoints]
    scheduler:
      type: slurm
      partitions: [{{name: gpu, default: true, max_time: 7-00:00:00}}, {{name: debug, max_time: 60}}]
      topology: {{nodes_per_switch: 32}}
    checkpoint: {{every_minutes: 30, path: /fsx/checkpoints}}
"""

CHILD = r"""
import json, resource, statistics, sys, time
from fleetform.pipeline import check
from fleetform.render import render
path = sys.argv[1]
check_s, render_s = [], []
for i in range(6):
    t0 = time.perf_counter(); result = check(path); t1 = time.perf_counter()
    files = render(result.model); t2 = time.perf_counter()
    if i:
        check_s.append(t1 - t0); render_s.append(t2 - t1)
conf = files["train/slurm/slurm.conf"].decode()
print(json.dumps({"check": statistics.median(check_s), "render": statistics.median(render_s),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "slurm_lines": len(conf.splitlines()), "topology_lines": len(files["train/slurm/topology.conf"].decode().splitlines()),
                  "bytes": sum(len(v) for v in files.values())}))
"""


def main() -> None:
    print(f"{'nodes':>7} {'validate':>9} {'render':>8} {'peak RSS':>9} {'slurm.conf':>11} {'topology.conf':>14} {'output':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in (100, 1_000, 10_000):
            path = Path(tmp) / f"{nodes}.yaml"
            path.write_text(BLUEPRINT.format(nodes=nodes, static=nodes // 2))
            out = subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, capture_output=True, text=True)
            d = json.loads(out.stdout)
            print(f"{nodes:>7,} {d['check'] * 1000:>7.1f}ms {d['render'] * 1000:>6.1f}ms {d['rss']:>7.1f}MB "
                  f"{d['slurm_lines']:>5} lines {d['topology_lines']:>8} lines {d['bytes'] / 1024:>7.1f}KB")
    print("Half the nodes static, half State=CLOUD; 32 nodes per leaf switch. Medians of 5 runs.")


if __name__ == "__main__":
    main()
