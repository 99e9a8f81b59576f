"""The EKS side of a pool shared by time: the inference fleet's node group follows the windows by scheduled actions
on its Auto Scaling group (fleetform/pool.py scaling_actions, providers/aws/pool.py), with the pool's warm-up lead.

What AWS requires of a scheduled action is checked on the recorded plan (`aws_problems`), each rule with its
source: Amazon EC2 Auto Scaling API Reference, PutScheduledUpdateGroupAction: Recurrence "consists of five fields
separated by white spaces: [Minute] [Hour] [Day_of_Month] [Month_of_Year] [Day_of_Week]" (Unix cron, crontab(5)
ranges: minute 0-59, hour 0-23, day of week 0-7 with Sunday 0 or 7); TimeZone "Valid values are the canonical
names of the IANA time zones"; ScheduledActionName 1-255 characters; the User Guide (Scheduled scaling, "Create a
scheduled action"): "The desired capacity must be equal to or greater than the minimum group size, and equal to or
less than the maximum group size". A real account would also prove that AWS runs the actions at those local
times and that EKS keeps the sizes the actions set; neither can run here."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from conftest import ROOT
from fleetform import pool as pools
from fleetform.pipeline import check
from fleetform.render import render

HYBRID = ROOT / "blueprints/hybrid-pool.yaml"
SCHEDULE = "aws:autoscaling/schedule:Schedule"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
UTC = timezone.utc
WEEKDAYS = (0, 1, 2, 3, 4)

CRON_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _cron_field(text: str, low: int, high: int) -> set[int] | None:
    """The values of one crontab(5) field (`*`, numbers, ranges, lists), or None when it is not one."""
    if text == "*":
        return set(range(low, high + 1))
    out: set[int] = set()
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            return None
        first, last = int(match[1]), int(match[2] or match[1])
        if not low <= first <= last <= high:
            return None
        out |= set(range(first, last + 1))
    return out


def aws_problems(schedule: dict) -> list[str]:
    """What PutScheduledUpdateGroupAction would refuse or misread in one recorded Schedule's inputs."""
    inputs = schedule["inputs"]
    problems = []
    fields = inputs.get("recurrence", "").split()
    if len(fields) != 5 or any(_cron_field(f, lo, hi) is None for f, (lo, hi) in zip(fields, CRON_RANGES)):
        problems.append(f"recurrence {inputs.get('recurrence')!r} is not 5-field Unix cron")
    if pools.zone(inputs.get("timeZone", "")) is None:
        problems.append(f"time zone {inputs.get('timeZone')!r} is not an IANA name")
    if not 1 <= len(inputs.get("scheduledActionName", "")) <= 255:
        problems.append("scheduled action name not 1-255 characters")
    if not inputs.get("minSize", 0) <= inputs.get("desiredCapacity", 0) <= inputs.get("maxSize", 0):
        problems.append("desired capacity outside min..max")
    if not inputs.get("autoscalingGroupName"):
        problems.append("no Auto Scaling group")
    return problems


