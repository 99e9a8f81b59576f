"""Image pre-pull on an inference fleet's EKS GPU node group: each new node pulls the model server images of
the fleet as soon as containerd runs, while the kubelet registers the node and the GPU stack comes up, so the
first replica on the node does not start its multi-GB pull only once the node is Ready and advertises GPUs.

Why user data and not a DaemonSet (read in awslabs/amazon-eks-ami, templates/al2023/runtime/rootfs/etc/systemd/
system and nodeadm/internal, 2026-07-23): on the EKS AL2023 AMI `nodeadm-config.service` writes containerd's
config before cloud-init, and `nodeadm-run.service` (After=cloud-final.service) restarts containerd
(containerd/daemon.go EnsureRunning: RestartDaemon) and starts the kubelet. A DaemonSet's pod can only start after
the node is Ready, with the CNI up: it gains at most the minute between Ready and the device plugin advertising
nvidia.com/gpu. A shell part that pulled in cloud-final would hold nodeadm-run, and so the join, until the pull
ended, and containerd's restart would cut a pull started earlier. So the user data's shell part installs a
systemd unit ordered After=nodeadm-run.service and starts it with --no-block: the pull begins the moment the
kubelet is started, and nothing waits on it.

The pull uses `ctr` (nodeadm itself calls `ctr --namespace k8s.io images import` in containerd/sandbox_image.go,
so it is on the AMI; crictl is not installed there) in containerd's `k8s.io` namespace, the CRI's, with the
overlayfs snapshotter the CRI uses unless the FastImagePull feature gate (SOCI) is on, which fleetform's NodeConfig
does not turn on, and the hosts directory the CRI reads (config2.template.toml: config_path
"/etc/containerd/certs.d:..."). The kubelet then finds the image present (imagePullPolicy IfNotPresent,
templates/k8s/deployment.yaml.j2) and does not pull it again. `ctr` names images fully (docker.io/vllm/...), which
ctr_reference writes. `ctr` does not call the kubelet's image credential provider: an image in private ECR (the
ecr-credential-provider's matchImages, nodeadm/internal/kubelet/image-credential-provider.go) is not pre-pulled
and the kubelet pulls it as before; images on Docker Hub (anonymous pulls, as the kubelet makes them without
imagePullSecrets) and other public registries are.
"""

from __future__ import annotations

import re

CTR_NAMESPACE = "k8s.io"
"""containerd's namespace of the CRI plugin, whose images the kubelet sees."""

HOSTS_DIR = "/etc/containerd/certs.d"
"""The first registry hosts directory of the CRI's config_path on the EKS AL2023 AMI (config2.template.toml)."""

PRIVATE_ECR = re.compile(r"^[^/]+\.dkr(\.ecr|-ecr)\.[^/]+\.(amazonaws\.com(\.cn)?|on\.aws|c2s\.ic\.gov|sc2s\.sgov\.gov"
                         r"|cloud\.adc-e\.uk|csp\.hci\.ic\.gov)/")
"""Registries the kubelet reaches through the ecr-credential-provider (its matchImages: *.dkr.ecr.*.amazonaws.com,
*.dkr-ecr.*.on.aws, *.dkr.ecr.*.amazonaws.com.cn and the isolated partitions'): `ctr` has no credentials for them."""

NODE_JOIN_S = 120
"""Of the node-ready time (fleetform/pool.py NODE_READY_S), the part after the kubelet starts: the node registers,
the VPC CNI and the NVIDIA device plugin come up and nvidia.com/gpu is advertised. GPU instances were measured at
"a 5-7 minute wait for an EC2 instance to spin up, and then another minute or so before it's ready to accept tasks"
(coiled/feedback#30): 2 minutes, the minute and the device plugin's start. The pre-pull runs during this part
only (it starts with the kubelet), so the pull and the join overlap by at most this much."""


def ctr_reference(image: str) -> str:
    """The image reference as `ctr` needs it, with its registry (the distribution reference grammar's default
    domain docker.io, and library/ for a one-part Docker Hub name), as the CRI normalizes the kubelet's."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"


def images(servers) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(pulled, left to the kubelet): the distinct images of the fleet's model servers and their init containers
    as `ctr` names them, sorted; those in private ECR are left to the kubelet (no credentials for ctr)."""
    refs = sorted({ctr_reference(i) for s in servers for i in (s.image, *(c.image for c in s.init_containers))})
    return tuple(r for r in refs if not PRIVATE_ECR.match(r)), tuple(r for r in refs if PRIVATE_ECR.match(r))
