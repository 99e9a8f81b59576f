"""The catalog: GPU instance types and GPU models, with the sources of their figures.

Data lives in providers/aws/ (installed as fleetform.providers.aws): instances.json and gpus.json, both
JSON so that every run reads them in well under a millisecond (the pure-Python YAML parser took
17 ms of each `fleetform validate`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Mapping

from .records import frozen


@frozen
class MigProfile:
    name: str
    max_per_gpu: int
    memory_mib: int


@frozen
class Gpu:
    """A GPU model: the facts later stages need, with their source."""

    name: str  # fleetform's name, e.g. H100-80GB
    family: str  # the catalog's GPU column, e.g. H100
    memory_mib: int
    bf16_dense_tflops: float
    hbm_gbps: float
    gfd_product: str
    mig: Mapping[str, MigProfile]
    source: str

    @property
    def memory_gb(self) -> float:
        """Memory in decimal GB (10^9 bytes), the unit model sizes are quoted in."""
        return self.memory_mib * 1024 * 1024 / 1e9


@frozen
class InstanceType:
    name: str
    gpu: Gpu
    gpu_count: int
    vcpus: int
    mem_gib: int
    net_baseline_gbps: float
    max_efa: int
    network_cards: int
    local_nvme_gb: int
    gpu_interconnect: str
    price_usd_hr: float | None

    @property
    def has_efa(self) -> bool:
        return self.max_efa > 0


@frozen
class Catalog:
    instances: Mapping[str, InstanceType]
    gpus: Mapping[str, Gpu]
    instance_sources: Mapping[str, str]
    gpu_sources: Mapping[str, str]

    def instance(self, name: str) -> InstanceType | None:
        return self.instances.get(name)

    def suggest_instance(self, name: str) -> list[str]:
        from difflib import get_close_matches  # imported for suggestions only

        return get_close_matches(name, list(self.instances), n=3, cutoff=0.6)

    def find_gpu(self, query: str) -> list[Gpu]:
        """GPU models matching a name or a family, case-insensitively (`H100`, `a100-80gb`)."""
        q = query.lower()
        return [g for g in self.gpus.values() if q in (g.name.lower(), g.family.lower())]


def _read(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    gdata = json.loads(_read("fleetform.providers.aws", "gpus.json"))
    gpus: dict[str, Gpu] = {}
    for name, g in gdata["gpus"].items():
        mig = {p: MigProfile(p, v["max"], v["memory_mib"]) for p, v in (g.get("mig") or {}).items()}
        gpus[name] = Gpu(name, g["family"], g["memory_mib"], g["bf16_dense_tflops"], g["hbm_gbps"],
                         g["gfd_product"], MappingProxyType(mig), g["source"])
    idata = json.loads(_read("fleetform.providers.aws", "instances.json"))
    instances: dict[str, InstanceType] = {}
    for row in idata["rows"]:
        matches = [g for g in gpus.values()
                   if g.family == row["gpu"] and g.memory_mib == row["gpu_mem_mib_each"]]
        if len(matches) != 1:
            raise RuntimeError(f"catalog: no single GPU model for {row['instance_type']} "
                               f"({row['gpu']}, {row['gpu_mem_mib_each']} MiB)")
        instances[row["instance_type"]] = InstanceType(
            row["instance_type"], matches[0], row["gpu_count"], row["vcpus"], row["mem_gib"],
            row["net_baseline_gbps"], row["max_efa"], row["network_cards"], row["local_nvme_gb"],
            row["gpu_interconnect"], row["on_demand_usd_hr_us_east_1"])
    return Catalog(MappingProxyType(instances), MappingProxyType(gpus),
                   MappingProxyType(idata["sources"]), MappingProxyType(gdata["sources"]))
