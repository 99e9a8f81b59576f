"""Shell completion scripts for bash and zsh, derived from the argparse parser of every command.

What each word completes to comes from the parser: the commands and their one-line helps (cli.COMMANDS),
each command's options, an option's choices; a value by its metavar: BLUEPRINT, OLD and NEW complete
blueprint files (*.yaml, *.yml, and folders to reach them), DIR folders, PATH (explain) the field paths of
the JSON Schema, REGION the AWS regions init knows, GPU the catalog's GPUs and instance types. Nothing is
listed by hand but that mapping of metavars.

zsh runs the same function through its bash-completion layer (bashcompinit, zshcompsys(1) "Use of
compinit": "bashcompinit ... provides a compatibility layer for bash completion functions"), so both shells
complete alike.
"""

from __future__ import annotations

import argparse
import shlex

FILES = "files"
DIRS = "dirs"
WORDS = "words"
PATHS = "paths"
NONE = "none"

BLUEPRINT_METAVARS = {"BLUEPRINT", "OLD", "NEW", "OLD NEW | BLUEPRINT"}  # the last: diff's sides (OLD NEW, or --base REV BLUEPRINT...)


def _value_kind(action: argparse.Action, words: dict[str, list[str]]) -> tuple[str, list[str]]:
    """How a value of this argument completes: (kind, words)."""
    if action.choices:
        return WORDS, [str(c) for c in action.choices]
    metavar = action.metavar if isinstance(action.metavar, str) else (action.dest or "").upper()
    if metavar in BLUEPRINT_METAVARS:
        return FILES, []
    if metavar == "DIR":
        return DIRS, []
    if metavar == "PATH":
        from .explain import paths

        return PATHS, paths()
    if metavar in words:
        return WORDS, words[metavar]
    return NONE, []


def spec() -> dict:
    """Every command's options and positionals, with how their values complete (from cli.build_parser())."""
    from .catalog import load_catalog
    from .cli import COMMANDS, build_parser
    from .starter import regions

    catalog = load_catalog()
    words = {"REGION": list(regions()),
             "GPU": sorted({g.family.lower() for g in catalog.gpus.values()}) + list(catalog.instances)}
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = {}
    for name in COMMANDS:
        command = sub.choices[name]
        options, positionals = {}, []
        for action in command._actions:
            if action.option_strings:
                takes = action.nargs != 0
                kind, values = _value_kind(action, words) if takes else (NONE, [])
                for option in action.option_strings:
                    options[option] = {"takes_value": takes, "kind": kind, "words": values}
            else:
                kind, values = _value_kind(action, words)
                positionals.append({"kind": kind, "words": values,
                                    "many": action.nargs in ("+", "*", argparse.REMAINDER)})
        commands[name] = {"options": options, "positionals": positionals}
    top = [o for a in parser._actions for o in a.option_strings]
    return {"commands": commands, "top_options": top}


def _q(words: list[str]) -> str:
    return shlex.quote(" ".join(words))


