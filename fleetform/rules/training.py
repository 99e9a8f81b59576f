"""Rules over training workloads: the fleet's GPUs hold the training state, and the run fits the
capacity it runs on."""

from __future__ import annotations

import math

from ..model import Blueprint
from . import Reporter, rule


def _workloads(bp: Blueprint):
    for fleet in bp.fleets:
        if fleet.training and fleet.workload is not None and fleet.shape is not None and fleet.nodes is not None:
            yield fleet, fleet.workload


@rule("training-memory", "warning",
      "the fleet's GPUs hold weights, gradients and optimizer states with FP32 master weights and states")
def training_memory(bp: Blueprint, report: Reporter) -> None:
    from ..workload import gb_text, training_state_gb

    for fleet, work in _workloads(bp):
        shape = fleet.shape
        need = training_state_gb(work.model_params_billion, work.precision, work.optimizer)
        gpus = fleet.nodes.max * shape.gpu_count
        have = gpus * shape.gpu.memory_gb
        if need <= have:
            continue
        nodes = math.ceil(math.ceil(need / shape.gpu.memory_gb) / shape.gpu_count)
        report(work.path + ("model_params_billion",),
               f"training {work.model_params_billion:g}B parameters with {work.optimizer or 'adamw'} in "
               f"{work.precision} keeps {gb_text(need)} of weights, gradients and optimizer states "
               f"({need / work.model_params_billion:g} B a parameter with FP32 master weights and states), more "
               f"than the {gb_text(have)} of the fleet's {gpus:,} {shape.gpu.name} GPUs, even fully sharded",
               f"at least {nodes:,} nodes (before activations), or a smaller model; waive it with a reason if "
               "the optimizer states are offloaded to CPU memory")


@rule("capacity-duration", "warning", "a training run on a Capacity Block ends within the longest block AWS sells")
def capacity_duration(bp: Blueprint, report: Reporter) -> None:
    from ..workload import CAPACITY_BLOCK_MAX_DAYS, training_time

    for fleet, work in _workloads(bp):
        if fleet.capacity_type != "capacity-block" or not work.tokens_billion or not work.mfu:
            continue
        shape = fleet.shape
        gpus = fleet.nodes.max * shape.gpu_count
        gpu_hours, hours = training_time(work.model_params_billion, work.tokens_billion, gpus,
                                         shape.gpu.bf16_dense_tflops, work.mfu)
        if hours / 24 <= CAPACITY_BLOCK_MAX_DAYS:
            continue
        nodes = math.ceil(gpu_hours / (CAPACITY_BLOCK_MAX_DAYS * 24) / shape.gpu_count)
        report(fleet.path + ("capacity", "type"),
               f"the run takes {hours / 24:,.0f} days on {gpus:,} GPUs (6 x {work.model_params_billion:g}B params x "
               f"{work.tokens_billion:g}B tokens at MFU {work.mfu:g}), longer than a Capacity Block lasts "
               f"(at most {CAPACITY_BLOCK_MAX_DAYS} days; its instances are terminated when it ends)",
               f"buy consecutive blocks and checkpoint to durable storage, or use {nodes:,} nodes to finish within "
               f"{CAPACITY_BLOCK_MAX_DAYS} days")
