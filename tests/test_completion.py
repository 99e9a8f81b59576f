"""`fleetform completion bash|zsh`: the scripts complete commands, options, option values, blueprint files and
explain's field paths. Each is run in the real shell with COMP_WORDS/COMP_CWORD set, as the shell's
completion system calls it (bash: `complete -F`; zsh: through bashcompinit, which sets them the same way and
leaves matching the typed prefix to zsh's own compadd)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import require, run_cli
from fleetform.cli import COMMANDS, build_parser


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("completion")
    for shell in ("bash", "zsh"):
        result = run_cli("completion", shell)
        assert result.returncode == 0, result.stderr
        (folder / f"fleetform.{shell}").write_text(result.stdout)
    return folder


@pytest.fixture
def work(tmp_path):
    for name in ("llm.yaml", "old.yml", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "blueprints").mkdir()
    return tmp_path


def complete(shell: str, scripts, cwd, *words: str) -> list[str]:
    program = require(shell, shell)
    if shell == "bash":
        call = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _fleetform; '
                'printf "%s\\n" "${COMPREPLY[@]}"')
    else:  # bashcompinit's _bash_complete sets ksharrays (0-based arrays) before it calls the function
        call = ('source "$1"; shift; setopt ksharrays; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
                '_fleetform; print -l -- "${COMPREPLY[@]}"')
    result = subprocess.run([program, "-c", call, "x", str(scripts / f"fleetform.{shell}"), *words], cwd=cwd,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return sorted(w for w in result.stdout.splitlines() if w)


def test_bash_completes_commands_options_values_files_and_paths(scripts, work):
    def bash(*words):
        return complete("bash", scripts, work, "fleetform", *words)

    assert bash("") == sorted(COMMANDS)
    assert bash("ex") == ["explain"]
    assert bash("--v") == ["--version"]
    assert bash("validate", "") == ["blueprints", "llm.yaml", "old.yml"]  # yaml files and folders, no .txt
    assert bash("diff", "llm.yaml", "") == ["blueprints", "llm.yaml", "old.yml"]
    assert bash("validate", "--format", "") == ["github", "json", "text"]
    assert bash("render", "-o", "") == ["blueprints"]
    assert bash("render", "--c") == ["--check"]
    assert bash("plan", "--format", "json", "llm.yaml", "--no") == ["--no-resources"]
    assert bash("completion", "") == ["bash", "zsh"]
    assert bash("init", "--region", "eu-west-") == ["eu-west-1", "eu-west-2", "eu-west-3"]
    assert bash("init", "--kind", "") == ["both", "inference", "training"]
    assert "h100" in bash("init", "--gpu", "h") and "p5.48xlarge" in bash("init", "--gpu", "p5")
    assert bash("init", "--g") == ["--gpu"]
    # explain: the schema's paths one level at a time
    assert bash("explain", "fleets.models.au") == ["fleets.models.autoscale"]
    assert "fleets.models.autoscale.metric" in bash("explain", "fleets.models.autoscale.")
    assert "fleets.models.autoscale.scale_up.period_s" not in bash("explain", "fleets.models.autoscale.")
    assert bash("explain", "--format", "json", "prov") == ["provider"]
    assert bash("explain", "fleets", "") == []  # one PATH only


def test_every_option_of_every_command_completes(scripts, work):
    """The script is made from the parser: no option is left out (a hand list would drift)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        options = sorted(o for a in command._actions for o in a.option_strings if o.startswith("--"))
        assert complete("bash", scripts, work, "fleetform", name, "--") == options, name


def test_zsh_script(scripts, work):
    zsh = require("zsh", "zsh")
    assert subprocess.run([zsh, "-n", str(scripts / "fleetform.zsh")], capture_output=True).returncode == 0

    def words(*typed):
        return complete("zsh", scripts, work, "fleetform", *typed)

    # zsh's compadd matches the typed prefix itself (bashcompinit's compgen -W does not filter)
    assert words("") == sorted(COMMANDS)
    assert words("validate", "") == ["blueprints", "llm.yaml", "old.yml"]
    assert words("completion", "") == ["bash", "zsh"]
    assert "fleets.models.autoscale" in words("explain", "fleets.models.au")
    assert "fleets.models.autoscale.metric" not in words("explain", "fleets.models.au")