def fires(recurrence: str, tz: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """The UTC instants in [start, end) at which a 5-field cron line fires in a time zone, local wall clock read
    with fold=0 (a skipped local time maps past the jump). The minute and hour fields are single numbers here."""
    minute, hour, _, _, dows = recurrence.split()
    days = {d % 7 for d in _cron_field(dows, 0, 7)}
    out = []
    day = start.astimezone(tz).date() - timedelta(days=1)
    while day <= end.astimezone(tz).date():
        if (day.weekday() + 1) % 7 in days:
            moment = datetime(day.year, day.month, day.day, int(hour), int(minute), tzinfo=tz).astimezone(UTC)
            if start <= moment < end:
                out.append(moment)
        day += timedelta(days=1)
    return out


def _pool(shares, lead=0, tz="Europe/Berlin"):
    return pools.Pool("p", "p5.48xlarge", 8, "capacity-block", "cr-0123456789abcdef0", tz, pools.DEFAULT_WEEK,
                      tuple(shares), ("pools", 0), lead)


def _share(fleet, floor=0, windows=(), remainder=False):
    return pools.Share(fleet, floor, tuple(pools.Window(*w, ()) for w in windows), remainder, "finish", ())


@pytest.fixture(scope="module")
def recorded():
    from fleetform.plan import record

    model = check(HYBRID).model
    return model, record(model, render(model))


def test_the_node_group_follows_the_windows_under_the_mocks(recorded):
    """blueprints/hybrid-pool.yaml: two scheduled actions on the serve node group's Auto Scaling group (its name
    read from the node group's resources output): 6/6/6 nodes from 07:36 on weekdays (08:00 less the 24-minute
    lead), 1/1/1 from 20:00, in Europe/Berlin; each one passes what AWS requires."""
    model, resources = recorded
    schedules = sorted((r for r in resources if r["type"] == SCHEDULE), key=lambda r: r["inputs"]["recurrence"])
    assert [(s["inputs"]["recurrence"], s["inputs"]["timeZone"], s["inputs"]["minSize"], s["inputs"]["desiredCapacity"],
             s["inputs"]["maxSize"]) for s in schedules] == [
        ("0 20 * * 1,2,3,4,5", "Europe/Berlin", 1, 1, 1), ("36 7 * * 1,2,3,4,5", "Europe/Berlin", 6, 6, 6)]
    for s in schedules:
        assert s["parent"] == "serve" and s["inputs"]["autoscalingGroupName"] == "eks-serve-gpu-asg"
        assert s["deps"]["autoscalingGroupName"] == [f"{NODE_GROUP}::serve-gpu"]
        assert aws_problems(s) == []
    assert len({s["inputs"]["scheduledActionName"] for s in schedules}) == 2
    # negative controls: a seconds field (six fields), a zone that is not IANA, a desired size above the maximum
    for key, value in (("recurrence", "0 47 7 * * 1-5"), ("timeZone", "CET+1"), ("desiredCapacity", 7),
                       ("recurrence", "47 24 * * 1")):
        broken = copy.deepcopy(schedules[1])
        broken["inputs"][key] = value
        assert aws_problems(broken), (key, value)
    # no other blueprint's node group gets an action, and the reference plan's groups keep their own sizes
    assert model.pools[0].lead_min == 24


def test_a_later_pulumi_up_leaves_the_pooled_group_sizes_to_the_schedule(recorded):
    """EKS reports the Auto Scaling group's sizes as the node group's, and an update sends the whole scaling_config
    (terraform-provider-aws node_group.go): the pooled group ignores minimum, maximum and desired size, the other
    node groups only the desired size (the Cluster Autoscaler's)."""
    _, resources = recorded
    groups = {r["name"]: r for r in resources if r["type"] == NODE_GROUP}
    assert groups["serve-gpu"]["options"]["ignoreChanges"] == [
        "scalingConfig.desiredSize", "scalingConfig.maxSize", "scalingConfig.minSize"]
    assert groups["serve-gpu"]["inputs"]["scalingConfig"] == {"desiredSize": 1, "maxSize": 6, "minSize": 1}
    assert groups["eks-system"]["options"]["ignoreChanges"] == ["scalingConfig.desiredSize"]


def test_actions_fire_a_lead_before_the_ledger_rises_in_every_week_of_a_year():
    """Over all 52 weeks of 2026 in Berlin (both clock changes): each rise action fires exactly `lead` minutes
    before the fleet's share rises in the ledger, each fall action when it falls, and at no other time."""
    pool = _pool([_share("serve", 1, [(WEEKDAYS, 8, 20, 6)]), _share("train", 2, remainder=True)], lead=13)
    actions = pools.scaling_actions(pool, "serve")
    tz = ZoneInfo(pool.time_zone)
    week, weeks = date(2026, 1, 5), 0
    while week.year == 2026:
        start, end = pools.week_bounds(week, tz)
        led = pools.ledger(pool, 8, week)
        rises, falls = [], []
        for before, hour in zip(led.hours, led.hours[1:]):
            if hour.nodes["serve"] != before.nodes["serve"]:
                (rises if hour.nodes["serve"] > before.nodes["serve"] else falls).append(hour.start)
        got_rises = sorted(m for a in actions if a.rise for m in fires(a.recurrence, tz, start - timedelta(hours=1), end))
        got_falls = sorted(m for a in actions if not a.rise for m in fires(a.recurrence, tz, start, end))
        assert got_rises == [r - timedelta(minutes=13) for r in rises], week
        assert got_falls == falls, week
        week += timedelta(days=7)
        weeks += 1
    assert weeks == 52


def test_a_lead_before_midnight_moves_to_the_day_before():
    """A window opening Monday 00:00 with a 30-minute lead: the action runs Sunday 23:30 (cron day 0, the week
    before). A Sunday evening window running into Monday's: the rise at Sunday 17:30, the fall from 3 to 2 nodes at
    Monday 00:00 (Sunday's 24:00, cron day 1) with no lead, the end at 06:00."""
    pool = _pool([_share("serve", 0, [((0,), 0, 6, 2)]), _share("train", 0, remainder=True)], lead=30)
    assert {(a.recurrence, a.nodes, a.rise) for a in pools.scaling_actions(pool, "serve")} == {
        ("30 23 * * 0", 2, True), ("0 6 * * 1", 0, False)}
    pool = _pool([_share("serve", 0, [((0,), 0, 6, 2), ((6,), 18, 24, 3)]), _share("train", 0, remainder=True)], lead=30)
    assert {(a.recurrence, a.nodes, a.rise) for a in pools.scaling_actions(pool, "serve")} == {
        ("30 17 * * 0", 3, True), ("0 0 * * 1", 2, False), ("0 6 * * 1", 0, False)}


def test_a_lead_into_the_skipped_hour_of_spring():
    """A window opening Sunday 03:00 in Berlin with a 15-minute lead: its action is 02:45 local, which does not exist
    on the last Sunday of March (the clock jumps from 02:00 to 03:00). Read with fold=0 that instant is 03:45 CEST,
    after the window opened: the one occurrence of the year that misses its lead. bin/pool-edge counts its lead in
    real minutes and is not affected (README, Pools)."""
    pool = _pool([_share("serve", 0, [((6,), 3, 9, 2)]), _share("train", 0, remainder=True)], lead=15)
    (rise,) = [a for a in pools.scaling_actions(pool, "serve") if a.rise]
    assert rise.recurrence == "45 2 * * 0"
    tz = ZoneInfo("Europe/Berlin")
    spring = fires(rise.recurrence, tz, datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 3, 30, tzinfo=UTC))
    opens = datetime(2026, 3, 29, 3, tzinfo=tz).astimezone(UTC)
    assert spring == [datetime(2026, 3, 29, 1, 45, tzinfo=UTC)] and spring[0] > opens
    summer = fires(rise.recurrence, tz, datetime(2026, 4, 5, tzinfo=UTC), datetime(2026, 4, 6, tzinfo=UTC))
    assert summer == [datetime(2026, 4, 5, 3, 0, tzinfo=tz).astimezone(UTC) - timedelta(minutes=15)]


