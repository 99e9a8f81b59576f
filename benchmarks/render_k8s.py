"""Benchmark: render an inference fleet serving 1, 20 and 200 models; print validate and render
time, peak memory and output size. Each size runs in a fresh process; medians of 5 runs.

    python benchmarks/render_k8s.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: bench, version: 1.0.0}}
provider: {{cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {{cidr: 10.0.0.0/16}}}}
fleets:
  - name: serve
    role: inference
    instance_type: p5.48xlarge
    nodes: {{min: 1, max: {nodes}}}
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

CHILD = r"""
import json, resource, statistics, sys, time
from fleetform.pipeline import check
from fleetform.render import render
check_s, render_s = [], []
for i in range(6):
    t0 = time.perf_counter(); result = check(sys.argv[1]); t1 = time.perf_counter()
    files = render(result.model); t2 = time.perf_counter()
    if i:
        check_s.append(t1 - t0); render_s.append(t2 - t1)
print(json.dumps({"check": statistics.median(check_s), "render": statistics.median(render_s),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "files": len(files), "bytes": sum(len(v) for v in files.values())}))
"""


def main() -> None:
    print(f"{'models':>6} {'validate':>9} {'render':>9} {'peak RSS':>9} {'files':>6} {'output':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for models in (1, 20, 200):
            path = Path(tmp) / f"{models}.yaml"
            path.write_text(HEAD.format(nodes=models * 4 // 8 + 1) + "".join(MODEL.format(i=i) for i in range(models)))
            out = subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, capture_output=True, text=True)
            d = json.loads(out.stdout)
            print(f"{models:>6} {d['check'] * 1000:>7.1f}ms {d['render'] * 1000:>7.1f}ms {d['rss']:>7.1f}MB "
                  f"{d['files']:>6} {d['bytes'] / 1024:>7.1f}KB")
    print("One KEDA-scaled vLLM Deployment, Service, PDB, ScaledObject and ServiceMonitor per model. Medians of 5 runs.")


if __name__ == "__main__":
    main()
