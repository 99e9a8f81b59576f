"""Multi-node replicas (fleetform/lws.py, issue 23): a model larger than a node is a LeaderWorkerSet group of
whole nodes. What is checked here, and from which source:
- the LeaderWorkerSet against the CRD schema of kubernetes-sigs/lws v0.10.0 (tests/crd, also in test_k8s's
  sweep of every example), its scale subresource as the KEDA and HPA target;
- the leader's vLLM argv against vLLM 0.11.0's own parser table (providers/vllm-serve-flags.tsv);
- the LWS chart values against that tag's charts/lws/values.yaml (tests/data/charts/lws-v0.10.0-values.yaml);
- the Pulumi program under mocks: EFA interfaces and a placement group on the fleet's launch template, the
  LWS release before the LeaderWorkerSet.
Not checked here (it needs GPUs and an AWS account): that the Ray cluster forms across two p5 nodes, vLLM
loads the 405B weights over 16 GPUs and NCCL uses EFA between the pods."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from conftest import ROOT
from fleetform import lws
from fleetform.pipeline import check
from fleetform.render import render

EXAMPLE = ROOT / "blueprints/inference-multinode.yaml"
TEXT = EXAMPLE.read_text()
CRD = json.loads((ROOT / "tests/crd/leaderworkerset.x-k8s.io_v1_LeaderWorkerSet.json").read_text())
CHART_VALUES = yaml.safe_load((ROOT / "tests/data/charts/lws-v0.10.0-values.yaml").read_text())


def _check(text: str, tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return check(path)


def _rules(text: str, tmp_path, rule: str) -> list:
    return [f for f in _check(text, tmp_path).findings if f.rule == rule]


@pytest.fixture(scope="module")
def rendered():
    result = check(EXAMPLE)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return result.model, render(result.model)


def test_a_model_larger_than_a_node_is_a_leaderworkerset_of_whole_nodes(rendered):
    model, files = rendered
    assert "big/k8s/llama-405b-deployment.yaml" not in files
    lws_doc = yaml.safe_load(files["big/k8s/llama-405b-leaderworkerset.yaml"])
    assert [e.message for e in jsonschema.Draft202012Validator(CRD).iter_errors(lws_doc)] == []
    spec = lws_doc["spec"]
    template = spec["leaderWorkerTemplate"]
    # TP 8 x PP 2 = 16 GPUs over p5.48xlarge's 8: two pods a group, each a whole node's GPUs and EFA interfaces
    assert template["size"] == 2 and template["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert spec["startupPolicy"] == "LeaderCreated"  # the workers start while the leader waits for them
    assert "replicas" not in spec  # KEDA owns the count
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    for pod in (leader, worker):
        limits = pod["resources"]["limits"]
        assert (limits["nvidia.com/gpu"], limits["vpc.amazonaws.com/efa"], limits["hugepages-2Mi"]) == (8, 32, "5120Mi")
        assert pod["resources"]["requests"] == {**pod["resources"]["requests"], **{k: limits[k] for k in limits}}
        assert {"name": "NCCL_DEBUG", "value": "WARN"} in pod["env"]  # the fleet's nccl.env
    args = leader["args"]
    assert args[0] == "meta-llama/Llama-3.1-405B-Instruct"
    flags = dict(zip(args[1::2], args[2::2]))
    assert (flags["--tensor-parallel-size"], flags["--pipeline-parallel-size"],
            flags["--distributed-executor-backend"]) == ("8", "2", "ray")
    # the Ray script, then vLLM with the args as "$@": nothing of the blueprint is spliced into shell text
    assert leader["command"][:2] == ["bash", "-c"] and leader["command"][2].endswith('exec vllm serve "$@"')
    assert leader["command"][3] == "vllm-leader" and len(leader["command"]) == 4
    assert worker["command"][:2] == ["bash", "-c"] and f"bash {lws.RAY_SCRIPT} worker" in worker["command"][2]
    assert "args" not in worker and "startupProbe" not in worker
    assert '--ray_cluster_size="$LWS_GROUP_SIZE"' in leader["command"][2]
    assert '--ray_address="$LWS_LEADER_ADDRESS"' in worker["command"][2]
    assert {p: leader[p]["httpGet"]["path"] for p in ("startupProbe", "readinessProbe", "livenessProbe")} == {
        "startupProbe": "/health", "readinessProbe": "/health", "livenessProbe": "/health"}


def test_the_leaders_argv_is_one_vllm_accepts(rendered):
    from fleetform.rules.inference import argv_problems

    _, files = rendered
    leader = yaml.safe_load(files["big/k8s/llama-405b-leaderworkerset.yaml"])["spec"]["leaderWorkerTemplate"][
        "leaderTemplate"]["spec"]["containers"][0]
    assert argv_problems(leader["args"][1:], owned=frozenset()) == []
    assert argv_problems(leader["args"][1:] + ["--pipeline-parallel-size", "x"], owned=frozenset()) != []


def test_keda_scales_groups_and_only_leaders_serve(rendered):
    """KEDA scales the LeaderWorkerSet through its scale subresource (the CRD's specReplicasPath .spec.replicas):
    a replica is a group. Requests reach the leaders only (worker-index 0), where vLLM's API server runs."""
    _, files = rendered
    scaled = yaml.safe_load(files["big/k8s/llama-405b-scaledobject.yaml"])
    assert scaled["spec"]["scaleTargetRef"] == {"apiVersion": "leaderworkerset.x-k8s.io/v1",
                                                "kind": "LeaderWorkerSet", "name": "llama-405b"}
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 2)
    assert CRD["properties"]["spec"]["properties"]["replicas"]["type"] == "integer"
    service = yaml.safe_load(files["big/k8s/llama-405b-service.yaml"])
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    policy = yaml.safe_load(files["big/k8s/llama-405b-group-networkpolicy.yaml"])
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": policy["spec"]["podSelector"][
        "matchLabels"]}}]}] and "ports" not in policy["spec"]["ingress"][0]


