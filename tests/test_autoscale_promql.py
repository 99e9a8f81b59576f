"""The KEDA triggers' PromQL, evaluated by a real Prometheus engine (Debian's promtool, `promtool test
rules`) over series shaped as vLLM 0.11.0 exports them and the ServiceMonitor scrape labels them, so
each query is proven to return what KEDA must compare with its threshold: the replicas' summed
KV-cache use, the p90 time to first token, and 0 (not an error, not NaN) while no request arrives or
no replica runs.

Series shapes: vllm/v1/metrics/loggers.py at v0.11.0 (vllm:kv_cache_usage_perc, a gauge 0-1;
vllm:time_to_first_token_seconds, a histogram with buckets ... 0.5, 0.75, 1.0, 2.5, 5.0 ...; labels
model_name and engine); the namespace and pod labels are the ones Prometheus Operator adds to every
series a ServiceMonitor scrapes."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from conftest import ROOT, require
from fleetform.pipeline import check
from fleetform.render import render

EXAMPLE = ROOT / "blueprints/inference-gateway.yaml"


def _queries() -> dict[str, str]:
    files = render(check(EXAMPLE).model)
    scaled = yaml.safe_load(files["chat/k8s/qwen-7b-scaledobject.yaml"])
    return {t.get("name", "queue"): t["metadata"]["query"] for t in scaled["spec"]["triggers"]}


def _labels(model: str, pod: str, namespace: str = "chat", **extra: str) -> str:
    labels = {"namespace": namespace, "pod": pod, "model_name": model, "engine": "0", **extra}
    return "{" + ",".join(f'{k}={json.dumps(v)}' for k, v in labels.items()) + "}"


def _ttft(model: str, pod: str, per_minute: dict[str, int]) -> list[dict]:
    """Cumulative bucket counters rising by per_minute[le] each minute (0 each: an idle replica)."""
    return [{"series": f"vllm:time_to_first_token_seconds_bucket{_labels(model, pod, le=le)}",
             "values": f"0+{n}x10"} for le, n in per_minute.items()]


BUSY = {"0.5": 50, "0.75": 70, "1.0": 80, "2.5": 95, "5.0": 100, "+Inf": 100}
"""100 requests a minute: the 90th falls in (1.0, 2.5], 10 of its 15: p90 = 1.0 + 10/15 x 1.5 = 2.0 s."""
IDLE = {le: 0 for le in BUSY}


def _promtool(tmp_path, series: list[dict], expr: str, samples: list[dict]) -> subprocess.CompletedProcess:
    promtool = require("promtool", "prometheus")
    test = {"rule_files": [], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series,
                       # round: the engine's float arithmetic gives 2.0000000000000004 for 2
                       "promql_expr_test": [{"expr": f"round(({expr}), 0.001)", "eval_time": "5m",
                                             "exp_samples": samples}]}]}
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)


def _value(tmp_path, series, expr, value):
    result = _promtool(tmp_path, series, expr, [{"labels": "{}", "value": value}])
    assert result.returncode == 0, result.stdout + result.stderr


def test_kv_cache_query_sums_this_models_replicas(tmp_path):
    series = [{"series": f"vllm:kv_cache_usage_perc{_labels('qwen-7b', 'a')}", "values": "0.9x10"},
              {"series": f"vllm:kv_cache_usage_perc{_labels('qwen-7b', 'b')}", "values": "0.7x10"},
              # another model, and the same model name in another namespace: not counted
              {"series": f"vllm:kv_cache_usage_perc{_labels('llama-8b', 'c')}", "values": "0.99x10"},
              {"series": f"vllm:kv_cache_usage_perc{_labels('qwen-7b', 'd', namespace='other')}", "values": "0.99x10"}]
    _value(tmp_path, series, _queries()["kv-cache"], 1.6)  # / threshold 0.8 = 2 replicas: as many as run


def test_ttft_query_is_the_p90_over_replicas(tmp_path):
    series = _ttft("qwen-7b", "a", BUSY) + _ttft("qwen-7b", "b", BUSY) + _ttft("llama-8b", "c", IDLE)
    _value(tmp_path, series, _queries()["ttft-p90"], 2.0)


def test_ttft_query_reads_0_when_idle(tmp_path):
    """No request in the window: histogram_quantile is NaN, which KEDA would take as a value (or an
    error); the query reads it as 0, so an idle model scales down on its other triggers."""
    _value(tmp_path, _ttft("qwen-7b", "a", IDLE), _queries()["ttft-p90"], 0)


def test_ttft_query_reads_0_with_no_replica(tmp_path):
    _value(tmp_path, _ttft("llama-8b", "c", BUSY), _queries()["ttft-p90"], 0)


def test_a_wrong_expectation_fails(tmp_path):
    """Control: promtool does compare (a p90 of 2.0 is not 2.5)."""
    series = _ttft("qwen-7b", "a", BUSY)
    assert _promtool(tmp_path, series, _queries()["ttft-p90"], [{"labels": "{}", "value": 2.5}]).returncode != 0


def test_queue_query_sums_waiting_requests(tmp_path):
    series = [{"series": f"vllm:num_requests_waiting{_labels('qwen-7b', 'a')}", "values": "3x10"},
              {"series": f"vllm:num_requests_waiting{_labels('qwen-7b', 'b')}", "values": "9x10"}]
    _value(tmp_path, series, _queries()["queue"], 12)


def _wake_query() -> str:
    files = render(check(EXAMPLE).model)
    scaled = yaml.safe_load(files["chat/k8s/llama-8b-scaledobject.yaml"])
    (wake,) = [t for t in scaled["spec"]["triggers"] if t.get("name") == "gateway-requests"]
    assert wake["metadata"]["activationThreshold"] == "0"
    return wake["metadata"]["query"]


def _epp(name: str, model: str, values: str, namespace: str = "chat", **extra: str) -> dict:
    """An endpoint picker counter (Inference Extension v1.1.0 pkg/epp/metrics/metrics.go: labels model_name,
    target_model_name; error_code on the error counter), scraped through its ServiceMonitor."""
    labels = {"namespace": namespace, "pod": "llama-8b-epp-0", "model_name": model, "target_model_name": model, **extra}
    return {"series": name + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}", "values": values}


def test_wake_query_rises_on_requests_refused_while_no_replica_runs(tmp_path):
    """No replica: every request is refused with 503 and counted in the error counter; 60 a minute is 1 a
    second, above the activation threshold 0, so KEDA takes the model off zero."""
    series = [_epp("inference_objective_request_error_total", "llama-8b", "0+60x10", error_code="ServiceUnavailable"),
              _epp("inference_objective_request_total", "llama-8b", "500x10")]  # served before it scaled down
    _value(tmp_path, series, _wake_query(), 1)


def test_wake_query_reads_0_when_nobody_asks(tmp_path):
    """Flat counters (and other models' or namespaces' requests) keep it inactive: the model stays at 0."""
    series = [_epp("inference_objective_request_total", "llama-8b", "500x10"),
              _epp("inference_objective_request_error_total", "llama-8b", "7x10", error_code="ServiceUnavailable"),
              _epp("inference_objective_request_total", "qwen-7b", "0+600x10"),
              _epp("inference_objective_request_total", "llama-8b", "0+600x10", namespace="other")]
    _value(tmp_path, series, _wake_query(), 0)


def test_wake_query_counts_served_requests_too(tmp_path):
    series = [_epp("inference_objective_request_total", "llama-8b", "0+120x10")]
    _value(tmp_path, series, _wake_query(), 2)
