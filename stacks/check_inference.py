"""The end-to-end check of a blueprint's inference fleets on the EKS cluster `pulumi up` made, for a user
with an AWS account and kubectl pointed at that cluster (`aws eks update-kubeconfig ...`, README). It never
runs in CI and has not run against AWS in fleetform's own tests (no credentials there): tests/test_eks.py
runs it against a fake kubectl that records what it asks.

    python stacks/check_inference.py blueprints/reference.yaml

First, for a fleet with a gateway, every model with replicas.min 0 is woken: the Gateway is Programmed, one
completion through it for the model (the endpoint picker counts it, answered or refused, and the KEDA trigger on
that counter takes the model off zero), then its Deployment must have a ready replica within the model's
cold-start budget (autoscale.cold_start_latency_s). Without that, the model has no endpoint and step 2 fails.

For every model of every inference fleet, in order, and stops at the first failure (exit 1):

1. its Deployment finishes rolling out (weights load before a replica is ready);
2. through its Service, from a pod in the fleet's namespace: GET /v1/models lists the model, and one
   completion (POST /v1/completions) answers; with api_key_secret the pod sends the key from the Secret;
3. the NetworkPolicy blocks the same request from a pod in another namespace (fleetform-e2e-outsider,
   made and deleted by the check);
4. the HPA (the Prometheus adapter's, or the one KEDA makes, keda-hpa-<ScaledObject>) reads a current
   value of the queue metric;
5. for a fleet with a gateway: the Gateway is Programmed (kgateway, installed by `pulumi up`, has made its
   proxy), and from a pod in the fleet's namespace, through the Gateway's address (status.addresses, Gateway
   API v1), one completion per model answers, sent as an OpenAI client sends it (the model in the body only,
   no X-Gateway-Model-Name header: the body-based router and the gateway's second pass route it) with the API
   key, and the same request without the key is refused with vLLM's 401 (not any HTTP error: a 404 or
   503 says nothing about the key).
6. for a fleet with semantic_routing: through the Gateway, a chat request for the routed name (in the body
   only) carrying the first easy example prompt is answered by the small model, one carrying the first hard
   example prompt by the large model.

The probe pods satisfy the namespaces' restricted Pod Security level (non-root, no privilege escalation,
all capabilities dropped, the runtime's seccomp profile).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time

from fleetform.pipeline import check

CURL_IMAGE = "curlimages/curl:8.10.1"
OUTSIDER = "fleetform-e2e-outsider"
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


BLOCKED_EXIT_CODES = {28, 7}
"""How curl ends when a NetworkPolicy drops (28, "Operation timeout") or rejects (7, "Failed to connect to
host") the connection (curl(1), EXIT CODES); 6 ("Couldn't resolve host") or no exit at all is no proof."""


class CheckFailed(Exception):
    pass


def probe_pod(name: str, namespace: str, args: list[str], api_key_secret: str | None = None) -> dict:
    """A one-shot curl pod that the restricted Pod Security level admits."""
    container = {"name": "probe", "image": CURL_IMAGE, "args": args, "securityContext": CONTAINER}
    if api_key_secret:
        container["env"] = [{"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": api_key_secret,
                                                                                   "key": "VLLM_API_KEY"}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"restartPolicy": "Never", "securityContext": RESTRICTED, "containers": [container]}}


def curl_args(url: str, body: dict | None = None, api_key: bool = False, max_time: int = 120) -> list[str]:
    args = ["-sS", "--fail", "--max-time", str(max_time)]
    if api_key:
        args += ["-H", "Authorization: Bearer $(VLLM_API_KEY)"]  # the kubelet expands $(VAR) in args
    if body is not None:
        args += ["-H", "Content-Type: application/json", "-d", json.dumps(body, sort_keys=True)]
    return args + [url]


