"""Multi-node replicas (issue 23): a model whose tensor_parallel x pipeline_parallel is more than the GPUs of a
node is served by a LeaderWorkerSet (kubernetes-sigs/lws) instead of a Deployment. One replica is one group of
pods, one pod per node: the leader starts a Ray head, waits until every worker of its group has joined, then
runs vLLM's API server over the group's GPUs; each worker joins the leader's Ray cluster and blocks.

Facts, and where they come from:
- kubernetes-sigs/lws v0.10.0 (commit 2161f38ff333f9e24d3c44adef7cd5d9787cac00), api/leaderworkerset/v1/
  leaderworkerset_types.go: the env LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX put in every pod of a
  group; the pod label leaderworkerset.sigs.k8s.io/worker-index ("0" on the leader); startupPolicy
  LeaderCreated (the workers' StatefulSet is created as soon as the leader pod is, so the leader can wait for
  them) and restartPolicy RecreateGroupOnPodRestart (a failed pod restarts its whole group: a Ray cluster that
  lost a node cannot serve). The CRD's scale subresource (specReplicasPath .spec.replicas,
  labelSelectorPath .status.hpaPodSelector, charts/lws/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml) is
  what KEDA's ScaledObject and the HPA scale: replicas are groups.
- The leader's and workers' commands follow LWS's own vLLM example (docs/examples/vllm/GPU/lws.yaml at that
  tag): vLLM's examples/online_serving/multi-node-serving.sh, shipped in the vllm/vllm-openai image under
  /vllm-workspace, `leader --ray_cluster_size=$(LWS_GROUP_SIZE)` (ray start --head, then it polls ray.nodes()
  until that many are alive, ray_init_timeout s at most, exit 1 otherwise) and `worker --ray_address=$(LWS_LEADER_ADDRESS)`
  (ray start --address=...:6379 --block, retried as long); both get --ray_init_timeout (ray_wait_s). vLLM's flags come to the leader's `vllm serve` as
  positional parameters of `bash -c` ("$@"), never spliced into the script text.
"""

from __future__ import annotations

import math

from .records import frozen

LWS_VERSION = "v0.10.0"
API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""LWS labels every pod of a group with its index in the group; the leader's is "0"."""
STARTUP_POLICY = "LeaderCreated"
RESTART_POLICY = "RecreateGroupOnPodRestart"

RAY_SCRIPT = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
SCRIPT_WAIT_S = 300
"""multi-node-serving.sh's own ray_init_timeout (examples/online_serving/multi-node-serving.sh at v0.11.0:
`ray_init_timeout=300`, overridden by `--ray_init_timeout=<s>` on both subcommands): how long the leader polls
for its workers, and a worker retries joining the head, before exiting 1. Too short for a group whose worker
node is still launching (a p5 takes minutes to boot and pull a 10 GB image): the leader exits, its group is
recreated (RecreateGroupOnPodRestart), and the next try meets the same wait. Not used: see ray_wait_s."""


def ray_wait_s(startup_budget_s: int) -> int:
    """The --ray_init_timeout a group's pods get: the leader's startup probe budget (fleetform/k8s.py: period x
    failureThreshold, from STARTUP_BASE_S + STARTUP_S_PER_GB x checkpoint GB). Waiting longer is moot (the
    kubelet kills a leader whose /health has not answered by then) and shorter restarts the group while the
    probe would still wait; the script's 300 s is the floor."""
    return max(SCRIPT_WAIT_S, startup_budget_s)


def leader_command(wait_s: int) -> tuple[str, ...]:
    """The leader: a Ray head with every worker of the group joined, then `vllm serve` with the args that follow
    ("vllm-leader" is $0 of bash -c; the server's argv follows as $1...)."""
    return ("bash", "-c", f'bash {RAY_SCRIPT} leader --ray_cluster_size="$LWS_GROUP_SIZE" '
                          f'--ray_init_timeout={wait_s} && exec vllm serve "$@"', "vllm-leader")


def worker_command(wait_s: int) -> tuple[str, ...]:
    """A worker: join the leader's Ray head (retried for wait_s) and block. bash is the container's PID 1, and
    the kernel drops a signal to a PID namespace's init that has no handler for it (pid_namespaces(7)): an
    `exec`ed script without a trap ignored the kubelet's SIGTERM and every deletion waited the whole grace
    period for the SIGKILL. The trap stops the node's Ray processes (`ray stop`) and exits; `wait` returns
    as soon as the trapped signal arrives (bash(1), SIGNALS)."""
    return ("bash", "-c", "trap 'ray stop; exit 143' TERM; "
                          f'bash {RAY_SCRIPT} worker --ray_address="$LWS_LEADER_ADDRESS" '
                          f'--ray_init_timeout={wait_s} & wait $!')


