"""Rules over training fleets scheduled by Kubernetes (Kueue and JobSet on the EKS cluster: fleetform/kueue.py).

The rules every training fleet gets (efa-multinode, training-memory, placement, storage) apply whatever
its orchestrator; these check what only the Kubernetes side has.
"""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


def _k8s_training(bp: Blueprint):
    return [f for f in bp.fleets if f.training and f.scheduler is not None and f.scheduler.type == "kubernetes"]


@rule("kueue-cloud", "error", "a training fleet scheduled by Kubernetes is on AWS, where it joins the EKS cluster")
def kueue_cloud(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud == "aws":
        return
    for fleet in _k8s_training(bp):
        report(fleet.scheduler.path + ("type",),
               f"training fleet '{fleet.name}' is scheduled by Kubernetes, and fleetform builds a Kubernetes "
               f"cluster (EKS) on AWS only", "schedule it with type: slurm on an existing controller")


SERVING_ONLY = ("autoscaler", "prometheus_url", "prometheus_release")
"""Scheduler keys only inference fleets read (KEDA or the HPA, and the Prometheus they query)."""


@rule("kueue-fields", "error", "queue_namespaces and job_image are set on training fleets scheduled by Kubernetes "
      "only, autoscaler and the Prometheus settings on inference fleets only")
def kueue_fields(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        scheduler = fleet.scheduler
        if scheduler is None or scheduler.type != "kubernetes":
            continue
        if fleet.training:
            for field in SERVING_ONLY:
                if field in scheduler.declared:
                    report(scheduler.path + (field,),
                           f"`{field}` has no effect on training fleet '{fleet.name}': Kueue admits its jobs onto "
                           "the nodes it has, nothing scales them", f"remove `{field}`")
            continue
        for field in ("queue_namespaces", "job_image"):
            if getattr(scheduler, field):
                report(scheduler.path + (field,),
                       f"`{field}` has no effect on inference fleet '{fleet.name}': it sets up Kueue for a "
                       "training fleet", f"remove `{field}`, or move it to a training fleet scheduled by Kubernetes")


@rule("kueue-fixed-size", "error", "a training fleet on Kubernetes has a fixed number of nodes")
def kueue_fixed_size(bp: Blueprint, report: Reporter) -> None:
    """Kueue's topology-aware scheduling admits a job only onto nodes that exist; the Cluster Autoscaler adds
    nodes only for pending pods, and a job waiting for admission is suspended and has none (Kueue v0.19.2
    docs, Topology Aware Scheduling, "ClusterAutoscaler support": only through a ProvisioningRequest admission
    check, which fleetform does not set up). Idle nodes above min are removed, and jobs larger than min then
    wait forever."""
    for fleet in _k8s_training(bp):
        if fleet.nodes is not None and fleet.nodes.min != fleet.nodes.max:
            report(fleet.nodes.path, f"training fleet '{fleet.name}' scales from {fleet.nodes.min} to "
                   f"{fleet.nodes.max} nodes, and Kueue admits a job only onto nodes that exist: nothing would "
                   f"add the nodes above {fleet.nodes.min}, and a job needing them would never start",
                   f"give it a fixed count: nodes: {fleet.nodes.max}")


@rule("kueue-topology", "error", "a training fleet on Kubernetes uses an instance type with EC2 network topology")
def kueue_topology(bp: Blueprint, report: Reporter) -> None:
    from ..kueue import TOPOLOGY_INSTANCE_TYPES

    for fleet in _k8s_training(bp):
        if fleet.kueue is not None and fleet.instance is not None \
                and fleet.instance.name not in TOPOLOGY_INSTANCE_TYPES:
            report(fleet.path + ("instance_type",),
                   f"EC2 describes no network topology for {fleet.instance.name}: its nodes get no "
                   "topology.k8s.aws/network-node-layer labels, Kueue's topology-aware flavor matches no node, "
                   f"and no job of training fleet '{fleet.name}' would be admitted",
                   "use an instance type with EC2 instance topology (p4d, p4de, p5, p5e, p5en, p6-b200, g6e "
                   "and others: EC2 User Guide, \"Prerequisites for Amazon EC2 topology\"), or schedule it with Slurm")


@rule("kueue-job-image", "warning", "a training fleet on Kubernetes names the image of its job template")
def kueue_job_image(bp: Blueprint, report: Reporter) -> None:
    for fleet in _k8s_training(bp):
        if fleet.kueue is not None and fleet.kueue.job is None:
            report(fleet.scheduler.path,
                   f"training fleet '{fleet.name}' has no job_image: its queues are rendered, its JobSet "
                   "template (jobs/jobset.yaml) is not",
                   'add job_image: an image with PyTorch, the EFA installer and aws-ofi-nccl, pinned by tag '
                   'or digest (for example "nvcr.io/nvidia/pytorch:25.01-py3")')


RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces Kubernetes makes itself: fleetform would create a Namespace object over one and try to delete it
when the fleet goes (the API server refuses to delete default, kube-system and kube-public), and Kueue refuses a
managedJobsNamespaceSelector that matches kube-system (kueue v0.19.2 pkg/config/validation.go)."""


def taken_namespaces(bp: Blueprint) -> dict[str, str]:
    """The namespaces a training job's namespace must not be, each with whose it is (also the mig-split rule's, for
    the namespaces of a split node's whole GPUs)."""
    from ..cluster import addons_data

    serving = {f.scheduler.namespace: f"inference fleet '{f.name}''s: its Pod Security Admission (restricted) and "
               "NetworkPolicy would apply to training pods too" for f in bp.fleets
               if not f.training and f.scheduler is not None and f.scheduler.type == "kubernetes"}
    taken = {chart["namespace"]: f"the {name} release's: removing it from the blueprint would delete the namespace "
             "and the release's pods with it" for name, chart in addons_data()["charts"].items()}
    taken.update({ns: "Kubernetes' own" for ns in RESERVED_NAMESPACES})
    taken.update(serving)
    taken.update({f.scheduler.namespace: f"Ray fleet '{f.name}''s, whose NetworkPolicy admits only its own pods"
                  for f in bp.fleets if f.scheduler is not None and f.scheduler.type == "ray"})
    return taken


@rule("kueue-namespace", "error", "a training fleet's namespaces are its own (not an inference fleet's, a chart's or "
      "Kubernetes'), and its job template's namespace has a LocalQueue")
def kueue_namespace(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud != "aws":  # no cluster: kueue-cloud says so
        return
    taken = taken_namespaces(bp)
    for fleet in _k8s_training(bp):
        scheduler = fleet.scheduler
        for i, namespace in enumerate(scheduler.queue_namespaces or (scheduler.namespace,)):
            if namespace in taken:
                where = scheduler.path + (("queue_namespaces", i) if scheduler.queue_namespaces else ("namespace",))
                report(where, f"namespace '{namespace}' of training fleet '{fleet.name}' is {taken[namespace]}",
                       "give the training jobs a namespace of their own (scheduler.namespace)")
        if scheduler.queue_namespaces and scheduler.namespace not in scheduler.queue_namespaces:
            report(scheduler.path + ("namespace",),
                   f"namespace '{scheduler.namespace}' of training fleet '{fleet.name}' is not in its queue_namespaces: "
                   "its job template would be created there, where fleetform makes no namespace, LocalQueue or "
                   "NCCL ConfigMap", f"add '{scheduler.namespace}' to queue_namespaces")


@rule("kueue-gpu-sharing", "error", "no serving fleet's time-slicing or MPS config would share a training fleet's GPUs",
      stage="cluster")
def kueue_gpu_sharing(bp: Blueprint, report: Reporter) -> None:
    """The cluster's one GPU Operator applies a sharing fleet's device plugin config as the default to every
    node without a config label (cluster-gpu-operator says the same of inference fleets): a training node
    would advertise each GPU as several, and a job asking for 8 would get shares of fewer."""
    if bp.cluster is None:
        return
    sharing = next((f for f in bp.fleets if f.kube is not None and f.kube.device_plugin is not None), None)
    if sharing is None:
        return
    for fleet in bp.fleets:
        if fleet.kueue is not None:
            report(fleet.scheduler.path, f"training fleet '{fleet.name}' shares the cluster's GPU Operator with "
                   f"'{sharing.name}', whose {sharing.gpu_sharing.strategy} config the device plugin applies as the "
                   "default to every node without a config label: the training GPUs would be shared too",
                   "put time-sliced or MPS serving fleets in a blueprint of their own")
