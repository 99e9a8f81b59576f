"""Pools shared by time (fleetform/pool.py, fleetform/rules/pool.py): the ledger is a pure function of the pool
and the week, checked hour by hour over Europe/Berlin's clock changes (the last Sundays of March and October,
EU Directive 2000/84/EC: 01:00 UTC) and over windows that touch; the rules fire on the schedules they name."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone

import pytest

from conftest import ROOT, run_cli
from fleetform import pool as pools
from fleetform.catalog import load_catalog
from fleetform.commands.plan import build, text_lines
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.rules import run

HYBRID = ROOT / "blueprints/hybrid-pool.yaml"
UTC = timezone.utc


def _pool(shares, nodes=8, tz="Europe/Berlin", week=pools.DEFAULT_WEEK):
    return pools.Pool("p", "p5.48xlarge", nodes, "capacity-block", "cr-0123456789abcdef0", tz, week, tuple(shares), ("pools", 0))


def _share(fleet, floor=0, windows=(), remainder=False, on_window="finish"):
    return pools.Share(fleet, floor, tuple(pools.Window(*w, ()) for w in windows), remainder, on_window, ())


WEEKDAYS = (0, 1, 2, 3, 4)
HYBRID_SHARES = [_share("serve", 0, [(WEEKDAYS, 8, 20, 6)]), _share("train", 2, remainder=True)]


def test_the_example_week_has_168_hours_and_the_issues_arithmetic():
    led = pools.ledger(_pool(HYBRID_SHARES), 8)
    assert len(led.hours) == 168
    # weekdays 08:00-20:00: serve 6 nodes, 5 x 12 h; training holds the rest of every hour
    assert led.gpu_hours("serve") == 5 * 12 * 6 * 8 == 2880
    assert led.gpu_hours("train") == (168 * 8 - 5 * 12 * 6) * 8 == 7872
    assert led.idle_gpu_hours == 0
    assert (led.peak("serve"), led.peak("train")) == (6, 8)
    monday = [h for h in led.hours if h.local.weekday() == 0]
    assert [h.nodes["serve"] for h in monday] == [0] * 8 + [6] * 12 + [0] * 4
    assert [h.nodes["train"] for h in monday] == [8] * 8 + [2] * 12 + [8] * 4
    # January: Berlin is UTC+1, so the window opens at 07:00 UTC
    assert monday[8].start == datetime(2026, 1, 5, 7, tzinfo=UTC)


@pytest.mark.parametrize("week, hours, opens_utc", [
    (date(2026, 3, 23), 167, 7),  # clocks go forward on Sunday 29 March: the week is an hour short; weekdays still CET
    (date(2026, 3, 30), 168, 6),  # the week after: CEST, the window opens at 06:00 UTC
    (date(2026, 10, 19), 169, 6),  # clocks go back on Sunday 25 October: an hour more; weekdays still CEST
    (date(2026, 10, 26), 168, 7),  # CET again
])
def test_the_ledger_over_berlins_clock_changes(week, hours, opens_utc):
    led = pools.ledger(_pool(HYBRID_SHARES), 8, week)
    assert len(led.hours) == hours
    assert led.gpu_hours("serve") == 2880  # the weekday window never meets the Sunday change
    assert led.gpu_hours("train") == (hours * 8 - 360) * 8
    first = next(h for h in led.hours if h.nodes["serve"])
    assert first.start == datetime(week.year, week.month, week.day, opens_utc, tzinfo=UTC)
    assert first.local.hour == 8


def test_a_window_over_the_changed_night_lasts_what_the_clock_says():
    """Sunday 01:00-04:00 local: 2 real hours when 02:00 is skipped (March), 4 when 02:00-03:00 comes twice (October)."""
    shares = [_share("serve", 0, [((6,), 1, 4, 3)]), _share("train", 0, remainder=True)]
    spring = pools.ledger(_pool(shares), 8, date(2026, 3, 23))
    autumn = pools.ledger(_pool(shares), 8, date(2026, 10, 19))
    plain = pools.ledger(_pool(shares), 8, date(2026, 1, 5))
    assert (spring.gpu_hours("serve"), plain.gpu_hours("serve"), autumn.gpu_hours("serve")) == (2 * 24, 3 * 24, 4 * 24)
    (span,) = pools.intervals(pools.Window((6,), 1, 4, 3, ()), date(2026, 10, 19), pools.zone("Europe/Berlin"))
    assert span == (datetime(2026, 10, 24, 23, tzinfo=UTC), datetime(2026, 10, 25, 3, tzinfo=UTC))


def test_touching_windows_never_overlap():
    """Windows are half-open: one ending at 12:00 and one starting at 12:00, a night window 20:00-08:00 against a day
    window 08:00-20:00, and 24:00 against the next day's 00:00 share no instant."""
    shares = [_share("a", 0, [(WEEKDAYS, 8, 12, 4), (WEEKDAYS, 12, 20, 8), ((5,), 0, 24, 8)]),
              _share("b", 0, [((0, 1, 2, 3), 20, 8, 8), ((4,), 20, 24, 8), ((6,), 0, 24, 8), ((6,), 20, 8, 8)])]
    pool = _pool(shares)
    tz = pools.zone("Europe/Berlin")
    for week in [date(2026, 1, 5), date(2026, 3, 23), date(2026, 10, 19)]:
        assert pools.overcommit(pool, week, tz) is None
        led = pools.ledger(pool, 8, week)
        assert all(h.used <= 8 for h in led.hours)
    led = pools.ledger(pool, 8)
    assert [h.nodes["a"] for h in led.hours[:24]] == [0] * 8 + [4] * 4 + [8] * 8 + [0] * 4
    assert [h.nodes["b"] for h in led.hours[:24]] == [8] * 8 + [0] * 12 + [8] * 4  # Sunday night's reaches Monday
    saturday = led.hours[5 * 24:6 * 24]
    assert [h.nodes["a"] for h in saturday] == [8] * 24 and [h.nodes["b"] for h in saturday] == [0] * 24
    assert led.idle_gpu_hours == 4 * 4 * 5 * 8  # a's 4 nodes of 08:00-12:00 leave 4 idle


