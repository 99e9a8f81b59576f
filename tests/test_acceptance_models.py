"""The acceptance of inference fleets (issue 20): <fleet>/acceptance/accept-models asks each model for a
completion through its Service (kubectl port-forward svc/NAME) and fails when none comes within the
model's startup budget (its startup probe's period x failure threshold, fleetform/k8s.py).

A fake OpenAI server on 127.0.0.1 answers as vLLM's /v1/completions does (choices[0].text), slowly, or
with 500; a fake kubectl first on PATH prints kubectl port-forward's first line ("Forwarding from
127.0.0.1:LOCAL -> PORT", kubectl/pkg/cmd/portforward) naming the fake server's port and logs its arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render

REFERENCE = ROOT / "blueprints/reference.yaml"

FAKE_KUBECTL = r'''#!/usr/bin/env python3
import json, os, sys, time
from pathlib import Path
with open(Path(__file__).resolve().parent / "calls.log", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
if sys.argv[3:5] == ["get", "secret"]:  # the API key's Secret: kubectl prints the jsonpath's base64 value
    print("czNjcmV0", end="")  # base64 of s3cret
    sys.exit(0)
print(f"Forwarding from 127.0.0.1:{os.environ['FAKE_PORT']} -> {sys.argv[-1].lstrip(':')}", flush=True)
time.sleep(60)
'''


class Fake(BaseHTTPRequestHandler):
    mode = "ok"
    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Fake.requests.append((self.path, body))
        if Fake.mode == "key" and self.headers.get("Authorization") != "Bearer s3cret":
            # vLLM with VLLM_API_KEY: AuthenticationMiddleware answers 401 {"error": "Unauthorized"}
            self.send_response(401)
            self.end_headers()
            return
        if Fake.mode == "500" or (Fake.mode == "500-once" and len(Fake.requests) == 1):
            self.send_response(500)
            self.end_headers()
            return
        if Fake.mode == "slow":
            time.sleep(3)
        answer = json.dumps({"id": "cmpl-1", "object": "text_completion", "model": body["model"],
                             "choices": [{"index": 0, "text": " Paris.", "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Fake.mode, Fake.requests = "ok", []
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    files = render(check(REFERENCE).model)
    (out / "accept-models").write_bytes(files["small-models/acceptance/accept-models"])
    (out / "models.json").write_bytes(files["small-models/acceptance/models.json"])
    return out


def _run(tmp_path: Path, rendered: Path, server, budget_s: int | None = None,
         config: dict | None = None) -> subprocess.CompletedProcess:
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    (fakes / "kubectl").write_text(FAKE_KUBECTL)
    (fakes / "kubectl").chmod(0o755)
    config = config or json.loads((rendered / "models.json").read_text())
    if budget_s is not None:
        for m in config["models"]:
            m["budget_s"] = budget_s
    (tmp_path / "models.json").write_text(json.dumps(config))
    env = dict(os.environ, PATH=f"{fakes}:{os.environ['PATH']}", FAKE_PORT=str(server.server_address[1]))
    env.pop("KUBECTL", None)
    return subprocess.run([sys.executable, str(rendered / "accept-models"), str(tmp_path / "models.json")],
                          capture_output=True, text=True, env=env, timeout=60)


def test_the_budget_is_the_startup_probes():
    """llama-8b of the reference: the startup probe's 76 x 10 s (10 minutes + 10 s per GB of weights)."""
    bp = check(REFERENCE).model
    fleet = next(f for f in bp.fleets if f.name == "small-models")
    server = fleet.kube.servers[0]
    startup = next(p for p in server.probes if p.kind == "startup")
    (m,) = fleet.model_checks
    assert m.budget_s == startup.period_s * startup.failure_threshold == 760
    assert (m.service, m.namespace, m.port, m.served_name) == ("llama-8b", "small-models", 8000, "llama-8b")


def test_a_model_that_answers_passes(tmp_path, rendered, server):
    done = _run(tmp_path, rendered, server)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS small-models/llama-8b: answered in" in done.stdout and "'Paris.'" in done.stdout
    assert Fake.requests == [("/v1/completions", {"model": "llama-8b", "prompt": "The capital of France is",
                                                  "max_tokens": 8, "temperature": 0})]
    calls = [json.loads(line) for line in (tmp_path / "fakes/calls.log").read_text().splitlines()]
    assert calls == [["-n", "small-models", "port-forward", "svc/llama-8b", ":8000"]]


def test_a_model_slower_than_its_budget_fails(tmp_path, rendered, server):
    Fake.mode = "slow"
    done = _run(tmp_path, rendered, server, budget_s=1)
    assert done.returncode == 1
    assert "FAIL small-models/llama-8b: no completion within its startup budget of 1 s" in done.stdout


def test_a_server_error_is_retried_until_the_budget_and_fails(tmp_path, rendered, server):
    Fake.mode = "500"
    done = _run(tmp_path, rendered, server, budget_s=2)
    assert done.returncode == 1 and "(last: HTTP 500)" in done.stdout
    assert len(Fake.requests) >= 1


def test_an_error_then_an_answer_within_the_budget_passes(tmp_path, rendered, server):
    Fake.mode = "500-once"  # a replica still loading: the first request gets 500, the retry an answer
    done = _run(tmp_path, rendered, server, budget_s=30)
    assert done.returncode == 0, done.stdout
    assert len(Fake.requests) == 2


def test_a_model_with_an_api_key_is_asked_with_it(tmp_path, server):
    """A model with api_key_secret: vLLM refuses /v1 requests without `Authorization: Bearer KEY` (401), so
    accept-models reads the key from the Secret (by name; the value never on a command line) and sends it;
    without it every attempt got 401 until the startup budget (760 s) ran out."""
    import yaml
    data = yaml.safe_load(REFERENCE.read_text())
    fleet = next(f for f in data["fleets"] if f["name"] == "small-models")
    fleet["models"][0]["api_key_secret"] = "llama-key"
    blueprint = tmp_path / "bp.yaml"
    blueprint.write_text(yaml.safe_dump(data))
    files = render(check(blueprint).model)
    (tmp_path / "accept-models").write_bytes(files["small-models/acceptance/accept-models"])
    config = json.loads(files["small-models/acceptance/models.json"])
    assert config["models"][0]["api_key_secret"] == "llama-key"
    Fake.mode = "key"
    done = _run(tmp_path, tmp_path, server, budget_s=30, config=config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    calls = [json.loads(line) for line in (tmp_path / "fakes/calls.log").read_text().splitlines()]
    assert calls[0] == ["-n", "small-models", "get", "secret", "llama-key", "-o", "jsonpath={.data.VLLM_API_KEY}"]


def test_a_refused_key_fails_at_once(tmp_path, rendered, server):
    """A 401 (no or a wrong key) is not retried until the budget: waiting does not change the key."""
    Fake.mode = "key"
    start = time.monotonic()
    done = _run(tmp_path, rendered, server, budget_s=30)
    assert done.returncode == 1 and "HTTP 401: the server refused the request's API key" in done.stdout
    assert time.monotonic() - start < 20 and len(Fake.requests) == 1