def test_the_lead_is_node_ready_image_pull_and_startup_budget():
    """warmup_minutes: node ready (8 min, NODE_READY_S) + the image's pull (vllm/vllm-openai, 12 GB at 2.5 GB a
    minute: 288 s) - the part of the pull the node group's pre-pull runs while the node joins (2 min,
    prepull.NODE_JOIN_S: it starts with the kubelet) + the longest startup probe budget of the pool's inference
    fleets (760 s), rounded up: 1,408 s -> 24 min (26 min without the pre-pull). Before this the lead was the probe
    budget alone (13 min): the node group's action asked for nodes that were not even running when the window
    opened. A pool without inference fleets on Kubernetes has none."""
    model = check(HYBRID).model
    (pool,) = model.pools
    serve = next(f for f in model.fleets if f.name == "serve")
    (startup,) = [p for s in serve.kube.servers for p in s.probes if p.kind == "startup"]
    assert startup.period_s * startup.failure_threshold == 760
    terms = pool.handover
    assert (terms.node_ready_s, terms.image, terms.image_pull_s, terms.startup_s) == (480, "vllm/vllm-openai:v0.11.0", 288, 760)
    assert terms.overlap_s == 120
    assert terms.lead_min == pools.warmup_minutes(pool, model.fleets) == 24
    # an image in private ECR is not pre-pulled (ctr has no credentials for it): the pull follows the join whole
    serve_ecr = replace(serve, kube=replace(serve.kube, servers=tuple(
        replace(s, image="123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-openai:v0.11.0") for s in serve.kube.servers)))
    private = pools.handover(pool, [serve_ecr])
    assert (private.overlap_s, private.lead_min) == (0, 26)
    assert pools.warmup_minutes(replace(pool, handover=None), [f for f in model.fleets if f.training]) == 0
    assert pools.handover(pool, [f for f in model.fleets if f.training]) is None


