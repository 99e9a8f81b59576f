"""Rules over pools shared by time (fleetform/pool.py): the time zone exists, the fleets fit the pool at every
hour, they match its instance type and capacity, training jobs fit between windows and inference windows are
longer than the replicas take to start."""

from __future__ import annotations

from datetime import timedelta

from .. import pool as pools
from ..model import Blueprint
from . import UNIQUE_NAMES, Reporter, did_you_mean, rule

POOL_TIME_ZONE = "pool-time-zone"
POOL_FLEETS = "pool-fleets"


def _local(moment, tz) -> str:
    return moment.astimezone(tz).strftime("%a %Y-%m-%d %H:%M %Z")


def _hours(span: timedelta) -> str:
    """`12 h`, or with the minutes the warm-up lead leaves: `11 h 47 min`."""
    hours, minutes = divmod(max(0, round(span.total_seconds() / 60)), 60)  # a lead and lag longer than a stretch: 0 h
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def _exact(seconds: int) -> str:
    """`1 h 30 min 18 s`, `12 min 48 s`: a duration to the second, for a sum whose terms the message shows."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes) + [f"{secs} s"] * bool(secs)
    return " ".join(parts) or "0 s"


@rule(POOL_TIME_ZONE, "error", "a pool's time zone is an IANA time zone name and its ledger week a real date")
def pool_time_zone(bp: Blueprint, report: Reporter) -> None:
    from zoneinfo import available_timezones

    for pool in bp.pools:
        if pools.zone(pool.time_zone) is None:
            report(pool.path + ("time_zone",), f"'{pool.time_zone}' is not a time zone of the IANA database",
                   did_you_mean(pool.time_zone, available_timezones(), "IANA names such as Europe/Berlin or UTC; known"))
        if pool.week is None:
            report(pool.path + ("ledger_week",), "the ledger week is not a calendar date", "write YYYY-MM-DD, e.g. 2026-01-05")


@rule(POOL_FLEETS, "error", "a pool's fleets exist, draw from one pool each, use its instance type and capacity, "
      "and are sized for their share")
def pool_fleets(bp: Blueprint, report: Reporter) -> None:
    fleets = {f.name: f for f in bp.fleets}
    seen: dict[str, str] = {}
    for pool in bp.pools:
        if sum(1 for s in pool.shares if s.remainder) > 1:
            report(pool.path + ("fleets",), f"pool '{pool.name}' gives the remainder to more than one fleet",
                   "one fleet takes the nodes the others do not hold; give the others windows")
        for share in pool.shares:
            fleet = fleets.get(share.fleet)
            if fleet is None:
                report(share.path + ("fleet",), f"no fleet is named '{share.fleet}'", did_you_mean(share.fleet, fleets, "fleets"))
                continue
            if share.fleet in seen:
                report(share.path + ("fleet",), f"fleet '{share.fleet}' already draws from pool '{seen[share.fleet]}'",
                       "a fleet draws from one pool, once")
                continue
            seen[share.fleet] = pool.name
            if share.remainder and share.windows:
                report(share.path + ("windows",), f"fleet '{share.fleet}' takes the remainder and also has windows",
                       "drop its windows: the remainder is what the other fleets leave")
            if pool.instance_type and fleet.instance_type != pool.instance_type:
                report(fleet.path + ("instance_type",), f"fleet '{fleet.name}' runs {fleet.instance_type}, pool "
                       f"'{pool.name}' has {pool.instance_type} nodes", f"set instance_type: {pool.instance_type}")
            if pool.capacity_type != "on-demand" and (fleet.capacity_type != pool.capacity_type
                                                      or fleet.reservation_id != pool.reservation_id):
                report(fleet.path + ("capacity",), f"fleet '{fleet.name}' is bought as {fleet.capacity_type}"
                       f"{' ' + fleet.reservation_id if fleet.reservation_id else ''}, not from pool '{pool.name}' "
                       f"({pool.capacity_type} {pool.reservation_id or ''})".rstrip(),
                       f"capacity: {{type: {pool.capacity_type}, reservation_id: {pool.reservation_id}}}")
            if pool.capacity_type in ("capacity-block", "reservation") and pool.reservation_id is None:
                report(pool.path + ("capacity",), f"pool '{pool.name}' is a {pool.capacity_type} without its id",
                       "add capacity.reservation_id (cr-...)")
            others = sum(s.floor for s in pool.shares if s is not share)
            peak = max([share.floor] + [w.nodes for w in share.windows]) if not share.remainder else \
                max(share.floor, pool.nodes - others)
            if fleet.nodes is not None and (fleet.nodes.max < peak or fleet.nodes.min > share.floor):
                report(fleet.nodes.path, f"fleet '{fleet.name}' is sized {fleet.nodes.min}-{fleet.nodes.max} nodes, "
                       f"its share of pool '{pool.name}' runs from {share.floor} to {peak}",
                       f"nodes: {{min: {min(fleet.nodes.min, share.floor)}, max: {max(fleet.nodes.max, peak)}}}")
            for window in share.windows:
                if window.nodes <= share.floor:
                    report(window.path + ("nodes",), f"the window gives fleet '{share.fleet}' {window.nodes} nodes, "
                           f"no more than its floor of {share.floor}", "raise the window's nodes or drop the window")


def _checked(bp: Blueprint):
    for pool in bp.pools:
        tz = pools.zone(pool.time_zone)
        if tz is not None and pool.week is not None:
            yield pool, tz


@rule("pool-overcommit", "error", "at no moment of the week do a pool's fleets hold more nodes than the pool has",
      needs=(UNIQUE_NAMES, POOL_TIME_ZONE, POOL_FLEETS))
def pool_overcommit(bp: Blueprint, report: Reporter) -> None:
    """One week is enough: every window of a pool is in the pool's one time zone, and local times map to UTC in
    the same order in every week (a skipped local time counts from the moment the clock jumps to), so two windows
    that overlap in a clock-change week overlap in every week (tests/test_pool.py checks all weeks of a year)."""
    for pool, tz in _checked(bp):
        found = pools.overcommit(pool, pool.week, tz)
        if found is None:
            continue
        moment, held = found
        parts = ", ".join(f"{fleet} {n}" for fleet, n in held.items())
        report(pool.path + ("nodes",), f"at {_local(moment, tz)} the fleets of pool '{pool.name}' hold "
               f"{sum(held.values())} nodes ({parts}), more than its {pool.nodes}",
               "shrink a window's nodes or a floor, move a window, or give one fleet the remainder")


def _lent(pool, share, week, tz):
    """The stretches in which a fleet holds more than its floor, as (start, end) in UTC."""
    return pools.segments(pool, share.fleet, week, tz)


@rule("pool-training-fit", "warning", "a training fleet's jobs on nodes it lends fit between the windows: the "
      "partition's max_time (finish) or the checkpoint interval (requeue) is shorter than the time it holds them",
      needs=(UNIQUE_NAMES, POOL_TIME_ZONE, POOL_FLEETS))
def pool_training_fit(bp: Blueprint, report: Reporter) -> None:
    fleets = {f.name: f for f in bp.fleets}
    for pool, tz in _checked(bp):
        for share in pool.shares:
            fleet = fleets[share.fleet]
            if not fleet.training:
                continue
            stretches = _lent(pool, share, pool.week, tz)
            if not stretches:
                continue
            start, end = min(stretches, key=lambda s: s[1] - s[0])
            # the next lend starts the warm-up lead and its nodes' release early (Handover.lend_min), and this stretch
            # starts the release lag late (the inference fleet's nodes drain and terminate after its window's end)
            shortest = end - start - timedelta(minutes=pools.lend_minutes(pool) + pool.lag_min)
            start += timedelta(minutes=pool.lag_min)  # when training really has the nodes back
            if share.on_window == "requeue":
                every = fleet.checkpoint.every_minutes if fleet.checkpoint else None
                if every is None or timedelta(minutes=every) >= shortest:
                    report(share.path + ("on_window",), f"fleet '{fleet.name}' holds its lent nodes for as little as "
                           f"{_hours(shortest)} (from {_local(start, tz)}), and "
                           + ("checkpoints never" if every is None else f"checkpoints every {every} min")
                           + ": a requeued job loses all its work there",
                           "checkpoint more often than the shortest stretch (checkpoint.every_minutes)")
                continue
            scheduler = fleet.scheduler
            parts = getattr(scheduler, "partitions", ())
            for part in parts:
                limit = pools.slurm_minutes(part.max_time)
                if limit is None or timedelta(minutes=limit) >= shortest:
                    report(part.path + ("max_time",), f"partition '{part.name}' lets a job run "
                           f"{'without limit' if limit is None else _hours(timedelta(minutes=limit))}, but fleet "
                           f"'{fleet.name}' holds its lent nodes for as little as {_hours(shortest)} (from "
                           f"{_local(start, tz)}): no job of the partition's time limit ever starts on them there",
                           f"a max_time under {_hours(shortest)}, or `on_window: requeue` with checkpoints")


@rule("pool-inference-warmup", "warning", "an inference fleet's window in a pool lasts longer than its replicas "
      "take to start, and its node group rises its warm-up lead early on every day of the year",
      needs=(UNIQUE_NAMES, POOL_TIME_ZONE, POOL_FLEETS))
def pool_inference_warmup(bp: Blueprint, report: Reporter) -> None:
    fleets = {f.name: f for f in bp.fleets}
    for pool, tz in _checked(bp):
        for share in pool.shares:
            fleet = fleets[share.fleet]
            if fleet.training or fleet.kube is None:
                continue
            budgets = [p.period_s * p.failure_threshold for s in fleet.kube.servers for p in s.probes if p.kind == "startup"]
            terms = pool.handover
            # a replica starts on a node the window's rise asks for: the node gets ready and pulls the image before
            # the startup probe's budget runs (pools.Handover, the warm-up lead's terms), not the budget alone
            node_s = (terms.node_ready_s + terms.image_pull_s) if terms is not None else 0
            startup_s = node_s + max(budgets, default=0)
            for begin, finish in _lent(pool, share, pool.week, tz):
                if startup_s and finish - begin <= timedelta(seconds=startup_s):
                    report(share.path + ("windows",), f"fleet '{fleet.name}' holds its window's nodes for "
                           f"{_hours(finish - begin)} from {_local(begin, tz)}, no longer than its replicas may take to "
                           f"start on a new node ({_exact(startup_s)}: node ready and image pull {_exact(node_s)}, the "
                           f"startup probe's budget {_exact(max(budgets, default=0))})",
                           "a longer window, or a model that loads faster")
                    break
            for action in fleet.pool_scaling:  # the node group's rises: cron lines in local wall clock
                missed = pools.lead_misses(pool, action, pool.week.year)
                if missed:
                    firsts = sorted({off > 0: (day, off) for day, off in reversed(missed)}.values())  # each way's first
                    said = ", and ".join(
                        f"on {day:%a %Y-%m-%d} " + (
                            f"{off} min late" + (", after the window opened" if off > action.lead_min else "") if off > 0
                            else f"{-off} min early, while training still holds the nodes")
                        for day, off in firsts)
                    report(share.path + ("windows",), f"the node group of fleet '{fleet.name}' rises at "
                           f"{action.recurrence!r} ({pool.time_zone}), {action.lead_min} min before its window, and a "
                           f"clock change can fall between the two: they rise {said} (the KEDA cron trigger "
                           "starts at the same local time; bin/pool-edge's lend counts real minutes)",
                           "open the window at an hour further from the clock change (in Europe 01:00-03:00 local)")


@rule("pool-inference-bounds", "error", "an inference fleet's autoscaler bounds never ask for more GPUs than the "
      "pool gives the fleet: its minimum at every hour of the week, its maximum at the fleet's peak",
      needs=(UNIQUE_NAMES, POOL_TIME_ZONE, POOL_FLEETS))
def pool_inference_bounds(bp: Blueprint, report: Reporter) -> None:
    """The minimum at an hour is what KEDA keeps then: the cron trigger's replicas (pools.window_replicas of the
    nodes the fleet holds) in a window, `replicas.min` outside (and always with `autoscaler: hpa`, which has no cron
    trigger); pods above the GPUs the fleet holds would stay pending on nodes training holds. The maximum
    (maxReplicaCount, one for all hours) must fit the fleet's peak, the most the pool ever gives it; between its
    windows queue depth can still raise the replicas above the floor, up to nodes the fleet does not hold then
    (README, Pools)."""
    fleets = {f.name: f for f in bp.fleets}
    for pool, tz in _checked(bp):
        for share in pool.shares:
            fleet = fleets[share.fleet]
            devices = fleet.devices()
            if fleet.training or fleet.kube is None or not fleet.models or devices is None:
                continue
            per_node = int(devices[0])
            led = pools.ledger(pool, per_node, pool.week)
            peak = led.peak(fleet.name)
            most = sum(m.replicas.max * m.gpus for m in fleet.models)
            if most > peak * per_node:
                report(fleet.path + ("models",), f"the models of fleet '{fleet.name}' may scale to {most} GPUs "
                       f"(replicas.max x tensor_parallel), but pool '{pool.name}' gives the fleet at most {peak} "
                       f"nodes ({peak * per_node} GPUs)", "lower replicas.max, or give the fleet more nodes in a window")
            cron = any(s.autoscaling is not None and s.autoscaling.kind == "keda" for s in fleet.kube.servers)
            for hour in led.hours:
                held = hour.nodes.get(fleet.name, 0)
                if cron and held > share.floor:
                    replicas = pools.window_replicas(fleet, held, per_node)
                else:
                    replicas = {m.name: m.replicas.min for m in fleet.models}
                least = sum(replicas[m.name] * m.gpus for m in fleet.models)
                if least > held * per_node:
                    report(fleet.path + ("models",), f"at {_local(hour.start, tz)} fleet '{fleet.name}' keeps at "
                           f"least {least} GPUs busy (its models' minimum replicas x tensor_parallel), but pool "
                           f"'{pool.name}' gives it {held} nodes ({held * per_node} GPUs) then: the pods above "
                           f"stay pending", "lower replicas.min, or raise the fleet's floor")
                    break


@rule("pool-inference-autoscaler", "warning", "an inference fleet with windows in a pool is scaled by KEDA, whose "
      "cron triggers raise its replicas with the windows; an HPA (or none) keeps the same minimum at every hour",
      needs=(UNIQUE_NAMES, POOL_TIME_ZONE, POOL_FLEETS))
def pool_inference_autoscaler(bp: Blueprint, report: Reporter) -> None:
    """The node group follows the windows either way (its scheduled actions), but only a KEDA ScaledObject gets a
    cron trigger per window (fleetform/pool.py cron_windows). A Kubernetes HorizontalPodAutoscaler has no schedule:
    its minReplicas is one number (autoscaling/v2 HorizontalPodAutoscalerSpec), so a window's nodes would wait empty
    until load raised the replicas, and no warm-up lead could run. Giving the HPA the same behaviour would take a
    program patching minReplicas at each edge, a second owner of the object beside `pulumi up`: KEDA is the way."""
    fleets = {f.name: f for f in bp.fleets}
    for pool, _ in _checked(bp):
        for share in pool.shares:
            fleet = fleets[share.fleet]
            scheduler = fleet.scheduler
            if fleet.training or fleet.kube is None or not share.windows or getattr(scheduler, "autoscaler", "keda") == "keda":
                continue
            report(scheduler.path + ("autoscaler",), f"fleet '{fleet.name}' scales with autoscaler: "
                   f"{scheduler.autoscaler}, so its replicas do not follow the windows of pool '{pool.name}': at every hour it "
                   f"keeps its replicas.min, and a window's nodes wait for load to fill them",
                   "autoscaler: keda (each window becomes a cron trigger that raises the minimum, a warm-up lead early)")


@rule("pool-warmup-overlap", "warning", "the warm-up lead of a window does not make a pool's fleets hold more nodes "
      "than the pool has while another fleet's window is still open", needs=(UNIQUE_NAMES, POOL_TIME_ZONE, POOL_FLEETS))
def pool_warmup_overlap(bp: Blueprint, report: Reporter) -> None:
    """A training fleet lends its nodes a lead early, but an inference fleet keeps its nodes to the end of its
    window: where one inference window opens as another closes, the opening fleet's nodes rise while the closing
    fleet still holds its own (pools.lead_overlaps). In a Capacity Block or a reservation the extra launches fail
    for the lead's minutes; in an on-demand pool they are bought."""
    lenders = {f.name for f in bp.fleets if f.pool_edge is not None}
    early = {f.name for f in bp.fleets if not f.training and f.kube is not None}
    for pool, tz in _checked(bp):
        for begin, change, held in pools.lead_overlaps(pool, lenders, early)[:1]:
            parts = ", ".join(f"{fleet} {n}" for fleet, n in held.items())
            until = change + timedelta(minutes=pool.lag_min)  # the closing fleet's nodes drain and terminate until then
            report(pool.path + ("fleets",), f"from {begin.astimezone(tz).strftime('%a %H:%M')} to "
                   f"{until.astimezone(tz).strftime('%H:%M')} ({pool.time_zone}) the fleets of pool '{pool.name}' hold "
                   f"{sum(held.values())} nodes ({parts}), more than its {pool.nodes}: a window's {pool.lead_min}-minute "
                   f"warm-up lead starts while another inference fleet's window is still open (its nodes are back "
                   f"{pool.lag_min} min after it closes at {change.astimezone(tz).strftime('%H:%M')})",
                   f"leave {pool.lead_min + pool.lag_min} minutes between the two windows (end the first an hour "
                   "earlier), or lower a window's nodes")
