"""Login nodes, users and home directories of Slurm training fleets (fleetform/login.py): the rules
(fleetform/rules/login.py), bin/users.json, and the Pulumi program's login instances, security group
and IAM under mocks (providers/aws/login.py). The machines themselves: tests/test_multihost.py (a
login host submits as a blueprint user) and tests/test_bootstrap_machine.py (the accounts step)."""

from __future__ import annotations

import json

import pytest

from conftest import AWS_TRAINING_HEAD, ROOT
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.policies import check as plan_check
from fleetform.render import render

STORAGE = """storage:
  - {name: shared, type: fsx-lustre, capacity_gib: 1200, throughput_mb_per_tib: 125, mount_path: /fsx}
  - {name: ckpt, type: s3}
fleets:
"""
FLEET = """\
    instance_type: p5.48xlarge
    nodes: 2
    storage: [shared]
    scheduler: {type: slurm, partitions: [{name: gpu, default: true}]}
"""
USERS = """\
    users:
      - {name: alice, uid: 2001, gid: 3000, group: ml}
      - {name: bob, uid: 2002, gid: 3000, group: ml, ssh_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG0 bob@laptop"]}
    home: {storage: shared}
"""


def blueprint(extra: str, fleet: str = FLEET) -> str:
    return AWS_TRAINING_HEAD.replace("fleets:\n", STORAGE) + fleet + extra


def findings(text: str, tmp_path) -> list[tuple[str, str, str]]:
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return [(f.severity.value, f.rule, f.path) for f in check(path).findings]


