"""`integrator server-hook` — protect the canonical repository's authority refs on the server.

`install` writes a `pre-receive` hook into a bare repository and records its settings in
the repository's git config; `check` is what that hook runs; `sign` prints the push option
that lets an integrator through on a server that authenticates no one; `keygen` writes a
key for it. The decision is `integrator.serverhook.decide.decide`; docs/server-hook.md has
the rules and the setups (ssh, gitolite, Gitea/Forgejo, GitLab, http-backend, git daemon,
GitHub).
"""

from __future__ import annotations

import argparse
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import add_json, print_json, say
from integrator.docpath import doc
from integrator.errors import EXIT_FENCED, EXIT_OK, IntegratorError, UsageError
from integrator.limits import HOOK_INPUT_BYTES
from integrator.plumbing import signing
from integrator.plumbing.signing import Update, push_option
from integrator.serverhook import run
from integrator.serverhook.decide import (
    IDENTITY_CHOICES,
)
from integrator.serverhook.install import REPLACED, install
from integrator.serverhook.run import CHAINED, GivenSettings

MAX_SHOWN_REFUSALS = 200

DESCRIPTION = f"""\
Keep the canonical repository's authority to the integrators, on the git server itself.

Only an integrator may create, move or delete refs/heads/<target> and anything under
{refnames.NAMESPACE} (queue, claims, claims-index, policy, held, archived, expansions, archive,
verdicts, …), tags and refs outside refs/heads/. Anyone who may push may create a
submission, {refnames.SUBMIT}<taskId>/<submissionId> (written once), and push
branches other than the target. Odd ref names are refused for everyone.

An integrator is a pusher whose name, as the server authenticated it, is allowed
(integrator.hook.allow), or a push carrying a valid integrator-hmac push option signed
with the shared key (integrator.hook.keyFile) — for servers that authenticate no one.
The name is read from the variable the server sets: GITEA_PUSHER_NAME (Gitea, Forgejo),
GL_USERNAME (GitLab), GITHUB_USER_LOGIN (GitHub Enterprise Server), GL_USER (gitolite),
REMOTE_USER (a web server in front of git http-backend), in that order; see
{doc("server-hook.md")}.
"""


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "server-hook",
        help="protect authority refs on the git server (a pre-receive hook)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    def usage(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=usage)
    inner = parser.add_subparsers(dest="hook_command", metavar="ACTION")

    install = inner.add_parser(
        "install",
        help="write hooks/pre-receive into a bare repository and record its settings",
        description=(
            "Write an executable pre-receive hook that runs `integrator server-hook check` "
            "and record the settings in the repository's git config. Running it again with "
            "the same arguments changes nothing. An existing pre-receive hook that integrator "
            f"did not write is left alone unless --chain (moved to {CHAINED} and run after "
            f"the check passes) or --force (moved to {REPLACED}). In a Gitea or Forgejo "
            "repository the hook goes into hooks/pre-receive.d/ beside Gitea's own."
        ),
    )
    install.add_argument("--repo", required=True, metavar="BARE", help="the bare repository")
    _add_settings(install)
    install.add_argument(
        "--python",
        default=sys.executable,
        metavar="PATH",
        help="the Python the hook runs, isolated (-I), so integrator must be installed in it "
        "(default: this one)",
    )
    how = install.add_mutually_exclusive_group()
    how.add_argument("--chain", action="store_true", help="keep a foreign hook, run it after")
    how.add_argument(
        "--force",
        action="store_true",
        help="replace a foreign hook; install into a core.hooksPath other repositories share",
    )
    add_json(install)
    install.set_defaults(func=run_install)

    check = inner.add_parser(
        "check",
        help="the hook itself: decide a push from standard input and the environment",
        description=(
            "Read `<old> <new> <ref>` lines on standard input, the pusher from the server's "
            "variables and the push options from GIT_PUSH_OPTION_*; exit 0 to accept or 1 "
            "to refuse, with one line per refused ref on standard error (git shows them as "
            "remote: lines). Settings come from the repository's git config; options given "
            "here take their place (for hosts whose hooks live outside the repository)."
        ),
    )
    check.add_argument(
        "--repo", metavar="PATH", help="the repository (default: $GIT_DIR, as git sets it)"
    )
    _add_settings(check)
    check.add_argument("--chain", metavar="HOOK", help="run HOOK with the same input once accepted")
    add_json(check)
    check.set_defaults(func=run_check)

    sign = inner.add_parser(
        "sign",
        help="print the push option that lets these updates past the hook",
        description=(
            "Print `integrator-hmac=…` for the updates given as `<old> <new> <ref>` lines "
            "(on standard input, or --update): old is the value the lease expects (40 zeros "
            "to create), new 40 zeros to delete. Pass it as `git push -o <value>`; sign every "
            "push attempt anew, as a signature is accepted once and for a few minutes."
        ),
    )
    sign.add_argument("--key-file", required=True, type=Path, metavar="F")
    sign.add_argument("--update", action="append", default=[], metavar="'OLD NEW REF'")
    add_json(sign)
    sign.set_defaults(func=run_sign)

    keygen = inner.add_parser("keygen", help="write a new random key file (mode 600)")
    keygen.add_argument("-o", "--output", required=True, type=Path, metavar="F")
    keygen.add_argument("--force", action="store_true", help="overwrite F")
    keygen.set_defaults(func=run_keygen)