def test_bash_script_is_shellcheck_clean(scripts):
    shellcheck = require("shellcheck", "shellcheck")
    result = subprocess.run([shellcheck, "-s", "bash", str(scripts / "fleetform.bash")], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout


def _complete_line(shell: str, scripts, cwd, line: str, words: list[str]) -> list[str]:
    """As the shell calls the function for LINE: bash splits words at = and : (COMP_WORDBREAKS) and sets
    COMP_LINE (the words below were recorded from an interactive bash 5 at each line's end); zsh's bashcompinit
    passes whole words."""
    program = require(shell, shell)
    body = ('COMP_LINE="$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_POINT=${#COMP_LINE}; '
            '_fleetform; ')
    if shell == "bash":
        call = 'source "$1"; shift; ' + body + 'printf "%s\\n" "${COMPREPLY[@]}"'
    else:
        call = 'source "$1"; shift; setopt ksharrays; ' + body + 'print -l -- "${COMPREPLY[@]}"'
    result = subprocess.run([program, "-c", call, "x", str(scripts / f"fleetform.{shell}"), line, *words], cwd=cwd,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return sorted(w for w in result.stdout.splitlines() if w)


def test_words_bash_splits_at_equals_and_colon(scripts, work):
    """`--region=eu-west-` and diff's `HEAD~1:blueprints/llm.yaml`: bash hands the function the pieces
    (`--region`, `=`, `eu-west-`) and replaces only the text after the last = or :; completion read the
    pieces as words, so --option=VALUE completed nothing and NEW never completed after a REV:PATH OLD."""
    def bash(line, *words):
        return _complete_line("bash", scripts, work, line, list(words))

    assert bash("fleetform init --region=eu-west-", "fleetform", "init", "--region", "=", "eu-west-") == \
        ["eu-west-1", "eu-west-2", "eu-west-3"]
    assert bash("fleetform validate --format=", "fleetform", "validate", "--format", "=") == \
        ["github", "json", "text"]
    assert bash("fleetform diff HEAD~1:llm.yaml o", "fleetform", "diff", "HEAD~1", ":", "llm.yaml", "o") == \
        ["old.yml"]
    assert bash("fleetform diff HEAD~1:ll", "fleetform", "diff", "HEAD~1", ":", "ll") == ["llm.yaml"]
    assert bash("fleetform validate --format=json ", "fleetform", "validate", "--format", "=", "json", "") == \
        ["blueprints", "llm.yaml", "old.yml"]

    def zsh(line):  # what compadd keeps: zsh matches the whole word against the replies itself
        typed = line.split(" ")
        return [w for w in _complete_line("zsh", scripts, work, line, typed) if w.startswith(typed[-1])]

    assert zsh("fleetform init --region=eu-west-") == ["--region=eu-west-1", "--region=eu-west-2",
                                                       "--region=eu-west-3"]
    assert zsh("fleetform diff HEAD~1:llm.yaml o") == ["old.yml"]
    assert "HEAD~1:llm.yaml" in zsh("fleetform diff HEAD~1:ll")


def _interactive_bash(scripts, cwd, typed: str, expect: str, timeout: float = 20.0) -> str:
    """TYPED and a TAB in a real interactive bash (readline does the word splitting and the replacing): the
    screen once it shows EXPECT (or at TIMEOUT)."""
    import os
    import pty
    import select
    import time

    bash = require("bash", "bash")
    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive bash with no rc files
        os.chdir(cwd)
        os.execve(bash, [bash, "--norc", "--noprofile", "-i"],
                  {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "dumb", "PS1": "$ ", "HOME": str(cwd)})
    screen = b""

    def read_until(marker: bytes, limit: float) -> None:
        nonlocal screen
        end = time.monotonic() + limit
        while marker not in screen and time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    screen += os.read(fd, 65536)
                except OSError:
                    return

    try:
        os.write(fd, f"source {scripts / 'fleetform.bash'}; echo sourced-ok\n".encode())
        read_until(b"sourced-ok\r\n$ ", timeout)
        screen = b""
        os.write(fd, typed.encode() + b"\t")
        read_until(expect.encode(), timeout)
        return screen.decode(errors="replace")
    finally:
        os.write(fd, b"\x03exit\n")
        os.close(fd)
        os.waitpid(pid, 0)


@pytest.mark.parametrize("typed, expect", [
    ("fleetform init --region=eu-nor", "--region=eu-north-1 "),
    ("fleetform plan --format=ma", "--format=markdown "),
    ("fleetform validate --format=js", "--format=json "),
    ("fleetform diff HEAD~1:llm.yaml ol", "HEAD~1:llm.yaml old.yml "),
    ("fleetform diff HEAD~1:bl", "HEAD~1:blueprints/"),
    ("fleetform validate bl", "validate blueprints/"),  # a folder: its /, no space
])
def test_a_real_interactive_bash_completes(scripts, work, typed, expect):
    """The strongest judge here: readline itself splits the line (COMP_WORDBREAKS) and replaces the text."""
    screen = _interactive_bash(scripts, work, typed, expect)
    assert expect in screen, screen