def model(text: str, tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return result.model


SSM = "    login: {nodes: 2, access: ssm}\n" + USERS
SSH = "    login: {nodes: 1, instance_type: m7i.large, access: {ssh_cidrs: [203.0.113.0/24]}}\n" + USERS


# --- rules --------------------------------------------------------------------------------------

def test_a_fleet_with_login_nodes_users_and_a_shared_home_is_clean(tmp_path):
    assert [f for f in findings(blueprint(SSM), tmp_path) if f[1].startswith("login")] == []


@pytest.mark.parametrize("users, expected", [
    ("[{name: alice, uid: 2001}, {name: bob, uid: 2001}]", ("login-uid", "fleets[0].users[1].uid")),
    ("[{name: alice, uid: 999}]", ("login-uid", "fleets[0].users[0].uid")),
    ("[{name: alice, uid: 2001, gid: 100}]", ("login-uid", "fleets[0].users[0].gid")),
    ("[{name: alice, uid: 2001, gid: 3000, group: a}, {name: bob, uid: 2002, gid: 3000, group: b}]",
     ("login-uid", "fleets[0].users[1].gid")),
    # 65534 is nobody/nogroup on every machine: the bootstrap's groupadd/useradd would stop at boot
    ("[{name: alice, uid: 65534}]", ("login-uid", "fleets[0].users[0].uid")),
    ("[{name: alice, uid: 2001, gid: 65534}]", ("login-uid", "fleets[0].users[0].gid")),
    ("[{name: alice, uid: 65535}]", ("login-uid", "fleets[0].users[0].uid")),
    ("[{name: alice, uid: 2001, groups: [nogroup]}]", ("login-uid", "fleets[0].users[0].groups[0]")),
    ("[{name: Alice, uid: 2001}]", ("login-user-name", "fleets[0].users[0].name")),
    ("[{name: 'al ice', uid: 2001}]", ("login-user-name", "fleets[0].users[0].name")),
    ("[{name: slurm, uid: 2001}]", ("login-user-name", "fleets[0].users[0].name")),
    ("[{name: alice, uid: 2001}, {name: alice, uid: 2002}]", ("unique-names", "fleets[0].users[1].name")),
])
def test_bad_users_are_errors(users, expected, tmp_path):
    found = findings(blueprint(f"    login: {{nodes: 1, access: ssm}}\n    users: {users}\n    home: {{storage: shared}}\n"),
                     tmp_path)
    assert ("error", *expected) in found, found


def test_the_default_images_user_id_is_refused_only_on_the_default_image(tmp_path):
    users = "    login: {nodes: 1, access: ssm}\n    users: [{name: alice, uid: 1000}]\n    home: {storage: shared}\n"
    assert ("error", "login-uid", "fleets[0].users[0].uid") in findings(blueprint(users), tmp_path)
    own_image = FLEET.replace("    nodes: 2\n", "    image: ami-0123456789abcdef0\n    nodes: 2\n")
    assert not [f for f in findings(blueprint(users, own_image), tmp_path) if f[1] == "login-uid"]


def test_login_nodes_without_access_are_an_error(tmp_path):
    found = findings(blueprint("    login: {nodes: 1}\n" + USERS), tmp_path)
    assert ("error", "login-access", "fleets[0].login") in found
    assert not [f for f in findings(blueprint("    login: {nodes: 0}\n" + USERS), tmp_path) if f[1] == "login-access"]


@pytest.mark.parametrize("cidrs", ["[0.0.0.0/0]", "[0.0.0.0/1, 128.0.0.0/1]"])
def test_ssh_from_the_whole_internet_is_a_warning(cidrs, tmp_path):
    found = findings(blueprint(f"    login: {{nodes: 1, access: {{ssh_cidrs: {cidrs}}}}}\n" + USERS), tmp_path)
    assert ("warning", "login-ssh-open", "fleets[0].login.access.ssh_cidrs") in found


@pytest.mark.parametrize("home, fleet_storage, message", [
    ("nothere", "[shared]", "no storage entry"),
    ("ckpt", "[shared, ckpt]", "is s3"),
    ("shared", "[]", "not in this fleet's storage"),
])
def test_home_on_storage_the_fleet_does_not_mount_is_an_error(home, fleet_storage, message, tmp_path):
    text = blueprint(SSM.replace("home: {storage: shared}", f"home: {{storage: {home}}}"),
                     FLEET.replace("storage: [shared]", f"storage: {fleet_storage}"))
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    found = [f for f in check(path).findings if f.rule == "login-home"]
    assert [f.path for f in found] == ["fleets[0].home.storage"] and message in found[0].message


def test_login_nodes_without_users_and_users_without_home_are_warnings(tmp_path):
    found = findings(blueprint("    login: {nodes: 1, access: ssm}\n"), tmp_path)
    assert ("warning", "login-default-user", "fleets[0].login") in found
    found = findings(blueprint("    users: [{name: alice, uid: 2001}]\n"), tmp_path)
    assert ("warning", "login-default-user", "fleets[0].users[0]") in found


def test_login_on_an_inference_or_onprem_fleet_is_an_error(tmp_path):
    onprem = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {name: a, version: 1.0.0}
provider: {cloud: onprem, site: lab}
fleets:
  - name: train
    role: training
    hosts: "gpu-[01-02]"
    hardware: {gpu: H100-80GB, gpu_count: 8, sockets: 2, cores_per_socket: 48, threads_per_core: 2, memory_gib: 2048}
    scheduler: {type: slurm, controller: {host: ctl}, partitions: [{name: gpu, default: true}]}
    login: {nodes: 1, access: ssm}
"""
    assert ("error", "login-scope", "fleets[0].login") in findings(onprem, tmp_path)


def test_the_reference_blueprint_has_no_login_config():
    result = check(ROOT / "blueprints/reference.yaml")
    assert result.model is not None and all(f.login is None for f in result.model.fleets)
    assert not [f for f in result.findings if f.rule.startswith("login")]


# --- users.json -----------------------------------------------------------------------------------

def test_users_json_holds_the_users_their_groups_and_the_shared_home(tmp_path):
    files = render(model(blueprint(SSM), tmp_path))
    users = json.loads(files["train/slurm/bin/users.json"])
    assert users["home_dir"] == "/fsx/home" and users["shared_home"] is True
    assert users["login_hosts"] == ["train-login-1", "train-login-2"]
    assert users["groups"] == [{"name": "ml", "gid": 3000}]
    assert [(u["name"], u["uid"], u["gid"]) for u in users["users"]] == [("alice", 2001, 3000), ("bob", 2002, 3000)]
    assert users["users"][1]["ssh_keys"] == ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG0 bob@laptop"]
    # no login node is a Slurm node: slurm.conf does not name them
    assert "login" not in files["train/slurm/slurm.conf"].decode()


def test_no_users_json_without_login_config(tmp_path):
    assert not [p for p in render(model(blueprint(""), tmp_path)) if p.endswith("users.json")]


# --- the Pulumi program under mocks ---------------------------------------------------------------

INSTANCE = "aws:ec2/instance:Instance"
SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def plan(text: str, tmp_path):
    bp = model(text, tmp_path)
    return bp, record(bp, render(bp))


def _of(resources, type_):
    return [r for r in resources if r["type"] == type_]


@pytest.fixture(scope="module")
def ssm_plan(tmp_path_factory):
    return plan(blueprint(SSM), tmp_path_factory.mktemp("ssm"))


def test_login_instances_are_tagged_login_with_their_names_imdsv2_and_encrypted(ssm_plan):
    _, resources = ssm_plan
    logins = [r for r in _of(resources, INSTANCE) if (r["inputs"].get("tags") or {}).get("fleetform:role") == "login"]
    assert sorted(r["inputs"]["tags"]["fleetform:node"] for r in logins) == ["train-login-1", "train-login-2"]
    for r in logins:
        inputs = r["inputs"]
        assert inputs["instanceType"] == "m7i.xlarge"
        assert inputs["metadataOptions"]["httpTokens"] == "required"
        assert inputs["metadataOptions"]["instanceMetadataTags"] == "enabled"
        assert inputs["rootBlockDevice"]["encrypted"] is True
        assert inputs["tags"]["Name"] == inputs["tags"]["fleetform:node"]
        import base64
        user_data = base64.b64decode(inputs["userDataBase64"]).decode()
        assert "FLEETFORM_ROLE=login" in user_data


def test_ssm_access_opens_no_port_and_makes_no_login_group(ssm_plan):
    _, resources = ssm_plan
    assert not [r for r in _of(resources, SG) if r["name"].endswith("-login")]
    assert not [r for r in _of(resources, INGRESS) if "login" in r["name"]]
    logins = [r for r in _of(resources, INSTANCE) if r["name"].startswith("train-login-")]
    assert all(len(r["inputs"]["vpcSecurityGroupIds"]) == 1 for r in logins)


def test_ssh_access_opens_port_22_from_the_named_ranges_only(tmp_path):
    _, resources = plan(blueprint(SSH), tmp_path)
    (group,) = [r for r in _of(resources, SG) if r["name"] == "train-login"]
    rules = [r["inputs"] for r in _of(resources, INGRESS) if r["name"].startswith("train-login-ssh")]
    assert rules == [{**rules[0], "fromPort": 22, "toPort": 22, "ipProtocol": "tcp", "cidrIpv4": "203.0.113.0/24"}]
    (login,) = [r for r in _of(resources, INSTANCE) if r["name"] == "train-login-1"]
    assert len(login["inputs"]["vpcSecurityGroupIds"]) == 2 and login["inputs"]["instanceType"] == "m7i.large"


def test_the_login_role_has_ssm_the_artifact_and_the_munge_key_only(ssm_plan):
    bp, resources = ssm_plan
    policies = {r["name"]: json.loads(r["inputs"]["policy"]) for r in _of(resources, ROLE_POLICY)
                if r["name"].startswith("train-login")}
    assert set(policies) == {"train-login-s3", "train-login-munge"}
    actions = sorted(a for p in policies.values() for s in p["Statement"]
                     for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    # s3:GetObjectVersion: the update timer installs each new artifact version (users added reach the
    # login node: bin/update downloads that exact version, as on a compute node)
    assert actions == ["kms:Decrypt", "s3:GetObject", "s3:GetObjectVersion", "secretsmanager:GetSecretValue"]
    attachments = [r["inputs"]["policyArn"] for r in resources if r["type"] == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
                   and r["name"].startswith("train-login")]
    assert attachments == ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]
    # the munge secret's resource policy lets the login role read the key
    (secret_policy,) = [r for r in resources if r["type"] == "aws:secretsmanager/secretPolicy:SecretPolicy"]
    readers = json.loads(secret_policy["inputs"]["policy"])["Statement"][0]["Condition"]["StringNotEquals"]["aws:PrincipalArn"]
    assert len(readers) == 3 and any("train-login" in r for r in readers), readers
    # the plan checks (IMDSv2, encryption, open ingress, the calls each role's programs make) pass
    assert plan_check(resources, bp) == []


def test_no_login_resources_without_login_nodes(tmp_path):
    _, resources = plan(blueprint(USERS), tmp_path)
    assert not [r for r in resources if "login" in r["name"]]


def test_iam_caller_actions_sees_a_login_role_that_cannot_read_the_munge_key(ssm_plan):
    """Negative control of the plan check above: without its munge policy the login role fails
    iam-caller-actions (the bootstrap's GetSecretValue and kms:Decrypt, providers/aws/calls.py LOGIN)."""
    bp, resources = ssm_plan
    crippled = [r for r in resources if r["name"] != "train-login-munge"]
    violations = {(v[0], v[1], v[2].split(",")[0]) for v in plan_check(crippled, bp)}
    assert violations == {("iam-caller-actions", "train-login", "does not allow secretsmanager:GetSecretValue"),
                          ("iam-caller-actions", "train-login", "does not allow kms:Decrypt")}, violations


def test_the_plan_says_the_login_nodes_are_not_priced(tmp_path):
    """Login nodes cost money too: the plan's cost section names them among what it cannot price (a CPU
    instance has no row in the GPU catalog), as it does the controller."""
    from fleetform.sizing import cost

    _, unpriced = cost(model(blueprint(SSM), tmp_path))
    assert "fleet train: 2 login node(s) (m7i.xlarge), not GPU instances in the catalog" in unpriced
    _, unpriced = cost(model(blueprint(USERS), tmp_path))
    assert not [u for u in unpriced if "login" in u]


def test_diff_says_how_a_changed_user_list_reaches_the_running_machines():
    """Day 2: bin/update runs the bootstrap's accounts step with every new artifact version, so a user
    added reaches the running controller and nodes in place; diff says so, and what it does not do."""
    from fleetform.changes import file_disruption

    found = file_disruption("train/slurm/bin/users.json", "~", b"{}", b"{}")
    assert found.cls == "in place" and "update timer" in found.how and "removed stays" in found.how
    assert "login nodes' update timers" in found.how and "login nodes get the change when they are replaced" not in found.how
    assert "bootstrap.accounts(env[\"FLEETFORM_ROLE\"])" in (ROOT / "templates/slurm/bin/update").read_text()


def test_a_login_node_runs_the_update_timer_so_users_added_later_can_log_in():
    """Day 2: the login bootstrap enables bin/update's timer, as a compute node's does, so a new
    artifact's users.json reaches the login node (the update run itself: tests/test_slurm_programs.py,
    role login). Before, a user added later existed on every machine but the one people log in to."""
    import ast

    tree = ast.parse((ROOT / "templates/slurm/bin/bootstrap").read_text())
    (login,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "login"]
    called = {n.func.id for n in ast.walk(login) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "enable_node_updates" in called
