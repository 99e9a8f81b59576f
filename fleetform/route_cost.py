"""The cost of a request on each route of an inference fleet (issue 23): what 1,000 requests to one model
cost on its fleet's GPUs, from the throughput the blueprint sized the model with (slo.qps_per_gpu) and the
catalog's dated price of the fleet's instance.

Assumptions, printed with the figure:
- A replica serves slo.qps_per_gpu requests a second on each of its GPUs (as `GPUs for the peak` sizes it),
  so one request holds 1 / (qps_per_gpu x 3,600) GPU-hours, whatever the tensor parallel: a TP 2 replica
  serves twice the QPS on twice the GPUs.
- A GPU costs the instance's hourly price over the devices a node offers to pods (fleet.devices(): whole
  GPUs, MIG slices or time-sliced shares), the unit qps_per_gpu counts in.
- "At full throughput" is the floor: every GPU busy. At the sized peak the replicas are only as busy as
  peak_qps over their capacity, and the cost of a request is that floor over the busy share; below the peak
  (and at min replicas, idle) it is higher still. Requests of different lengths cost different amounts:
  qps_per_gpu is an average over the blueprint's request mix.
"""

from __future__ import annotations

from .records import frozen

SECONDS_PER_HOUR = 3600
REQUESTS = 1000


@frozen
class RouteCost:
    """What 1,000 requests to one model cost on its fleet."""

    model: str
    qps_per_gpu: float
    usd_per_gpu_hour: float
    devices_per_node: int
    device: str  # what one device is (fleet.devices()): a GPU's name, a MIG slice or a time-sliced share
    instance_usd_hour: float
    busy_at_peak: float  # peak_qps over the sized replicas' capacity, 0-1

    @property
    def usd_per_1000(self) -> float:
        """At full throughput: every GPU busy."""
        return REQUESTS * self.usd_per_gpu_hour / (self.qps_per_gpu * SECONDS_PER_HOUR)

    @property
    def usd_per_1000_at_peak(self) -> float:
        return self.usd_per_1000 / self.busy_at_peak

    @property
    def formula(self) -> str:
        return (f"1,000 / ({self.qps_per_gpu:g} QPS per GPU x 3,600 s) x ${self.instance_usd_hour:g}/h / "
                f"{self.devices_per_node} x {self.device} per instance; over {self.busy_at_peak:.0%} busy at the sized peak")

    @property
    def result(self) -> str:
        return (f"${self.usd_per_1000:.4f} at full throughput, ${self.usd_per_1000_at_peak:.4f} at the sized peak")


def route_cost(fleet, model, replicas: int, qps_per_gpu: float) -> RouteCost | None:
    """The cost of 1,000 requests to `model` served by `replicas` replicas (the sized count) at `qps_per_gpu`
    (measured, or sizing's estimate from the SLO), or None where the fleet has no dated price (sizing says why
    elsewhere)."""
    slo, devices = model.slo, fleet.devices()
    price = fleet.instance.price_usd_hr if fleet.instance is not None else None
    if slo is None or devices is None or price is None or fleet.capacity_type not in ("on-demand", "reservation"):
        return None
    per_node, _, device = devices
    capacity = replicas * model.gpus * qps_per_gpu
    busy = min(1.0, slo.peak_qps / capacity) if capacity > 0 else 1.0
    return RouteCost(model.name, qps_per_gpu, price / per_node, per_node, device, price, busy)



@frozen
class BlendedCost:
    """What 1,000 requests for a fleet's semantic routing name cost (fleetform/semrouter.py): a share of them
    simple, served by the small model, the rest by the large one.

    Assumptions, printed with the figure: the blueprint's simple_share is the share the router sends to the small
    model (the router's own classification is not measured here); each model's cost per request is its route's
    (RouteCost above, the same qps_per_gpu whatever the request's route); the router itself runs on the system nodes'
    CPU, which is not counted (the system nodes cost the same with or without it while they have room)."""

    small: RouteCost
    large: RouteCost
    simple_share: float

    @property
    def usd_per_1000(self) -> float:
        return self.simple_share * self.small.usd_per_1000 + (1 - self.simple_share) * self.large.usd_per_1000

    @property
    def usd_per_1000_at_peak(self) -> float:
        return (self.simple_share * self.small.usd_per_1000_at_peak
                + (1 - self.simple_share) * self.large.usd_per_1000_at_peak)

    @property
    def saving(self) -> float:
        """Against sending every request to the large model, at full throughput."""
        return 1 - self.usd_per_1000 / self.large.usd_per_1000

    @property
    def formula(self) -> str:
        return (f"{self.simple_share:.0%} simple x {self.small.model} ${self.small.usd_per_1000:.4f} + "
                f"{1 - self.simple_share:.0%} x {self.large.model} ${self.large.usd_per_1000:.4f} (each at full "
                "throughput; the router's CPU on the system nodes not counted)")

    @property
    def result(self) -> str:
        return (f"${self.usd_per_1000:.4f} at full throughput, ${self.usd_per_1000_at_peak:.4f} at the sized peak; "
                f"{self.saving:.0%} less than all to {self.large.model}")


def blended_cost(spec, routes: dict[str, RouteCost]) -> BlendedCost | None:
    """The blend for a fleet's semantic_routing spec from its models' route costs; None where there is no spec or
    either model has no cost (no SLO to size it, or no dated price: sizing says why for each model)."""
    if spec is None or spec.small not in routes or spec.large not in routes or spec.small == spec.large:
        return None
    return BlendedCost(routes[spec.small], routes[spec.large], spec.simple_share)
