"""Image pre-pull on an inference fleet's EKS GPU node group (fleetform/prepull.py): the images the model holds, the
rendered user data (its MIME parts, its shell part run against a fake systemctl, shellcheck), the pull program run
against a fake ctr, the launch template under Pulumi's mocks, and what `diff` says when the image list changes.

What only a real EKS node would prove (no AWS account here): that systemd on the AL2023 NVIDIA AMI runs the unit
after nodeadm-run.service (read in awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/system:
nodeadm-run.service is After=cloud-final.service, so cloud-final's script cannot wait for it), that the kubelet
then finds the image present, and how many minutes that saves a p5.48xlarge."""

from __future__ import annotations

import base64
import email
import os
import stat
import subprocess
from dataclasses import replace

import pytest

from conftest import ROOT, require, run_cli
from fleetform import prepull
from fleetform.changes import file_disruption
from fleetform.pipeline import check
from fleetform.render import render

REF = ROOT / "blueprints/reference.yaml"
PROGRAM = ROOT / "templates/prepull/fleetform-prepull"
UNIT = ROOT / "templates/prepull/fleetform-prepull.service"


@pytest.fixture(scope="module")
def reference():
    model = check(REF).model
    return model, render(model)


def test_ctr_names_images_with_their_registry():
    """ctr takes no short names: the distribution reference grammar's default domain (docker.io) and library/ for a
    one-part name, as the CRI normalizes what the kubelet asks for; a name whose first part has a dot, a port or is
    localhost already names its registry."""
    assert prepull.ctr_reference("vllm/vllm-openai:v0.11.0") == "docker.io/vllm/vllm-openai:v0.11.0"
    assert prepull.ctr_reference("busybox:1.36") == "docker.io/library/busybox:1.36"
    assert prepull.ctr_reference("ghcr.io/org/img:1") == "ghcr.io/org/img:1"
    assert prepull.ctr_reference("registry:5000/img:1") == "registry:5000/img:1"
    assert prepull.ctr_reference("localhost/img:1") == "localhost/img:1"
    digest = "vllm/vllm-openai@sha256:" + "a" * 64
    assert prepull.ctr_reference(digest) == "docker.io/" + digest


def test_private_ecr_images_are_left_to_the_kubelet(reference):
    """The ecr-credential-provider's matchImages (nodeadm/internal/kubelet/image-credential-provider.go) are the
    registries ctr has no credentials for; public.ecr.aws is anonymous and pre-pulled."""
    model, _ = reference
    serve = next(f for f in model.fleets if f.name == "serve")
    ecr = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-openai:v0.11.0"
    servers = (replace(serve.kube.servers[0], image=ecr), replace(serve.kube.servers[0], image="public.ecr.aws/x/y:1"))
    assert prepull.images(servers) == (("public.ecr.aws/x/y:1",), (ecr,))
    assert prepull.images((replace(serve.kube.servers[0], image="1.dkr-ecr.eu-west-1.on.aws/a:1"),)) == (
        (), ("1.dkr-ecr.eu-west-1.on.aws/a:1",))


def test_the_node_groups_hold_their_models_images(reference):
    """Each inference GPU group pre-pulls the distinct images of its fleet's servers (init containers included);
    the system group and a training fleet's groups pull nothing."""
    model, _ = reference
    groups = {g.name: g for g in model.cluster.node_groups}
    assert groups["serve"].prepull == ("docker.io/vllm/vllm-openai:v0.11.0",)
    assert groups["small-models"].prepull == ("docker.io/vllm/vllm-openai:v0.11.0",)
    assert groups["system"].prepull == () and groups["serve"].prepull_skipped == ()


def _parts(data: bytes) -> list:
    message = email.message_from_bytes(data)
    assert message.is_multipart()
    return [(p.get_content_type(), p.get_payload()) for p in message.get_payload()]


