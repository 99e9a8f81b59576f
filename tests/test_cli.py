"""The CLI contract: formats, exit codes, several files, help, and that each command imports only what it uses."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AWS_TRAINING_HEAD, ROOT, run_cli
from fleetform import __version__
from fleetform.cli import COMMANDS, build_parser, main

REF = "blueprints/reference.yaml"
BROKEN = AWS_TRAINING_HEAD + """    instance_type: p5.48xlarg
    nodes: 4
    capacity: {type: spot}
    scheduler: {type: slurm}
"""


def test_valid_blueprint_exits_0_with_summary():
    result = run_cli("validate", "blueprints/onprem-ib.yaml")
    assert (result.returncode, result.stdout, result.stderr) == (0, "1 blueprint checked, valid: 0 errors, 0 warnings\n", "")
    # the reference's 512-day run on a Capacity Block, Kubernetes 1.33 in EKS extended support and two Hub models
    # without a pinned commit are warnings: still valid, exit 0
    result = run_cli("validate", REF)
    assert result.returncode == 0 and result.stdout.endswith("1 blueprint checked, valid: 0 errors, 4 warnings\n")


def test_broken_blueprint_lists_every_finding_then_summary(write):
    path = write(BROKEN)
    result = run_cli("validate", str(path))
    assert result.returncode == 1 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines == [
        f"{path}:8:20: error: fleets[0].instance_type: 'p5.48xlarg' is not a GPU instance type in the catalog; "
        "did you mean 'p5.48xlarge'? [instance-type]",
        f"{path}:10:22: warning: fleets[0].capacity.type: spot instances can be reclaimed at two minutes' notice; "
        "this fleet writes no checkpoints, so a reclaim loses all progress; checkpoint to durable storage often "
        "(checkpoint.every_minutes), or use on-demand, a reservation or a Capacity Block [spot-training]",
        "1 blueprint checked, invalid: 1 error, 1 warning",
    ]


def test_json_format_carries_the_same_findings(write):
    path = write(BROKEN)
    text = run_cli("validate", str(path)).stdout.splitlines()[:-1]
    result = run_cli("validate", "--format", "json", str(path))
    data = json.loads(result.stdout)
    assert result.returncode == 1
    assert data["summary"] == {"files": 1, "errors": 1, "warnings": 1, "waived": 0, "valid": False, "shown": 2,
                               "not_shown": 0}
    rebuilt = [f"{f['file']}:{f['line']}:{f['column']}: {f['severity']}: {f['path']}: {f['message']}; {f['hint']} "
               f"[{f['rule']}]" for f in data["findings"]]
    assert rebuilt == text


def test_several_files_in_one_run(write):
    path = write(BROKEN)
    result = run_cli("validate", REF, str(path), "blueprints/onprem-ib.yaml")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "3 blueprints checked, invalid: 1 error, 5 warnings"


def test_usage_errors_exit_2():
    missing = run_cli("validate", "no/such/file.yaml")
    assert missing.returncode == 2
    assert missing.stderr.startswith("fleetform: error: cannot read no/such/file.yaml") and "Traceback" not in missing.stderr
    assert run_cli("validate").returncode == 2
    assert run_cli("nonsense").returncode == 2
    assert run_cli("validate", "--format", "xml", REF).returncode == 2
    assert run_cli("validate", "blueprints").returncode == 2  # a directory


def test_rules_lists_id_severity_and_summary():
    data = json.loads(run_cli("rules", "--format", "json").stdout)
    ids = [r["id"] for r in data]
    assert len(ids) == len(set(ids))
    for expected in ("schema", "yaml-duplicate-key", "instance-type", "efa-multinode", "spot-training",
                     "reservation-id", "placement-zone", "size-range", "tensor-parallel", "model-fits",
                     "kv-cache-room", "autoscaler-reach", "gpu-sharing", "fsx-capacity", "k8s-version",
                     "role-scheduler", "unique-names", "storage-ref", "hostlist-range", "node-memory", "mount-path",
                     "tag-key-imds", "spread-placement", "kueue-cloud", "kueue-fields", "kueue-job-image",
                     "kueue-namespace", "kueue-gpu-sharing", "kueue-fixed-size", "kueue-topology", "ray-version",
                     "ray-placement", "ray-efa", "ray-workers", "ray-head", "ray-node-image", "ray-socket-ifname",
                     "mig-split", "lws-parallelism", "lws-interconnect", "lws-tp-within-node", "lws-efa-image",
                     "slinky-placement", "slinky-size", "slinky-gres", "slinky-memory", "slinky-namespace",
                     "slinky-users", "slinky-directory", "slinky-cpus", "slinky-efa-image", "semantic-router-gateway",
                     "semantic-router-models", "semantic-router-name", "semantic-router-fit",
                     "cache-scope", "prefix-routing", "prefix-routing-adapters"):
        assert expected in ids
    assert all(r["severity"] in ("error", "warning") and r["summary"] for r in data)
    text = run_cli("rules").stdout.splitlines()
    assert text[0].split() == ["RULE", "SEVERITY", "STAGE", "CHECKS"] and len(text) == len(data) + 1


def _modules_after(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after `fleetform ARGV` ran in it."""
    code = ("import sys\nfrom fleetform.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('MODULES', *sorted(sys.modules))")
    result = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(result.stdout.rsplit("MODULES", 1)[1].split())