class Kubectl:
    def __init__(self, program: str = "kubectl"):
        self.program = program
        self.last_exit_code: int | None = None

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([self.program, *args], input=stdin, capture_output=True, text=True, timeout=3900)
        if check and result.returncode != 0:
            raise CheckFailed(f"kubectl {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
        return result

    def run_pod(self, pod: dict, timeout_s: int = 300) -> tuple[bool, str]:
        """Create the pod, wait until it ends, return (succeeded, its log), delete it. The exit code of its
        container (None when it never ended) is kept in `last_exit_code`."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self("apply", "-f", "-", stdin=json.dumps(pod))
        try:
            deadline = time.monotonic() + timeout_s
            phase = ""
            while time.monotonic() < deadline:
                phase = self("-n", namespace, "get", "pod", name, "-o", "jsonpath={.status.phase}").stdout.strip()
                if phase in ("Succeeded", "Failed"):
                    break
                time.sleep(2)
            code = self("-n", namespace, "get", "pod", name, "-o",
                        "jsonpath={.status.containerStatuses[0].state.terminated.exitCode}", check=False).stdout.strip()
            self.last_exit_code = int(code) if code.isdigit() else None
            log = self("-n", namespace, "logs", name, check=False).stdout
            return phase == "Succeeded", log
        finally:
            self("-n", namespace, "delete", "pod", name, "--ignore-not-found", "--wait=false", check=False)


def _hpa_name(server) -> str:
    """KEDA names the HPA it makes keda-hpa-<ScaledObject name> (KEDA docs, ScaledObject spec,
    advanced.horizontalPodAutoscalerConfig.name: "default: keda-hpa-{scaled-object-name}")."""
    return f"keda-hpa-{server.name}" if server.autoscaling.kind == "keda" else server.name


def check_model(kubectl: Kubectl, server, say) -> None:
    ns, name = server.namespace, server.name
    kubectl("-n", ns, "rollout", "status", f"deploy/{name}", "--timeout=60m")
    say(f"{ns}/{name}: rolled out")
    base = f"http://{name}.{ns}.svc:{server.port}"
    key = next((e.secret for e in server.secret_env if e.name == "VLLM_API_KEY"), None)
    ok, log = kubectl.run_pod(probe_pod(f"e2e-{name}-models", ns, curl_args(f"{base}/v1/models", api_key=bool(key)), key))
    if not ok or name not in {m.get("id") for m in json.loads(log or "{}").get("data", [])}:
        raise CheckFailed(f"{ns}/{name}: GET /v1/models through the Service did not list the model: {log[:300]}")
    body = {"model": name, "prompt": "The capital of France is", "max_tokens": 8}
    ok, log = kubectl.run_pod(probe_pod(f"e2e-{name}-completion", ns,
                                        curl_args(f"{base}/v1/completions", body, api_key=bool(key)), key))
    if not ok or not json.loads(log or "{}").get("choices"):
        raise CheckFailed(f"{ns}/{name}: POST /v1/completions through the Service did not answer: {log[:300]}")
    say(f"{ns}/{name}: /v1/models and one completion answer through the Service")
    ok, log = kubectl.run_pod(probe_pod(f"e2e-{name}-outsider", OUTSIDER, curl_args(f"{base}/v1/models", max_time=10)))
    if ok:
        raise CheckFailed(f"{ns}/{name}: a pod in namespace {OUTSIDER} reached the server: the NetworkPolicy is "
                          "not enforced")
    if kubectl.last_exit_code not in BLOCKED_EXIT_CODES:
        # a probe that never ran (Pending, refused by admission) or failed to resolve the Service's name
        # proves nothing about the policy
        raise CheckFailed(f"{ns}/{name}: the probe in namespace {OUTSIDER} did not fail by a blocked connection "
                          f"(curl exit code {kubectl.last_exit_code}; 28 or 7 expected): {log[:300]}")
    say(f"{ns}/{name}: the NetworkPolicy blocks a pod of another namespace")
    if server.autoscaling is not None:
        hpa = json.loads(kubectl("-n", ns, "get", "hpa", _hpa_name(server), "-o", "json").stdout)
        current = [m for m in (hpa.get("status") or {}).get("currentMetrics") or []
                   if any((m.get(t) or {}).get("current") for t in ("pods", "external", "object"))]
        if not current:
            raise CheckFailed(f"{ns}/{name}: the HPA {_hpa_name(server)} reads no current metric value: "
                              f"{json.dumps((hpa.get('status') or {}).get('conditions'))[:300]}")
        say(f"{ns}/{name}: the HPA {_hpa_name(server)} reads {json.dumps(current[0], sort_keys=True)}")


HTTP_ERROR_EXIT_CODE = 22
"""curl --fail's exit code for an HTTP status of 400 or more (curl(1), EXIT CODES: "HTTP page not retrieved")."""
UNAUTHORIZED = 401
"""vLLM's answer to a /v1 request without the key (vllm/entrypoints/openai/api_server.py, AuthenticationMiddleware:
`JSONResponse(content={"error": "Unauthorized"}, status_code=401)`). Any other error (the Gateway's 404 for an
unmatched route, a 503 from a pool with no replica, a 500 from a failing picker) says nothing about the key."""
STATUS_MARK = "fleetform-http-status="
"""What the keyless probe prints before the status (curl -w, written out even when --fail ends the transfer)."""


def gateway_url(kubectl: Kubectl, gateway, say) -> str:
    """The completions URL of a Programmed Gateway, at its first address (status.addresses, Gateway API v1)."""
    ns, name = gateway.namespace, gateway.name
    kubectl("-n", ns, "wait", "--for=condition=Programmed", f"gateway/{name}", "--timeout=10m")
    status = json.loads(kubectl("-n", ns, "get", "gateway", name, "-o", "json").stdout).get("status") or {}
    addresses = [a.get("value") for a in status.get("addresses") or [] if a.get("value")]
    if not addresses:
        raise CheckFailed(f"{ns}/{name}: the Gateway is Programmed but has no address")
    say(f"{ns}/{name}: Programmed at {addresses[0]}")
    return f"http://{addresses[0]}:{gateway.listener_port}/v1/completions"


def _api_key(server) -> str | None:
    return next((e.secret for e in server.secret_env if e.name == "VLLM_API_KEY"), None)


def wake_budget_s(model) -> int:
    """How long a model at zero may take to get a ready replica: the blueprint's autoscale.cold_start_latency_s,
    which the cold-start-budget rule holds the estimate (fleetform/gateway.py cold_start) to; the estimate where
    the blueprint gives none."""
    from fleetform.gateway import cold_start

    budget = model.autoscale.cold_start_latency_s if model.autoscale is not None else None
    return math.ceil(budget if budget is not None else cold_start(model).total_s)


def wake_model(kubectl: Kubectl, fleet, server, url: str, budget_s: int, say) -> None:
    """Take a model at replicas.min 0 off zero through the Gateway, as a client would: one completion for it (with
    no replica the endpoint picker counts it and answers 503, fleetform/k8s.py wake_triggers; the request's own
    outcome is not the check), then its Deployment must have a ready replica within the budget. kubectl waits on
    .status.readyReplicas (a Deployment at 0 replicas is already Available, so condition=Available proves nothing;
    rollout status likewise returns at once)."""
    gateway = fleet.inference_gateway
    ns, name = server.namespace, server.name
    body = {"model": name, "prompt": "The capital of France is", "max_tokens": 1}  # the body only, as a client
    kubectl.run_pod(probe_pod(f"e2e-gw-{name}-wake", ns, curl_args(url, body, api_key=True, max_time=30),
                              _api_key(server)))
    result = kubectl("-n", ns, "wait", "--for=jsonpath={.status.readyReplicas}=1", f"deploy/{name}",
                     f"--timeout={budget_s}s", check=False)
    if result.returncode != 0:
        raise CheckFailed(f"{ns}/{name}: at 0 replicas, a request through the Gateway did not bring a ready replica "
                          f"within its cold-start budget of {budget_s} s (autoscale.cold_start_latency_s): "
                          f"{(result.stderr or result.stdout).strip()[:300]}")
    say(f"{ns}/{name}: woken from 0 replicas through the Gateway within {budget_s} s")


def check_gateway(kubectl: Kubectl, fleet, say) -> None:
    """The fleet's Gateway answers for each of its models (fleetform/gateway.py: the body-based router on the way in
    sets the model-name header, the second pass matches a model's HTTPRoute by it, paths under /v1) to a request that
    names its model in the body only, and not without the key (vLLM checks it behind the gateway)."""
    gateway = fleet.inference_gateway
    ns, name = gateway.namespace, gateway.name
    url = gateway_url(kubectl, gateway, say)
    keys = {s.name: _api_key(s) for s in fleet.kube.servers}
    for picker in gateway.pickers:
        body = {"model": picker.model, "prompt": "The capital of France is", "max_tokens": 8}
        ok, log = kubectl.run_pod(probe_pod(f"e2e-gw-{picker.pool}-completion", ns,
                                            curl_args(url, body, api_key=True), keys[picker.pool]))
        if not ok or not json.loads(log or "{}").get("choices"):
            raise CheckFailed(f"{ns}/{name}: POST /v1/completions for {picker.model} through the Gateway did not "
                              f"answer: {log[:300]}")
        status = ["-o", "/dev/null", "-w", STATUS_MARK + "%{http_code}\n"]
        ok, log = kubectl.run_pod(probe_pod(f"e2e-gw-{picker.pool}-nokey", ns, status + curl_args(url, body)))
        answered = re.findall(rf"{STATUS_MARK}(\d+)", log or "")
        if ok or kubectl.last_exit_code != HTTP_ERROR_EXIT_CODE or answered != [str(UNAUTHORIZED)]:
            raise CheckFailed(f"{ns}/{name}: a request for {picker.model} without the API key was not refused "
                              f"by vLLM's {UNAUTHORIZED} (curl exit code {kubectl.last_exit_code}, HTTP status "
                              f"{answered[-1] if answered else 'none'}; {HTTP_ERROR_EXIT_CODE} and {UNAUTHORIZED} "
                              f"expected): {(log or '')[:300]}")
        say(f"{ns}/{name}: {picker.model} answers through the Gateway with the key, and refuses without it")


def check_routing(kubectl: Kubectl, fleet, say) -> None:
    """A fleet with semantic_routing (fleetform/semrouter.py): through the Gateway, a chat request for the routed
    name in the body only (no header), once with the first easy example prompt and once with the first hard one,
    must be answered by the small and by the large model (the `model` of vLLM's answer is the served model). This
    is where the router's own pass through the proxy (fleetform/semrouter.py LISTENER) is proven or not."""
    gateway, router = fleet.inference_gateway, fleet.inference_gateway.semantic_router
    ns = gateway.namespace
    url = gateway_url(kubectl, gateway, say).replace("/v1/completions", "/v1/chat/completions")
    key = _api_key(next(s for s in fleet.kube.servers if s.name == router.large))
    for kind, prompt, expected in (("easy", router.easy[0], router.small), ("hard", router.hard[0], router.large)):
        body = {"model": router.model_name, "messages": [{"role": "user", "content": prompt}], "max_tokens": 8}
        ok, log = kubectl.run_pod(probe_pod(f"e2e-gw-routing-{kind}", ns, curl_args(url, body, api_key=True),
                                            key))
        try:
            answered = json.loads(log or "{}").get("model") if ok else None
        except json.JSONDecodeError:
            answered = None
        if answered != expected:
            raise CheckFailed(f"{ns}/{gateway.name}: the {kind} prompt {prompt!r} for {router.model_name!r} was "
                              f"answered by {answered!r}, not {expected!r}: {(log or '')[:300]}")
        say(f"{ns}/{gateway.name}: {'an' if kind == 'easy' else 'a'} {kind} request for {router.model_name} went to {expected}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("blueprint")
    parser.add_argument("--kubectl", default="kubectl")
    args = parser.parse_args(argv)
    result = check(args.blueprint)
    if result.model is None:
        print(f"{args.blueprint}: the blueprint has errors; run fleetform validate", file=sys.stderr)
        return 1
    kubectl = Kubectl(args.kubectl)
    servers = [s for f in result.model.fleets if f.kube is not None for s in f.kube.servers]
    outsider = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OUTSIDER, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted"}}}
    try:
        kubectl("apply", "-f", "-", stdin=json.dumps(outsider))
        for fleet in result.model.fleets:  # a model at zero has no endpoint for check_model until woken
            asleep = [s for s in fleet.kube.servers if s.autoscaling is not None and s.autoscaling.min_replicas == 0] \
                if fleet.inference_gateway is not None else []
            if asleep:
                url = gateway_url(kubectl, fleet.inference_gateway, print)
                for server in asleep:
                    model = next(m for m in fleet.models if m.name == server.name)
                    wake_model(kubectl, fleet, server, url, wake_budget_s(model), print)
        for server in servers:
            check_model(kubectl, server, print)
        for fleet in result.model.fleets:
            if fleet.inference_gateway is not None:
                check_gateway(kubectl, fleet, print)
                if fleet.inference_gateway.semantic_router is not None:
                    check_routing(kubectl, fleet, print)
    except CheckFailed as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        kubectl("delete", "namespace", OUTSIDER, "--ignore-not-found", "--wait=false", check=False)
    print(f"{len(servers)} model(s) checked end to end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