def bash() -> str:
    """The bash script: `source <(fleetform completion bash)`."""
    data = spec()
    out = [
        "# bash completion for fleetform (`fleetform completion bash`): source it, or save it as",
        "# ~/.local/share/bash-completion/completions/fleetform. Made from fleetform's own argument parser.",
        "# shellcheck disable=SC2016  # explain's word list holds the field $schema, meant literally",
        "",
        "_fleetform_add() {",
        "    # append each line of the standard input to COMPREPLY (bash and zsh alike; zsh has no mapfile)",
        "    local w",
        "    while IFS= read -r w; do [[ -n $w ]] && COMPREPLY+=(\"$w\"); done",
        "    return 0",
        "}",
        "",
        "_fleetform_filenames() {",
        "    # bash: the replies are file names, so a folder gets its / and no space after it (zsh has no compopt)",
        "    if type compopt >/dev/null 2>&1; then compopt -o filenames 2>/dev/null; fi",
        "    return 0",
        "}",
        "",
        "_fleetform_complete_kind() {",
        "    # $1: files | dirs | words | paths, $2: the words, $3: the word being completed",
        "    COMPREPLY=()",
        "    case \"$1\" in",
        "        files)  # diff's REV:PATH: the PATH part from the working tree",
        "            local rev=\"\" path=\"$3\"",
        "            [[ $path == *:* ]] && rev=\"${path%%:*}:\" && path=\"${path#*:}\"",
        "            _fleetform_filenames",
        "            _fleetform_add < <(compgen -P \"$rev\" -d -- \"$path\")",
        "            _fleetform_add < <(compgen -P \"$rev\" -f -X '!*.yaml' -- \"$path\")",
        "            _fleetform_add < <(compgen -P \"$rev\" -f -X '!*.yml' -- \"$path\") ;;",
        "        dirs) _fleetform_filenames; _fleetform_add < <(compgen -d -- \"$3\") ;;",
        "        words) _fleetform_add < <(IFS=$' \\t\\n'; compgen -W \"$2\" -- \"$3\") ;;",
        "        paths) # one level at a time: the fields under what is typed, not all their descendants",
        "            local w dots=\"${3//[^.]/}\" wd",
        "            while IFS= read -r w; do",
        "                wd=\"${w//[^.]/}\"; [[ -n $w && ${#wd} -le ${#dots} ]] && COMPREPLY+=(\"$w\")",
        "            done < <(IFS=$' \\t\\n'; compgen -W \"$2\" -- \"$3\") ;;",
        "    esac",
        "    return 0",
        "}",
        "",
        "_fleetform_words() {",
        "    # COMP_WORDS with the words bash split at = and : (COMP_WORDBREAKS: --region=us-east-1,",
        "    # HEAD~1:llm.yaml) joined again where COMP_LINE has no space between them: _fleetform_w, _fleetform_cw",
        "    local rest=\"${COMP_LINE-}\" gap w i n",
        "    _fleetform_w=(); _fleetform_cw=0",
        "    for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do",
        "        w=\"${COMP_WORDS[i]}\"; n=${#_fleetform_w[@]}",
        "        gap=\"${rest%%[![:space:]]*}\"; rest=\"${rest#\"$gap\"}\"",
        "        if [[ $n -gt 0 && -n ${COMP_LINE-} && -z $gap ]]; then _fleetform_w[n-1]=\"${_fleetform_w[n-1]}$w\"",
        "        else _fleetform_w+=(\"$w\"); fi",
        "        rest=\"${rest#\"$w\"}\"",
        "        if [[ $i -eq $COMP_CWORD ]]; then _fleetform_cw=$((${#_fleetform_w[@]} - 1)); fi",
        "    done",
        "    return 0",
        "}",
        "",
        "_fleetform() {",
        "    # a word bash split at = or : is completed whole, and the replies lose what bash keeps before the",
        "    # word's last = or : (zsh passes whole words: nothing is cut); --option=VALUE completes VALUE",
        "    local _fleetform_w _fleetform_cw _fleetform_lead=\"\" _fleetform_cut=\"\" r",
        "    _fleetform_words",
        "    local whole=\"${_fleetform_w[_fleetform_cw]}\"",
        "    [[ $whole != \"${COMP_WORDS[COMP_CWORD]}\" ]] && _fleetform_cut=\"${whole%\"${whole##*[=:]}\"}\"",
        "    _fleetform_main",
        "    local out=()",
        "    for r in \"${COMPREPLY[@]}\"; do",
        "        r=\"$_fleetform_lead$r\"",
        "        [[ $r == \"$_fleetform_cut\"* ]] && out+=(\"${r#\"$_fleetform_cut\"}\")",
        "    done",
        "    COMPREPLY=(\"${out[@]}\")",
        "    return 0",
        "}",
        "",
        "_fleetform_main() {",
        "    local cur=\"${_fleetform_w[_fleetform_cw]}\" prev=\"\" cmd=\"\" i n=0",
        "    [[ $_fleetform_cw -gt 0 ]] && prev=\"${_fleetform_w[_fleetform_cw-1]}\"",
        "    if [[ $cur == -*=* ]]; then  # --option=VALUE: VALUE as if it followed --option",
        "        prev=\"${cur%%=*}\"; _fleetform_lead=\"$prev=\"; cur=\"${cur#*=}\"",
        "    fi",
        "    for ((i = 1; i < _fleetform_cw; i++)); do",
        "        case \"${_fleetform_w[i]}\" in -*) ;; *) cmd=\"${_fleetform_w[i]}\"; break ;; esac",
        "    done",
        "    if [[ -z $cmd ]]; then",
        f"        if [[ $cur == -* ]]; then _fleetform_complete_kind words {_q(data['top_options'])} \"$cur\"",
        f"        else _fleetform_complete_kind words {_q(list(data['commands']))} \"$cur\"; fi",
        "        return 0",
        "    fi",
        "    # positionals before the cursor, skipping option values",
        "    local takes_value=\"\"",
        "    case \"$cmd\" in",
    ]
    for name, command in data["commands"].items():
        valued = [o for o, v in command["options"].items() if v["takes_value"]]
        out.append(f"        {name}) takes_value={_q(valued)} ;;")
    out += [
        "    esac",
        "    for ((i = i + 1; i < _fleetform_cw; i++)); do",
        "        case \"${_fleetform_w[i]}\" in",
        "            -*=*) ;;",
        "            -*) [[ \" $takes_value \" == *\" ${_fleetform_w[i]} \"* ]] && ((i++)) ;;",
        "            *) ((n++)) ;;",
        "        esac",
        "    done",
        "    case \"$cmd\" in",
    ]
    for name, command in data["commands"].items():
        out.append(f"        {name})")
        valued = {o: v for o, v in command["options"].items() if v["takes_value"]}
        if valued:
            out.append("            case \"$prev\" in")
            for option, value in valued.items():
                out.append(f"                {shlex.quote(option)}) _fleetform_complete_kind {value['kind']} "
                           f"{_q(value['words'])} \"$cur\"; return 0 ;;")
            out.append("            esac")
        out.append(f"            if [[ $cur == -* ]]; then _fleetform_complete_kind words "
                   f"{_q(list(command['options']))} \"$cur\"; return 0; fi")
        positionals = command["positionals"]
        if positionals:
            out.append("            case $n in")
            for index, positional in enumerate(positionals):
                last = index == len(positionals) - 1
                pattern = "*" if last and positional["many"] else f"{index}"
                out.append(f"                {pattern}) _fleetform_complete_kind {positional['kind']} "
                           f"{_q(positional['words'])} \"$cur\" ;;")
            if not positionals[-1]["many"]:
                out.append("                *) COMPREPLY=() ;;")
            out.append("            esac")
        else:
            out.append("            COMPREPLY=()")
        out.append("            ;;")
    out += [
        "    esac",
        "    return 0",
        "}",
        "",
        "complete -F _fleetform fleetform",
    ]
    return "\n".join(out) + "\n"


def zsh() -> str:
    """The zsh script: the bash function through zsh's bashcompinit (`source <(fleetform completion zsh)`
    in ~/.zshrc, after compinit)."""
    head = [
        "# zsh completion for fleetform (`fleetform completion zsh`): source it from ~/.zshrc after compinit.",
        "# It runs fleetform's bash completion through zsh's bash-completion layer (bashcompinit).",
        "autoload -U +X compinit && { (( ${+_comps} )) || compinit }",
        "autoload -U +X bashcompinit && bashcompinit",
    ]
    return "\n".join(head) + "\n" + bash()
