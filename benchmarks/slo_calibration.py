"""The SLO roofline (fleetform/slo.py) against published vLLM figures (benchmarks/slo-published.json).

    python benchmarks/slo_calibration.py

Prints each point's estimate, the published figure and the error, and exits 1 when one is further off than
fleetform.slo.CALIBRATION_TOLERANCE. These are published figures, not our own measurement: no GPU machine
was available, so no `vllm bench serve` run of ours is recorded here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fleetform.slo import CALIBRATION_TOLERANCE, FACTORS, published_points, reproduce

POINTS = Path(__file__).resolve().parent / "slo-published.json"


def main() -> int:
    print(f"factors: prefill MFU {FACTORS.prefill_mfu:g}, decode HBM bandwidth {FACTORS.decode_bandwidth:g}, "
          f"step overhead {FACTORS.step_overhead_s * 1000:g} ms, all-reduce latency "
          f"{FACTORS.allreduce_latency_s * 1e6:g} us; tolerance {CALIBRATION_TOLERANCE:.0%}")
    print(f"{'point':32} {'estimate':>10} {'published':>10} {'unit':9} {'error':>7}")
    worst = 0.0
    for point in published_points(POINTS):
        got = reproduce(point)
        error = got / point["published"] - 1
        worst = max(worst, abs(error))
        print(f"{point['id']:32} {got:10.1f} {point['published']:10.1f} {point['unit']:9} {error:+7.1%}")
    print(f"largest error {worst:.1%}: {'within' if worst <= CALIBRATION_TOLERANCE else 'OUTSIDE'} the tolerance")
    return 0 if worst <= CALIBRATION_TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
