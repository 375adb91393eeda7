"""The command line's parser: a table that lists every command without importing it, every
help page reachable, "did you mean" for a mistyped command."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from integrator import cli
from integrator.cli import build_parser, main
from integrator.commands._table import COMMANDS


def _registered() -> dict[str, tuple[str, str | None]]:
    """What the command modules register themselves: name -> (module, one-line help)."""
    found: dict[str, tuple[str, str | None]] = {}
    for module in sorted({m for m, _ in COMMANDS.values()}):
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(f"integrator.commands.{module}").register(sub)
        for action in sub._choices_actions:
            found[action.dest] = (module, action.help)
    return found


def _pages() -> list[list[str]]:
    """Every help page: the top one, each command's, each of their actions' (nested)."""
    pages: list[list[str]] = [[]]

    def walk(words: list[str], parser: argparse.ArgumentParser) -> None:
        pages.append(words)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, inner in action.choices.items():
                    walk([*words, name], inner)

    for name in COMMANDS:
        parser = build_parser(name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                walk([name], action.choices[name])
    return pages


def test_the_command_table_is_what_the_modules_register() -> None:
    """Each command in `COMMANDS` is registered by the module it names, with the same
    one-line help, and no module registers a command the table lacks."""
    table = {name: (module, helptext) for name, (module, helptext) in COMMANDS.items()}
    assert _registered() == table


def test_the_command_list_is_alphabetical() -> None:
    """`integrator --help` lists the commands in alphabetical order."""
    assert list(COMMANDS) == sorted(COMMANDS)


def test_every_help_page_prints_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """Every command's and every action's --help prints its usage and exits 0 (76 pages
    and more: the lazy parser must not lose one)."""
    pages = _pages()
    assert len(pages) >= 76
    for words in pages:
        with pytest.raises(SystemExit) as exited:
            main([*words, "--help"])
        assert exited.value.code == 0, words
        out = capsys.readouterr().out
        assert out.startswith("usage: integrator"), words
        if words:
            assert f"integrator {' '.join(words)}" in out, words


def test_top_help_and_version_import_no_command_module() -> None:
    """`integrator --help` and `--version` import neither a command module nor pydantic or
    pygit2 (they cost most of a start-up)."""
    probe = (
        "import sys, io, contextlib\n"
        "from integrator.cli import main\n"
        "for words in (['--help'], ['--version']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try: main(words)\n"
        "        except SystemExit: pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'pygit2', 'structlog') or (m.startswith('integrator.commands.') and m != "
        "'integrator.commands._table'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + probe],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert json.loads(out) == []


def test_a_command_s_help_imports_only_its_module() -> None:
    """`integrator queue --help` imports the queue command's module and no other."""
    probe = (
        "import sys, io, contextlib, json\n"
        "from integrator.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: main(['queue', '--help'])\n"
        "    except SystemExit: pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('integrator.commands.')"
        " and not m.startswith('integrator.commands._'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == ["integrator.commands.queue"]


HEAVY = ("pydantic", "pygit2", "structlog", "prometheus_client", "cryptography")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_s_help_loads_no_heavy_library(command: str) -> None:
    """`integrator COMMAND --help` builds its parser without the models, the repository
    library, the logger or the metrics (each costs tens to hundreds of milliseconds): a
    command module keeps them inside the functions that run it."""
    probe = (
        "import sys, io, contextlib, json\n"
        "from integrator.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try: main([{command!r}, '--help'])\n"
        "    except SystemExit: pass\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_a_mistyped_command_suggests_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    """`integrator stauts` exits 2 and names `status`; a word near nothing gets no guess."""
    assert main(["stauts"]) == 2
    assert "did you mean status" in capsys.readouterr().err
    assert main(["xyzzy"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'xyzzy'" in err and "did you mean" not in err


def test_the_real_process_lists_every_command() -> None:
    """`python -m integrator --help` in its own process lists every command and exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "integrator", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    for name in COMMANDS:
        assert f"    {name}" in done.stdout
    assert cli.DESCRIPTION.splitlines()[0] in done.stdout


def test_bash_completion_completes_commands_actions_and_options(tmp_path: Path) -> None:
    """`integrator completion bash`, sourced in a real bash, completes a command, an action
    of it and that action's options."""
    script = tmp_path / "c.bash"
    done = subprocess.run(
        [sys.executable, "-m", "integrator", "completion", "bash"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    script.write_text(done.stdout)
    probe = (
        f"source {script}\n"
        'COMP_WORDS=(integrator stat); COMP_CWORD=1; _integrator; echo "${COMPREPLY[*]}"\n'
        "COMP_WORDS=(integrator contract li); COMP_CWORD=2; _integrator; "
        'echo "${COMPREPLY[*]}"\n'
        "COMP_WORDS=(integrator contract list --li); COMP_CWORD=3; _integrator; "
        'echo "${COMPREPLY[*]}"\n'
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["status", "list", "--live"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_a_script_naming_every_command(shell: str) -> None:
    """The zsh and fish scripts name every command (fish: one `complete` line each)."""
    done = subprocess.run(
        [sys.executable, "-m", "integrator", "completion", shell],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    for name in COMMANDS:
        assert name in done.stdout


def test_schema_show_takes_a_part_of_the_name(capsys: pytest.CaptureFixture[str]) -> None:
    """`schema show contract` prints the ownership contract's schema; a part that names
    several is exit 2 naming them."""
    assert main(["schema", "show", "contract"]) == 0
    assert "coding.workspace.ownership.v1" in capsys.readouterr().out
    assert main(["schema", "show", "v1"]) == 2
    assert "verdict.v1" in capsys.readouterr().err
