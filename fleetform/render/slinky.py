"""<fleet>/slinky/: a training fleet scheduled by Slurm on EKS through Slinky: values.yaml, the `slurm` chart's values
that `pulumi up` installs as the fleet's release; slurm.conf and gres.conf as the operator's slurmctld reads them (for
review and the offline slurmctld check), sssd.conf of the job users' directory (when the blueprint names one);
<fleet>/k8s/: its Namespace and the
StorageClass of slurmctld's state claim, applied before the release."""

from __future__ import annotations

from ..model import Blueprint, Fleet
from ..slinky import SSSD_BIND_PATH
from .jinja import render


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    s = fleet.slinky
    if s is None:
        return {}
    labels = (("app.kubernetes.io/part-of", bp.name), ("app.kubernetes.io/managed-by", "fleetform"),
              ("fleetform.dev/fleet", fleet.cloud_name)) + tuple(sorted(bp.labels.items()))
    common = {"fleet": fleet.name, "s": s, "labels": labels}
    return {
        f"{fleet.name}/k8s/namespace.yaml": render("slinky/namespace.yaml.j2", **common),
        f"{fleet.name}/k8s/storageclass.yaml": render("slinky/storageclass.yaml.j2", **common),
        f"{fleet.name}/k8s/kustomization.yaml": render("slinky/kustomization.yaml.j2", fleet=fleet.name,
                                                       resources=["namespace.yaml", "storageclass.yaml"]),
        f"{fleet.name}/slinky/values.yaml": render("slinky/values.yaml.j2", **common),
        f"{fleet.name}/slinky/slurm.conf": render("slinky/slurm.conf.j2", **common),
        f"{fleet.name}/slinky/gres.conf": render("slinky/gres.conf.j2", **common),
    } | ({f"{fleet.name}/slinky/sssd.conf": render("slinky/sssd.conf.j2", bind_path=SSSD_BIND_PATH, **common)}
         if s.sssd_conf else {})