def test_a_night_window_over_a_weekend_day_overlaps():
    """Friday's 20:00-08:00 reaches into Saturday, where the other fleet holds every node from 00:00: found at
    Saturday 00:00 Berlin time (Friday 23:00 UTC)."""
    pool = _pool([_share("a", 0, [((5,), 0, 24, 8)]), _share("b", 0, [(WEEKDAYS, 20, 8, 8)])])
    moment, held = pools.overcommit(pool, date(2026, 1, 5), pools.zone("Europe/Berlin"))
    assert moment == datetime(2026, 1, 9, 23, tzinfo=UTC) and held == {"a": 8, "b": 8}
    wider = _pool([_share("a", 0, [(WEEKDAYS, 8, 13, 4)]), _share("b", 0, [(WEEKDAYS, 12, 14, 5)])])
    moment, held = pools.overcommit(wider, date(2026, 1, 5), pools.zone("Europe/Berlin"))
    assert moment == datetime(2026, 1, 5, 11, tzinfo=UTC) and held == {"a": 4, "b": 5}


def test_a_monday_morning_window_from_sunday_night_wraps_into_the_week():
    """The Sunday before the week: a window 22:00-06:00 on Sundays holds Monday 00:00-06:00 of this week."""
    led = pools.ledger(_pool([_share("a", 0, [((6,), 22, 6, 5)]), _share("b", 0, remainder=True)]), 8)
    assert [h.nodes["a"] for h in led.hours[:8]] == [5] * 6 + [0] * 2
    assert [h.nodes["a"] for h in led.hours[-3:]] == [0, 5, 5]
    assert led.gpu_hours("a") == 8 * 5 * 8


def test_the_ledger_is_pure():
    pool = _pool(HYBRID_SHARES)
    assert pools.ledger(pool, 8) == pools.ledger(pool, 8)
    assert pools.ledger(pool, 8, date(2026, 1, 7)) == pools.ledger(pool, 8, date(2026, 1, 5))  # any day of the week


def test_clock_change_weeks():
    assert pools.clock_change_weeks(2026, pools.zone("Europe/Berlin")) == [date(2026, 3, 23), date(2026, 10, 19)]
    assert pools.clock_change_weeks(2026, pools.zone("UTC")) == []


@pytest.mark.parametrize("value, minutes", [
    ("11:00:00", 660), (90, 90), ("90", 90), ("1-12", 2160), ("2-00:30", 2910), ("7-00:00:00", 10080),
    ("30:30", 30.5), ("UNLIMITED", None), (None, None)])
def test_slurm_minutes(value, minutes):
    assert pools.slurm_minutes(value) == minutes


