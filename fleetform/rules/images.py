"""Rules over container images: a server's image is pinned, so every replica runs the same build."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule

VLLM_REPOSITORY = "vllm/vllm-openai"
VLLM_PINNED = "v0.11.0"
"""The vLLM image line fleetform's vLLM checks are written for (providers/vllm-serve-flags.tsv, first line)."""


def split_reference(image: str) -> tuple[str, str, str]:
    """(repository, tag, digest) of an image reference, as the distribution reference grammar reads it
    (distribution/reference, reference.go): a digest follows '@'; a tag follows the last ':' of the
    last path component (a ':' before a '/' is a registry's port)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repository, _, tag = name.rpartition(":")
        return repository, tag, digest
    return name, "", digest


@rule("image-pinned", "warning", "a model's (or a Slinky fleet's slurmd) container image names a tag other than latest, or a digest: an image "
      "without one pulls whatever `latest` is on the day a node starts")
def image_pinned(bp: Blueprint, report: Reporter) -> None:
    for fleet in bp.fleets:
        for model in fleet.models:
            repository, tag, digest = split_reference(model.image)
            if digest or (tag and tag != "latest"):
                continue
            what = "names no tag, so it pulls 'latest'" if not tag else "uses the tag 'latest'"
            example = (f"{VLLM_REPOSITORY}:{VLLM_PINNED}, the line fleetform's vLLM checks are written for"
                       if repository == VLLM_REPOSITORY else f"{repository}:VERSION")
            report(model.path + ("image",),
                   f"image '{model.image}' {what}, which moves: with imagePullPolicy IfNotPresent each node keeps "
                   "the build it pulled first, so replicas run different builds and a rollback has nothing to return to",
                   f"pin it with a version tag or a digest, e.g. {example} (or {repository}@sha256:DIGEST)")
        # a Slinky fleet's slurmd image: the `slurm` chart's imagePullPolicy is IfNotPresent too (values.yaml)
        image = getattr(fleet.scheduler, "slurmd_image", None)
        if image:
            repository, tag, digest = split_reference(image)
            if not digest and (not tag or tag == "latest"):
                what = "names no tag, so it pulls 'latest'" if not tag else "uses the tag 'latest'"
                report(fleet.scheduler.path + ("slurmd_image",),
                       f"slurmd_image '{image}' {what}, which moves: with imagePullPolicy IfNotPresent each node "
                       "keeps the build it pulled first, so slurmd pods run different builds",
                       f"pin it with a version tag or a digest, e.g. {repository}:VERSION "
                       f"(or {repository}@sha256:DIGEST)")
