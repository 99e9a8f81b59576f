"""The EKS cluster's Kubernetes version against EKS's release calendar (providers/aws/eks-versions.tsv, from
the EKS User Guide, "Understand the Kubernetes version lifecycle on EKS"), judged on the run's day
(FLEETFORM_TODAY), and Hub weights without a pinned commit (hf-revision-unpinned)."""

from __future__ import annotations

import datetime

import pytest

from conftest import ROOT, TODAY, run_cli
from fleetform.pipeline import check
from fleetform.eks_versions import calendar, in_standard_support, newest_in_standard_support

BODY = (ROOT / "tests/corpus/392-hf-revision-unpinned.yaml").read_text()
REFERENCE = ROOT / "blueprints/reference.yaml"


def _findings(tmp_path, version: str = "1.35", model_extra: str = "", day: str | None = None, monkeypatch=None):
    if day is not None:
        monkeypatch.setenv("FLEETFORM_TODAY", day)
    path = tmp_path / "bp.yaml"
    path.write_text(BODY.replace('version: "1.35"', f'version: "{version}"') + model_extra)
    return [(f.severity.value, f.rule, f.path, f.message) for f in check(path).findings]


def _rule(findings, rule):
    return [f for f in findings if f[1] == rule]


K8S_MIN, K8S_MAX = (1, 25), (1, 37)  # fleetform/rules/inference.py: the versions fleetform renders for


def test_the_calendar_follows_the_eks_policy_of_14_plus_12_months():
    """EKS User Guide: standard support for 14 months after the EKS release, then extended support "for the next
    12 months"; every row of the data file keeps to it, so a typo in a date shows."""
    rows = calendar()
    assert [r.version for r in rows] == [f"1.{m}" for m in range(25, 36)]
    for row in rows:
        assert row.end_of_extended == row.end_of_standard.replace(year=row.end_of_standard.year + 1), row
    assert calendar()[-1].version == "1.35" and (1, 25) == K8S_MIN  # the calendar starts where rendering does


@pytest.mark.parametrize("day, rules", [
    ("2026-07-28", []),                                   # the last day of 1.33's standard support
    ("2026-07-29", [("warning", "eks-version-support")]),  # billed as extended support from this day (UTC)
    ("2027-07-28", [("warning", "eks-version-support")]),
    ("2027-07-29", [("error", "eks-version")]),            # end of extended support: EKS no longer offers it
])
def test_support_is_judged_on_the_runs_day(tmp_path, monkeypatch, day, rules):
    found = [f for f in _findings(tmp_path, "1.33", day=day, monkeypatch=monkeypatch)
             if f[1] in ("eks-version", "eks-version-support")]
    assert [(s, r) for s, r, _, _ in found] == rules
    for _, _, path, _ in found:
        assert path == "fleets[0].scheduler.version"


def test_the_warning_names_the_price_its_source_and_the_oldest_supported_version(tmp_path):
    (warning,) = _rule(_findings(tmp_path, "1.33"), "eks-version-support")
    message = warning[3]
    assert "ended on 2026-07-29" in message and "until 2027-07-29" in message
    assert "$0.60 per cluster per hour" in message and "Amazon EKS extended support for Kubernetes versions pricing" in message
    assert "providers/aws/eks-versions.tsv" in message
    result = check(tmp_path / "bp.yaml")
    (finding,) = [f for f in result.findings if f.rule == "eks-version-support"]
    assert "the oldest in standard support is 1.34, the newest 1.35" in finding.hint


def test_an_unknown_or_ended_version_is_an_error_with_the_known_list(tmp_path):
    (unknown,) = _rule(_findings(tmp_path, "1.99"), "eks-version")
    assert "Kubernetes 1.99 is not in fleetform's EKS release calendar (known: 1.25, 1.26" in unknown[3]
    assert unknown[0] == "error"
    (ended,) = _rule(_findings(tmp_path, "1.30"), "eks-version")
    assert "EKS ended extended support of Kubernetes 1.30 on 2026-07-23" in ended[3]
    assert _rule(_findings(tmp_path, "1.35"), "eks-version") == []
    assert _rule(_findings(tmp_path, "1.34"), "eks-version-support") == []  # standard support until 2026-12-02