def _add_settings(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow",
        action="append",
        metavar="IDENTITY",
        help="an integrator's name as the server authenticates it (repeat for several)",
    )
    parser.add_argument("--key-file", type=Path, metavar="F", help="the shared HMAC key")
    parser.add_argument(
        "--target",
        action="append",
        metavar="BRANCH",
        help="a protected target branch (default: integrator.target, else the branches the "
        "repository has integrator queues for; install never guesses from HEAD)",
    )
    parser.add_argument(
        "--identity-from",
        choices=IDENTITY_CHOICES,
        help="trust only this variable for the pusher's name (default: auto)",
    )
    parser.add_argument("--max-age", type=int, metavar="SECONDS", help="signature lifetime (300)")
    parser.add_argument(
        "--require-identity",
        action="store_true",
        default=None,
        help="refuse pushes with no authenticated pusher and no valid signature",
    )


def _given(args: argparse.Namespace) -> GivenSettings:
    """The settings given on the command line."""
    return GivenSettings(
        allow=None if args.allow is None else tuple(args.allow),
        key_file=args.key_file,
        target=None if args.target is None else tuple(args.target),
        identity_from=args.identity_from,
        max_age=args.max_age,
        require_identity=bool(args.require_identity),
    )


# --- check ----------------------------------------------------------------------------


def run_check(args: argparse.Namespace) -> int:
    """Fail closed: anything that goes wrong refuses the push, saying why."""
    data = sys.stdin.buffer.read(HOOK_INPUT_BYTES + 1)  # past the limit it is refused anyway
    env = dict(os.environ)
    prefix = ""
    try:
        git_dir = Path(args.repo).resolve() if args.repo else run.git_dir_of(env, Path.cwd())
        config = run.merged(run.read_config(git_dir), _given(args).overrides())
        settings = run.settings_from_config(config)
        verdict = run.run_check(data, env=env, git_dir=git_dir, settings=settings)
    except Exception as err:
        message = str(err) if isinstance(err, IntegratorError) else f"{type(err).__name__}: {err}"
        say(f"integrator: refusing the push: the hook cannot decide: {message}", err=True)
        return EXIT_FENCED
    if verdict.identity_source == "GL_USERNAME":
        prefix = "GL-HOOK-ERR: "  # GitLab shows lines with this prefix in its web interface
    if args.json:
        print_json(verdict.to_json())
    lines = verdict.refusals()
    for line in lines[:MAX_SHOWN_REFUSALS]:
        say(prefix + line, err=True)
    if len(lines) > MAX_SHOWN_REFUSALS:
        say(f"{prefix}integrator: … and {len(lines) - MAX_SHOWN_REFUSALS} more", err=True)
    if not verdict.accepted:
        return EXIT_FENCED
    if args.chain:
        return _chain(Path(args.chain), data, prefix)
    return EXIT_OK


def _chain(hook: Path, data: bytes, prefix: str) -> int:
    """Hand the same input to the hook this one replaced; its refusal refuses the push."""
    sys.stdout.flush()
    sys.stderr.flush()
    accepted = run.run_chained(hook, data)
    if accepted is None:
        say(f"{prefix}integrator: refusing the push: the chained hook {hook} is missing", err=True)
        return EXIT_FENCED
    return EXIT_OK if accepted else EXIT_FENCED


# --- install --------------------------------------------------------------------------


def run_install(args: argparse.Namespace) -> int:
    installed = install(
        Path(args.repo),
        _given(args),
        python=args.python,
        chain=args.chain,
        force=args.force,
    )
    if args.json:
        print_json(
            {
                "hook": str(installed.hook),
                "written": installed.written,
                "chained": str(installed.chained) if installed.chained else None,
                "replaced": str(installed.replaced) if installed.replaced else None,
                "settings": installed.settings,
                "warnings": installed.warnings,
            }
        )
    else:
        say(f"{'wrote' if installed.written else 'unchanged'} {installed.hook}")
        if installed.chained:
            say(f"runs {installed.chained} after the check passes")
        if installed.replaced:
            say(f"the hook it replaced is kept as {installed.replaced}")
        for name, values in sorted(installed.settings.items()):
            for value in values:
                say(f"  {name} = {value}")
    for warning in installed.warnings:
        say(f"warning: {warning}", err=True)
    return EXIT_OK


# --- sign and keygen ------------------------------------------------------------------


def run_sign(args: argparse.Namespace) -> int:
    key = signing.load_key(args.key_file)
    lines = list(args.update) or sys.stdin.read().splitlines()
    updates = []
    for line in (text.strip() for text in lines):
        parts = line.split(" ", 2)
        if line and len(parts) != 3:
            raise UsageError(f"{line!r} is not '<old> <new> <ref>'")
        if line:
            updates.append(Update(*parts))
    option = push_option(key, updates)
    if args.json:
        print_json({"option": option, "updates": [u.line().decode().strip() for u in updates]})
    else:
        print(option)
    return EXIT_OK


def run_keygen(args: argparse.Namespace) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if args.force else os.O_EXCL)
    try:
        fd = os.open(args.output, flags, stat.S_IRUSR | stat.S_IWUSR)
    except FileExistsError as err:
        raise UsageError(f"{args.output} exists; pass --force to overwrite it") from err
    except OSError as err:
        raise UsageError(f"cannot write {args.output}: {err.strerror}") from err
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    os.chmod(args.output, 0o600)
    say(f"wrote {args.output} (keep it secret: whoever reads it can sign pushes)")
    return EXIT_OK
