"""fleetform catalog [--gpu NAME]: GPU instance types with their GPU facts and prices, and sources."""

from __future__ import annotations

import json
import sys

from ..catalog import Gpu, load_catalog


def add_parser(sub) -> None:
    p = sub.add_parser("catalog",
                       description="List the GPU instance types fleetform knows, with GPU facts and on-demand "
                                   "prices, and the source and date of every figure.")
    p.add_argument("--gpu", metavar="NAME", help="only this GPU (a family like H100, or a model like A100-80GB)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.set_defaults(run=run)


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    out = []
    for row in [header] + rows:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        out.append("  ".join(cells).rstrip())
    return out


def _gpu_block(gpu: Gpu) -> list[str]:
    lines = [
        f"{gpu.name}: {gpu.memory_gb:.1f} GB, {gpu.bf16_dense_tflops:g} TFLOPS BF16 dense, "
        f"{gpu.hbm_gbps:g} GB/s memory bandwidth; GFD product {gpu.gfd_product}",
        f"  source: {gpu.source}",
    ]
    if gpu.mig:
        profiles = ", ".join(f"{p.name} (x{p.max_per_gpu}, {p.memory_mib * 1048576 / 1e9:.1f} GB)" for p in gpu.mig.values())
        lines.append(f"  MIG profiles: {profiles}")
    else:
        lines.append("  MIG: not supported")
    return lines


def run(args) -> int:
    from ..cli import UsageError

    catalog = load_catalog()
    gpus = list(catalog.gpus.values())
    if args.gpu:
        gpus = catalog.find_gpu(args.gpu)
        if not gpus:
            names = sorted({g.family for g in catalog.gpus.values()} | set(catalog.gpus))
            raise UsageError(f"no GPU named {args.gpu!r}; known: {', '.join(names)}")
    chosen = {g.name for g in gpus}
    instances = [i for i in catalog.instances.values() if i.gpu.name in chosen]
    if args.format == "json":
        data = {
            "gpus": [{"name": g.name, "family": g.family, "memory_mib": g.memory_mib,
                      "bf16_dense_tflops": g.bf16_dense_tflops, "hbm_gbps": g.hbm_gbps, "gfd_product": g.gfd_product,
                      "mig_profiles": {p.name: {"max": p.max_per_gpu, "memory_mib": p.memory_mib} for p in g.mig.values()},
                      "source": g.source} for g in gpus],
            "instances": [{"instance_type": i.name, "gpu": i.gpu.name, "gpu_count": i.gpu_count, "vcpus": i.vcpus,
                           "mem_gib": i.mem_gib, "max_efa": i.max_efa, "network_cards": i.network_cards,
                           "net_baseline_gbps": i.net_baseline_gbps, "local_nvme_gb": i.local_nvme_gb,
                           "gpu_interconnect": i.gpu_interconnect, "on_demand_usd_hr_us_east_1": i.price_usd_hr}
                          for i in instances],
            "sources": {"instances": dict(catalog.instance_sources), "gpus": dict(catalog.gpu_sources)},
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return 0
    header = ["INSTANCE", "GPU", "GPUS", "GPU GB", "vCPU", "MEM GiB", "EFA", "NET Gbit/s", "NVMe GB", "$/HOUR"]
    rows = [[i.name, i.gpu.name, i.gpu_count, f"{i.gpu.memory_gb:.1f}", i.vcpus, i.mem_gib, i.max_efa,
             f"{i.net_baseline_gbps:g}", i.local_nvme_gb, "n/a" if i.price_usd_hr is None else f"{i.price_usd_hr:.2f}"]
            for i in instances]
    lines = _table(header, rows, right={2, 3, 4, 5, 6, 7, 8, 9})
    lines.append("")
    lines.append("GPUs")
    for gpu in gpus:
        lines.extend(_gpu_block(gpu))
    lines.append("")
    lines.append("Sources")
    for key, text in list(catalog.instance_sources.items()) + list(catalog.gpu_sources.items()):
        lines.append(f"  {key}: {' '.join(text.split())}")
    lines.append("  $/HOUR: on-demand Linux in us-east-1; n/a where AWS publishes no on-demand price")
    lines.append("  units: GPU memory in GB (10^9 bytes), as plan's sizing and the checks use it; host memory (MEM) in "
                 "GiB (2^30 bytes), as EC2 reports it; NVMe in GB; network in Gbit/s")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
