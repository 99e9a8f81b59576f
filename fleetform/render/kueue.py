"""<fleet>/k8s/ of a training fleet scheduled by Kubernetes: Kueue's objects (Topology, ResourceFlavor,
ClusterQueue, WorkloadPriorityClass, a LocalQueue and the NCCL ConfigMap per namespace), its PriorityClass and
the kustomization that lists them; <fleet>/jobs/jobset.yaml, the JobSet template users copy (not applied:
a job is submitted, not installed)."""

from __future__ import annotations

from .. import kueue
from ..model import Blueprint, Fleet
from .jinja import render


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    k = fleet.kueue
    if k is None:
        return {}
    labels = (("app.kubernetes.io/part-of", bp.name), ("app.kubernetes.io/managed-by", "fleetform"),
              ("fleetform.dev/fleet", fleet.name)) + tuple(sorted(bp.labels.items()))
    common = {"fleet": fleet.name, "k": k, "labels": labels, "api": kueue.KUEUE_API}
    objects: dict[str, bytes] = {
        "priorityclass.yaml": render("kueue/priorityclass.yaml.j2", **common),
        "workloadpriorityclass.yaml": render("kueue/workloadpriorityclass.yaml.j2", **common),
        "topology.yaml": render("kueue/topology.yaml.j2", **common),
        "resourceflavor.yaml": render("kueue/resourceflavor.yaml.j2", **common),
        "clusterqueue.yaml": render("kueue/clusterqueue.yaml.j2", **common),
    }
    for namespace, queue in k.local_queues:
        one = {"namespace": namespace, "queue": queue, **common}
        objects[f"{namespace}-namespace.yaml"] = render("kueue/namespace.yaml.j2", **one)
        objects[f"{namespace}-localqueue.yaml"] = render("kueue/localqueue.yaml.j2", **one)
        objects[f"{namespace}-nccl-configmap.yaml"] = render("kueue/nccl-configmap.yaml.j2",
                                                             excluded=kueue.SCHEDULER_SPECIFIC, **one)
    out = {f"{fleet.name}/k8s/{name}": data for name, data in objects.items()}
    out[f"{fleet.name}/k8s/kustomization.yaml"] = render("kueue/kustomization.yaml.j2", fleet=fleet.name,
                                                         resources=sorted(objects))
    if k.job is not None:
        out[f"{fleet.name}/jobs/jobset.yaml"] = render(
            "kueue/jobset.yaml.j2", fleet=fleet.name, k=k, j=k.job, api=kueue.JOBSET_API,
            queue_label=kueue.QUEUE_LABEL, priority_label=kueue.PRIORITY_LABEL,
            topology_annotation=kueue.PREFERRED_TOPOLOGY, gpu_resource=kueue.GPU_RESOURCE,
            efa_resource=kueue.EFA_RESOURCE, hugepages_resource=kueue.HUGEPAGES_RESOURCE)
    return out