def test_the_blueprint_overrides_each_term(write):
    """node_ready_minutes, image_pull_minutes (0: the node image holds it) and release_minutes replace the defaults;
    the startup probe budget stays the model's own."""
    text = HYBRID.read_text().replace("    time_zone: Europe/Berlin\n", "    time_zone: Europe/Berlin\n"
                                      "    node_ready_minutes: 15\n    image_pull_minutes: 0\n    release_minutes: 12\n")
    model = check(write(text)).model
    (pool,) = model.pools
    assert (pool.handover.node_ready_s, pool.handover.image_pull_s, pool.handover.startup_s) == (900, 0, 760)
    assert (pool.lead_min, pool.lag_min) == (28, 12)  # 1,660 s -> 28 min
    serve = next(f for f in model.fleets if f.name == "serve")
    assert {a.recurrence for a in serve.pool_scaling} == {"32 7 * * 1,2,3,4,5", "0 20 * * 1,2,3,4,5"}
    train = next(f for f in model.fleets if f.name == "train")
    # training's lend starts before the rise by a keeper round and the clean-up, here the measured release: 1,660 s
    # + 60 s + 720 s -> 41 min
    assert (train.pool_edge.warmup_minutes, train.pool_edge.release_minutes) == (41, 12)


def test_the_release_lag_is_the_drain_and_the_instance_clean_up():
    """release_minutes: the drain + the Capacity Block's clean-up (300 s). serve's window falls from 6 nodes to 1, so
    its drain evicts 40 pods (8 a node) through a PodDisruptionBudget of maxUnavailable 1: one at a time, the next
    only once the replacement is ready, which has no node to start on; EKS cuts the drain at 5 minutes
    (EKS_DRAIN_LIMIT_S) -> 10 min. A fall that drains one pod of each model waits only the pods' termination grace
    (10 s endpoint grace + 120 s drain + 30 s exit: 160 s), and that counts at most EKS_DRAIN_LIMIT_S."""
    model = check(HYBRID).model
    (pool,) = model.pools
    assert (pool.handover.drain_s, pool.handover.cleanup_s, pool.lag_min) == (300, 300, 10)
    serve = next(f for f in model.fleets if f.name == "serve")
    # one node above the floor, one pod of 8 GPUs on it: one eviction, the grace alone
    whole = replace(serve, kube=replace(serve.kube, servers=tuple(replace(s, gpu_count=8) for s in serve.kube.servers)))
    one = replace(pool, handover=None, shares=tuple(
        replace(s, windows=tuple(replace(w, nodes=s.floor + 1) for w in s.windows)) if s.fleet == "serve" else s
        for s in pool.shares))
    assert pools.handover(one, [whole]).drain_s == 160
    assert pools.handover(replace(pool, handover=None), [whole]).drain_s == 300  # 5 nodes of one pod each
    slow = replace(serve, kube=replace(serve.kube, servers=tuple(replace(s, grace_s=900) for s in serve.kube.servers)))
    assert pools.handover(replace(pool, handover=None), [slow]).drain_s == pools.EKS_DRAIN_LIMIT_S == 300
    assert pools.release_minutes(replace(pool, handover=None), [slow]) == 10