def test_hpa_scales_the_leaderworkerset_too(tmp_path):
    result = _check(TEXT.replace("autoscaler: keda", "autoscaler: hpa"), tmp_path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    hpa = yaml.safe_load(render(result.model)["big/k8s/llama-405b-hpa.yaml"])
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"


def test_a_model_within_a_node_stays_a_deployment(tmp_path):
    text = TEXT.replace("tensor_parallel: 8 ", "tensor_parallel: 4 ").replace("pipeline_parallel: 2 ",
                                                                              "pipeline_parallel: 2 ")
    result = _check(text.replace("model_params_billion: 405", "model_params_billion: 70")
                    .replace("meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"), tmp_path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    files = render(result.model)
    deployment = yaml.safe_load(files["big/k8s/llama-405b-deployment.yaml"])
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # TP 4 x PP 2 = 8 GPUs: one node, one pod, no Ray
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8 and "--pipeline-parallel-size" in container["args"]
    assert "--distributed-executor-backend" not in container["args"]
    assert not any(name.endswith("leaderworkerset.yaml") for name in files)
    assert result.model.cluster.release("lws") is None


def test_lws_parallelism_wants_whole_nodes(tmp_path):
    assert _rules(TEXT, tmp_path, "lws-parallelism") == []
    (finding,) = _rules(TEXT.replace("tensor_parallel: 8 ", "tensor_parallel: 4 ").replace(
        "pipeline_parallel: 2 ", "pipeline_parallel: 3 "), tmp_path, "lws-parallelism")
    assert "12 GPUs a replica, not a whole number of p5.48xlarges (8 GPUs each)" in finding.message
    assert finding.path.endswith("pipeline_parallel") and "16" in finding.hint


def test_tensor_parallel_across_nodes_is_a_warning_with_pipeline_as_the_way(tmp_path):
    text = TEXT.replace("tensor_parallel: 8 ", "tensor_parallel: 16 ").replace("pipeline_parallel: 2 ",
                                                                               "pipeline_parallel: 1 ")
    (finding,) = _rules(text, tmp_path, "lws-tp-within-node")
    assert finding.severity.value == "warning"
    assert finding.hint == "use tensor_parallel 8 and pipeline_parallel 2"
    assert _rules(text, tmp_path, "tensor-parallel") == []  # no longer an error: vLLM runs it, slower
    assert _rules(TEXT, tmp_path, "lws-tp-within-node") == []


def test_a_replica_spanning_nodes_without_efa_is_an_error(tmp_path):
    """g6e.4xlarge (1 x L40S 48 GB) has no EFA in the catalog: a 70B fp8 model over 2 of them would talk TCP."""
    text = (TEXT.replace("p5.48xlarge", "g6e.4xlarge").replace("model_params_billion: 405", "model_params_billion: 70")
            .replace("precision: bf16", "precision: fp8").replace("tensor_parallel: 8 ", "tensor_parallel: 1 ")
            .replace("max_model_len: 8192", "max_model_len: 4096"))
    (finding,) = _rules(text, tmp_path, "lws-interconnect")
    assert "spans 2 g6e.4xlarge nodes, which have no EFA" in finding.message
    assert _rules(TEXT, tmp_path, "lws-interconnect") == []


def test_the_memory_rule_splits_the_weights_across_tp_and_pp(tmp_path):
    """810 GB of bf16 weights: more than 8 H100s hold (618.5 GB at 0.9), less than 16 (1,237 GB)."""
    assert _rules(TEXT, tmp_path, "model-fits") == []
    (finding,) = _rules(TEXT.replace("pipeline_parallel: 2 ", "pipeline_parallel: 1 "), tmp_path, "model-fits")
    assert "810.0 GB, more than the 618.5 GB vLLM may use on 8 x H100-80GB" in finding.message


def test_the_cluster_installs_lws_and_the_efa_plugin_with_keys_of_the_chart(rendered):
    from test_kueue import _missing

    model, _ = rendered
    release = model.cluster.release("lws")
    assert (release.repo, release.version, release.namespace) == ("oci://registry.k8s.io/lws/charts", "v0.10.0",
                                                                 "lws-system")
    assert release.values and _missing(release.values, CHART_VALUES) == []
    assert _missing({"image": {"mananger": {}}}, CHART_VALUES) == ["image.mananger"]  # negative control
    assert release.values["image"]["manager"]["tag"] == lws.LWS_VERSION
    assert model.cluster.release("aws-efa-k8s-device-plugin") is not None
    group = next(g for g in model.cluster.node_groups if g.fleet == "big")
    assert dict(group.devices) == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
    server = next(w for w in model.cluster.workloads if w.name == "big/llama-405b")
    # 1 to 2 groups of 2 pods: what the cluster rules pack onto the 2 to 4 nodes
    assert (server.kind, server.min_replicas, server.max_replicas) == ("LeaderWorkerSet", 2, 4)
    assert dict(server.devices) == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}


def test_the_fleet_needs_whole_groups_of_nodes(tmp_path):
    """autoscaler-reach counts nodes per replica: 2 replicas of 2 nodes need 4, not the 2 that 32 GPUs / 8 ... """
    assert _rules(TEXT, tmp_path, "autoscaler-reach") == []
    (finding,) = _rules(TEXT.replace("nodes: {min: 2, max: 4}", "nodes: {min: 2, max: 3}"), tmp_path,
                        "autoscaler-reach")
    assert "4" in finding.message


def test_the_plan_puts_efa_and_a_placement_group_on_the_node_group_and_lws_before_the_object(rendered):
    from fleetform.plan import record

    model, files = rendered
    assert model.fleets[0].placement == "cluster"  # the default of a fleet whose replicas span nodes
    resources = record(model, files)
    by_name = {r["name"]: r for r in resources}
    template = by_name["big-nodes"]["inputs"]
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == 33 and "vpcSecurityGroupIds" not in template
    assert [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in interfaces[:3]] == [
        (0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")]
    assert by_name["big-placement"]["inputs"]["strategy"] == "cluster"
    assert by_name["eks-lws"]["inputs"]["chart"] == "oci://registry.k8s.io/lws/charts/lws"
    (obj,) = [r for r in resources if r["type"].endswith("LeaderWorkerSet")]
    assert "eks-lws" in obj["depends_on"] and "eks-aws-efa-k8s-device-plugin" in obj["depends_on"]


def test_sizing_counts_nodes_per_replica(tmp_path):
    from fleetform.sizing import sizing

    text = TEXT.replace("        hf_token_secret: hf-token\n", "        hf_token_secret: hf-token\n        slo: "
                        "{peak_qps: 4, qps_per_gpu: 0.2, redundancy: 0, burst_headroom: 0}\n")
    result = _check(text, tmp_path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    steps = {s.what: s for s in sizing(result.model)[0].steps}
    assert steps["llama-405b: nodes per replica"].result == "2 nodes (a LeaderWorkerSet group)"
    # 4 / 0.2 = 20 GPUs -> 2 replicas of 16 GPUs -> 2 groups of 2 nodes
    assert steps["llama-405b: replicas and nodes"].result == "2 replicas on 4 nodes"
    # 3 x 8 GPUs of TP 8 x PP 3 on 8-GPU nodes: 1 replica (24 >= 20) on 3 nodes
    text = text.replace("pipeline_parallel: 2 ", "pipeline_parallel: 3 ").replace("nodes: {min: 2, max: 4}", "nodes: {min: 3, max: 6}")
    result = _check(text, tmp_path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    steps = {s.what: s for s in sizing(result.model)[0].steps}
    assert steps["llama-405b: replicas and nodes"].result == "1 replicas on 3 nodes"


def test_the_stock_vllm_image_on_efa_is_a_warning_naming_an_image_with_aws_ofi_nccl(tmp_path):
    # vllm/vllm-openai installs no libfabric/aws-ofi-nccl (vLLM docker/Dockerfile v0.11.0; vllm#55635): NCCL
    # between the group's pods would use sockets although each pod holds 32 EFA interfaces
    (finding,) = _rules(TEXT, tmp_path, "lws-efa-image")
    assert finding.severity == "warning" and str(finding.path).endswith("image")
    assert "TCP sockets" in finding.message and "aws-ofi-nccl" in finding.hint
    assert "763104351884.dkr.ecr" in finding.hint  # AWS's vLLM DLC, built FROM vllm/vllm-openai + EFA installer
    for image in ("docker.io/vllm/vllm-openai:v0.11.0", "vllm/vllm-openai@sha256:" + "0" * 64):
        assert len(_rules(TEXT.replace("vllm/vllm-openai:v0.11.0", image), tmp_path, "lws-efa-image")) == 1
    dlc = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.11.0-gpu-py312-ec2"
    assert _rules(TEXT.replace("vllm/vllm-openai:v0.11.0", dlc), tmp_path, "lws-efa-image") == []
    # a model within one node has no NCCL between nodes: no finding
    single = TEXT.replace("tensor_parallel: 8 ", "tensor_parallel: 4 ").replace("pipeline_parallel: 2 ",
                                                                               "pipeline_parallel: 1 ")
    assert _rules(single, tmp_path, "lws-efa-image") == []


def test_the_group_waits_for_its_ray_cluster_as_long_as_the_leaders_startup_probe(rendered):
    # multi-node-serving.sh gives up after ray_init_timeout (300 s by default, examples/online_serving/
    # multi-node-serving.sh at v0.11.0): a worker whose p5 node is still launching made the leader exit and
    # RecreateGroupOnPodRestart recreate the group in a loop. Both pods wait the leader's startup budget.
    _, files = rendered
    doc = yaml.safe_load(files["big/k8s/llama-405b-leaderworkerset.yaml"])
    template = doc["spec"]["leaderWorkerTemplate"]
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    probe = leader["startupProbe"]
    budget = probe["periodSeconds"] * probe["failureThreshold"]
    # 405B in bf16 from the Hub: 600 s + 10 s/GB of its checkpoint, far beyond the script's 300 s
    assert budget > 8000
    for pod in (leader, worker):
        assert f"--ray_init_timeout={budget} " in pod["command"][2] + " "
    assert lws.ray_wait_s(120) == lws.SCRIPT_WAIT_S  # never below the script's own default


def _quantity_bytes(text: str) -> int:
    return int(text[:-2]) * 1024 ** {"Mi": 2, "Gi": 3}[text[-2:]]


def test_rays_rotated_logs_fit_half_the_pods_tmp(rendered):
    # Ray writes its logs under /tmp/ray (the pod's 4 GiB /tmp emptyDir) and rotates at 512 MiB x 5 backups by
    # default (ray_constants.py LOGGING_ROTATE_BYTES / LOGGING_ROTATE_BACKUP_COUNT): one file could pass the
    # sizeLimit and get the pod evicted, restarting its group. RAY_ROTATION_* (Ray's logging docs) bound them.
    _, files = rendered
    doc = yaml.safe_load(files["big/k8s/llama-405b-leaderworkerset.yaml"])
    for role in ("leaderTemplate", "workerTemplate"):
        spec = doc["spec"]["leaderWorkerTemplate"][role]["spec"]
        env = {e["name"]: e["value"] for e in spec["containers"][0]["env"] if "value" in e}
        tmp = next(v for v in spec["volumes"] if v["name"] == "tmp")["emptyDir"]["sizeLimit"]
        max_bytes, backups = int(env["RAY_ROTATION_MAX_BYTES"]), int(env["RAY_ROTATION_BACKUP_COUNT"])
        assert lws.RAY_LOG_FILES * max_bytes * (backups + 1) <= _quantity_bytes(tmp) // 2
        assert max_bytes >= 16 * 1024 ** 2  # still a useful log: 32 MiB a file at a 4 GiB /tmp
        # Ray's defaults would not fit: one file and its five backups are 3 GiB
        assert 512 * 1024 ** 2 * 6 * lws.RAY_LOG_FILES > _quantity_bytes(tmp) // 2


def test_the_worker_stops_ray_and_exits_on_sigterm_as_pid_1(tmp_path):
    # The kubelet sends SIGTERM to the container's PID 1; the kernel drops it unless PID 1 has a handler
    # (pid_namespaces(7)), so an exec'ed script made every deletion wait the full grace period. Run the
    # worker's command as PID 1 of a new PID namespace, with a stand-in script that blocks as
    # `ray start --block` does and a stand-in `ray` that records `ray stop`.
    import os
    import shutil
    import signal
    import subprocess
    import time

    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--pid", "--fork", "--map-root-user", "true"],
                                         capture_output=True).returncode:
        if os.environ.get("CI"):
            pytest.fail("unshare --pid --map-root-user must work in CI (util-linux, user namespaces)")
        pytest.skip("no unprivileged PID namespaces here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ray").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/ray.log\n')
    (bin_dir / "ray").chmod(0o755)
    script = tmp_path / "multi-node-serving.sh"
    script.write_text(f'echo "$@" > {tmp_path}/script.args\nexec sleep 300\n')
    command = list(lws.worker_command(600))
    command[2] = command[2].replace(lws.RAY_SCRIPT, str(script))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LWS_LEADER_ADDRESS": "leader.example"}
    proc = subprocess.Popen([unshare, "--pid", "--fork", "--map-root-user", "--kill-child", *command], env=env)
    try:
        children = f"/proc/{proc.pid}/task/{proc.pid}/children"
        deadline = time.monotonic() + 10
        while not (tmp_path / "script.args").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "script.args").read_text().split() == [
            "worker", "--ray_address=leader.example", "--ray_init_timeout=600"]
        (init,) = (int(p) for p in open(children).read().split())  # PID 1 of the namespace
        os.kill(init, signal.SIGTERM)
        assert proc.wait(timeout=5) == 143  # at once, not after the grace period
        assert (tmp_path / "ray.log").read_text().split() == ["stop"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
