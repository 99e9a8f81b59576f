"""Pools: one budget of nodes (a Capacity Block, an On-Demand Capacity Reservation or a plain node count of one
instance type) that several fleets share by time.

A pool's schedule gives each of its fleets a floor and windows (days of the week, whole local hours, in the
pool's IANA time zone) in which the fleet holds more nodes; one fleet may take the `remainder`, what the others
do not hold. Everything here is a pure function of the model: windows are resolved into concrete UTC intervals
for one given week with the standard library's zoneinfo (so a week with a daylight-saving change has 167 or 169
hours, as a reservation paid by the hour does), and the ledger is the hour-by-hour count of each fleet's nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import prepull
from .records import frozen

Path = tuple

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_SETS = {"weekdays": (0, 1, 2, 3, 4), "weekends": (5, 6), "daily": (0, 1, 2, 3, 4, 5, 6)}
"""Names for sets of days, as Slurm's reservation flags name them (WEEKDAY, WEEKEND, DAILY)."""

DEFAULT_WEEK = date(2026, 1, 5)
"""The week the plan's ledger shows when a pool names none: a Monday with no daylight-saving change in either
hemisphere's usual rules (Europe, North America and Australia change in March/April and October/November)."""

HOUR = timedelta(hours=1)
UTC = timezone.utc


@frozen
class Window:
    """Hours of given days in which a fleet holds `nodes` nodes. `end` <= `start` runs past midnight into the
    next day (20:00-08:00); `end` 24 is midnight at the end of the day."""

    days: tuple[int, ...]  # 0 = Monday
    start: int  # local hour 0-23
    end: int  # local hour 1-24
    nodes: int
    path: Path

    @property
    def hours(self) -> int:
        """Local hours a window lasts on a day without a clock change."""
        return (self.end - self.start) % 24 or 24


@frozen
class Share:
    """One fleet's part of a pool."""

    fleet: str
    floor: int  # nodes held outside every window
    windows: tuple[Window, ...]
    remainder: bool  # holds the pool's nodes that no other fleet holds (at least its floor)
    on_window: Literal["finish", "requeue"]  # training: jobs on lent nodes end by their time limit, or are requeued
    path: Path


@frozen
class Pool:
    name: str
    instance_type: str | None
    nodes: int
    capacity_type: Literal["capacity-block", "reservation", "on-demand"]
    reservation_id: str | None
    time_zone: str
    week: date  # the Monday whose week the plan's ledger shows
    shares: tuple[Share, ...]
    path: Path
    lead_min: int = 0  # warm-up lead: a fleet's nodes rise this many minutes before its window opens (warmup_minutes)
    lag_min: int = 0  # release lag: a fleet's nodes are back in the pool this many minutes after its share falls
    node_ready_min: int | None = None  # the blueprint's node_ready_minutes (None: NODE_READY_S)
    image_pull_min: int | None = None  # the blueprint's image_pull_minutes (None: image size over IMAGE_PULL_GB_PER_MIN)
    release_min: int | None = None  # the blueprint's release_minutes (None: drain + RELEASE_CLEANUP_S)
    handover: "Handover | None" = None  # the terms of lead_min and lag_min (handover())

    def share(self, fleet: str) -> Share | None:
        return next((s for s in self.shares if s.fleet == fleet), None)


def zone(name: str) -> ZoneInfo | None:
    """The IANA time zone of that name, or None when the time zone database has none."""
    if not name or name != name.strip() or name.startswith(("/", ".")) or ".." in name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def week_bounds(week: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """The UTC instants of local midnight at the start of `week`'s Monday and of the next Monday."""
    monday = week - timedelta(days=week.weekday())
    start = datetime(monday.year, monday.month, monday.day, tzinfo=tz).astimezone(UTC)
    nxt = monday + timedelta(days=7)
    return start, datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz).astimezone(UTC)


def _local(day: date, hour: int, tz: ZoneInfo) -> datetime:
    """Local `hour` o'clock of `day` as a UTC instant. A local time skipped by a spring-forward change (02:00 in
    Berlin on the last Sunday of March) counts with the offset before the change (PEP 495, fold=0): 02:00 CET is
    03:00 CEST, the moment the clock jumps to."""
    moment = datetime(day.year, day.month, day.day, tzinfo=tz) if hour < 24 else \
        datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=tz)
    if hour < 24:
        moment = moment.replace(hour=hour)
    return moment.astimezone(UTC)


