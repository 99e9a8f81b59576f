"""Benchmark: how long the real slurmctld (Debian's slurm-wlm 22.05) takes to start on a rendered
Slurm folder, by node count and leaf switch count, up to the largest topology the schema allows.

    python benchmarks/slurmctld_topology.py            # the cases below, about 3 minutes
    python benchmarks/slurmctld_topology.py 10000 10   # one case: NODES NODES_PER_SWITCH

Each case renders an on-prem training fleet with fleetform and starts slurmctld on it with the
test harness (tests/slurmctld.py: auth/none, NodeAddr=127.0.0.1, state in a temp dir) until it
says `Running as primary controller`.

Measured on the 2-core CI machine (2026-11-22, slurmctld 22.05, seconds to ready):

    nodes   leaf switches            start
    1,000     500 (2 per switch)       0.5
    2,000   1,000 (2 per switch)       1.5
    4,000   2,000 (2 per switch)       7.2
    4,000   2,000 under 63 spines     11.4   (a 4-level tree of fan-out 32: more switches, slower)
   10,000   5,000 (2 per switch)     162.1   (the case of issue 9; now a slurm-topology error)
   10,000   1,000 (10 per switch)       3.0
   65,536       1 (no tree)           50.0   (the node count alone)
   65,536   1,024 (64 per switch)     62.1   (the largest topology the schema allows)
  100,000       -                      -     refused: "Too many hosts in range" (Slurm's MAX_RANGE 64K)

So the start grows with the square of the switch count (x2 switches, x3-5 time), and a deeper tree
does not help. fleetform bounds a fleet to 65,536 nodes (fleetform.slurm.MAX_HOSTS, what Slurm's
hostlist parser accepts) and 1,024 leaf switches (MAX_LEAF_SWITCHES): at that bound the switches
add about 12 s to the 50 s the nodes take.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import slurmctld  # noqa: E402  (the test harness)

from fleetform.pipeline import check  # noqa: E402
from fleetform.render import render  # noqa: E402

BLUEPRINT = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: bench, version: 1.0.0}}
provider: {{cloud: onprem}}
fleets:
  - name: train
    role: training
    hosts: gpu-[00001-{nodes:05d}]
    hardware: {{gpu: H100-80GB, gpu_count: 8, sockets: 2, cores_per_socket: 56, threads_per_core: 2, memory_gib: 2048}}
    interconnect: {{fabric: infiniband, hcas: [mlx5_0]}}
    scheduler:
      type: slurm
      controller: {{host: ctl}}
      partitions: [{{name: gpu, default: true}}]
{topology}"""

CASES = [(1_000, 2), (2_000, 2), (10_000, 10), (65_536, None), (65_536, 64)]


def measure(nodes: int, per_switch: int | None) -> str:
    topology = f"      topology: {{nodes_per_switch: {per_switch}}}\n" if per_switch else ""
    with tempfile.TemporaryDirectory(prefix="bench-slurmctld-") as tmp:
        source = Path(tmp) / "bp.yaml"
        source.write_text(BLUEPRINT.format(nodes=nodes, topology=topology))
        result = check(source)
        if result.model is None:
            return f"{nodes:>7,} nodes, {per_switch} per switch: refused: " + "; ".join(
                f.message for f in result.findings)
        folder = Path(tmp) / "slurm"
        for name, data in render(result.model).items():
            if name.startswith("train/slurm/"):
                target = folder / name.split("/", 2)[2]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        switches = (folder / "topology.conf").read_text().count("SwitchName=") if per_switch else 0
        outcome = slurmctld.check(folder, timeout=900)
        state = "ready" if outcome.ok else "FAILED: " + "; ".join(slurmctld.problems(outcome)[-2:])
        return f"{nodes:>7,} nodes, {switches:>5,} switches: {state} in {outcome.seconds:.1f} s"


def main() -> None:
    if not slurmctld.available():
        sys.exit("slurmctld is not installed (apt-get install slurmctld)")
    cases = [(int(sys.argv[1]), int(sys.argv[2]) or None)] if len(sys.argv) == 3 else CASES
    for nodes, per_switch in cases:
        print(measure(nodes, per_switch), flush=True)


if __name__ == "__main__":
    main()