def test_the_example_validates_clean_and_plans_its_ledger():
    result = check(HYBRID)
    assert result.ok, [f.to_text() for f in result.findings]
    assert not [f for f in result.findings if f.rule.startswith("pool-")], [f.to_text() for f in result.findings]
    _, (data, _files, _findings) = build(str(HYBRID), resources=False)
    (p,) = data["pools"]
    # serve: 6 nodes 5 x 12 h, its floor of 1 the other 108 h; train: the rest of 8 nodes
    assert p["hours"] == 168 and p["idle_gpu_hours"] == 0
    assert p["fleets"]["serve"] == {"gpu_hours": (360 + 108) * 8, "node_hours": 468, "peak_nodes": 6}
    assert p["fleets"]["train"] == {"gpu_hours": (1344 - 468) * 8, "node_hours": 876, "peak_nodes": 7}
    price = load_catalog().instance("p5.48xlarge").price_usd_hr
    assert p["separate_nodes"] == 13 and p["nodes"] == 8
    assert (p["usd_per_week"], p["separate_usd_per_week"]) == (round(8 * 168 * price, 2), round(13 * 168 * price, 2))
    md = "\n".join(text_lines(data, True))
    assert "```mermaid\ngantt\n" in md
    assert "| Mon 08:00 | 2026-01-05T07:00Z | 12 | 6 | 2 | 0 |" in md
    text = "\n".join(text_lines(data, False))
    assert "mermaid" not in text and "Pool p5-block: 8 x p5.48xlarge" in text


def test_the_chart_parses_with_mermaid():
    from test_diagram import assert_parses

    charts = {"hybrid": pools.gantt(pools.ledger(_pool(HYBRID_SHARES), 8)),
              "spring": pools.gantt(pools.ledger(_pool(HYBRID_SHARES), 8, date(2026, 3, 23))),
              "autumn": pools.gantt(pools.ledger(_pool(HYBRID_SHARES), 8, date(2026, 10, 19)))}
    assert_parses(charts)
    assert "  6 nodes :2026-01-05 08:00, 2026-01-05 20:00" in charts["hybrid"]


def _variant(write, old: str, new: str, count: int = 1):
    text = HYBRID.read_text()
    assert text.count(old) == count, old
    return check(write(text.replace(old, new)))


def _rules(result):
    return sorted({f.rule for f in result.findings})


def test_unknown_time_zone(write):
    result = _variant(write, "time_zone: Europe/Berlin", "time_zone: Europe/Berln")
    (finding,) = [f for f in result.findings if f.rule == "pool-time-zone"]
    assert finding.severity.value == "error" and "did you mean 'Europe/Berlin'?" in finding.to_text()
    assert ":30:16:" in finding.to_text() or "time_zone" in finding.to_text()


def test_overcommit_names_the_hour(write):
    result = _variant(write, "floor: 2\n        remainder: true", "floor: 3\n        remainder: true")
    (finding,) = [f for f in result.findings if f.rule == "pool-overcommit"]
    assert "at Mon 2026-01-05 08:00 CET" in finding.message and "9 nodes (serve 6, train 3), more than its 8" in finding.message


def test_one_week_decides_overcommit_for_the_whole_year():
    """pool-overcommit checks the ledger week alone: a schedule that fits it fits every week of the year, the
    clock-change weeks included, and one that does not fits none (here for Berlin, New York and Sydney, whose
    clocks change on other days and in other directions)."""
    night = [((0, 1, 2, 3), 20, 8, 8), ((4,), 20, 24, 8), ((6,), 0, 24, 8), ((6,), 20, 8, 8)]
    fits = [_share("a", 0, [(WEEKDAYS, 8, 12, 4), (WEEKDAYS, 12, 20, 8), ((5,), 0, 24, 8)]), _share("b", 0, night)]
    clash = [_share("a", 0, [((5,), 0, 24, 8)]), _share("b", 0, [(WEEKDAYS, 20, 8, 8)])]
    for name in ("Europe/Berlin", "America/New_York", "Australia/Sydney"):
        tz = pools.zone(name)
        weeks = [date(2026, 1, 5) + timedelta(days=7 * n) for n in range(52)]
        assert set(pools.clock_change_weeks(2026, tz)) <= set(weeks) and len(pools.clock_change_weeks(2026, tz)) == 2
        assert all(pools.overcommit(_pool(fits, tz=name), week, tz) is None for week in weeks)
        assert all(pools.overcommit(_pool(clash, tz=name), week, tz) is not None for week in weeks)


