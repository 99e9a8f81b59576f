"""Training arithmetic shared by the rules (which `validate` runs) and the plan's sizing: small
and import-light, so validate does not load the sizing and cost code."""

from __future__ import annotations

from .model import BYTES_PER_PARAM

CAPACITY_BLOCK_MAX_DAYS = 182
"""The longest EC2 Capacity Block for ML: 1-day steps up to 14 days, 7-day steps up to 182 days
(EC2 API reference, DescribeCapacityBlockOfferings CapacityDurationHours, read 2026-11-22)."""

OPTIMIZER_BYTES = {
    # bytes per parameter for (weights + gradients + optimizer states): low = everything in the
    # training precision; high = mixed precision with FP32 master weights and FP32 states
    # (ZeRO, Rajbhandari et al. 2020, section 3.1: 2 + 2 + 12 = 16 bytes with Adam).
    "adamw": ("weights, gradients, Adam m and v", 4, 16),
    "adam": ("weights, gradients, Adam m and v", 4, 16),
    "sgd": ("weights, gradients, momentum", 3, 12),
    "adafactor": ("weights, gradients, factored second moments", 2, 8),
}


def gb_text(value: float) -> str:
    return f"{value / 1000:.2f} TB" if value >= 1000 else f"{value:,.0f} GB"


def training_state_gb(params_b: float, precision: str, optimizer: str | None) -> float:
    """The pessimistic (mixed-precision) size of weights, gradients and optimizer states, in GB:
    what the training-memory rule and the sizing decide with."""
    _, low_b, high_b = OPTIMIZER_BYTES[optimizer or "adamw"]
    return params_b * max(high_b, low_b * BYTES_PER_PARAM[precision])


def training_time(params_b: float, tokens_b: float, gpus: int, peak_tflops: float, mfu: float) -> tuple[float, float]:
    """(GPU-hours, wall-clock hours) from 6 x parameters x tokens / (GPUs x peak x MFU)."""
    flops = 6 * params_b * 1e9 * tokens_b * 1e9
    gpu_hours = flops / (peak_tflops * 1e12 * mfu) / 3600
    return gpu_hours, gpu_hours / gpus
