"""No test skips silently in CI: a test that needs a program may skip on a developer's machine, but
with `CI` set it fails (conftest.require, or the same two branches written out), and nothing else
skips (no skip marks, no importorskip: what a test needs is a dependency or a file in the repository)."""

from __future__ import annotations

import ast

import pytest

from conftest import ROOT, require

TESTS = sorted((ROOT / "tests").glob("*.py"))


def _calls(node: ast.AST) -> set[str]:
    """The dotted names called in node, e.g. {'pytest.skip', 'os.environ.get'}."""
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            names.add(ast.unparse(call.func))
    return names


def test_every_skip_is_a_failure_in_ci():
    checked = 0
    for path in TESTS:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and ast.unparse(node) in (
                    "pytest.mark.skip", "pytest.mark.skipif", "pytest.importorskip", "unittest.skip"):
                raise AssertionError(f"{path.name}:{node.lineno}: {ast.unparse(node)} skips in CI too; use "
                                     "conftest.require, or ship what the test needs")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "pytest.skip" in _calls(node):
                calls = _calls(node)
                assert "pytest.fail" in calls and "os.environ.get" in calls, (
                    f"{path.name}:{node.lineno}: {node.name} skips without failing when CI is set")
                checked += 1
    assert checked >= 1  # conftest.require at least: the check reads real code


def test_no_test_reads_shared_beside_the_checkout():
    """shared/ beside the repository is absent in a fresh checkout: tests read tests/data/shared/."""
    needle = "ROOT.parent / " + '"shared'  # spelled in two parts, so that this file does not match itself
    for path in TESTS:
        assert needle not in path.read_text(), f"{path.name} reads ../shared/"


def test_require_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no-such-program is not installed .* CI must run this test"):
        require("no-such-program", "no-such-package")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Debian package no-such-package"):
        require("no-such-program", "no-such-package")
    assert require("git", "git").endswith("/git")


def test_aws_e2e_is_deselected_unless_asked_for():
    """tests/test_aws_e2e.py needs a deployed stack: a plain run (CI's) selects none of it, and
    `-m aws_e2e` selects all of it."""
    import subprocess
    import sys

    def selected(*args: str) -> int:
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                              "tests/test_aws_e2e.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        return sum(1 for line in out.stdout.splitlines() if "test_aws_e2e.py::" in line)

    assert selected() == 0
    import e2e_checks

    assert selected("-m", "aws_e2e") == len(e2e_checks.CHECKS) > 0