def test_user_data_is_mime_with_the_node_config_and_the_pre_pull(reference):
    """AL2023's nodeadm reads application/node.eks.aws parts, cloud-init runs text/x-shellscript parts (EKS merges
    its own NodeConfig into a managed node group's MIME user data): the RAID0 NodeConfig where the instance has local
    NVMe (serve: p5.48xlarge), then the shell part with the image list. It names no fleet (a rename rolls no node)."""
    _, files = reference
    parts = _parts(files["serve/node/user-data"])
    assert [t for t, _ in parts] == ["application/node.eks.aws", "text/x-shellscript"]
    assert "strategy: RAID0" in parts[0][1]
    script = parts[1][1]
    assert script.startswith("#!/bin/bash\n")
    images = script.split("<<'FLEETFORM_IMAGES'\n", 1)[1].split("\nFLEETFORM_IMAGES\n", 1)[0]
    assert images.splitlines() == ["docker.io/vllm/vllm-openai:v0.11.0"]
    # it names no fleet: the same user data for every fleet with the same images and local NVMe
    assert _parts(files["small-models/node/user-data"])[1][1] == script
    # the program and the unit are the shipped files, byte for byte
    program = script.split("<<'FLEETFORM_PREPULL'\n", 1)[1].split("FLEETFORM_PREPULL\n", 1)[0]
    assert program == PROGRAM.read_text()
    unit = script.split("<<'FLEETFORM_UNIT'\n", 1)[1].split("FLEETFORM_UNIT\n", 1)[0]
    assert unit == UNIT.read_text()
    # small-models (p4de.24xlarge has local NVMe too); an instance without it gets the shell part alone
    model, _ = reference
    serve = next(f for f in model.fleets if f.name == "serve")
    from fleetform.render.jinja import render as render_template
    bare = render_template("prepull/user-data.j2", images=("docker.io/vllm/vllm-openai:v0.11.0",), local_nvme=False)
    assert [t for t, _ in _parts(bare)] == ["text/x-shellscript"]
    assert serve.instance.local_nvme_gb


def test_the_unit_starts_after_nodeadm_run_and_nothing_waits_on_it():
    """nodeadm-run.service restarts containerd (nodeadm/internal/containerd/daemon.go EnsureRunning) and starts the
    kubelet after cloud-final: the pull is ordered after it, and is not a oneshot anything could be held by."""
    lines = UNIT.read_text().splitlines()
    assert "After=nodeadm-run.service" in lines
    assert "Type=exec" in lines and not any(line.startswith(("Before=", "WantedBy=", "RequiredBy=")) for line in lines)