def intervals(window: Window, week: date, tz: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """The window's concrete UTC intervals that overlap the week (clipped to it), in order."""
    start, end = week_bounds(week, tz)
    monday = week - timedelta(days=week.weekday())
    out = []
    for offset in range(-1, 7):  # the Sunday before: a window past midnight reaches into Monday
        day = monday + timedelta(days=offset)
        if day.weekday() not in window.days:
            continue
        begin = _local(day, window.start, tz)
        finish = _local(day if window.end > window.start else day + timedelta(days=1), window.end, tz)
        begin, finish = max(begin, start), min(finish, end)
        if begin < finish:
            out.append((begin, finish))
    return out


def edges(pool: Pool, week: date, tz: ZoneInfo) -> list[datetime]:
    """Every instant in the week at which some fleet's share may change, with the week's start, in order."""
    start, _ = week_bounds(week, tz)
    points = {start}
    for share in pool.shares:
        for window in share.windows:
            for begin, finish in intervals(window, week, tz):
                points.update((begin, finish))
    return sorted(p for p in points if p < week_bounds(week, tz)[1])


def shares_at(pool: Pool, moment: datetime, spans: dict) -> dict[str, int]:
    """Each fleet's nodes at a UTC instant; `spans` maps (fleet, window index) to the window's intervals."""
    held = {}
    for share in pool.shares:
        if share.remainder:
            continue
        nodes = share.floor
        for index, window in enumerate(share.windows):
            if any(b <= moment < f for b, f in spans[share.fleet, index]):
                nodes = max(nodes, window.nodes)
        held[share.fleet] = nodes
    for share in pool.shares:
        if share.remainder:
            held[share.fleet] = max(share.floor, pool.nodes - sum(held.values()))
    return {s.fleet: held[s.fleet] for s in pool.shares}


@dataclass(frozen=True)
class Hour:
    start: datetime  # UTC
    local: datetime  # in the pool's time zone
    nodes: dict  # fleet -> nodes held (the most it holds at any moment of the hour)

    @property
    def used(self) -> int:
        return sum(self.nodes.values())


@dataclass(frozen=True)
class Ledger:
    pool: str
    time_zone: str
    week: date
    gpus_per_node: int
    pool_nodes: int
    hours: tuple[Hour, ...]

    def gpu_hours(self, fleet: str) -> int:
        return sum(h.nodes[fleet] for h in self.hours) * self.gpus_per_node

    @property
    def idle_gpu_hours(self) -> int:
        return sum(max(0, self.pool_nodes - h.used) for h in self.hours) * self.gpus_per_node

    def peak(self, fleet: str) -> int:
        return max((h.nodes[fleet] for h in self.hours), default=0)

    @property
    def fleets(self) -> tuple[str, ...]:
        return tuple(self.hours[0].nodes) if self.hours else ()

    def runs(self) -> list[tuple[Hour, int, dict]]:
        """Consecutive hours with the same shares: (first hour, how many hours, nodes per fleet)."""
        out: list[tuple[Hour, int, dict]] = []
        for hour in self.hours:
            if out and out[-1][2] == hour.nodes:
                first, count, nodes = out[-1]
                out[-1] = (first, count + 1, nodes)
            else:
                out.append((hour, 1, hour.nodes))
        return out


def _spans(pool: Pool, week: date, tz: ZoneInfo) -> dict:
    return {(s.fleet, i): intervals(w, week, tz) for s in pool.shares for i, w in enumerate(s.windows)}


def ledger(pool: Pool, gpus_per_node: int, week: date | None = None, time_zone: str | None = None) -> Ledger:
    """The hour-by-hour ledger of one week (local Monday 00:00 to the next): 168 hours, 167 or 169 in a week
    whose clocks change. A pure function of its arguments; the time zone must exist (rule pool-time-zone)."""
    week = week or pool.week
    name = time_zone or pool.time_zone
    tz = zone(name)
    if tz is None:
        raise ValueError(f"unknown time zone {name!r}")
    start, end = week_bounds(week, tz)
    spans = _spans(pool, week, tz)
    points = edges(pool, week, tz)
    hours = []
    moment = start
    while moment < end:
        nxt = moment + HOUR
        inside = [moment] + [p for p in points if moment < p < nxt]
        counts = [shares_at(pool, p, spans) for p in inside]
        most = {s.fleet: max(c[s.fleet] for c in counts) for s in pool.shares}
        hours.append(Hour(moment, moment.astimezone(tz), most))
        moment = nxt
    return Ledger(pool.name, name, week - timedelta(days=week.weekday()), gpus_per_node, pool.nodes, tuple(hours))


def overcommit(pool: Pool, week: date, tz: ZoneInfo) -> tuple[datetime, dict] | None:
    """The first instant of the week at which the fleets hold more nodes than the pool has, with the shares."""
    spans = _spans(pool, week, tz)
    for moment in edges(pool, week, tz):
        held = shares_at(pool, moment, spans)
        if sum(held.values()) > pool.nodes:
            return moment, held
    return None


def clock_change_weeks(year: int, tz: ZoneInfo) -> list[date]:
    """The Mondays of the weeks of `year` in which the zone's UTC offset changes."""
    out = []
    day = date(year, 1, 1)
    day -= timedelta(days=day.weekday())
    while day.year <= year:
        start, end = week_bounds(day, tz)
        if (end - start) != timedelta(days=7):
            out.append(day)
        day += timedelta(days=7)
    return out


def segments(pool: Pool, fleet: str, week: date, tz: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """The stretches of the week (UTC) in which `fleet` holds more than its floor, merged where they touch;
    a stretch running over the week's end is joined with the one at its start (the schedule repeats)."""
    start, end = week_bounds(week, tz)
    spans = _spans(pool, week, tz)
    share = pool.share(fleet)
    points = edges(pool, week, tz)
    above = []
    for index, moment in enumerate(points):
        nxt = points[index + 1] if index + 1 < len(points) else end
        if shares_at(pool, moment, spans)[fleet] > share.floor:
            if above and above[-1][1] == moment:
                above[-1] = (above[-1][0], nxt)
            else:
                above.append((moment, nxt))
    if len(above) > 1 and above[0][0] == start and above[-1][1] == end:
        first, last = above.pop(0), above.pop()
        above.append((last[0], last[1] + (first[1] - first[0])))
    return above


def gantt(led: Ledger) -> str:
    """The ledger as a Mermaid gantt chart (GitHub renders gantt charts): one section per fleet, one bar per run
    of hours in which the fleet holds the same number of nodes, in the pool's local time."""
    lines = ["gantt", f"  title {led.pool}: nodes per fleet, week of {led.week.isoformat()} ({led.time_zone})",
             "  dateFormat YYYY-MM-DD HH:mm", "  axisFormat %a %H:%M", "  todayMarker off"]
    for fleet in led.fleets:
        lines.append(f"  section {fleet}")
        run_start, held = None, None
        for index, hour in enumerate(led.hours + (None,)):
            value = hour.nodes[fleet] if hour is not None else None
            if value != held:
                if run_start is not None and held:
                    stop = hour.local if hour is not None else led.hours[-1].local + HOUR
                    lines.append(f"  {held} node{'s' if held != 1 else ''} :{run_start.strftime('%Y-%m-%d %H:%M')}, "
                                 f"{stop.strftime('%Y-%m-%d %H:%M')}")
                run_start, held = (hour.local if hour is not None else None), value
    return "\n".join(lines) + "\n"


def _week(text: str | None) -> date | None:
    if text is None:
        return DEFAULT_WEEK
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None  # rule pool-time-zone reports it


def build(item: dict, path: Path) -> Pool:
    """A schema-valid `pools` entry as the model's Pool."""
    shares = []
    for i, entry in enumerate(item["fleets"]):
        spath = path + ("fleets", i)
        windows = tuple(
            Window(DAY_SETS[w["days"]] if isinstance(w["days"], str) else tuple(sorted(DAYS.index(d) for d in w["days"])),
                   int(w["start"][:2]), int(w["end"][:2]), w["nodes"], spath + ("windows", j))
            for j, w in enumerate(entry.get("windows", ())))
        shares.append(Share(entry["fleet"], entry.get("floor", 0), windows, entry.get("remainder", False),
                            entry.get("on_window", "finish"), spath))
    capacity = item["capacity"]
    return Pool(item["name"], item.get("instance_type"), item["nodes"], capacity["type"], capacity.get("reservation_id"),
                item["time_zone"], _week(item.get("ledger_week")), tuple(shares), path,
                node_ready_min=item.get("node_ready_minutes"), image_pull_min=item.get("image_pull_minutes"),
                release_min=item.get("release_minutes"))


def slurm_minutes(value: str | int | None) -> float | None:
    """A Slurm time limit in minutes; None for no limit. Slurm's forms (sbatch(1), --time): "minutes",
    "minutes:seconds", "hours:minutes:seconds", "days-hours", "days-hours:minutes", "days-hours:minutes:seconds",
    and UNLIMITED or INFINITE."""
    if value is None or str(value).upper() in ("UNLIMITED", "INFINITE"):
        return None
    text = str(value)
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
        return int(days) * 1440 + hours * 60 + minutes + seconds / 60
    if len(parts) == 3:
        return parts[0] * 60 + parts[1] + parts[2] / 60
    if len(parts) == 2:
        return parts[0] + parts[1] / 60
    return float(parts[0])


def plan_dict(bp) -> list[dict]:
    """Each pool's ledger for the plan: hours, runs, GPU-hours per fleet, idle GPU-hours, and the cost of the pool
    against separate fleets each sized for its own peak, at the catalog's dated on-demand price."""
    from .catalog import load_catalog

    out = []
    for pool in bp.pools:
        instance = load_catalog().instance(pool.instance_type or "") if pool.instance_type else None
        if instance is None:
            fleet = next((f for f in bp.fleets if pool.share(f.name) is not None and f.instance is not None), None)
            instance = fleet.instance if fleet else None
        gpus = instance.gpu_count if instance else 0
        led = ledger(pool, gpus)
        hours = len(led.hours)
        fleets = {f: {"gpu_hours": led.gpu_hours(f), "node_hours": led.gpu_hours(f) // gpus if gpus else 0,
                      "peak_nodes": led.peak(f)} for f in led.fleets}
        price = instance.price_usd_hr if instance else None
        separate = sum(v["peak_nodes"] for v in fleets.values())
        out.append({
            "pool": pool.name, "time_zone": pool.time_zone, "week": led.week.isoformat(), "hours": hours,
            "nodes": pool.nodes, "gpus_per_node": gpus, "instance_type": instance.name if instance else None,
            "capacity": pool.capacity_type,
            "fleets": fleets, "idle_gpu_hours": led.idle_gpu_hours, "pool_gpu_hours": pool.nodes * gpus * hours,
            "separate_nodes": separate,
            "usd_per_week": None if price is None else round(pool.nodes * hours * price, 2),
            "separate_usd_per_week": None if price is None else round(separate * hours * price, 2),
            "price": None if price is None else f"${price:g}/h on-demand, us-east-1 (catalog: AWS Price List API, 2026-07-20)"
                     + ("; a Capacity Block's price is set when it is bought" if pool.capacity_type == "capacity-block" else ""),
            "runs": [{"start": first.local.strftime("%a %H:%M"), "start_utc": first.start.strftime("%Y-%m-%dT%H:%MZ"),
                      "hours": count, "nodes": dict(nodes), "idle": pool.nodes - sum(nodes.values())}
                     for first, count, nodes in led.runs()],
            "chart": gantt(led),
            "warmup_lead_minutes": pool.lead_min,
            "release_lag_minutes": pool.lag_min,
            "handover": _handover_dict(pool.handover),
            "scaling_actions": [
                {"fleet": f.name, "name": a.name, "recurrence": a.recurrence, "time_zone": a.time_zone,
                 "min_size": a.nodes, "desired_capacity": a.nodes, "max_size": a.nodes, "lead_minutes": a.lead_min,
                 "lag_minutes": a.lag_min, "change": f"{_days_text(a.days)} {a.hour:02d}:00"}
                for f in bp.fleets if pool.share(f.name) is not None for a in f.pool_scaling],
        })
    return out


def _handover_dict(terms: Handover | None) -> dict | None:
    """The lead's and the lag's terms for the plan, in seconds, each with its source."""
    if terms is None:
        return None
    return {"node_ready_s": terms.node_ready_s, "node_ready_from": terms.node_ready_from,
            "image": terms.image, "image_pull_s": terms.image_pull_s, "image_pull_from": terms.image_pull_from,
            "startup_s": terms.startup_s, "overlap_s": terms.overlap_s, "lead_minutes": terms.lead_min,
            "lend_minutes": terms.lend_min,
            "drain_s": terms.drain_s, "cleanup_s": terms.cleanup_s, "release_from": terms.release_from,
            "lag_minutes": terms.lag_min}


def _span(seconds: int) -> str:
    """`8 min`, `12 min 40 s`."""
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min" + (f" {rest} s" if rest else "")


def _days_text(days: tuple[int, ...]) -> str:
    """Days of the week as the plan writes them: `Mon-Fri`, `Sat,Sun`, `Mon,Wed`."""
    names = [DAYS[d].capitalize() for d in days]
    if len(days) > 2 and list(days) == list(range(days[0], days[-1] + 1)):
        return f"{names[0]}-{names[-1]}"
    return ",".join(names)


def plan_lines(pools_data: list[dict], markdown: bool, table) -> list[str]:
    """The plan's section of each pool: the ledger's runs as a table, the totals, and (markdown) the gantt chart."""
    lines: list[str] = []
    for p in pools_data:
        title = (f"Pool {p['pool']}: {p['nodes']} x {p['instance_type']} ({p['capacity']}), week of {p['week']} "
                 f"in {p['time_zone']}, {p['hours']} h")
        lines += ["", f"#### {title}", ""] if markdown else ["", title]
        if markdown:
            lines += ["```mermaid", p["chart"].rstrip("\n"), "```", ""]
        fleets = list(p["fleets"])
        rows = [(r["start"], r["start_utc"], str(r["hours"]), *(str(r["nodes"][f]) for f in fleets), str(r["idle"]))
                for r in p["runs"]]
        lines += table(("from (local)", "from (UTC)", "hours", *(f"{f} nodes" for f in fleets), "idle nodes"), rows, markdown)
        lines.append("")
        gpus = p["gpus_per_node"]
        totals = [(f, str(v["peak_nodes"]), f"{v['gpu_hours']:,}") for f, v in p["fleets"].items()]
        totals.append(("idle", "", f"{p['idle_gpu_hours']:,}"))
        lines += table(("fleet", "peak nodes", f"GPU-hours a week ({gpus} a node)"), totals, markdown)
        if p["usd_per_week"] is not None:
            saved = p["separate_usd_per_week"] - p["usd_per_week"]
            text = (f"the pool: {p['nodes']} nodes x {p['hours']} h = ${p['usd_per_week']:,.2f} a week; separate fleets "
                    f"each sized for its peak: {p['separate_nodes']} nodes x {p['hours']} h = "
                    f"${p['separate_usd_per_week']:,.2f} a week; saved ${saved:,.2f} ({p['price']})")
        else:
            text = f"the pool: {p['nodes']} nodes, separate fleets each sized for its peak: {p['separate_nodes']} nodes; not priced"
        lines += ["", f"- {text}"] if markdown else [f"  {text}"]
        terms = p.get("handover")
        if terms:
            ready = ("node_ready_minutes" if terms["node_ready_from"] == "node_ready_minutes"
                     else f"launch, boot, join EKS, GPUs advertised; {NODE_READY_SOURCE}")
            pull = "image_pull_minutes" if terms["image_pull_from"] == "image_pull_minutes" else \
                f"{terms['image']}, {terms['image_pull_from']}: {IMAGE_PULL_SOURCE}"
            lead = (f"warm-up lead: {p['warmup_lead_minutes']} min = node ready {_span(terms['node_ready_s'])} ({ready}) "
                    f"+ image pull {_span(terms['image_pull_s'])} ({pull}) "
                    + (f"- {_span(terms['overlap_s'])} of the pull while the node joins (pre-pulled from the "
                       "kubelet's start) " if terms.get("overlap_s") else "")
                    + f"+ startup probe budget "
                    f"{_span(terms['startup_s'])} (weights loaded), rounded up: nodes and KEDA cron minimums rise that "
                    f"much before a window opens, and training's lends start {terms['lend_minutes']} min before it "
                    f"(its lent nodes power down in the keeper's next round, up to 1 min, and their instances' clean-up "
                    f"takes {_span(terms['cleanup_s'])} before the pool's capacity takes the rise's launches)")
            back = "release_minutes" if terms["release_from"] == "release_minutes" else \
                (f"drain {_span(terms['drain_s'])}: the pods' termination grace, or EKS's 5-minute cut where a "
                 f"fall drains more pods of a model than its PodDisruptionBudget lets go at once ({EKS_DRAIN_SOURCE})"
                 + (f", + instance clean-up {_span(terms['cleanup_s'])} until the pool's capacity takes a launch again "
                    f"({RELEASE_CLEANUP_SOURCE})" if terms["cleanup_s"] else ""))
            lag = (f"release lag: {p['release_lag_minutes']} min ({back}): a node group shrinks at the hour its window "
                   "closes, and training's lends end that much after it; the ledger counts whole hours")
            lines += [f"- {lead}", f"- {lag}"] if markdown else [f"  {lead}", f"  {lag}"]
        if p.get("scaling_actions"):
            lines += ["", "Scheduled actions on the node groups' Auto Scaling groups:", ""] if markdown else \
                ["  scheduled actions on the node groups' Auto Scaling groups:"]
            lines += table(("fleet", "share changes", "recurrence (cron)", "time zone", "min/desired/max", "lead / lag"), [
                (a["fleet"], a["change"], a["recurrence"], a["time_zone"],
                 f"{a['min_size']}/{a['desired_capacity']}/{a['max_size']}",
                 f"{a['lead_minutes']} min early" if a["lead_minutes"] else
                 f"nodes back {a['lag_minutes']} min after" if a.get("lag_minutes") else "0 min")
                for a in p["scaling_actions"]], markdown)
    return lines


@frozen
class Lend:
    """Hours of some days (local time of the pool) in which a training fleet lends `nodes` to the pool's other
    fleets."""

    days: tuple[int, ...]
    start: int  # local hour
    hours: int  # wall-clock hours
    nodes: str  # hostlist of the lent nodes: the fleet's highest-numbered ones


@frozen
class PoolEdge:
    """What a Slurm training fleet's bin/pool-edge needs on the controller (rendered into bin/pool.json)."""

    pool: str
    time_zone: str
    lead_minutes: int  # reservations are made this far ahead: the longest partition max_time + one keeper round
    lends: tuple[Lend, ...]
    on_window: str  # finish | requeue: what happens to a job still running on lent nodes when a lend starts
    warmup_minutes: int = 0  # each lend starts this much earlier than its hour: the pool's warm-up lead (Pool.lead_min)
    release_minutes: int = 0  # each lend ends this much later than its hour: the pool's release lag (Pool.lag_min)


KEEPER_ROUND_MIN = 60
"""Margin on top of the longest time limit: the keeper runs pool-edge every minute; an hour spares a controller
that was down a while."""


def _plain_week(pool: Pool, tz: ZoneInfo) -> date:
    """The ledger week, or the first week after it without a clock change (the weekly pattern in wall-clock hours)."""
    week = pool.week - timedelta(days=pool.week.weekday())
    while True:
        start, end = week_bounds(week, tz)
        if end - start == timedelta(days=7):
            return week
        week += timedelta(days=7)


def edge(pool: Pool, fleet, hosts: list[str]) -> PoolEdge | None:
    """The lends of a Slurm training fleet of a pool: each stretch in which it holds fewer than its peak nodes, its
    highest-numbered nodes lent. None when the fleet lends nothing, the time zone is unknown or a partition has no
    time limit (rule pool-training-fit reports that)."""
    import hostlist

    tz = zone(pool.time_zone)
    share = pool.share(fleet.name)
    if tz is None or share is None or pool.week is None:
        return None
    limits = [slurm_minutes(p.max_time) for p in fleet.scheduler.partitions] or [None]
    if any(limit is None for limit in limits):
        return None
    week = _plain_week(pool, tz)
    led = ledger(pool, 1, week)
    peak = led.peak(fleet.name)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for first, count, nodes in led.runs():
        lent = peak - nodes[fleet.name]
        if lent > 0:
            groups.setdefault((first.local.hour, count, lent), []).append(first.local.weekday())
    lends = tuple(Lend(tuple(sorted(days)), hour, count, hostlist.collect_hostlist(hosts[len(hosts) - lent:]))
                  for (hour, count, lent), days in sorted(groups.items(), key=lambda g: (min(g[1]), g[0])))
    if not lends:
        return None
    return PoolEdge(pool.name, pool.time_zone, int(max(limits)) + KEEPER_ROUND_MIN, lends, share.on_window,
                    lend_minutes(pool), pool.lag_min)


def lend_minutes(pool: Pool) -> int:
    """How long before the hour a training fleet's lend starts (Handover.lend_min); the lead without a handover."""
    return pool.handover.lend_min if pool.handover is not None else pool.lead_min


@frozen
class CronWindow:
    """A KEDA cron trigger (keda.sh/docs/2.17/scalers/cron: metadata timezone, start, end, desiredReplicas; start
    and end are 5-field Linux cron, Minute Hour Dom Month Dow, Sunday 0): while it is active the model keeps at
    least `replicas`. It starts the pool's warm-up lead (`lead_min`, Pool.lead_min: node ready, image pull and the
    startup probe budget) before the window opens, in the same minute as the node group's scheduled scaling action
    and the training fleet's lend (bin/pool-edge): its pods never wait on a node not yet asked for, and rise no
    earlier than the nodes do (they stay pending until a node is ready). It ends when the window does, as the node
    group's fall does."""

    timezone: str
    start: str
    end: str
    replicas: int
    lead_min: int


def _cron(minute_of_day: int, days: tuple[int, ...]) -> str:
    """A 5-field cron line at a local minute of some days (0 = Monday), the minute folded into the day before or
    after when it falls outside 0..1439."""
    shift, minute = divmod(minute_of_day, 1440)
    dows = sorted({(d + shift + 1) % 7 for d in days})  # cron: Sunday 0, Monday 1
    return f"{minute % 60} {minute // 60} * * {','.join(str(d) for d in dows)}"


def cron_windows(pool: Pool, fleet) -> dict[str, tuple[CronWindow, ...]]:
    """Each model's cron triggers for an inference fleet's windows: the window's devices shared among the fleet's
    models in proportion to their most replicas (times tensor parallel), within each model's replicas range."""
    share = pool.share(fleet.name)
    devices = fleet.devices()
    if share is None or devices is None or fleet.kube is None or not fleet.models:
        return {}
    per_node = devices[0]
    out = {}
    for model in fleet.models:
        lead = pool.lead_min  # see CronWindow
        triggers = []
        for window in share.windows:
            replicas = window_replicas(fleet, window.nodes, per_node)[model.name]
            end = window.start * 60 + window.hours * 60
            triggers.append(CronWindow(pool.time_zone, _cron(window.start * 60 - lead, window.days),
                                       _cron(end, window.days), replicas, lead))
        out[model.name] = tuple(triggers)
    return out


def window_replicas(fleet, nodes: int, per_node: int) -> dict[str, int]:
    """Each model's cron minimum while the fleet holds `nodes`: the nodes' devices shared among the models by their
    most replicas times tensor parallel, within each model's replicas range (the range's minimum can ask for more
    than the share: rule pool-inference-bounds)."""
    weights = {m.name: m.replicas.max * m.gpus for m in fleet.models}
    total = sum(weights.values()) or 1
    return {m.name: max(m.replicas.min, min(m.replicas.max, nodes * per_node * weights[m.name] // total // m.gpus))
            for m in fleet.models}


def schedule_delta(old: list[dict], new: list[dict]) -> list[dict]:
    """What a change does to each pool's week, from the two plans' `pools`: the pools whose ledger changed, with
    each fleet's GPU-hours a week, the idle GPU-hours and the hours whose shares differ, old -> new."""
    before = {p["pool"]: p for p in old}
    out = []
    for p in new:
        q = before.get(p["pool"])
        if q is None or q["runs"] == p["runs"] and q["nodes"] == p["nodes"]:
            continue
        fleets = sorted(set(p["fleets"]) | set(q["fleets"]))

        def hourly(plan: dict) -> list[dict]:
            return [r["nodes"] for r in plan["runs"] for _ in range(r["hours"])]

        a, b = hourly(q), hourly(p)
        moved = sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))
        out.append({
            "hours_changed": moved, "hours": p["hours"],
            "pool": p["pool"], "time_zone": p["time_zone"], "week": p["week"],
            "gpu_hours": {f: {"old": q["fleets"].get(f, {}).get("gpu_hours", 0),
                              "new": p["fleets"].get(f, {}).get("gpu_hours", 0)} for f in fleets},
            "idle_gpu_hours": {"old": q["idle_gpu_hours"], "new": p["idle_gpu_hours"]},
            "runs": {"old": [r for r in q["runs"] if r not in p["runs"]], "new": [r for r in p["runs"] if r not in q["runs"]]},
        })
    return out


def schedule_text(item: dict, replaced: int | None) -> str:
    """One line of a diff's summary for a pool whose schedule changed."""
    def signed(a: int, b: int) -> str:
        return f"{a:,} -> {b:,} ({b - a:+,})"

    parts = [f"{f} {signed(v['old'], v['new'])}" for f, v in item["gpu_hours"].items()]
    parts.append(f"idle {signed(item['idle_gpu_hours']['old'], item['idle_gpu_hours']['new'])}")
    what = ("nothing replaced" if replaced == 0 else "cloud resources not compared" if replaced is None
            else f"{replaced} cloud resources replaced")
    return (f"pool {item['pool']}: schedule change, {what}; {item['hours_changed']} of {item['hours']} hours of the "
            f"week of {item['week']} ({item['time_zone']}) change hands; GPU-hours a week: " + ", ".join(parts))


NODE_READY_S = 480
"""From the node group's scheduled action to a GPU node that takes pods, when the blueprint does not say
(`node_ready_minutes`): 8 minutes. EC2 launches the instance (pending -> running), it boots the EKS-optimized
NVIDIA AMI, nodeadm joins it to the cluster, and the NVIDIA device plugin advertises nvidia.com/gpu. A CPU instance
registers with its cluster 39 s after the request (c5.xlarge, awslabs/amazon-eks-ami#1099, AWS's own timing) to
70-80 s (karpenter-provider-aws#6128), and "GPU instance types often take much longer to boot within EC2" (the
same #1099); GPU instances were measured at "a 5-7 minute wait for an EC2 instance to spin up, and then another
minute or so before it's ready to accept tasks" (coiled/feedback#30), and a ParallelCluster Slurm node takes about
5 minutes from a job's submission to its start (aws-parallelcluster#4236, the maintainers' baseline). 8 minutes is
the upper end of the GPU figure; a p5.48xlarge's own launch time has not been measured here (no AWS account)."""

NODE_READY_SOURCE = "default: GPU instances 5-7 min to run + a minute to take pods, coiled/feedback#30; not measured on this instance type"
"""Where NODE_READY_S comes from, as the plan prints it beside the figure (DESIGN: every figure names its source)."""

IMAGE_GB = {"vllm/vllm-openai": 12.0}
"""The compressed size a node pulls of a model server image, by repository: "docker pull
vllm/vllm-openai:latest - the image is around 12 GB" (vllm-project/vllm#27154, October 2025, the month of the
pinned v0.11.0). An image of another repository is taken to be as large (they are built on it)."""

IMAGE_PULL_GB_PER_MIN = 2.5
"""How fast a fresh node pulls and unpacks an image without a pre-pull or lazy loading: "Standard Docker image
pulls of 15-20 GB can take 4-6 minutes per instance" (AWS Machine Learning Blog, "Reducing container cold start
times using SOCI index on DLAMI and DLC", 2026-06-03); the slow end, 15 GB in 6 minutes. The node groups pre-pull
the image from the kubelet's start on (fleetform/prepull.py), so the pull overlaps the node's join
(prepull.NODE_JOIN_S) and the replica's container, with its startup probe, starts when the rest has arrived."""

IMAGE_PULL_SOURCE = "vllm-project/vllm#27154, 2025-10; AWS ML Blog on SOCI, 2026-06-03"
"""Where IMAGE_GB and IMAGE_PULL_GB_PER_MIN come from, as the plan prints them."""

EKS_DRAIN_LIMIT_S = 300
"""How long EKS lets a managed node group's node drain before Auto Scaling terminates it anyway: "Before each
instance is terminated, Amazon EKS sends a signal to drain that node ... runs any configured preStop lifecycle
hooks, sends SIGTERM signals to the containers, then waits for the terminationGracePeriodSeconds ... If the node
hasn't been drained after 5 minutes, Amazon EKS lets Auto Scaling continue the forced termination of the instance"
(EKS User Guide, "Delete a managed node group"; the same lifecycle hook drains a scale-in, aws-node-termination-
handler#186, AWS's answer)."""

RELEASE_CLEANUP_S = 300
"""From a terminated instance to its capacity back in a Capacity Block: "When you stop or terminate an instance
in a Capacity Block, it takes several minutes to clean up your instance before you can launch another instance to
replace it. During this time, your instance will be in a stopping or shutting-down state" (EC2 User Guide, "Launch
instances using Capacity Blocks"). "Several minutes" read as 5; a blueprint that measured its own sets
`release_minutes`."""


EKS_DRAIN_SOURCE = "EKS User Guide, Delete a managed node group"
RELEASE_CLEANUP_SOURCE = "EC2 User Guide, Launch instances using Capacity Blocks: 'several minutes', read as 5"
"""Where EKS_DRAIN_LIMIT_S and RELEASE_CLEANUP_S come from, as the plan prints them."""


KEEPER_ROUND_S = 60
"""The keeper runs bin/pool-edge every minute (fleetform-keeper.timer): a lend's power-down starts up to this late."""


@frozen
class Handover:
    """The terms of a pool's warm-up lead and release lag, in seconds, each with where it comes from.

    Lead (a window opens): the node group's scheduled action asks for the nodes; each node launches, boots, joins
    EKS and advertises its GPUs (node_ready_s), pulls the model server's image (image_pull_s), and the replica loads
    its weights within its startup probe's budget (startup_s). Lag (a window closes): the node group's action
    shrinks the group at the hour; EKS drains each node (its pods' preStop hooks and grace, at most
    EKS_DRAIN_LIMIT_S: drain_s) and the terminated instance's capacity comes back to the Capacity Block or
    reservation minutes later (cleanup_s). The training fleet's lend ends the lag after the hour, so Slurm resumes
    no node into capacity still held (EC2 answers ReservationCapacityExceeded, not a code of the keeper's back-off: the
    node goes DOWN, its job is requeued, and the keeper's next round puts the node back to be launched again)."""

    node_ready_s: int
    node_ready_from: str
    image: str | None
    image_pull_s: int
    image_pull_from: str
    startup_s: int
    drain_s: int
    cleanup_s: int
    release_from: str
    overlap_s: int = 0  # of the pull, the part that runs while the node joins (the node group's pre-pull)

    @property
    def lead_min(self) -> int:
        """node ready + image pull - their overlap + startup: the pre-pull starts with the kubelet, so the node's
        join and the pull run side by side, and the replica starts after the later of the two."""
        return math.ceil((self.node_ready_s + self.image_pull_s - self.overlap_s + self.startup_s) / 60)

    @property
    def lend_min(self) -> int:
        """When a training fleet's lend starts, in minutes before the hour: the lead, and before it the lent nodes'
        release (bin/pool-edge powers them down in the keeper's next round, KEEPER_ROUND_S; their instances then hold
        the Capacity Block's slots for the clean-up, cleanup_s), so the node group's rise finds the capacity free."""
        return math.ceil((self.node_ready_s + self.image_pull_s - self.overlap_s + self.startup_s + KEEPER_ROUND_S
                          + self.cleanup_s) / 60)

    @property
    def lag_min(self) -> int:
        return math.ceil((self.drain_s + self.cleanup_s) / 60)


def _lead_fleets(pool: Pool, fleets) -> list:
    """The pool's inference fleets on Kubernetes: those whose node groups rise and fall with the windows."""
    return [f for f in fleets if pool.share(f.name) is not None and not f.training and f.kube is not None]


def _fall_evicts(pool: Pool, fleet) -> int:
    """The most pods of one model that a window's fall drains at once: the nodes the window adds above the floor, times
    the model's pods a node holds. Every model has a PodDisruptionBudget of maxUnavailable 1 (templates/k8s/pdb.yaml.j2)
    and a drain evicts through the eviction API, which honours it ("API-initiated eviction ... respects your configured
    PodDisruptionBudgets", Kubernetes docs, API-initiated Eviction): after the first eviction the replacement pod has no
    node to start on (the group is shrinking, and KEDA holds the window's replicas for its 300 s scale-down
    stabilization), so no second eviction is allowed and EKS terminates the node at its 5-minute cut (EKS_DRAIN_LIMIT_S)."""
    share = pool.share(fleet.name)
    devices = fleet.devices()
    if share is None or not share.windows or devices is None:
        return 0
    added = max(w.nodes for w in share.windows) - share.floor
    return max(added * max(1, int(devices[0]) // max(1, s.gpu_count)) for s in fleet.kube.servers)


def image_gb(image: str) -> float:
    """The pulled size of a model server image (IMAGE_GB by repository, else the vLLM image's)."""
    repository = image.rsplit("@", 1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    for prefix in ("docker.io/library/", "docker.io/"):
        repository = repository.removeprefix(prefix)
    return IMAGE_GB.get(repository, IMAGE_GB["vllm/vllm-openai"])


def handover(pool: Pool, fleets) -> Handover | None:
    """The terms of the pool's warm-up lead and release lag (Handover), from its inference fleets on Kubernetes
    and the blueprint's overrides; None when the pool has no such fleet (nothing rises early, nothing drains)."""
    servers = [s for f in _lead_fleets(pool, fleets) for s in f.kube.servers]
    if not servers:
        return None
    startup = max((p.period_s * p.failure_threshold for s in servers for p in s.probes if p.kind == "startup"), default=0)
    if pool.node_ready_min is not None:
        ready, ready_from = pool.node_ready_min * 60, "node_ready_minutes"
    else:
        ready, ready_from = NODE_READY_S, "default"
    image = max((s.image for s in servers), key=lambda i: (image_gb(i), i))
    if pool.image_pull_min is not None:
        pull, pull_from = pool.image_pull_min * 60, "image_pull_minutes"
    else:
        pull = math.ceil(image_gb(image) / IMAGE_PULL_GB_PER_MIN * 60)
        pull_from = f"{image_gb(image):g} GB at {IMAGE_PULL_GB_PER_MIN:g} GB/min"
    if pool.release_min is not None:
        drain, cleanup, release_from = 0, pool.release_min * 60, "release_minutes"
    else:
        drain = min(EKS_DRAIN_LIMIT_S, max(s.grace_s for s in servers))
        if any(_fall_evicts(pool, f) > 1 for f in _lead_fleets(pool, fleets)):
            drain = EKS_DRAIN_LIMIT_S  # each model's PodDisruptionBudget lets the drain evict one pod at a time
        # the clean-up is a Capacity Block's (or a reservation's) slot held by a shutting-down instance; an on-demand
        # pool is a count of nodes and a terminated instance holds no capacity a resume would need
        cleanup, release_from = (0 if pool.capacity_type == "on-demand" else RELEASE_CLEANUP_S), "default"
    # the node group pre-pulls the image from the kubelet's start (fleetform/prepull.py), unless ctr cannot (ECR)
    pulled = not prepull.PRIVATE_ECR.match(prepull.ctr_reference(image))
    overlap = min(prepull.NODE_JOIN_S, ready, pull) if pulled else 0
    return Handover(ready, ready_from, image, pull, pull_from, startup, drain, cleanup, release_from, overlap)


def warmup_minutes(pool: Pool, fleets) -> int:
    """The pool's warm-up lead in whole minutes (rounded up): node ready + image pull - the part of the pull the node
    group's pre-pull runs while the node joins + the longest startup probe
    budget (period x failure threshold, fleetform/k8s.py) of the pool's inference fleets on Kubernetes (Handover).
    The rise of an inference fleet's nodes (its node group's scheduled action, its KEDA cron trigger) and the
    training fleet's lend that frees those nodes start this much before the window opens, so the replicas are
    ready when it does; 0 when no fleet of the pool runs on Kubernetes. One lead for the whole pool: a lend frees
    nodes for whichever fleet's window opens. The ledger stays in whole hours."""
    terms = pool.handover if pool.handover is not None else handover(pool, fleets)
    return terms.lead_min if terms is not None else 0


def release_minutes(pool: Pool, fleets) -> int:
    """The pool's release lag in whole minutes (rounded up): how long after an inference fleet's share falls its
    nodes are drained, terminated and their capacity back in the pool (Handover); 0 without such a fleet."""
    terms = pool.handover if pool.handover is not None else handover(pool, fleets)
    return terms.lag_min if terms is not None else 0


@frozen
class ScalingAction:
    """A recurring scheduled action on the Auto Scaling group of an inference fleet's EKS managed node group
    (EC2 Auto Scaling PutScheduledUpdateGroupAction: Recurrence in Unix cron, 5 fields [Minute] [Hour]
    [Day_of_Month] [Month_of_Year] [Day_of_Week], in TimeZone, an IANA name; "When you specify a time zone that
    observes Daylight Saving Time (DST), the action automatically adjusts for DST", Amazon EC2 Auto Scaling User
    Guide, Scheduled scaling). At each moment the fleet's share of the pool changes, the group's minimum, desired
    capacity and maximum become the nodes the fleet then holds: the Cluster Autoscaler can neither take more of
    the pool than the share nor give back nodes the window holds. A rise starts the pool's warm-up lead early; a
    fall runs at the hour itself (the window is the inference fleet's to its end), and its nodes are back in the pool
    the release lag later (Pool.lag_min: EKS drains them, EC2 cleans the instances up), when training's lend ends."""

    name: str  # the scheduled action's name, unique in the group
    recurrence: str
    time_zone: str
    nodes: int  # min_size = desired_capacity = max_size
    rise: bool  # the fleet's share grows here (the lead applies) or shrinks
    lead_min: int  # minutes before the share changes (rises only)
    days: tuple[int, ...]  # local days of the change itself (0 = Monday), for the plan
    hour: int  # local hour of the change itself
    lag_min: int = 0  # falls: minutes after the change until the nodes given back are in the pool again


def scaling_actions(pool: Pool, fleet: str) -> tuple[ScalingAction, ...]:
    """The scheduled actions of a fleet's node group: one per local time of day (and direction) at which its share
    changes, over the days it changes then, from the ledger of a week without a clock change (the pattern in wall
    clock hours; AWS applies the zone's daylight-saving rules to each occurrence). Pure; () when the time zone is
    unknown or the fleet is not in the pool."""
    tz = zone(pool.time_zone)
    if tz is None or pool.share(fleet) is None or pool.week is None:
        return ()
    runs = ledger(pool, 1, _plain_week(pool, tz)).runs()
    groups: dict[tuple[int, int, bool], list[int]] = {}
    for index, (first, _, nodes) in enumerate(runs):
        before = runs[index - 1][2][fleet]  # index 0: the week's last run, the schedule repeats
        now = nodes[fleet]
        if now != before:
            groups.setdefault((first.local.hour, now, now > before), []).append(first.local.weekday())
    out = []
    for (hour, nodes, rise), days in sorted(groups.items(), key=lambda g: (min(g[1]), g[0])):
        lead = pool.lead_min if rise else 0
        minute = hour * 60 - lead
        shift, at = divmod(minute, 1440)
        name = (f"fleetform-{pool.name}-{fleet}-{'up' if rise else 'down'}-{nodes}-at-{at // 60:02d}{at % 60:02d}"
                f"-{''.join(DAYS[(d + shift) % 7][:2] for d in sorted(days))}")
        out.append(ScalingAction(name, _cron(minute, tuple(sorted(days))), pool.time_zone, nodes, rise, lead,
                                 tuple(sorted(days)), hour, 0 if rise else pool.lag_min))
    return tuple(out)


def lead_misses(pool: Pool, action: ScalingAction, year: int) -> list[tuple[date, int]]:
    """The days of `year` (local days of the share's change) on which a rising action, a cron line in local wall
    clock, does not fire `lead_min` real minutes before the change: its local time is skipped or repeated by a
    clock change between the two (a lead of 15 min before a 03:00 window in Berlin is 02:45, which the last Sunday
    of March does not have). Each day comes with the minutes the action fires after (+, a skipped hour: late) or
    before (-, a repeated hour read as its first occurrence: early) the lead's start. Read as Python reads a local
    time (fold=0); bin/pool-edge counts real minutes and never misses. Pure."""
    tz = zone(pool.time_zone)
    if tz is None or not action.rise or not action.lead_min:
        return []
    shift, at = divmod(action.hour * 60 - action.lead_min, 1440)
    out = []
    day = date(year, 1, 1)
    while day.year == year:
        if day.weekday() in action.days:
            wanted = _local(day, action.hour, tz) - timedelta(minutes=action.lead_min)
            fire_day = day + timedelta(days=shift)
            fired = datetime(fire_day.year, fire_day.month, fire_day.day, at // 60, at % 60, tzinfo=tz).astimezone(UTC)
            if fired != wanted:
                out.append((day, round((fired - wanted).total_seconds() / 60)))
        day += timedelta(days=1)
    return out


def lead_overlaps(pool: Pool, lenders: set[str], early: set[str]) -> list[tuple[datetime, datetime, dict]]:
    """The moments of a week without a clock change (UTC) at which the warm-up lead makes the fleets hold more nodes
    than the pool has: (the lead's start, the share change, nodes per fleet in between). During the lead a rising
    fleet of `early` (inference fleets on Kubernetes: scheduled actions and cron triggers) already holds its new
    share, a rising training fleet not yet (a lend ends the release lag after the hour), and a lender (a Slurm
    training fleet: bin/pool-edge lends a lead early) already gave its nodes up, while a falling inference fleet keeps
    its nodes until the change itself, as its scheduled action and KEDA's cron end say, and the release lag after it
    (Pool.lag_min: its nodes drain and terminate): one inference fleet's window opening as another's closes. Pure."""
    tz = zone(pool.time_zone)
    if tz is None or not (pool.lead_min or pool.lag_min) or pool.week is None:
        return []
    runs = ledger(pool, 1, _plain_week(pool, tz)).runs()
    out = []
    for index, (first, _, now) in enumerate(runs):
        before = runs[index - 1][2]
        if not any(now[f] > before[f] for f in now if f in early):
            continue
        held = {f: now[f] if (f in early and now[f] > before[f]) or (f in lenders and now[f] < before[f]) else before[f]
                for f in now}
        if sum(held.values()) > pool.nodes >= sum(now.values()):  # the lead's own (pool-overcommit has the rest)
            out.append((first.start - timedelta(minutes=pool.lead_min), first.start, held))
    return out
