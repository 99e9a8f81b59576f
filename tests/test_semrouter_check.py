"""stacks/check_inference.py on a fleet with semantic_routing (blueprints/inference-router.yaml): through the Gateway,
an easy prompt for `auto` must come back from the small model and a hard one from the large model. Never run against
AWS here: a fake kubectl (tests/test_eks.py FAKE_KUBECTL with test_gateway_wake_check's gateway answers) answers as a
cluster would, routing correctly or (FAKE_ROUTE=wrong) sending every request to the large model, as kgateway would
if the router's route-level filter never ran."""

from __future__ import annotations

import json
import runpy

from conftest import ROOT
from test_eks import FAKE_KUBECTL
from test_gateway_wake_check import GATEWAY_AND_ZERO

EXAMPLE = ROOT / "blueprints/inference-router.yaml"
ROUTING = '''elif "logs" in args and "-routing-" in pod():
    wrong = os.environ.get("FAKE_ROUTE") == "wrong"
    model = "qwen-32b" if wrong or pod().endswith("-hard") else "qwen-7b"
    print(json.dumps({"model": model, "choices": [{"message": {"content": "4"}}]}))
elif "logs" in args:'''


def _run(route, tmp_path, monkeypatch, capsys):
    fake = FAKE_KUBECTL.replace('if "get" in args and "pod" in args and any("exitCode" in a for a in args):',
                                GATEWAY_AND_ZERO, 1).replace('elif "logs" in args:', ROUTING, 1)
    assert fake.count("-routing-") == 1
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(fake)
    kubectl.chmod(0o755)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls"))
    monkeypatch.setenv("FAKE_MODE", "")
    monkeypatch.setenv("FAKE_ZERO", "")
    monkeypatch.setenv("FAKE_ROUTE", route)
    module = runpy.run_path(str(ROOT / "stacks/check_inference.py"))
    code = module["main"]([str(EXAMPLE), "--kubectl", str(kubectl)])
    return code, capsys.readouterr(), (tmp_path / "calls").read_text().splitlines()


def test_the_check_sends_an_easy_and_a_hard_prompt_for_auto_through_the_gateway(tmp_path, monkeypatch, capsys):
    code, out, calls = _run("", tmp_path, monkeypatch, capsys)
    assert code == 0, out.err
    assert "chat/chat-gateway: an easy request for auto went to qwen-7b" in out.out
    assert "chat/chat-gateway: a hard request for auto went to qwen-32b" in out.out
    pods = {p["metadata"]["name"]: p for p in (json.loads(c[len("STDIN "):]) for c in calls
                                               if c.startswith("STDIN ") and '"Pod"' in c)}
    easy = pods["e2e-gw-routing-easy"]["spec"]["containers"][0]
    args = easy["args"]
    assert "X-Gateway-Model-Name: auto" not in args  # the body only, as an OpenAI client sends it
    assert args[-1] == "http://10.100.7.9:80/v1/chat/completions"
    body = json.loads(args[args.index("-d") + 1]) if "-d" in args else json.loads(
        next(a for a in args if a.startswith("{")))
    assert body["model"] == "auto" and body["messages"][0]["content"] == "answer briefly"
    assert easy["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "chat-api-key"


def test_the_check_fails_when_every_request_reaches_the_large_model(tmp_path, monkeypatch, capsys):
    code, out, _ = _run("wrong", tmp_path, monkeypatch, capsys)
    assert code == 1
    assert "the easy prompt 'answer briefly' for 'auto' was answered by 'qwen-32b', not 'qwen-7b'" in out.err
