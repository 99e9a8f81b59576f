"""fleetform completion bash|zsh: print a shell completion script (fleetform/completion.py)."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    p = sub.add_parser("completion",
                       description="Print a completion script for bash or zsh: commands, options, their values, "
                                   "blueprint files and the field paths of `fleetform explain`.",
                       epilog="install:\n"
                              "  bash: fleetform completion bash > ~/.local/share/bash-completion/completions/fleetform\n"
                              "        (or: source <(fleetform completion bash) in ~/.bashrc)\n"
                              "  zsh:  source <(fleetform completion zsh) in ~/.zshrc")
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell")
    p.set_defaults(run=run)


def run(args) -> int:
    from .. import completion

    sys.stdout.write(completion.bash() if args.shell == "bash" else completion.zsh())
    return 0