def test_a_version_newer_than_the_calendar_is_a_warning_not_an_error(tmp_path):
    """EKS offers a new minor version every few months and the calendar lags: 1.36, past its newest row (1.35) and
    within what fleetform renders for, must not stop a valid blueprint; only past K8S_MAX is it unknown."""
    found = _findings(tmp_path, "1.36")
    assert _rule(found, "eks-version") == []
    (newer,) = _rule(found, "eks-version-support")
    assert newer[0] == "warning" and "Kubernetes 1.36 is newer than fleetform's EKS release calendar (newest 1.35" in newer[3]
    assert _rule(_findings(tmp_path, "1.38"), "eks-version")[0][0] == "error"  # past K8S_MAX (1.37)


def test_a_fleetform_today_that_is_no_date_is_a_finding_not_a_traceback(tmp_path, monkeypatch):
    found = _findings(tmp_path, "1.33", day="24.11.2026", monkeypatch=monkeypatch)
    (error,) = _rule(found, "eks-version")
    assert "FLEETFORM_TODAY='24.11.2026' is not a date" in error[3]
    assert _rule(found, "eks-version-support") == []


def test_onprem_kubernetes_is_not_judged_by_the_eks_calendar(tmp_path):
    text = BODY.replace("  cloud: aws\n  region: us-east-1\n  availability_zone: us-east-1a\n  network:\n"
                        "    cidr: 10.40.0.0/16\n", "  cloud: onprem\n").replace('version: "1.35"', 'version: "1.30"')
    path = tmp_path / "onprem.yaml"
    path.write_text(text)
    rules = {f.rule for f in check(path).findings}
    assert not rules & {"eks-version", "eks-version-support"}, rules


def test_the_suggested_version_is_in_standard_support_on_every_day_the_calendar_covers():
    """The version the role-scheduler hint suggests (where a blueprint gives none) is the newest in standard
    support: never one billed as extended support."""
    from fleetform.rules.fleets import suggested_k8s_version

    assert suggested_k8s_version() == "1.35"  # on the suite's day
    day = datetime.date(2024, 1, 1)
    while day < calendar()[-1].end_of_standard:
        version = newest_in_standard_support(day, K8S_MAX)
        assert version in {v.version for v in in_standard_support(day)}, day
        day += datetime.timedelta(days=7)


def test_the_reference_still_validates_with_its_true_warnings():
    result = run_cli("validate", str(REFERENCE))
    assert result.returncode == 0, result.stdout
    assert "[eks-version-support]" in result.stdout and TODAY == "2026-11-24"


# --- Hub weights without a pinned commit ------------------------------------------------------------------

COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"


@pytest.mark.parametrize("weights, where", [
    ("", "fleets[0].models[0].model"),
    ('        weights: {source: hub}\n', "fleets[0].models[0].model"),
    ('        weights: {revision: main}\n', "fleets[0].models[0].weights.revision"),
    ('        weights: {revision: v1.0}\n', "fleets[0].models[0].weights.revision"),
])
def test_hub_weights_without_a_commit_are_a_warning(tmp_path, weights, where):
    (warning,) = _rule(_findings(tmp_path, model_extra=weights), "hf-revision-unpinned")
    assert warning[0] == "warning" and warning[2] == where


@pytest.mark.parametrize("weights", [f'        weights: {{revision: "{COMMIT}"}}\n',
                                     "        weights: {source: s3, uri: s3://models/qwen/}\n"])
def test_a_pinned_commit_or_s3_weights_are_no_finding(tmp_path, weights):
    assert _rule(_findings(tmp_path, model_extra=weights), "hf-revision-unpinned") == []


