"""The Kueue objects of an inference fleet's node split by GPU (fleetform/mig.py), in its <fleet>/k8s/ folder beside
its model servers: the PriorityClass and WorkloadPriorityClass of its training pods, a ResourceFlavor of its nodes, the
ClusterQueue whose quota is the whole GPUs only, a LocalQueue (and, outside the fleet's own, a Namespace) per training
namespace; and <fleet>/jobs/whole-gpus-job.yaml, the Job users copy (not applied). Kueue's own templates
(templates/kueue/) print the queue objects; templates/mig/ the ResourceFlavor, the ClusterQueue and the Job."""

from __future__ import annotations

from .. import kueue
from ..model import Fleet
from .jinja import render


def objects(fleet: Fleet, labels) -> dict[str, bytes]:
    """The Kueue objects, by file name in <fleet>/k8s/."""
    split = fleet.split
    if split is None:
        return {}
    k = split.kueue
    common = {"fleet": fleet.name, "k": k, "labels": labels, "api": kueue.KUEUE_API}
    out = {
        "training-priorityclass.yaml": render("kueue/priorityclass.yaml.j2", **common),
        "training-workloadpriorityclass.yaml": render("kueue/workloadpriorityclass.yaml.j2", **common),
        "training-resourceflavor.yaml": render("mig/resourceflavor.yaml.j2", **common),
        "training-clusterqueue.yaml": render("mig/clusterqueue.yaml.j2", **common),
    }
    for namespace, queue in k.local_queues:
        one = {"namespace": namespace, "queue": queue, **common}
        if namespace != fleet.kube.namespace:  # the fleet's own namespace.yaml makes that one
            out[f"training-{namespace}-namespace.yaml"] = render("kueue/namespace.yaml.j2", **one)
        out[f"training-{namespace}-localqueue.yaml"] = render("kueue/localqueue.yaml.j2", **one)
    return out


def jobs(fleet: Fleet) -> dict[str, bytes]:
    split = fleet.split
    if split is None or split.job is None:
        return {}
    return {f"{fleet.name}/jobs/whole-gpus-job.yaml": render(
        "mig/job.yaml.j2", fleet=fleet.name, k=split.kueue, j=split.job, queue_label=kueue.QUEUE_LABEL,
        priority_label=kueue.PRIORITY_LABEL, gpu_resource=kueue.GPU_RESOURCE)}
