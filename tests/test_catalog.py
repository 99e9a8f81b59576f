"""The catalog: every instance maps to one GPU model, every figure has a source, and the CLI table."""

from __future__ import annotations

import json

from conftest import ROOT, run_cli
from fleetform.catalog import load_catalog

SHARED = ROOT / "tests/data/shared"  # copies of the specification's source data, with their sources


def test_catalog_holds_the_shared_instance_facts():
    catalog = load_catalog()
    ours = json.loads((ROOT / "providers/aws/instances.json").read_text())
    assert ours["rows"] == json.loads((SHARED / "aws-gpu-instances.json").read_text())["rows"]
    assert len(catalog.instances) == len(ours["rows"]) == 31
    p5 = catalog.instance("p5.48xlarge")
    assert (p5.gpu.name, p5.gpu_count, p5.network_cards, p5.max_efa, p5.price_usd_hr) == ("H100-80GB", 8, 32, 32, 55.04)
    assert catalog.instance("p4d.24xlarge").gpu.name == "A100-40GB"
    assert catalog.instance("p4de.24xlarge").gpu.name == "A100-80GB"


def test_every_gpu_has_facts_and_a_source():
    for gpu in load_catalog().gpus.values():
        assert gpu.memory_mib > 0 and gpu.bf16_dense_tflops > 0 and gpu.hbm_gbps > 0
        assert gpu.gfd_product.startswith("NVIDIA-") and len(gpu.source) > 20


def test_mig_profiles_match_the_shared_data():
    import yaml

    gpus = load_catalog().gpus
    assert set(gpus["H100-80GB"].mig) == {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
    assert not gpus["L4"].mig and not gpus["L40S"].mig
    shared = yaml.safe_load((SHARED / "mig-profiles.yaml").read_text())
    assert len(shared) >= 4
    for name, entry in shared.items():
        assert gpus[name].gfd_product == entry["gfd_product"]
        assert {p.name: {"max": p.max_per_gpu, "memory_mib": p.memory_mib} for p in gpus[name].mig.values()} \
            == entry["profiles"]


def test_catalog_cli_filters_by_gpu():
    result = run_cli("catalog", "--gpu", "H100")
    assert result.returncode == 0
    rows = [line.split()[0] for line in result.stdout.split("\n\n")[0].splitlines()[1:]]
    assert rows == ["p5.48xlarge", "p5.4xlarge"]
    assert "NVIDIA-H100-80GB-HBM3" in result.stdout and "3g.40gb" in result.stdout
    assert "Sources" in result.stdout and "2026-07-20" in result.stdout


def test_catalog_cli_full_and_json():
    text = run_cli("catalog").stdout
    assert "p5e.48xlarge" in text and " n/a" in text  # no published price is shown as such, not as 0
    data = json.loads(run_cli("catalog", "--format", "json").stdout)
    assert len(data["instances"]) == 31 and data["sources"]["instances"]["price"]


def test_unknown_gpu_is_a_usage_error():
    result = run_cli("catalog", "--gpu", "H1OO")
    assert result.returncode == 2 and "no GPU named 'H1OO'" in result.stderr