@pytest.mark.parametrize("version, day, rule", [
    ("1.33", "2027-08-01", "eks-version"),          # ended; 1.34's and 1.35's standard support ended too
    ("1.99", "2028-04-01", "eks-version"),          # unknown, on a day no row of the calendar is offered
    ("1.35", "2027-04-01", "eks-version-support"),  # 1.35, the calendar's newest, is in extended support
])
def test_a_hint_never_names_an_empty_list_once_the_calendar_is_out_of_date(tmp_path, monkeypatch, version, day, rule):
    """The calendar is data read on a day (providers/aws/eks-versions.tsv): from 2027-03-27 no row of it is in
    standard support. Before, the eks-version hint then read "use a version in standard support: " (an empty
    list) and eks-version-support's "upgrade to a version in standard support; none is in standard support".
    The hint now says the calendar is out of date and how to read the versions EKS offers that day."""
    _findings(tmp_path, version, day=day, monkeypatch=monkeypatch)
    (finding,) = [f for f in check(tmp_path / "bp.yaml").findings if f.rule == rule]
    assert not finding.hint.rstrip().endswith(":"), finding.hint
    assert "none is in standard support" not in finding.hint, finding.hint
    assert "providers/aws/eks-versions.tsv" in finding.hint and "aws eks describe-cluster-versions" in finding.hint


def test_the_upgrade_hint_of_a_running_cluster_goes_one_minor_version_at_a_time(tmp_path):
    """EKS updates a control plane one minor version per update ("Control plane version upgrades must be done for
    one minor version at a time", EKS User Guide, eksctl "Cluster upgrades"; UpdateClusterVersion): a cluster on
    1.32 cannot go to 1.34 in one `pulumi up`. Before, the hint named only the oldest and newest in standard
    support, and a blueprint moved from 1.32 straight to the newest failed at UpdateClusterVersion."""
    _findings(tmp_path, "1.32")
    (finding,) = [f for f in check(tmp_path / "bp.yaml").findings if f.rule == "eks-version-support"]
    assert "one minor version at a time" in finding.hint and "1.33 first" in finding.hint, finding.hint


@pytest.mark.parametrize("old, new, says", [
    ("1.33", "1.35", "cannot go to 1.35 in one change"),  # the step team-llm took when its base moved
    ("1.35", "1.34", "cannot go down to 1.34"),
    ("1.34", "1.35", None),
    ("1.35", "1.35", None),
])
def test_diff_refuses_a_version_jump_or_a_downgrade_of_the_running_cluster(tmp_path, old, new, says):
    """EKS updates a running control plane one minor version at a time and never back (EKS User Guide, "Update
    existing cluster to new Kubernetes version"; eksctl "Cluster upgrades"): `pulumi up` would fail at
    UpdateClusterVersion after changing everything before it. A new cluster (another name) takes any version."""
    import json

    text = REFERENCE.read_text()
    (tmp_path / "old.yaml").write_text(text.replace('version: "1.33"', f'version: "{old}"'))
    (tmp_path / "new.yaml").write_text(text.replace('version: "1.33"', f'version: "{new}"'))
    result = run_cli("diff", "--no-resources", "--format", "json", "old.yaml", "new.yaml", cwd=tmp_path)
    steps = [f for f in json.loads(result.stdout)["findings_introduced"] if f["rule"] == "eks-version-step"]
    if says is None:
        assert steps == []
        return
    (step,) = steps
    assert says in step["message"] and step["path"] == "fleets[1].scheduler.version" and step["severity"] == "error"
    renamed = text.replace("name: llm-70b", "name: llm-70c", 1)
    (tmp_path / "other.yaml").write_text(renamed.replace('version: "1.33"', f'version: "{new}"'))
    other = run_cli("diff", "--no-resources", "--format", "json", "old.yaml", "other.yaml", cwd=tmp_path)
    assert [f for f in json.loads(other.stdout)["findings_introduced"] if f["rule"] == "eks-version-step"] == []
