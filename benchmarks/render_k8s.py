"""Benchmark: render an inference fleet serving 1, 20 and 200 models.

    python benchmarks/render_k8s.py [--runs N]

Whole command: `fleetform render BP -o DIR`, a fresh process per run, the sizes interleaved; the
floor is the same fleet with 1 model, measured in the same run. Rendering must grow linearly with
the models: the CPU time each model adds above the floor is printed at 20 and at 200 models, and
their ratio (1.0 = linear). In-process (after imports, median of 5 runs after a warm-up): validate
+ resolve and render apart, files and output size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import FLEETFORM, PY, header, interleaved, median, spread  # noqa: E402

HEAD = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: bench, version: 1.0.0}}
provider: {{cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {{cidr: 10.0.0.0/16}}}}
fleets:
  - name: serve
    role: inference
    instance_type: p5.48xlarge
    nodes: {{min: {low}, max: {nodes}}}
    scheduler: {{type: kubernetes, version: "1.33", namespace: serve, autoscaler: keda}}
    models:
"""
MODEL = """      - name: model-{i:03d}
        image: vllm/vllm-openai:v0.11.0
        model: org/model-{i:03d}
        model_params_billion: 8
        precision: bf16
        tensor_parallel: 1
        max_model_len: 8192
        replicas: {{min: 1, max: 4}}
        autoscale: {{metric: queue_depth, target_per_replica: 5}}
"""
SIZES = (1, 20, 200)


def inference_blueprint(models: int) -> str:
    """One fleet of p5 nodes: at least enough for every model's one minimum replica of 1 GPU (the
    min-nodes-hold rule), at most enough for 4 replicas each."""
    return (HEAD.format(low=-(-models // 8), nodes=models * 4 // 8 + 1)
            + "".join(MODEL.format(i=i) for i in range(models)))


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
                  "files": len(files), "bytes": sum(len(v) for v in files.values())}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    header("render: an inference fleet of 1 to 200 models", args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for models in SIZES:
            paths[models] = Path(tmp) / f"{models}.yaml"
            paths[models].write_text(inference_blueprint(models))
        samples = interleaved({m: FLEETFORM + ["render", str(paths[m]), "-o", str(Path(tmp) / f"out-{m}")]
                               for m in SIZES}, args.runs)
        print(f"\n{'models':>6}  {'whole command, CPU':>24}  {'wall':>8}  {'peak RSS':>9}  {'validate':>9} {'render':>9}  "
              f"{'files':>5} {'output':>9}")
        for models in SIZES:
            d = json.loads(subprocess.run(PY + ["-c", CHILD, str(paths[models])], check=True, capture_output=True,
                                          text=True).stdout)
            print(f"{models:>6}  {spread(samples[models]):>24}  {median(samples[models], 'wall') * 1000:>5.0f} ms  "
                  f"{median(samples[models], 'rss_mib'):>5.1f} MiB  {d['check'] * 1000:>6.1f} ms {d['render'] * 1000:>6.1f} ms"
                  f"  {d['files']:>5} {d['bytes'] / 1024:>6.1f} KB")
    floor = median(samples[1])
    per_model = {m: (median(samples[m]) - floor) / (m - 1) for m in SIZES[1:]}
    print(f"\nper model above the 1-model floor: {per_model[20] * 1000:.2f} ms at 20 models, "
          f"{per_model[200] * 1000:.2f} ms at 200 ({per_model[200] / per_model[20]:.2f}x; 1.0 is linear)")
    print("One KEDA-scaled vLLM Deployment, Service, PDB, ScaledObject and ServiceMonitor per model; in-process "
          "figures are CPU time after imports, median of 5 runs after a warm-up.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