def test_image_sizes_by_repository():
    assert pools.image_gb("vllm/vllm-openai:v0.11.0") == pools.image_gb("docker.io/vllm/vllm-openai@sha256:ab") == 12.0
    assert pools.image_gb("registry.example.com:5000/team/vllm:v1") == 12.0  # unknown: as large as the vLLM image


def test_the_plan_lists_the_actions_and_the_lead():
    from fleetform.commands.plan import build, text_lines

    _, (data, _, _) = build(str(HYBRID), resources=False)
    (pool,) = data["pools"]
    assert pool["warmup_lead_minutes"] == 24 and pool["release_lag_minutes"] == 10
    assert pool["handover"] == {
        "node_ready_s": 480, "node_ready_from": "default", "image": "vllm/vllm-openai:v0.11.0", "image_pull_s": 288,
        "image_pull_from": "12 GB at 2.5 GB/min", "startup_s": 760, "overlap_s": 120, "lead_minutes": 24,
        "lend_minutes": 30, "drain_s": 300, "cleanup_s": 300, "release_from": "default", "lag_minutes": 10}
    assert pool["scaling_actions"] == [
        {"fleet": "serve", "name": "fleetform-p5-block-serve-up-6-at-0736-motuwethfr", "recurrence": "36 7 * * 1,2,3,4,5",
         "time_zone": "Europe/Berlin", "min_size": 6, "desired_capacity": 6, "max_size": 6, "lead_minutes": 24,
         "lag_minutes": 0, "change": "Mon-Fri 08:00"},
        {"fleet": "serve", "name": "fleetform-p5-block-serve-down-1-at-2000-motuwethfr", "recurrence": "0 20 * * 1,2,3,4,5",
         "time_zone": "Europe/Berlin", "min_size": 1, "desired_capacity": 1, "max_size": 1, "lead_minutes": 0,
         "lag_minutes": 10, "change": "Mon-Fri 20:00"}]
    markdown = "\n".join(text_lines(data, True))
    assert "| serve | Mon-Fri 08:00 | 36 7 * * 1,2,3,4,5 | Europe/Berlin | 6/6/6 | 24 min early |" in markdown
    assert "| serve | Mon-Fri 20:00 | 0 20 * * 1,2,3,4,5 | Europe/Berlin | 1/1/1 | nodes back 10 min after |" in markdown
    # the arithmetic, term by term, each default figure with its source (DESIGN: every figure fleetform prints names its
    # source and date)
    assert ("warm-up lead: 24 min = node ready 8 min (launch, boot, join EKS, GPUs advertised; default: GPU instances "
            "5-7 min to run + a minute to take pods, coiled/feedback#30; not measured on this instance type) + image pull "
            "4 min 48 s (vllm/vllm-openai:v0.11.0, 12 GB at 2.5 GB/min: vllm-project/vllm#27154, 2025-10; AWS ML Blog on "
            "SOCI, 2026-06-03) - 2 min of the pull while the node joins (pre-pulled from the kubelet's start) + startup "
            "probe budget 12 min 40 s (weights loaded), rounded up: nodes and KEDA cron "
            "minimums rise that much before a window opens, and training's lends start 30 min before it (its lent nodes "
            "power down in the keeper's next round, up to 1 min, and their instances' clean-up takes 5 min before the "
            "pool's capacity takes the rise's launches)") in markdown
    assert ("release lag: 10 min (drain 5 min: the pods' termination grace, or EKS's 5-minute cut where a fall drains "
            "more pods of a model than its PodDisruptionBudget lets go at once (EKS User Guide, Delete a managed node "
            "group), + instance clean-up 5 min until the pool's capacity takes a launch again (EC2 "
            "User Guide, Launch instances using Capacity Blocks: 'several minutes', read as 5))") in markdown