def test_fleet_mismatches(write):
    result = _variant(write, "instance_type: p5.48xlarge\n    nodes: {min: 1, max: 6}",
                      "instance_type: p5e.48xlarge\n    nodes: {min: 1, max: 4}")
    messages = [f.message for f in result.findings if f.rule == "pool-fleets"]
    assert any("runs p5e.48xlarge, pool 'p5-block' has p5.48xlarge" in m for m in messages), messages
    assert any("sized 1-4 nodes, its share of pool 'p5-block' runs from 1 to 6" in m for m in messages), messages
    result = _variant(write, "      - fleet: serve\n", "      - fleet: serv\n")
    assert any("no fleet is named 'serv'" in f.message for f in result.findings)
    result = _variant(write, "reservation_id: cr-0123456789abcdef0\n    scheduler:\n      type: kubernetes",
                      "reservation_id: cr-0123456789abcdef1\n    scheduler:\n      type: kubernetes")
    assert any("not from pool 'p5-block'" in f.message for f in result.findings if f.rule == "pool-fleets")


def test_training_max_time_longer_than_the_night(write):
    result = _variant(write, 'max_time: "11:00:00"', "max_time: 7-00:00:00")
    (finding,) = [f for f in result.findings if f.rule == "pool-training-fit"]
    assert finding.severity.value == "warning"
    # 12 h less the next morning's lend, 30 min before 08:00 (the 24-minute warm-up lead, a keeper round and the
    # Capacity Block's clean-up of the lent instances: 07:30), and the 10-minute release lag (tonight's lend ends at
    # 20:10, when serve's nodes are gone)
    assert ("lets a job run 168 h, but fleet 'train' holds its lent nodes for as little as 11 h 20 min (from Mon "
            "2026-01-05 20:10 CET)") in finding.message
    # requeue with checkpoints every 30 minutes fits the 12-hour nights
    ok = _variant(write, "on_window: finish", "on_window: requeue")
    assert "pool-training-fit" not in _rules(ok)
    text = HYBRID.read_text().replace("on_window: finish", "on_window: requeue").replace("every_minutes: 30", "every_minutes: 720")
    late = check(write(text))
    assert any("checkpoints every 720 min" in f.message for f in late.findings if f.rule == "pool-training-fit")


def test_an_inference_window_shorter_than_startup():
    result = check(HYBRID)
    model, doc = result.model, result.document
    serve = next(f for f in model.fleets if f.name == "serve")
    assert not [f for f in run(model, doc) if f.rule == "pool-inference-warmup"]
    servers = tuple(replace(s, probes=tuple(replace(p, failure_threshold=4400) for p in s.probes)) for s in serve.kube.servers)
    slow = replace(serve, kube=replace(serve.kube, servers=servers))
    model = replace(model, fleets=tuple(slow if f.name == "serve" else f for f in model.fleets))
    (finding,) = [f for f in run(model, doc) if f.rule == "pool-inference-warmup"]
    assert "holds its window's nodes for 12 h from Mon 2026-01-05 08:00 CET" in finding.message


def test_an_inference_window_shorter_than_node_ready_pull_and_startup():
    """A replica of a window starts on a node the window's rise asks for: the node gets ready (8 min) and pulls the
    image (4 min 48 s) before the startup probe's budget runs. A budget of 11 h 55 min alone fits the 12-hour window;
    with the node's 12 min 48 s it does not (the rule compared the budget alone)."""
    result = check(HYBRID)
    model, doc = result.model, result.document
    serve = next(f for f in model.fleets if f.name == "serve")
    servers = tuple(replace(s, probes=tuple(replace(p, failure_threshold=4290) if p.kind == "startup" else p
                                            for p in s.probes)) for s in serve.kube.servers)
    slow = replace(serve, kube=replace(serve.kube, servers=servers))
    model = replace(model, fleets=tuple(slow if f.name == "serve" else f for f in model.fleets))
    (finding,) = [f for f in run(model, doc) if f.rule == "pool-inference-warmup"]
    assert ("no longer than its replicas may take to start on a new node (12 h 7 min 48 s: node ready and image "
            "pull 12 min 48 s, the startup probe's budget 11 h 55 min)") in finding.message, finding.message


