"""Benchmark: render training fleets of 10 to 100,000 nodes (issue 13, goal 3).

    python benchmarks/render.py [--runs N]

Whole command: `fleetform render BP -o DIR`, a fresh process per run, the sizes interleaved. Goal:
render at 100,000 nodes within 1.3x the CPU time of 10 nodes (the floor, measured in the same run)
and within 35 MiB peak RSS. One Slurm fleet takes at most 65,536 nodes (Slurm's own hostlist limit),
so 100,000 nodes are two fleets of 50,000; the largest single fleet is measured too. In-process (after imports, median of 5 runs after a warm-up): validate
+ resolve and render apart, and the size of slurm.conf and topology.conf, which grow with node
groups and switches, not nodes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import FLEETFORM, PY, header, interleaved, median, ratio, spread, verdict  # noqa: E402

HEAD = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {name: bench, version: 1.0.0}
provider: {cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {cidr: 10.0.0.0/16}}
storage:
  - {name: scratch, type: fsx-lustre, capacity_gib: 48000, throughput_mb_per_tib: 250, mount_path: /fsx}
  - {name: checkpoints, type: s3}
fleets:
"""
FLEET = """  - name: {name}
    role: training
    instance_type: p5.48xlarge
    nodes: {{min: {static}, max: {nodes}}}
    storage: [scratch, checkpoints]
    scheduler:
      type: slurm
      partitions: [{{name: gpu, default: true, max_time: 7-00:00:00}}, {{name: debug, max_time: 60}}]
      topology: {{nodes_per_switch: {per_switch}}}
    checkpoint: {{every_minutes: 30, path: /fsx/checkpoints}}
"""
LARGEST_FLEET = 65_536
"""fleetform.slurm.MAX_HOSTS: Slurm's hostlist parser refuses a range of more (MAX_RANGE 64K)."""
SIZES = (10, 1_000, LARGEST_FLEET, 100_000)
GOAL_TIME, GOAL_RSS_MIB = 1.3, 35


def training_blueprint(nodes: int) -> str:
    """`nodes` training nodes: one fleet up to the largest Slurm takes, else fleets of equal size
    (100,000 nodes: two Slurm clusters of 50,000). Half of each fleet static, half State=CLOUD; 32
    nodes per leaf switch, 64 above 32,768 nodes (fleetform allows 1,024 leaves, what slurmctld
    starts with in seconds), 5 for 10 nodes (which cannot fill a 32-port leaf)."""
    fleets = -(-nodes // LARGEST_FLEET)
    each = nodes // fleets
    return HEAD + "".join(FLEET.format(name="train" if i == 0 else f"train-{i + 1}", nodes=each, static=each // 2,
                                       per_switch=5 if each < 64 else 32 if each <= 32_768 else 64)
                       for i in range(fleets))


CHILD = r"""
import json, statistics, sys, time
from fleetform.pipeline import check
from fleetform.render import render
check_s, render_s = [], []
for i in range(6):
    t0 = time.process_time(); result = check(sys.argv[1]); t1 = time.process_time()
    files = render(result.model); t2 = time.process_time()
    if i:
        check_s.append(t1 - t0); render_s.append(t2 - t1)
print(json.dumps({"check": statistics.median(check_s), "render": statistics.median(render_s),
                  "slurm_lines": len(files["train/slurm/slurm.conf"].splitlines()),
                  "topology_lines": len(files["train/slurm/topology.conf"].splitlines()),
                  "bytes": sum(len(v) for v in files.values())}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    header("render: training fleets of 10 to 100,000 nodes", args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for nodes in SIZES:
            paths[nodes] = Path(tmp) / f"{nodes}.yaml"
            paths[nodes].write_text(training_blueprint(nodes))
        cases = {nodes: FLEETFORM + ["render", str(paths[nodes]), "-o", str(Path(tmp) / f"out-{nodes}")]
                 for nodes in SIZES}
        samples = interleaved(cases, args.runs)
        print(f"\n{'nodes':>7}  {'whole command, CPU':>26}  {'wall':>14}  {'peak RSS':>18}  "
              f"{'validate':>9} {'render':>8}  {'slurm.conf':>10} {'topology.conf':>13} {'output':>9}")
        for nodes in SIZES:
            child = subprocess.run(PY + ["-c", CHILD, str(paths[nodes])], check=True, capture_output=True, text=True)
            d = json.loads(child.stdout)
            print(f"{nodes:>7,}  {spread(samples[nodes]):>26}  {median(samples[nodes], 'wall') * 1000:>11.0f} ms  "
                  f"{spread(samples[nodes], 'rss_mib', 1, 'MiB'):>18}  {d['check'] * 1000:>6.1f} ms {d['render'] * 1000:>5.1f} ms"
                  f"  {d['slurm_lines']:>4} lines {d['topology_lines']:>7} lines {d['bytes'] / 1024:>6.1f} KB")
    top, floor = SIZES[-1], SIZES[0]
    time_ratio = ratio(samples[top], samples[floor])
    rss = median(samples[top], "rss_mib")
    print(f"\ngoal 3 (render): {top:,} nodes (two fleets) take {time_ratio:.2f}x the CPU time of {floor} nodes "
          f"({verdict(time_ratio, GOAL_TIME)}); peak RSS {rss:.1f} MiB ({verdict(rss, GOAL_RSS_MIB)}); one fleet of "
          f"{LARGEST_FLEET:,}: {ratio(samples[LARGEST_FLEET], samples[floor]):.2f}x")
    print("in-process: CPU time after imports, median of 5 runs after a warm-up")
    return 0 if time_ratio <= GOAL_TIME and rss <= GOAL_RSS_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