def test_a_lead_across_a_clock_change_is_a_finding(write):
    """pool-inference-warmup also names the day a rising action misses its lead (lead_misses): a Sunday window at
    03:00 in Berlin rises at 02:45, which 29 March 2026 skips and 25 October repeats (read as its first, summer
    time, occurrence: an hour and 15 minutes early). The example's 08:00 windows never miss."""
    pool = _pool([_share("serve", 0, [((6,), 3, 9, 2)]), _share("train", 0, remainder=True)], lead=15)
    (rise,) = [a for a in pools.scaling_actions(pool, "serve") if a.rise]
    assert pools.lead_misses(pool, rise, 2026) == [(date(2026, 3, 29), 60), (date(2026, 10, 25), -60)]
    model = check(HYBRID).model
    serve = next(f for f in model.fleets if f.name == "serve")
    assert all(pools.lead_misses(model.pools[0], a, 2026) == [] for a in serve.pool_scaling)
    text = HYBRID.read_text().replace('{days: [mon, tue, wed, thu, fri], start: "08:00", end: "20:00", nodes: 6}',
                                      '{days: [sun], start: "03:00", end: "20:00", nodes: 6}')
    result = check(write(text))
    (finding,) = [f for f in result.findings if f.rule == "pool-inference-warmup"]
    assert ("rises at '36 2 * * 0' (Europe/Berlin), 24 min before its window, and a clock change can fall between "
            "the two: they rise on Sun 2026-03-29 60 min late") in finding.message


def test_a_lead_over_another_inference_window_is_an_overlap():
    """lead_overlaps: a training fleet lends a lead early, so the example's 08:00 handover stays within the pool;
    two inference fleets handing over at 14:00 both hold their nodes from 13:47 (12 of 8 nodes); a training
    fleet taking nodes back at 20:00 rises at the hour itself (its lend ends then), never a lead early."""
    shares = [_share("serve", 1, [(WEEKDAYS, 8, 14, 5)]), _share("chat", 1, [(WEEKDAYS, 14, 20, 5)]),
              _share("train", 2, remainder=True)]
    pool = _pool(shares, lead=13)
    ((begin, change, held),) = {(b, c, tuple(h.items())) for b, c, h in pools.lead_overlaps(pool, {"train"}, {"serve", "chat"})
                                if b.astimezone(ZoneInfo("Europe/Berlin")).weekday() == 0}
    assert dict(held) == {"serve": 5, "chat": 5, "train": 2} and change - begin == timedelta(minutes=13)
    assert change.astimezone(ZoneInfo("Europe/Berlin")).hour == 14
    assert len(pools.lead_overlaps(pool, {"train"}, {"serve", "chat"})) == 5  # one a weekday
    assert pools.lead_overlaps(_pool(shares, lead=0), {"train"}, {"serve", "chat"}) == []
    hybrid = _pool([_share("serve", 1, [(WEEKDAYS, 8, 20, 6)]), _share("train", 2, remainder=True)], lead=13)
    assert pools.lead_overlaps(hybrid, {"train"}, {"serve"}) == []
    # a training fleet that did not lend early (no bin/pool-edge) would overlap at 08:00
    assert len(pools.lead_overlaps(hybrid, set(), {"serve"})) == 5


