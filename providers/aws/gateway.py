"""The gateway's CustomResourceDefinitions on the blueprint's EKS cluster (issue 23): the Gateway API v1.4.0
standard channel and the Gateway API Inference Extension v1.1.0, vendored under providers/aws/crds/ (sources in
its README, pinned in providers/aws/addons.yaml `crd_bundles`), applied before kgateway's releases, which watch
them, and before any Gateway, HTTPRoute or InferencePool (EksCluster.install and the fleets' `apply`).

Each CRD is its own resource, read from the vendored bytes, as the rendered objects are (providers/aws/kube.py):
the plan lists it and a version bump shows as an update of each CRD (its bundle-version annotation and schema).
A `kubernetes.yaml.v2.ConfigFile` of the release URL would do the work inside the provider plugin, opaque under
the mocks of `fleetform plan`, and would fetch bytes no digest pins.

Day 2. A new bundle version replaces the vendored files: `pulumi up` updates each CRD in place (the Kubernetes
provider updates a CustomResourceDefinition, no replacement: its name does not change), and the API server keeps
every Gateway, HTTPRoute and InferencePool, converting nothing: a version that drops a served API version the
objects are stored in must be preceded by moving them (the upstream release notes say when). A CRD is never
deleted by `pulumi up` (retain_on_delete): removing the last gateway from the blueprint, or a file from a
bundle, leaves the CRD in the cluster, because deleting a CRD deletes every object of its kind, in every
namespace, including objects fleetform did not make. `kubectl delete crd NAME` removes one by hand."""

from __future__ import annotations

from importlib import resources

import pulumi
import yaml

from fleetform.cluster import CrdBundle

from .kube import EksCluster, KubeObject

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crd_documents(bundle: CrdBundle) -> list[tuple[str, dict]]:
    """The bundle's CRDs, in the order addons.yaml lists their files: (file name, object)."""
    folder = resources.files("fleetform.providers.aws").joinpath("crds", f"{bundle.name}-{bundle.version}")
    out = []
    for name, _blob in bundle.files:
        for doc in yaml.load_all(folder.joinpath(name).read_bytes(), Loader=_SAFE_LOADER):  # noqa: S506 (safe)
            if doc:
                out.append((name, doc))
    return out


def install_crds(eks: EksCluster) -> list[KubeObject]:
    """Every CRD of the cluster's bundles, after the system node group (the cluster answers the Kubernetes API
    once it exists; the node group keeps the order of the other cluster-wide objects)."""
    out = []
    for bundle in eks.model.crd_bundles:
        for _name, obj in crd_documents(bundle):
            opts = pulumi.ResourceOptions.merge(eks.k8s_opts(eks, [eks.system]),
                                                pulumi.ResourceOptions(retain_on_delete=True))
            out.append(KubeObject(f"{eks.name}-crd-{obj['metadata']['name']}", obj, opts))
    return out
