"""nccl.env by fabric, and the NCCL lint on the mission's sample overrides, finding by finding."""

from __future__ import annotations

from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render
from variants import VARIANTS

SAMPLE = """    nccl:
      env:
        NCCL_IB_HCA: mlx5_0,mlx5_1
        NCCL_SOCKET_IFNAME: eth0
        NCCL_DEBUG: INFO
        NCCL_TIMEOUT: 1800
        NCCL_ALGO: Ring
        NCCL_PROTO: Simple
"""


# The decided findings of the sample, on either fabric: NCCL_SOCKET_IFNAME=eth0 is fine; NCCL_TIMEOUT
# is an error; the others are warnings (why is asserted per fabric below).
REFERENCE_OWN = {"capacity-duration", "eks-version-support", "hf-revision-unpinned"}
"""The reference blueprint's own warnings, whatever its NCCL settings."""
SAMPLE_FINDINGS = [
    ("error", "nccl-env", "NCCL_TIMEOUT"),
    ("warning", "nccl-env-risky", "NCCL_ALGO"),
    ("warning", "nccl-env-risky", "NCCL_DEBUG"),
    ("warning", "nccl-env-risky", "NCCL_IB_HCA"),
    ("warning", "nccl-env-risky", "NCCL_PROTO"),
]


def _findings(text: str, tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return {(f.severity.value, f.rule, f.path.rsplit(".", 1)[-1]): f for f in check(path).findings}


def test_mission_sample_on_infiniband(tmp_path):
    onprem = (ROOT / "blueprints/onprem-ib.yaml").read_text().replace("    nccl:\n      debug: WARN\n", SAMPLE)
    found = _findings(onprem, tmp_path)
    assert sorted(found) == SAMPLE_FINDINGS
    # NCCL_TIMEOUT: not an NCCL variable, and the hint says what to set instead
    timeout = found[("error", "nccl-env", "NCCL_TIMEOUT")]
    assert "not an NCCL variable" in timeout.message and "init_process_group(timeout=" in timeout.hint
    # NCCL_IB_HCA without '=' is a prefix match: mlx5_1 also selects mlx5_10 and mlx5_11
    hca = found[("warning", "nccl-env-risky", "NCCL_IB_HCA")]
    assert "prefix" in hca.message and hca.hint == "write =mlx5_0,mlx5_1 to select exactly these HCAs"
    # NCCL_ALGO and NCCL_PROTO force what NCCL tunes itself: for debugging
    assert "debugging" in found[("warning", "nccl-env-risky", "NCCL_ALGO")].message
    assert "LL128" in found[("warning", "nccl-env-risky", "NCCL_PROTO")].message
    # NCCL_DEBUG=INFO belongs in nccl.debug
    assert found[("warning", "nccl-env-risky", "NCCL_DEBUG")].hint.startswith("write `nccl: {debug: INFO}`")
    # NCCL_SOCKET_IFNAME=eth0 is a valid setting: no finding


def test_mission_sample_on_efa(tmp_path):
    reference = (ROOT / "blueprints/reference.yaml").read_text().replace(
        "    nccl:\n      debug: WARN\n      env: {}                       # extra NCCL_* variables; linted against "
        "NCCL's documented list\n", SAMPLE)
    found = {k: v for k, v in _findings(reference, tmp_path).items() if k[1] not in REFERENCE_OWN}
    assert sorted(found) == SAMPLE_FINDINGS
    assert "EFA does not use" in found[("warning", "nccl-env-risky", "NCCL_IB_HCA")].message


def _env(text: str, tmp_path) -> str:
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return render(result.model)["train/nccl.env"].decode()


def _settings(env: str) -> list[str]:
    return [line for line in env.splitlines() if line and not line.startswith("#")]


def test_efa_sets_no_transport_variables(tmp_path):
    env = _env((ROOT / "blueprints/reference.yaml").read_text(), tmp_path)
    assert _settings(env) == ["NCCL_DEBUG=WARN"]
    assert "aws-ofi-nccl" in env and "FI_PROVIDER" not in env and "FI_EFA_USE_DEVICE_RDMA" not in env


def test_infiniband_selects_exact_hcas_and_interface(tmp_path):
    env = _env((ROOT / "blueprints/onprem-ib.yaml").read_text(), tmp_path)
    assert _settings(env) == ["NCCL_DEBUG=WARN",
                              "NCCL_IB_HCA==mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11",
                              "NCCL_SOCKET_IFNAME==enp170s0f0"]


def test_roce_sets_gid_index_and_traffic_class(tmp_path):
    env = _env(VARIANTS["onprem-roce-switches"], tmp_path)
    assert _settings(env) == ["NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0,mlx5_1", "NCCL_IB_GID_INDEX=3", "NCCL_IB_TC=106",
                              "NCCL_SOCKET_IFNAME==eth0"]


def test_tcp_disables_ib_probing(tmp_path):
    env = _env(VARIANTS["onprem-tcp"], tmp_path)
    assert _settings(env) == ["NCCL_DEBUG=WARN", "NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME==eno1"]


def test_every_variable_has_its_reason_on_the_line_above(tmp_path):
    for text in [(ROOT / "blueprints/onprem-ib.yaml").read_text(), VARIANTS["onprem-roce-switches"]]:
        lines = _env(text, tmp_path).splitlines()
        for index, line in enumerate(lines):
            if not line.startswith("#"):
                assert lines[index - 1].startswith("# ") and len(lines[index - 1]) > 10


def test_blueprint_values_override_fleetform_and_say_so(tmp_path):
    text = (ROOT / "blueprints/onprem-ib.yaml").read_text().replace(
        "    nccl:\n      debug: WARN\n", "    nccl:\n      debug: WARN\n      env:\n        NCCL_IB_HCA: =mlx5_0\n")
    env = _env(text, tmp_path)
    assert "NCCL_IB_HCA==mlx5_0\n" in env
    assert "# set in the blueprint's nccl.env, replacing fleetform's =mlx5_0,mlx5_3" in env


def test_nccl_list_is_read_only_for_a_blueprint_that_sets_variables(tmp_path):
    """Reading NCCL's variable list is half a millisecond of every validate (issue 13's floor): a
    blueprint whose nccl.env is empty has nothing to lint against it."""
    from fleetform import nccl

    nccl.variables.cache_clear()
    assert check(ROOT / "blueprints/reference.yaml").ok
    assert nccl.variables.cache_info().misses == 0
    onprem = (ROOT / "blueprints/onprem-ib.yaml").read_text().replace("    nccl:\n      debug: WARN\n", SAMPLE)
    _findings(onprem, tmp_path)
    assert nccl.variables.cache_info().misses == 1
