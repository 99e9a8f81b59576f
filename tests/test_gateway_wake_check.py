"""stacks/check_inference.py and a model at replicas.min 0 behind the gateway (blueprints/inference-gateway.yaml's
llama-8b): with no replica its Service has no endpoint, so the check must first wake it through the Gateway and
wait, within its cold-start budget, for a ready replica. Never run against AWS here: a fake kubectl (tests/test_eks.py
FAKE_KUBECTL, plus a gateway) answers as a cluster would where the model sits at zero until a request for it
passes the Gateway."""

from __future__ import annotations

import json
import math
import runpy

from conftest import ROOT
from test_eks import FAKE_KUBECTL
from test_gateway import EXAMPLE

GATEWAY_AND_ZERO = '''\
def awake(model):
    if model not in os.environ.get("FAKE_ZERO", "").split(","):
        return True
    return mode != "never-wakes" and f'"e2e-gw-{model}-wake"' in open(os.environ["FAKE_LOG"]).read()
if "wait" in args and any(a.startswith("deploy/") for a in args):
    model = next(a for a in args if a.startswith("deploy/"))[len("deploy/"):]
    if not awake(model):
        sys.stderr.write(f"error: timed out waiting for the condition on deployments/{model}\\n")
        sys.exit(1)
elif "get" in args and "gateway" in args:
    print(json.dumps({"status": {"addresses": [{"type": "IPAddress", "value": "10.100.7.9"}]}}))
elif "get" in args and "pod" in args and pod().endswith("-nokey"):
    print(22 if any("exitCode" in a for a in args) else "Failed")
elif "logs" in args and pod().endswith("-nokey"):
    print("fleetform-http-status=401")
elif "get" in args and "pod" in args and pod().endswith("-wake"):
    print(22 if any("exitCode" in a for a in args) else "Failed")  # the picker's 503 while no replica runs
elif "get" in args and "pod" in args and pod().startswith("e2e-") and not pod().startswith("e2e-gw-") \\
        and not pod().endswith("-outsider") and not awake(pod()[len("e2e-"):].rsplit("-", 1)[0]):
    print(7 if any("exitCode" in a for a in args) else "Failed")  # no endpoint: connection refused
elif "get" in args and "pod" in args and any("exitCode" in a for a in args):'''


def _run(mode, tmp_path, monkeypatch, capsys):
    fake = FAKE_KUBECTL.replace('if "get" in args and "pod" in args and any("exitCode" in a for a in args):',
                                GATEWAY_AND_ZERO, 1)
    assert fake != FAKE_KUBECTL
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(fake)
    kubectl.chmod(0o755)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls"))
    monkeypatch.setenv("FAKE_MODE", mode)
    monkeypatch.setenv("FAKE_ZERO", "llama-8b")
    module = runpy.run_path(str(ROOT / "stacks/check_inference.py"))
    code = module["main"]([str(EXAMPLE), "--kubectl", str(kubectl)])
    return code, capsys.readouterr(), (tmp_path / "calls").read_text().splitlines()


def test_a_model_at_zero_is_woken_through_the_gateway_before_its_service_is_asked(tmp_path, monkeypatch, capsys):
    code, out, calls = _run("", tmp_path, monkeypatch, capsys)
    assert code == 0, out.err
    assert "chat/llama-8b: woken from 0 replicas through the Gateway within 300 s" in out.out
    wait = json.dumps(["-n", "chat", "wait", "--for=jsonpath={.status.readyReplicas}=1", "deploy/llama-8b",
                       "--timeout=300s"])  # the blueprint's autoscale.cold_start_latency_s
    assert wait in calls
    applied = [json.loads(c[len("STDIN "):])["metadata"]["name"] for c in calls if c.startswith("STDIN ") and '"Pod"' in c]
    # woken first, through the Gateway; then asked through its Service; the model at one replica is not woken
    assert applied.index("e2e-gw-llama-8b-wake") < applied.index("e2e-llama-8b-models")
    assert "e2e-gw-qwen-7b-wake" not in applied
    wake = next(json.loads(c[len("STDIN "):]) for c in calls if c.startswith("STDIN ") and "e2e-gw-llama-8b-wake" in c)
    args = wake["spec"]["containers"][0]["args"]
    assert not any(a.startswith("X-Gateway-Model-Name") for a in args) and args[-1] == "http://10.100.7.9:80/v1/completions"
    assert wake["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "chat-api-key"


def test_a_model_that_does_not_wake_within_its_budget_fails_the_check(tmp_path, monkeypatch, capsys):
    code, out, _ = _run("never-wakes", tmp_path, monkeypatch, capsys)
    assert code == 1
    assert "did not bring a ready replica within its cold-start budget of 300 s" in out.err


def test_the_wait_is_the_blueprints_budget_or_else_the_estimate():
    from dataclasses import replace

    from fleetform.gateway import cold_start
    from fleetform.pipeline import check

    module = runpy.run_path(str(ROOT / "stacks/check_inference.py"))
    model = next(m for m in check(EXAMPLE).model.fleets[0].models if m.name == "llama-8b")
    assert module["wake_budget_s"](model) == 300
    unset = replace(model, autoscale=replace(model.autoscale, cold_start_latency_s=None))
    assert module["wake_budget_s"](unset) == math.ceil(cold_start(model).total_s) != 300
