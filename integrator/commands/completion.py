"""`integrator completion bash|zsh|fish` — a shell completion script, printed.

The script is static: the commands, each command's actions and the options of each, read
from the parser when the script is printed (so it completes what this version has).
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from integrator.commands._common import say

SHELLS = ("bash", "zsh", "fish")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL. bash: `source <(integrator "
        "completion bash)` (or save it in ~/.local/share/bash-completion/completions/"
        "integrator); zsh: `source <(integrator completion zsh)`; fish: `integrator "
        "completion fish > ~/.config/fish/completions/integrator.fish`.",
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(func=run)


def _words() -> dict[str, tuple[list[str], dict[str, list[str]]]]:
    """Command -> (its actions, options by action; "" for the command's own options)."""
    import importlib

    from integrator.commands._table import COMMANDS

    found: dict[str, tuple[list[str], dict[str, list[str]]]] = {}
    for name, (module, _) in COMMANDS.items():
        if name == "completion":
            found[name] = ([], {"": list(SHELLS)})
            continue
        sub = argparse.ArgumentParser(prog="integrator").add_subparsers()
        importlib.import_module(f"integrator.commands.{module}").register(sub)
        command = sub.choices[name]
        actions = _subparsers(command)
        options = {"": _options(command)}
        options.update({action: _options(p) for action, p in actions.items()})
        found[name] = (sorted(actions), options)
    return found


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def bash(words: dict[str, tuple[list[str], dict[str, list[str]]]]) -> str:
    cases = []
    for name, (actions, options) in words.items():
        inner = [f"        {shlex.quote(a)}) opts={shlex.quote(' '.join(o))} ;;" for a, o in
                 options.items() if a]  # fmt: skip
        cases.append(
            f"    {shlex.quote(name)})\n"
            f"      actions={shlex.quote(' '.join(actions))}\n"
            f"      opts={shlex.quote(' '.join(options['']))}\n"
            '      case "${COMP_WORDS[2]}" in\n' + "\n".join(inner) + ("\n" if inner else "")
            + "      esac ;;"
        )  # fmt: skip
    return (
        "# integrator completion for bash: source <(integrator completion bash)\n"
        "_integrator() {\n"
        '  local cur="${COMP_WORDS[COMP_CWORD]}" actions="" opts=""\n'
        "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
        f"    COMPREPLY=($(compgen -W {shlex.quote(' '.join(words))} -- \"$cur\")); return\n"
        "  fi\n"
        '  case "${COMP_WORDS[1]}" in\n' + "\n".join(cases) + "\n  esac\n"
        '  if [ "$COMP_CWORD" -eq 2 ] && [ -n "$actions" ] && [[ "$cur" != -* ]]; then\n'
        '    COMPREPLY=($(compgen -W "$actions" -- "$cur"))\n'
        "  else\n"
        '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))\n'
        "  fi\n"
        "}\n"
        "complete -o default -F _integrator integrator\n"
    )  # fmt: skip


def zsh(words: dict[str, tuple[list[str], dict[str, list[str]]]]) -> str:
    return (
        "# integrator completion for zsh: source <(integrator completion zsh)\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(words)
    )


def fish(words: dict[str, tuple[list[str], dict[str, list[str]]]]) -> str:
    lines = [
        "# integrator completion for fish: integrator completion fish > "
        "~/.config/fish/completions/integrator.fish",
        "complete -c integrator -f",
    ]
    top = " ".join(words)
    lines.append(f"complete -c integrator -n 'not __fish_seen_subcommand_from {top}' -a '{top}'")
    for name, (actions, options) in words.items():
        seen = f"__fish_seen_subcommand_from {name}"
        if actions:
            lines.append(f"complete -c integrator -n '{seen}' -a '{' '.join(actions)}'")
        for action, opts in options.items():
            if name == "completion":
                lines.append(f"complete -c integrator -n '{seen}' -a '{' '.join(opts)}'")
                continue
            cond = seen if not action else f"{seen}; and __fish_seen_subcommand_from {action}"
            for opt in opts:
                lines.append(f"complete -c integrator -n '{cond}' -l {opt[2:]}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    words = _words()
    render = {"bash": bash, "zsh": zsh, "fish": fish}[args.shell]
    say(render(words), end="")
    return 0