def test_a_changed_action_is_made_again_not_updated_in_place(recorded, write):
    """An update of a recurring scheduled action sends the StartTime the provider stored at creation (AWS
    computed it: the first occurrence), so once that has passed AWS refuses it ("Given start time is in the past")
    or runs the action at the old time: terraform-provider-aws resourceSchedulePut (`d.GetOk("start_time")`),
    issues hashicorp/terraform-provider-aws#38983 and #41200, pulumi/pulumi-aws#2473. The action's name carries
    its time, days and sizes, so only a change of the pool's time zone reaches an existing action: it is replaced,
    the old one deleted first (both have one name on one group, and PutScheduledUpdateGroupAction is an upsert that
    keeps an unspecified StartTime), so AWS computes the first occurrence in the new zone."""
    from fleetform.changes import compare
    from fleetform.plan import record

    _, resources = recorded
    schedules = [r for r in resources if r["type"] == SCHEDULE]
    assert schedules and all(s["options"]["deleteBeforeReplace"] and "timeZone" in s["options"]["replaceOnChanges"]
                             for s in schedules)
    moved = check(write(HYBRID.read_text().replace("time_zone: Europe/Berlin", "time_zone: Europe/London"))).model
    changes = compare(resources, record(moved, render(moved)))
    assert sorted(c.action for c in changes if c.type == SCHEDULE) == ["replace", "replace"]


def test_a_lead_miss_says_whether_the_nodes_rise_late_or_early(write):
    """A clock change between a rising action and its window makes the nodes rise late (the skipped hour: after the
    window opened) or early (the repeated hour, read as its first occurrence: while training still holds the
    nodes). In Sydney the year's first miss is April's repeated hour, so the finding must not call it a rise
    without the lead; lead_misses gives each day with the minutes the action fires off its lead."""
    sydney = _pool([_share("serve", 0, [((6,), 3, 9, 2)]), _share("train", 0, remainder=True)], lead=15,
                   tz="Australia/Sydney")
    (rise,) = [a for a in pools.scaling_actions(sydney, "serve") if a.rise]
    assert pools.lead_misses(sydney, rise, 2026) == [(date(2026, 4, 5), -60), (date(2026, 10, 4), 60)]
    text = (HYBRID.read_text().replace("time_zone: Europe/Berlin", "time_zone: Australia/Sydney")
            .replace('{days: [mon, tue, wed, thu, fri], start: "08:00", end: "20:00", nodes: 6}',
                     '{days: [sun], start: "03:00", end: "20:00", nodes: 6}'))
    (finding,) = [f for f in check(write(text)).findings if f.rule == "pool-inference-warmup"]
    assert ("they rise on Sun 2026-04-05 60 min early, while training still holds the nodes, and on Sun 2026-10-04 "
            "60 min late, after the window opened") in finding.message


PLAN_GOLDEN = ROOT / "tests/golden/plan-pools"


@pytest.mark.parametrize("markdown", [True, False], ids=["markdown", "text"])
def test_the_plans_pool_section_matches_its_golden(markdown):
    """The pool section of `fleetform plan blueprints/hybrid-pool.yaml` (ledger, totals, the lead's and the lag's
    arithmetic, the scheduled actions) is kept in tests/golden/plan-pools/ and reviewed when it changes;
    FLEETFORM_UPDATE_GOLDEN=1 rewrites it."""
    import os

    from fleetform.commands.plan import _table, build
    from fleetform.pool import plan_lines

    _, (data, _, _) = build(str(HYBRID), resources=False)
    text = "\n".join(plan_lines(data["pools"], markdown, _table)).strip("\n") + "\n"
    golden = PLAN_GOLDEN / f"hybrid-pool.{'md' if markdown else 'txt'}"
    if os.environ.get("FLEETFORM_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def test_an_overlap_lasts_from_the_lead_to_the_lag():
    """pool-warmup-overlap on two inference fleets handing over at 14:00 (corpus 461): chat's nodes rise from 13:36
    (the 24-minute lead) and serve's are gone only at 14:10 (the 10-minute release lag), so the finding spans both
    and its hint leaves lead plus lag between the windows."""
    (finding,) = [f for f in check(ROOT / "tests/corpus/461-pool-warmup-overlap.yaml").findings
                  if f.rule == "pool-warmup-overlap"]
    assert finding.message.startswith("from Mon 13:36 to 14:10 (Europe/Berlin) the fleets of pool 'p5-block' hold 12 nodes")
    assert "(its nodes are back 10 min after it closes at 14:00)" in finding.message
    assert finding.hint.startswith("leave 34 minutes between the two windows")
