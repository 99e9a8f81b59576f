"""Slurm accounting and teams (issue 20, fleetform/accounting.py): what slurmdbd.conf, slurm.conf and
accounts.cfg hold for blueprints/onprem-teams.yaml, that no password reaches the blueprint or a
rendered file, and the rules' findings. tests/test_accounting_cluster.py runs the rendered files in
a real slurmdbd + MariaDB + slurmctld + slurmd."""

from __future__ import annotations

import re

from conftest import ROOT, run_cli
from fleetform.pipeline import check
from fleetform.render import render

TEAMS = ROOT / "blueprints/onprem-teams.yaml"
ONPREM = ROOT / "blueprints/onprem-ib.yaml"


def _files(path) -> dict[str, str]:
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return {name: data.decode() for name, data in render(result.model).items()}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_slurm_conf_names_slurmdbd_gpus_enforcement_and_monthly_priority():
    conf = _lines(_files(TEAMS)["train/slurm/slurm.conf"])
    wanted = ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=slurm-ctl",
              "AccountingStoragePort=6819", "AccountingStorageTRES=gres/gpu",
              "AccountingStorageEnforce=associations,limits,qos,safe", "JobAcctGatherType=jobacct_gather/cgroup",
              "PriorityType=priority/multifactor", "PriorityDecayHalfLife=0", "PriorityUsageResetPeriod=MONTHLY",
              "PriorityWeightFairshare=10000", "PriorityWeightAssoc=1000"]
    for line in wanted:
        assert line in conf, line
    assert not [line for line in conf if line.startswith("AccountingStorageType=") and "none" in line]


def test_without_accounting_nothing_changes():
    files = _files(ONPREM)
    assert "AccountingStorageType=accounting_storage/none" in _lines(files["train/slurm/slurm.conf"])
    assert not [line for line in _lines(files["train/slurm/slurm.conf"]) if line.startswith("Priority")]
    assert "train/slurm/slurmdbd.conf" not in files and "train/slurm/accounts.cfg" not in files


def test_slurmdbd_conf_names_the_database_and_includes_the_password():
    conf = _lines(_files(TEAMS)["train/slurm/slurmdbd.conf"])
    assert conf == ["AuthType=auth/munge", "DbdHost=slurm-ctl", "DbdPort=6819", "SlurmUser=slurm",
                    "LogFile=/var/log/slurm/slurmdbd.log", "PidFile=/run/slurmdbd.pid",
                    "StorageType=accounting_storage/mysql", "StorageHost=db.example", "StoragePort=3306",
                    "StorageUser=slurm", "StorageLoc=slurm_acct_db", "PurgeJobAfter=24months",
                    "PurgeStepAfter=24months", "Include /etc/slurm/slurmdbd-storage.conf"]


def test_accounts_cfg_has_each_team_with_budget_minutes_limits_and_default_accounts():
    cfg = _lines(_files(TEAMS)["train/slurm/accounts.cfg"])
    assert cfg[:2] == ["Cluster - 'dgx'", "Parent - 'root'"]
    # 12,000 GPU-hours a month = 720,000 GPU-minutes (GrpTRESMins counts minutes)
    assert ("Account - 'llm':Description='llm':Organization='llm':Fairshare=50:GrpTRESMins=gres/gpu=720000:"
            "MaxTRES=gres/gpu=32:Priority=100") in cfg
    assert ("Account - 'research':Description='research':Organization='research':Fairshare=20:"
            "GrpTRESMins=gres/gpu=120000:MaxTRES=gres/gpu=8:Priority=0") in cfg
    # bob is in llm and research: his default account is the first team that lists him
    at = cfg.index("Parent - 'research'")
    assert cfg[at + 1:at + 3] == ["User - 'erin':DefaultAccount='research':Fairshare=1",
                                  "User - 'bob':DefaultAccount='llm':Fairshare=1"]


def test_a_password_in_the_blueprint_is_refused(tmp_path):
    source = tmp_path / "pw.yaml"
    source.write_text(TEAMS.read_text().replace("        keep_job_months: 24\n",
                                                "        keep_job_months: 24\n        password: hunter2\n"))
    result = run_cli("validate", str(source))
    assert result.returncode == 1
    assert "fleets[0].scheduler.accounting.password: unknown field" in result.stdout, result.stdout
    assert run_cli("render", str(source), "-o", str(tmp_path / "out")).returncode == 1
    assert not (tmp_path / "out").exists()


def test_no_rendered_file_holds_a_password(tmp_path):
    for name, text in _files(TEAMS).items():
        assert "StoragePass" not in text.replace("(StoragePass=...)", ""), name


def _rules(tmp_path, text: str) -> dict[str, str]:
    source = tmp_path / "bp.yaml"
    source.write_text(text)
    return {f.rule: f.to_text() for f in check(source).findings}


def test_rules_catch_teams_without_accounting_and_oversized_teams(tmp_path):
    text = TEAMS.read_text()
    block = re.search(r"      accounting:\n(        .*\n)+", text)
    found = _rules(tmp_path, text.replace(block.group(0), ""))
    assert "teams-need-accounting" in found, found
    found = _rules(tmp_path, text.replace("max_gpus_per_job: 32", "max_gpus_per_job: 33"))
    assert "team-max-gpus" in found and "fleet's 32 GPUs" in found["team-max-gpus"], found
    found = _rules(tmp_path, text.replace("gpu_hours_per_month: 2000", "gpu_hours_per_month: 7"))
    assert "team-budget" in found and "one hour of a 8-GPU job" in found["team-budget"], found
    assert _rules(tmp_path, text) == {}
    # a partition without max_time: a job without --time is unlimited and, with a budget, never starts
    found = _rules(tmp_path, text.replace("          max_time: 3-00:00:00\n", ""))
    assert set(found) == {"team-time-limit"}, found
    assert "partition gpu has no max_time" in found["team-time-limit"], found
    assert "teams[0].gpu_hours_per_month" in found["team-time-limit"], found


def test_diff_says_how_a_changed_accounting_file_reaches_the_cluster():
    from fleetform.changes import file_disruption

    dbd = file_disruption("train/slurm/slurmdbd.conf", "changed")
    assert dbd.cls == "in place" and "restart slurmdbd" in dbd.how and "reconfigure" not in dbd.how
    accounts = file_disruption("train/slurm/accounts.cfg", "changed")
    assert accounts.cls == "in place" and "sacctmgr -i load" in accounts.how and "stays" in accounts.how


def test_accounting_tres_guards_the_fatal_and_the_silent_combinations():
    """Stage config: no blueprint makes these (the lines come from one record), crafted models do."""
    from dataclasses import replace

    from fleetform.rules import run

    result = check(TEAMS)
    model, document = result.model, result.document
    fleet = model.fleets[0]

    def findings(**changes):
        broken = replace(fleet, **changes)
        return [f.message for f in run(replace(model, fleets=(broken,)), document) if f.rule == "accounting-tres"]

    assert findings() == []
    fatal = findings(accounting=replace(fleet.accounting, storage_type="accounting_storage/none"))
    assert len(fatal) == 1 and "slurmdbd is required to run with TRES gres/gpu" in fatal[0], fatal
    silent = findings(slurm=replace(fleet.slurm, gres_types=()))
    assert len(silent) == 1 and "GresTypes does not declare 'gpu'" in silent[0], silent