NOT_FOR_VALIDATE = ("jinja2", "pulumi", "pulumi_aws", "fleetform.render", "fleetform.plan", "fleetform.policies",
                    "fleetform.sizing", "fleetform.commands.render", "fleetform.commands.plan",
                    "fleetform.commands.diff", "fleetform.commands.catalog", "fleetform.commands.schema",
                    "fleetform.commands.rules", "tarfile", "subprocess",
                    "difflib", "hashlib",  # suggestions and OpenSSL's hashes: not on a valid blueprint's path
                    "fleetform.bases", "encodings.utf_8_sig")  # the reference extends no base; BOMs are dropped by hand


def test_validate_imports_only_what_it_uses():
    """validate sits at its import floor (issue 13): no template engine, Pulumi, git or other command."""
    modules = _modules_after("validate", REF)
    assert "fleetform.commands.validate" in modules and "jsonschema" in modules  # the check ran
    assert sorted(m for m in modules if m.startswith(NOT_FOR_VALIDATE)) == []


def test_help_imports_no_command():
    modules = _modules_after("--help")
    assert sorted(m for m in modules if m.startswith(("fleetform.commands.", "yaml", "jsonschema", "jinja2"))) == []
    assert "textwrap" not in modules  # the top-level help is printed as written (1 ms of --help's import)
    assert {"fleetform.commands.plan", "fleetform.commands.diff"} & _modules_after("validate", "--help") == set()


def test_version():
    result = run_cli("--version")
    assert (result.returncode, result.stdout) == (0, f"fleetform {__version__}\n")


def test_no_command_prints_the_whole_help():
    result = run_cli()
    assert result.returncode == 2
    for name in COMMANDS:  # every command with its one-line help, not only a usage line
        assert f"  {name}" in result.stderr and COMMANDS[name][:30] in result.stderr
    assert "--debug" in result.stderr and "--version" in result.stderr


def test_a_mistyped_command_gets_a_suggestion():
    result = run_cli("valdate", REF)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "fleetform: error: unknown command 'valdate'; did you mean 'validate'?"
    far = run_cli("xyzzy")
    assert far.returncode == 2 and "the commands are validate, render, plan, diff" in far.stderr


def test_every_argument_has_help():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(COMMANDS)
    for name, command in sub.choices.items():
        for action in command._actions:
            assert action.help, f"fleetform {name}: {action.option_strings or action.dest} has no help"
        # the one-line help --help lists is the one each command registers
        assert [a.help for a in sub._choices_actions if a.dest == name] == [COMMANDS[name]]