def test_an_on_demand_pool_waits_no_capacity_clean_up():
    """The release lag's clean-up term is a Capacity Block's: "it takes several minutes to clean up your instance before
    you can launch another instance to replace it" (EC2 User Guide, Launch instances using Capacity Blocks). An
    on-demand pool is a count of nodes; training waits the drain alone (EKS's 5-minute cut: serve's PodDisruptionBudget
    lets its pods on the 5 nodes go one at a time), 5 min, not 10."""
    model = check(HYBRID).model
    (pool,) = model.pools
    assert pools.handover(pool, model.fleets).lag_min == 10
    on_demand = replace(pool, capacity_type="on-demand", reservation_id=None)
    terms = pools.handover(on_demand, model.fleets)
    assert (terms.drain_s, terms.cleanup_s, terms.lag_min) == (300, 0, 5)


def test_rules_are_listed():
    out = run_cli("rules").stdout
    for rule_id in ("pool-time-zone", "pool-fleets", "pool-overcommit", "pool-training-fit", "pool-inference-warmup",
                    "pool-inference-bounds", "pool-inference-autoscaler", "pool-warmup-overlap"):
        assert rule_id in out


def test_render_check_covers_the_example(tmp_path):
    """`render --check` on blueprints/hybrid-pool.yaml: clean after a render; a hand-edited bin/pool.json (the lent
    nodes) is stale."""
    out = tmp_path / "out"
    assert run_cli("render", str(HYBRID), "-o", str(out)).returncode == 0
    assert run_cli("render", str(HYBRID), "-o", str(out), "--check").returncode == 0
    pool_json = out / "train/slurm/bin/pool.json"
    pool_json.write_text(pool_json.read_text().replace("train-[003-007]", "train-[004-007]"))
    stale = run_cli("render", str(HYBRID), "-o", str(out), "--check")
    assert stale.returncode == 1 and "train/slurm/bin/pool.json" in stale.stdout + stale.stderr


def test_keda_cron_triggers_follow_the_windows(tmp_path):
    """The inference fleet's ScaledObject keeps its queue trigger and gains one cron trigger per window (KEDA's cron
    scaler: timezone, start, end, desiredReplicas, keda.sh/docs/2.17/scalers/cron), which the CRD schema of KEDA
    2.20.2 (tests/crd) and KEDA's own checks beyond it (tests/data/keda) accept, as kubernetes-validate and the
    schemas accept every other manifest of the example."""
    import jsonschema
    import yaml

    from test_k8s import ADMISSION, CRD_SCHEMAS, _validate

    model = check(HYBRID).model
    files = render(model)
    assert _validate(model, files) == 9  # the 9 manifests of serve/k8s/, kustomization.yaml aside
    (doc,) = yaml.safe_load_all(files["serve/k8s/qwen-7b-scaledobject.yaml"])
    prometheus, cron = doc["spec"]["triggers"]
    assert prometheus["type"] == "prometheus"
    # the trigger starts the warm-up lead (24 min: node ready, image pull less its pre-pulled part, startup probe budget) before 08:00, at the
    # node group's own rise: its pods never wait on a node not yet asked for, and rise no earlier than the nodes do
    assert cron == {"type": "cron", "metricType": "AverageValue", "metadata": {
        "timezone": "Europe/Berlin", "start": "36 7 * * 1,2,3,4,5", "end": "0 20 * * 1,2,3,4,5", "desiredReplicas": "48"}}
    (rise,) = [a for a in next(f for f in model.fleets if f.name == "serve").pool_scaling if a.rise]
    assert cron["metadata"]["start"] == rise.recurrence
    crd = jsonschema.Draft202012Validator(CRD_SCHEMAS["keda.sh_v1alpha1_ScaledObject"])
    admission = jsonschema.Draft202012Validator(ADMISSION["keda.sh_v1alpha1_ScaledObject"])
    assert list(crd.iter_errors(doc)) == list(admission.iter_errors(doc)) == []
    # negative controls, neither of them in the CRD's schema (KEDA v2.20.2): its webhook refuses a fallback whose
    # triggers are all cpu or memory (CheckFallbackValid in apis/keda/v1alpha1/scaledobject_types.go), and the cron
    # scaler parses five fields (pkg/scalers/cron_scaler.go)
    cpu_only = yaml.safe_load(files["serve/k8s/qwen-7b-scaledobject.yaml"])
    cpu_only["spec"]["triggers"] = [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]
    assert list(admission.iter_errors(cpu_only)) and not list(crd.iter_errors(cpu_only))
    seconds = yaml.safe_load(files["serve/k8s/qwen-7b-scaledobject.yaml"])
    seconds["spec"]["triggers"][1]["metadata"]["start"] = "0 0 8 * * 1-5"
    assert list(admission.iter_errors(seconds)) and not list(crd.iter_errors(seconds))