RAY_LOG_FILES = 32
"""Log files one pod's Ray keeps growing at once, counted generously: the head's gcs_server, dashboard,
dashboard_agent, runtime_env_agent, monitor, log_monitor and raylet (.out/.err each) plus a worker
process per GPU of the node (vLLM's RayWorkerWrapper actors, .out/.err each)."""
RAY_ROTATION_BACKUP_COUNT = 1
"""Rotated copies kept per file (Ray's default 5)."""
RAY_LOG_SHARE = 2
"""Ray's logs may fill 1/RAY_LOG_SHARE of the pod's /tmp emptyDir (Ray's temp dir is /tmp/ray); the rest is
for vLLM's and torch's temporary files."""


def ray_log_env(tmp_gib: int) -> tuple[tuple[str, str], ...]:
    """RAY_ROTATION_MAX_BYTES and RAY_ROTATION_BACKUP_COUNT (Ray's logging docs, "Log rotation"; ray_constants.py
    LOGGING_ROTATE_BYTES 512 MiB and LOGGING_ROTATE_BACKUP_COUNT 5 by default) such that RAY_LOG_FILES files,
    each with its backups, fit their share of /tmp: at Ray's defaults one file and its backups are 3 GiB of a
    4 GiB emptyDir, and the kubelet evicts a pod whose emptyDir passes its sizeLimit."""
    max_bytes = tmp_gib * 1024 ** 3 // RAY_LOG_SHARE // (RAY_LOG_FILES * (RAY_ROTATION_BACKUP_COUNT + 1))
    return (("RAY_ROTATION_MAX_BYTES", str(max_bytes)), ("RAY_ROTATION_BACKUP_COUNT", str(RAY_ROTATION_BACKUP_COUNT)))


EXECUTOR_ARGS = ("--distributed-executor-backend", "ray")
"""vLLM 0.11 picks Ray when the world size is more than the GPUs it sees (config/parallel.py), said outright here."""


STOCK_IMAGES = ("vllm/vllm-openai", "docker.io/vllm/vllm-openai", "index.docker.io/vllm/vllm-openai")
"""Images known to carry no EFA userspace (libfabric, aws-ofi-nccl): vLLM's docker/Dockerfile at v0.11.0
installs none (vllm-project/vllm#55635 asks for it), so NCCL over them uses TCP sockets between nodes."""


def lacks_efa_plugin(image: str) -> bool:
    """Whether the image is the stock vllm/vllm-openai (any tag or digest), which has no aws-ofi-nccl."""
    repository = image.split("@", 1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return repository in STOCK_IMAGES


def nodes_per_replica(model, per_node: int) -> int:
    """Nodes (pods) one replica of the model takes: 1 when its GPUs fit one node, else its GPUs over a node's
    (the lws-parallelism rule reports a count that is not a whole number of nodes)."""
    return math.ceil(model.gpus / per_node) if per_node and model.gpus > per_node else 1


def multinode(fleet) -> bool:
    """Whether any model of the inference fleet spans nodes (its shape known)."""
    shape = fleet.shape
    return shape is not None and any(nodes_per_replica(m, shape.gpu_count) > 1 for m in fleet.models)


def spans_nodes(item: dict, instance) -> bool:
    """The same, on the blueprint's fleet as written (resolve sets the default placement by it)."""
    if instance is None or item.get("role") != "inference" or not instance.gpu_count:
        return False
    return any(m.get("tensor_parallel", 1) * m.get("pipeline_parallel", 1) > instance.gpu_count
               for m in item.get("models", ()) if isinstance(m, dict))


@frozen
class Group:
    """What makes a model's replica a LeaderWorkerSet group (fleetform/k8s.py Server.group)."""

    size: int  # pods per replica, one per node: leaderWorkerTemplate.size
    leader_command: tuple[str, ...]
    worker_command: tuple[str, ...]
    efa: int  # vpc.amazonaws.com/efa per pod: the node's EFA interfaces (0: none)
    hugepages: str | None  # hugepages-2Mi per pod where it uses EFA
    leader_selector: tuple[tuple[str, str], ...]  # the Service's and the InferencePool's: the leaders only
    network_policy: str  # the NetworkPolicy that lets a group's pods reach each other (Ray, NCCL bootstrap)
    ray_env: tuple[tuple[str, str], ...]  # Ray's log rotation, bounded to the pod's /tmp (ray_log_env)
    startup_policy: str = STARTUP_POLICY
    restart_policy: str = RESTART_POLICY


def group(model, per_node: int, instance, selector: tuple, name: str, startup_budget_s: int,
          tmp_gib: int) -> Group | None:
    """The group of a model that spans nodes, None for one that fits a node. instance: the catalog's (EFA);
    startup_budget_s: the leader's startup probe budget, which bounds the wait for the group's Ray cluster;
    tmp_gib: the size of the pods' /tmp emptyDir, where Ray writes its logs."""
    from .kueue import EFA_HUGEPAGES

    size = nodes_per_replica(model, per_node)
    if size == 1:
        return None
    efa = instance.max_efa if instance is not None and instance.max_efa else 0
    wait = ray_wait_s(startup_budget_s)
    return Group(size, leader_command(wait), worker_command(wait), efa, EFA_HUGEPAGES if efa else None,
                 tuple(selector) + ((WORKER_INDEX_LABEL, "0"),), f"{name}-group", ray_log_env(tmp_gib))