def test_the_shell_part_installs_and_queues_the_unit(reference, tmp_path):
    """The shell part run with its paths under a temporary root and a fake systemctl: it writes the image list, the
    program (executable) and the unit, reloads systemd and starts the unit with --no-block (cloud-final must not
    wait: nodeadm-run, which starts the kubelet, waits for cloud-final)."""
    _, files = reference
    script = _parts(files["serve/node/user-data"])[1][1]
    root = tmp_path / "root"
    for folder in ("etc/systemd/system", "usr/local/bin"):
        (root / folder).mkdir(parents=True)
    script = script.replace("/etc/", f"{root}/etc/").replace("/usr/local/bin/", f"{root}/usr/local/bin/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    fake = bin_dir / "systemctl"
    fake.write_text(f'#!/bin/bash\nprintf "%s\\n" "$*" >> {log}\n')
    fake.chmod(0o755)
    result = subprocess.run(["bash", "-c", script], env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert (root / "etc/fleetform/prepull-images").read_text() == "docker.io/vllm/vllm-openai:v0.11.0\n"
    program = root / "usr/local/bin/fleetform-prepull"
    assert program.read_text() == PROGRAM.read_text().replace("/etc/", f"{root}/etc/")
    assert program.stat().st_mode & stat.S_IXUSR
    unit = (root / "etc/systemd/system/fleetform-prepull.service").read_text()
    assert unit == UNIT.read_text().replace("/etc/", f"{root}/etc/").replace("/usr/local/bin/", f"{root}/usr/local/bin/")
    assert log.read_text().splitlines() == ["daemon-reload", "start --no-block fleetform-prepull.service"]


def test_user_data_and_program_are_shellcheck_clean(reference):
    shellcheck = require("shellcheck", "shellcheck")
    _, files = reference
    for text in (_parts(files["serve/node/user-data"])[1][1], PROGRAM.read_text()):
        result = subprocess.run([shellcheck, "--shell=bash", "-"], input=text, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


FAKE_CTR = """#!/bin/bash
# stand-in for containerd's ctr: logs its arguments; an image named in $FAKE_CTR_FAIL fails its first
# $FAKE_CTR_FAILURES pulls (counted in $FAKE_CTR_LOG.<n>)
printf '%s\\n' "$*" >> "$FAKE_CTR_LOG"
image=${!#}
if [ "$image" = "${FAKE_CTR_FAIL:-}" ]; then
  n=$(grep -c -x -F -- "$*" "$FAKE_CTR_LOG")
  if [ "$n" -le "${FAKE_CTR_FAILURES:-0}" ]; then echo "ctr: failed to resolve $image" >&2; exit 1; fi
fi
echo "unpacking $image...done"
"""


def _run(tmp_path, images: list[str], fail: str = "", failures: int = 0, tries: int = 3):
    ctr = tmp_path / "ctr"
    ctr.write_text(FAKE_CTR)
    ctr.chmod(0o755)
    log = tmp_path / "ctr.log"
    listing = tmp_path / "images"
    listing.write_text("".join(f"{i}\n" for i in images))
    env = {**os.environ, "FLEETFORM_CTR": str(ctr), "FAKE_CTR_LOG": str(log), "FAKE_CTR_FAIL": fail,
           "FAKE_CTR_FAILURES": str(failures), "FLEETFORM_PREPULL_TRIES": str(tries), "FLEETFORM_PREPULL_DELAY_S": "0"}
    result = subprocess.run([str(PROGRAM), str(listing)], env=env, capture_output=True, text=True, timeout=30)
    return result, (log.read_text().splitlines() if log.exists() else [])


def test_the_program_pulls_each_image_into_the_cri_namespace(tmp_path):
    """ctr --namespace k8s.io images pull --hosts-dir /etc/containerd/certs.d IMAGE: the CRI's namespace (the
    kubelet sees those images) and the CRI's registry hosts directory (nodeadm's config2.template.toml)."""
    result, calls = _run(tmp_path, ["docker.io/vllm/vllm-openai:v0.11.0", "ghcr.io/o/i:1"])
    assert result.returncode == 0, result.stderr
    assert calls == [f"--namespace k8s.io images pull --hosts-dir /etc/containerd/certs.d {i}"
                     for i in ("docker.io/vllm/vllm-openai:v0.11.0", "ghcr.io/o/i:1")]
    assert "2 pulled, 0 failed" in result.stdout


def test_the_program_retries_and_gives_up_on_one_image_only(tmp_path):
    """A registry that fails twice is tried again (3 tries); one that keeps failing is given up after the tries,
    the next image is still pulled, and the unit ends failed (the kubelet pulls what is missing)."""
    result, calls = _run(tmp_path, ["docker.io/a/b:1"], fail="docker.io/a/b:1", failures=2)
    assert result.returncode == 0 and len(calls) == 3, result.stderr
    assert "failed (try 1 of 3)" in result.stderr
    again = tmp_path / "again"
    again.mkdir()
    result, calls = _run(again, ["docker.io/a/b:1", "docker.io/c/d:1"], fail="docker.io/a/b:1", failures=9)
    assert result.returncode == 1
    assert [c.rsplit(" ", 1)[1] for c in calls] == ["docker.io/a/b:1"] * 3 + ["docker.io/c/d:1"]
    assert "docker.io/a/b:1 failed 3 times" in result.stderr and "1 pulled, 1 failed" in result.stdout


def test_the_program_refuses_a_missing_list(tmp_path):
    result = subprocess.run([str(PROGRAM), str(tmp_path / "none")], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "no image list" in result.stderr


def test_the_launch_template_sends_the_rendered_user_data(reference):
    """Under Pulumi's mocks the inference group's launch template carries the rendered file, byte for byte."""
    from fleetform.plan import record

    model, files = reference
    resources = record(model, files)
    for fleet in ("serve", "small-models"):
        (template,) = [r for r in resources if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"
                       and r["name"] == f"{fleet}-nodes"]
        assert base64.b64decode(template["inputs"]["userData"]) == files[f"{fleet}/node/user-data"]


def test_a_changed_image_rolls_the_node_group(tmp_path):
    """diff: a new vLLM image changes the user data, a new launch template version: a node roll of the group (the
    rendered file says so even with --no-resources); the Deployment's own rolling update comes with it."""
    text = REF.read_text()
    new = tmp_path / "new.yaml"
    new.write_text(text.replace("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.1", 1))
    result = run_cli("diff", "--no-resources", str(REF), str(new))
    assert result.returncode in (0, 1), result.stderr
    assert "node/user-data" in result.stdout and "node roll" in result.stdout
    assert file_disruption("serve/node/user-data", "~", b"a", b"b").cls == "node roll"
    assert file_disruption("serve/node/user-data", "+", None, b"b") is None  # a new fleet's group: nothing runs yet


def test_a_cold_start_on_a_new_node_waits_for_the_node_and_the_pull(reference):
    """cold-start-budget's estimate: where the node group keeps a node, the replica's node has the image (pre-pulled
    at boot or by an earlier replica) and only weights and engine count; where the group may be at zero nodes, a
    new node first: 480 s ready + 288 s pull - 120 s pre-pulled while it joins = 648 s (768 s for an image in
    private ECR, which the kubelet pulls after Ready). Corpus 510 is the finding."""
    from fleetform.gateway import cold_start

    model, _ = reference
    serve = next(f for f in model.fleets if f.name == "serve")
    chat = serve.models[0]
    kept = cold_start(chat, serve)
    assert kept.node_s == 0 and kept.total_s == cold_start(chat).total_s
    empty = replace(serve, nodes=replace(serve.nodes, min=0))
    fresh = cold_start(chat, empty)
    assert fresh.node_s == 648 and fresh.total_s == kept.total_s + 648
    assert fresh.detail.startswith("a new node: ready 480 s + image pull 288 s - 120 s of it pre-pulled")
    private = replace(chat, image="123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-openai:v0.11.0")
    assert cold_start(private, empty).node_s == 768