def test_cron_lines_cross_midnight_and_weekdays():
    assert pools._cron(8 * 60, (0, 1, 2, 3, 4)) == "0 8 * * 1,2,3,4,5"
    assert pools._cron(20 * 60 + 12 * 60, (0, 1, 2, 3, 4)) == "0 8 * * 2,3,4,5,6"  # 20:00 + 12 h: the next mornings
    assert pools._cron(-30, (0,)) == "30 23 * * 0"  # half an hour before Monday: Sunday 23:30
    assert pools._cron(24 * 60, (6,)) == "0 0 * * 1"  # Sunday's 24:00 is Monday 00:00


def test_cron_replicas_share_the_windows_gpus():
    """Two models on one fleet share a window's GPUs by their most replicas x tensor parallel, within their ranges."""
    from types import SimpleNamespace as NS

    models = (NS(name="big", replicas=NS(min=1, max=4), tensor_parallel=4, gpus=4),
              NS(name="small", replicas=NS(min=2, max=16), tensor_parallel=1, gpus=1))
    fleet = NS(name="serve", models=models, kube=NS(servers=()), devices=lambda: (8, 80.0, "H100"))
    pool = _pool([_share("serve", 1, [(WEEKDAYS, 8, 20, 4)]), _share("train", 0, remainder=True)])
    crons = pools.cron_windows(pool, fleet)
    # 4 nodes x 8 GPUs = 32; weights 16 and 16: 16 GPUs each -> big 4 replicas (TP 4), small 16
    assert [c.replicas for c in crons["big"]] == [4] and [c.replicas for c in crons["small"]] == [16]
    assert crons["big"][0].start == "0 8 * * 1,2,3,4,5" and crons["big"][0].end == "0 20 * * 1,2,3,4,5"


def test_diff_of_a_moved_window_is_a_schedule_change(tmp_path, write):
    """Moving the weekday window an hour later replaces nothing and hands 10 hours a week over (08:00-09:00 back
    to training, 20:00-21:00 to inference, five days); shrinking it moves GPU-hours from serving to training."""
    moved = write(HYBRID.read_text().replace('start: "08:00", end: "20:00", nodes: 6', 'start: "09:00", end: "21:00", nodes: 6'),
                  "moved.yaml")
    result = run_cli("diff", str(HYBRID), str(moved), "--format", "json")
    data = json.loads(result.stdout)
    (item,) = data["schedule"]
    assert data["summary"]["resources"]["replace"] == 0
    assert item["hours_changed"] == 10 and item["hours"] == 168
    assert item["gpu_hours"] == {"serve": {"old": 3744, "new": 3744}, "train": {"old": 7008, "new": 7008}}
    text = run_cli("diff", str(HYBRID), str(moved)).stdout
    assert "pool p5-block: schedule change, nothing replaced; 10 of 168 hours of the week of 2026-01-05" in text
    smaller = write(HYBRID.read_text().replace('end: "20:00", nodes: 6', 'end: "20:00", nodes: 5')
                    .replace("max: 48}", "max: 40}"), "smaller.yaml")  # 5 nodes, 40 GPUs: pool-inference-bounds
    (item,) = json.loads(run_cli("diff", str(HYBRID), str(smaller), "--format", "json").stdout)["schedule"]
    assert item["gpu_hours"]["serve"] == {"old": 3744, "new": 3744 - 5 * 12 * 8}
    assert item["gpu_hours"]["train"] == {"old": 7008, "new": 7008 + 5 * 12 * 8} and item["hours_changed"] == 60
    same = json.loads(run_cli("diff", str(HYBRID), str(HYBRID), "--format", "json").stdout)
    assert same["schedule"] == []


def test_time_zones_resolve_without_a_system_zone_database():
    """A machine or container without /usr/share/zoneinfo still knows Europe/Berlin: fleetform depends on the tzdata
    package, which zoneinfo falls back to (PEP 615); without it every pool would read as an unknown time zone."""
    import subprocess
    import sys

    probe = "from fleetform import pool; z = pool.zone('Europe/Berlin'); print(z is not None and z.key)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={**__import__("os").environ, "PYTHONTZPATH": "/nonexistent"})
    assert result.stdout.strip() == "Europe/Berlin", result.stderr