def test_debug_shows_the_traceback_of_an_internal_error(monkeypatch, capsys):
    from fleetform.commands import validate

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(validate, "run", broken)
    monkeypatch.delenv("FLEETFORM_DEBUG", raising=False)
    assert main(["validate", REF]) == 3
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: a bug" in err and "--debug" in err and "Traceback" not in err
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "validate", REF])
    with pytest.raises(ZeroDivisionError):  # after the command too
        main(["validate", REF, "--debug"])
    monkeypatch.setenv("FLEETFORM_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["validate", REF])


def test_render_does_not_import_pulumi(tmp_path):
    code = (f"import sys; from fleetform.cli import main; rc = main(['render', '{ROOT}/blueprints/reference.yaml']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pulumi', 'pulumi_aws'}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "[]"


def test_the_summary_counts_waived_warnings(write):
    path = write(BROKEN.replace("p5.48xlarg\n", "p5.48xlarge\n") + """waivers:
  - rule: spot-training
    reason: Short experiments that checkpoint every few minutes; a reclaim costs little.
""")
    result = run_cli("validate", str(path))
    assert (result.returncode, result.stdout) == (0, "1 blueprint checked, valid: 0 errors, 0 warnings (1 warning waived)\n")


def test_plan_and_diff_without_pulumi_show_the_rest_and_name_the_extra(monkeypatch, capsys):
    """In-process twin of test_packaging's venv without the aws extra: pulumi hidden from imports."""
    monkeypatch.setitem(sys.modules, "pulumi", None)
    ref = str(ROOT / REF)
    assert main(["plan", ref]) == 2
    out, err = capsys.readouterr()
    assert "pip install 'fleetform[aws]'" in err and "pulumi is not installed" in err
    assert "Sizing" in out and "Cloud resources: not recorded" in out
    assert main(["plan", ref, "--no-resources"]) == 0
    assert main(["diff", ref, ref]) == 2
    out, err = capsys.readouterr()
    assert "Rendered files: 0 changed" in out and "pip install 'fleetform[aws]'" in err
    assert main(["diff", ref, ref, "--no-resources"]) == 0
    assert main(["diff", ref, ref, "--detailed-exitcode"]) == 1  # 2 would read as "changes"
    assert "pip install 'fleetform[aws]'" in capsys.readouterr().err


def test_validate_checks_every_readable_blueprint_when_one_cannot_be_read(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("x: [\n")
    result = run_cli("validate", str(broken), str(tmp_path / "missing.yaml"), "blueprints/reference.yaml")
    assert result.returncode == 2
    assert f"{broken}:2:1: error: YAML syntax error" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("2 blueprints checked, invalid: 1 error")
    assert f"cannot read {tmp_path / 'missing.yaml'}" in result.stderr


def test_diff_detailed_exitcode_reports_every_error_as_1(tmp_path):
    """2 means "changes" with --detailed-exitcode (terraform plan's convention), never a usage error."""
    ref = "blueprints/reference.yaml"
    assert run_cli("diff", "nosuchrev:" + ref, ref, "--detailed-exitcode").returncode == 1
    assert run_cli("diff", ref, ref, "--format", "yaml", "--detailed-exitcode").returncode == 1
    assert run_cli("diff", ref, ref, "--format", "yaml").returncode == 2  # without the flag: a usage error


BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
"""The environment of a user's shell: stdout buffered when it is not a terminal. PYTHONUNBUFFERED
(set by some CI runners and images) would write every line at once and hide a missing flush."""


def _script(prelude: str, *argv: str, unbuffered: bool = False, **popen) -> subprocess.CompletedProcess:
    """`fleetform ARGV` as the installed script runs it (fleetform.cli.run), after PRELUDE."""
    code = f"{prelude}\nimport sys\nsys.argv = ['fleetform', *sys.argv[1:]]\nfrom fleetform.cli import run\nrun()\n"
    env = BUFFERED | ({"PYTHONUNBUFFERED": "1"} if unbuffered else {})
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, text=True, timeout=120, env=env, **popen)


# An object whose finalizer runs only when the interpreter is torn down at exit.
TEARDOWN = ("import os\nclass Witness:\n    def __del__(self, write=os.write):\n        write(2, b'torn down\\n')\n"
            "witness = Witness()")


def test_the_script_ends_without_tearing_python_down_and_loses_no_output(write):
    """run() skips the interpreter's teardown when nothing is registered to run at exit; what is
    still buffered is flushed first, whatever the exit code (the findings of a broken blueprint and
    --version's line are short: they sit in stdout's buffer until run() flushes it)."""
    broken = _script(TEARDOWN, "validate", str(write(BROKEN)))
    assert (broken.returncode, broken.stderr) == (1, "") and broken.stdout.endswith("invalid: 1 error, 1 warning\n")
    assert broken.stdout == run_cli("validate", str(write(BROKEN))).stdout
    schema = _script(TEARDOWN, "schema")
    assert (schema.returncode, schema.stderr) == (0, "")
    assert json.loads(schema.stdout) == json.loads(run_cli("schema").stdout)
    for argv, code, out in [(["--version"], 0, f"fleetform {__version__}\n"), (["nosuch"], 2, "")]:
        result = _script(TEARDOWN, *argv)
        assert (result.returncode, result.stdout) == (code, out) and "torn down" not in result.stderr
    assert "unknown command 'nosuch'" in _script(TEARDOWN, "nosuch").stderr


def test_the_script_runs_the_atexit_callbacks_then_ends_without_teardown():
    """An atexit callback (logging and weakref.finalize register them, plan's imports too) runs, once,
    what it prints is flushed, the exit code is kept; then the process ends without the teardown
    (issue 19: the teardown of plan's 1,300 modules was a tenth of its time)."""
    registered = _script(TEARDOWN + "\nimport atexit\natexit.register(print, 'at exit')", "validate", REF)
    assert registered.returncode == 0 and registered.stdout.endswith("4 warnings\nat exit\n")
    assert registered.stderr == ""
    failing = _script(TEARDOWN + "\nimport atexit\natexit.register(print, 'at exit')", "validate", "nosuch.yaml")
    assert (failing.returncode, failing.stdout) == (2, "at exit\n") and "torn down" not in failing.stderr


def test_the_script_exits_as_usual_when_something_waits_for_exit():
    """Another thread gets Python's own exit: the thread is joined, the exit code is kept; a
    callback still runs once."""
    threaded = _script(TEARDOWN + "\nimport threading, time\n"
                       "threading.Thread(target=lambda: (time.sleep(0.5), print('joined'))).start()", "nosuch")
    assert threaded.returncode == 2 and threaded.stdout == "joined\n" and "torn down" in threaded.stderr
    tempdir = _script("import tempfile\nkept = tempfile.TemporaryDirectory()\nprint(kept.name)", "rules")
    assert tempdir.returncode == 0 and tempdir.stdout.startswith("/")
    assert not Path(tempdir.stdout.splitlines()[0]).exists()  # removed by its finalizer, which atexit runs
    both = _script(TEARDOWN + "\nimport atexit, threading, time\natexit.register(print, 'at exit')\n"
                   "threading.Thread(target=lambda: (time.sleep(0.5), print('joined'))).start()", "nosuch")
    assert both.stdout == "joined\nat exit\n" and "torn down" in both.stderr


def test_plan_leaves_no_thread_so_the_script_ends_without_teardown():
    """The Pulumi program runs with an executor of its own, joined when it is done (fleetform/plan.py):
    its worker threads would otherwise keep plan from ending without the interpreter's teardown."""
    result = _script(TEARDOWN + "\nimport atexit, threading\n"
                     "atexit.register(lambda: print('threads', threading.active_count()))",
                     "plan", REF, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("}\nthreads 1\n") and "torn down" not in result.stderr


def test_the_script_freezes_what_the_command_imported():
    """The command's imports are made with the collector off, then frozen; the collector is on again
    for the command's own work."""
    result = _script("import atexit, gc\natexit.register(lambda: print(gc.get_freeze_count() > 10_000, "
                     "gc.isenabled()))", "rules")
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "True True"


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv,code", [(["validate", REF], 2), (["schema"], 2),
                                       (["diff", REF, REF, "--detailed-exitcode"], 1),
                                       (["diff", REF, "blueprints/onprem-ib.yaml", "--detailed-exitcode"], 1)],
                         ids=["validate", "schema", "diff-same", "diff-changed"])
def test_a_standard_output_that_cannot_be_written_is_a_clear_error(argv, code, unbuffered):
    """`> /dev/full`: the write fails in the command (a big output, or any when unbuffered) or in the
    final flush (a small one); either way the usage exit (1 under --detailed-exitcode, where 2 means
    changes) with what is wrong, not exit 3 (a bug) or Python's 120."""
    with open("/dev/full", "w") as full:
        result = _script("", *argv, unbuffered=unbuffered, stdout=full)
    assert (result.returncode, result.stderr) == (code, "fleetform: error: cannot write the standard output: "
                                                        "No space left on device; free space on that device\n")


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_reader_that_goes_away_keeps_the_verdict(write, unbuffered):
    """`fleetform validate BP | head`: the reader is gone before anything is written (its end of the
    pipe closed first); the exit code is still the blueprint's."""
    for path, code in [(write(BROKEN), 1), (ROOT / REF, 0)]:
        read, written = os.pipe()
        os.close(read)
        try:
            result = _script("", "validate", str(path), unbuffered=unbuffered, stdout=written)
        finally:
            os.close(written)
        assert (result.returncode, result.stderr) == (code, "")


@pytest.mark.parametrize("argv,code", [(["--version"], 0), (["validate", REF], 0), (["nosuch"], 2),
                                       (["validate", "nosuch.yaml"], 2)])
def test_closed_standard_streams_keep_the_exit_code(argv, code):
    """Started with stdout or stderr closed (`>&-`, `2>&-`): Python sets sys.stdout or sys.stderr to
    None; the exit code is the command's, and no message lands in the other stream."""
    for closed in (">&-", "2>&-"):
        result = subprocess.run(["sh", "-c", f'exec "$@" {closed}', "sh", sys.executable, "-m", "fleetform", *argv],
                                cwd=ROOT, env=BUFFERED, timeout=60, capture_output=True, text=True)
        assert result.returncode == code, (closed, result)
        assert "fleetform: error" not in result.stdout and "Traceback" not in result.stderr, (closed, result)


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_stderr_that_cannot_be_written_does_not_change_the_exit_code(write, unbuffered):
    """`2>&1 | head` with the reader gone, or both streams on a full disk: the messages are lost,
    never the verdict (no exit 120, no traceback)."""
    cases = [(["validate", str(write(BROKEN))], 1, 2), (["validate", REF], 0, 2), (["validate", "nosuch.yaml"], 2, 2),
             (["diff", REF, REF, "--detailed-exitcode"], 0, 1), (["nosuch"], 2, 2)]
    for argv, gone, full in cases:
        read, written = os.pipe()
        os.close(read)
        try:
            result = _script("", *argv, unbuffered=unbuffered, stdout=written, stderr=written)
        finally:
            os.close(written)
        assert result.returncode == gone, (argv, "reader gone")
        with open("/dev/full", "w") as device:
            result = _script("", *argv, unbuffered=unbuffered, stdout=device, stderr=device)
        assert result.returncode == full, (argv, "disk full")


def test_an_error_of_the_machine_is_not_a_bug(monkeypatch, capsys):
    """A full disk, a quota, a file-size limit or an I/O error met in a command is exit 2 with where
    and what to do; --debug still shows the traceback."""
    import errno

    import fleetform.commands.rules as rules_command

    for error, where in [(OSError(errno.ENOSPC, "No space left on device"), "a write failed (temporary files go to "),
                         (OSError(errno.EDQUOT, "Disk quota exceeded", "/work/out/x"), "cannot write /work/out/x: ")]:
        def fail(args, error=error):
            raise error

        monkeypatch.setattr(rules_command, "run", fail)
        assert main(["rules"]) == 2
        assert capsys.readouterr().err.startswith(f"fleetform: error: {where}")
        with pytest.raises(OSError):
            main(["rules", "--debug"])


@pytest.mark.parametrize("name, rule, line", [("331-ssh-cidr-host-bits.yaml", "network", 14),
                                              ("330-hostlist-reversed.yaml", "hostlist-range", 33),
                                              ("332-node-memory.yaml", "node-memory", 21)])
def test_plan_and_render_stop_at_the_finding_not_a_traceback(name, rule, line, tmp_path):
    """Issue 17: an SSH CIDR with host bits stopped `plan` in its ingress check, a reversed hostlist
    range stopped `validate` and `render` ("start > stop"); each is now a finding at its line."""
    path = ROOT / "tests" / "corpus" / name
    for argv in (("plan", str(path)), ("render", str(path), "-o", str(tmp_path / "out"))):
        result = run_cli(*argv, cwd=tmp_path)
        assert result.returncode == 1, (argv, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr and "internal error" not in result.stderr
        assert f"{path}:{line}:" in result.stdout and f"[{rule}]" in result.stdout, result.stdout
    assert not (tmp_path / "out").exists()