def test_inference_bounds_fit_the_pool_at_every_hour(write):
    """rule pool-inference-bounds: the example's bounds fit (48 GPUs at most = the window's 6 nodes; 2 replicas at
    least on the floor's 8 GPUs); a maximum beyond the fleet's peak and a minimum beyond its floor are errors."""
    assert "pool-inference-bounds" not in _rules(check(HYBRID))
    wide = _variant(write, "replicas: {min: 2, max: 48}", "replicas: {min: 2, max: 56}")
    (finding,) = [f for f in wide.findings if f.rule == "pool-inference-bounds"]
    assert finding.severity.value == "error"
    assert "may scale to 56 GPUs (replicas.max x tensor_parallel), but pool 'p5-block' gives the fleet at most 6 " \
           "nodes (48 GPUs)" in finding.message, finding.message
    high = _variant(write, "replicas: {min: 2, max: 48}", "replicas: {min: 9, max: 48}")
    (finding,) = [f for f in high.findings if f.rule == "pool-inference-bounds"]
    assert "at Mon 2026-01-05 00:00 CET fleet 'serve' keeps at least 9 GPUs busy" in finding.message, finding.message
    assert "gives it 1 nodes (8 GPUs) then" in finding.message
    # the cron minimum in the window is the window's share within the model's range: window_replicas
    serve = next(f for f in check(HYBRID).model.fleets if f.name == "serve")
    assert pools.window_replicas(serve, 6, 8) == {"qwen-7b": 48}
    assert pools.window_replicas(serve, 0, 8) == {"qwen-7b": 2}


def test_an_hpa_fleet_in_a_pool_is_told_to_use_keda(write):
    """rule pool-inference-autoscaler: an HPA has one minReplicas for all hours and gets no cron trigger, so its
    replicas would not follow the window; the example (KEDA) is clean, the same fleet with `autoscaler: hpa` warns
    at the autoscaler, with the hint to use keda."""
    assert "pool-inference-autoscaler" not in _rules(check(HYBRID))
    result = _variant(write, "autoscaler: keda", "autoscaler: hpa")
    (finding,) = [f for f in result.findings if f.rule == "pool-inference-autoscaler"]
    assert finding.severity.value == "warning" and finding.path == "fleets[0].scheduler.autoscaler"
    assert "do not follow the windows of pool 'p5-block'" in finding.message and "autoscaler: keda" in finding.hint


def _edge_program():
    from test_pool_edge import _program

    return _program()


def _lends(pool, lead=26, lag=8):
    """The training fleet's PoolEdge (pool.edge) of a pool with that lead and lag, as bin/pool.json carries it."""
    from types import SimpleNamespace as NS

    pool = replace(pool, lead_min=lead, lag_min=lag)
    train = NS(name="train", scheduler=NS(partitions=(NS(max_time="4:00:00"),)))
    edge = pools.edge(pool, train, [f"train-{i:03d}" for i in range(1, 9)])
    return pool, edge, [{"days": list(l.days), "start": l.start, "hours": l.hours, "nodes": l.nodes} for l in edge.lends]


def test_the_lead_and_the_lag_cross_midnight():
    """A window from Monday 00:00 to 06:00 (the lead crosses into Sunday) and one from Sunday 18:00 to 24:00 (the
    lag crosses into Monday): the node group rises at Sunday 23:34 and 17:34, falls at Monday 00:00 (one fewer node)
    and 06:00 with no lead, each fall's nodes back 8 min later; training's lends, as bin/pool-edge computes them in
    real minutes, run from 17:34 on Sunday to 06:08 on Monday (the two windows touch: one stretch)."""
    shares = [_share("serve", 0, [((0,), 0, 6, 2), ((6,), 18, 24, 3)]), _share("train", 0, remainder=True)]
    pool, edge, lends = _lends(_pool(shares))
    assert (edge.warmup_minutes, edge.release_minutes) == (26, 8)
    assert {(a.recurrence, a.nodes, a.rise, a.lead_min, a.lag_min) for a in pools.scaling_actions(pool, "serve")} == {
        ("34 17 * * 0", 3, True, 26, 0), ("0 0 * * 1", 2, False, 0, 8), ("0 6 * * 1", 0, False, 0, 8)}
    program = _edge_program()
    config = {"pool": "p", "time_zone": "Europe/Berlin", "lead_minutes": 300, "on_window": "finish",
              "warmup_minutes": edge.warmup_minutes, "release_minutes": edge.release_minutes, "lends": lends}
    # Sunday 4 January 2026, 12:00 UTC (13:00 CET)
    (stretch,) = [(b, f) for b, f, hosts in program.stretches(config, datetime(2026, 1, 4, 12, tzinfo=UTC),
                                                              datetime(2026, 1, 5, 12, tzinfo=UTC)) if "train-008" in hosts]
    assert stretch == (datetime(2026, 1, 4, 16, 34, tzinfo=UTC), datetime(2026, 1, 5, 5, 8, tzinfo=UTC))
    # a window alone at Monday 00:00: its lend starts on Sunday, 26 real minutes before midnight
    pool, edge, lends = _lends(_pool([_share("serve", 0, [((0,), 0, 6, 2)]), _share("train", 0, remainder=True)]))
    tz = pools.zone("Europe/Berlin")
    (occurrence,) = list(program.occurrences(lends[0], tz, datetime(2026, 1, 4, tzinfo=UTC), datetime(2026, 1, 6, tzinfo=UTC),
                                             edge.warmup_minutes, edge.release_minutes))
    assert occurrence == (datetime(2026, 1, 4, 22, 34, tzinfo=UTC), datetime(2026, 1, 5, 5, 8, tzinfo=UTC))
    # the ledger stays in whole hours: lead and lag change none of it
    assert pools.ledger(pool, 8).runs() == pools.ledger(replace(pool, lead_min=0, lag_min=0), 8).runs()


@pytest.mark.parametrize("day, opens_utc, lends_from, back_utc", [
    # the spring change (Sunday 29 March 2026, 02:00 CET -> 03:00 CEST): a window 03:00-09:00 CEST opens at 01:00 UTC;
    # 26 real minutes before is 00:34 UTC (01:34 CET, before the skipped hour); it closes at 07:00 UTC, back 07:08
    (date(2026, 3, 29), datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 3, 29, 0, 34, tzinfo=UTC),
     datetime(2026, 3, 29, 7, 8, tzinfo=UTC)),
    # the autumn change (Sunday 25 October, 03:00 CEST -> 02:00 CET): 03:00 CET is 02:00 UTC, the lend from 01:34 UTC
    # (02:34 CEST, the first pass of the repeated hour); the window closes at 09:00 CET = 08:00 UTC, back 08:08
    (date(2026, 10, 25), datetime(2026, 10, 25, 2, tzinfo=UTC), datetime(2026, 10, 25, 1, 34, tzinfo=UTC),
     datetime(2026, 10, 25, 8, 8, tzinfo=UTC)),
])
def test_the_lead_and_the_lag_over_a_clock_change(day, opens_utc, lends_from, back_utc):
    """bin/pool-edge counts the lead and the lag in real minutes from the window's local hours, so both hold on
    the days Berlin's clock changes, where the node group's cron line (local wall clock) misses its lead
    (lead_misses, rule pool-inference-warmup)."""
    pool, edge, lends = _lends(_pool([_share("serve", 0, [((6,), 3, 9, 2)]), _share("train", 0, remainder=True)]))
    tz = pools.zone("Europe/Berlin")
    program = _edge_program()
    start = datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(hours=3)
    (occurrence,) = list(program.occurrences(lends[0], tz, start, start + timedelta(hours=24),
                                             edge.warmup_minutes, edge.release_minutes))
    assert occurrence == (lends_from, back_utc)
    assert opens_utc - occurrence[0] == timedelta(minutes=26)
    (rise,) = [a for a in pools.scaling_actions(pool, "serve") if a.rise]
    assert rise.recurrence == "34 2 * * 0" and day in {d for d, _ in pools.lead_misses(pool, rise, 2026)}


def test_a_stretch_shorter_than_the_lead_and_the_lag_reads_as_none():
    """A training fleet that has its lent nodes back for one hour between two windows, with a 40-minute lead and a
    30-minute lag, holds them not at all: the finding says 0 h, not a negative span."""
    from fleetform.rules.pool import _hours

    assert _hours(timedelta(minutes=60 - 40 - 30)) == "0 h"
    assert _hours(timedelta(minutes=11 * 60 + 26)) == "11 h 26 min"
