"""The canonical repository's own guard: a `pre-receive` hook that keeps authority refs to
the integrators (docs/server-hook.md).

`decide` is the pure decision. It takes what git hands a pre-receive hook (the
`<old> <new> <ref>` lines, the environment with the server's authenticated user and the push
options) and the settings, and returns a `HookVerdict` with one `RefVerdict` per ref.
`integrator.serverhook.run.run_check` is the wrapper the hook calls (settings from git
config, the key file, symbolic refs, used nonces). `push_option` is what an integrator's
transport calls to sign the updates it is about to push.

Who may write what:
- `refs/heads/<target>` and every ref under `refs/integrator/` (queue, claims, claims-index,
  policy, held, archived, expansions, archive, verdicts, …): integrators only. An
  integrator is a pusher whose server-authenticated name is in `integrator.hook.allow`, or a
  push carrying a valid `integrator-hmac` option (for servers that authenticate no one).
- `refs/integrator/submit/<taskId>/<submissionId>`: anyone may create it — but a pusher the
  server authenticated only for a contract whose lease it holds (`lease.holder` equals its
  name), under that contract's own task (run.py reads the pushed `submission.json` from the
  push's quarantine, measured first); a submission is written once, so updating or deleting
  one is the integrators' job. A name under
  `refs/integrator/submit/` that no daemon could decide — not exactly `<task>/<id>`, a task
  that is not a ref component, an id not of integrator's shape — is refused for everyone
  (an integrator may still delete one made before the hook).
- other branches (`refs/heads/…`): anyone. Tags, notes and every other namespace: integrators.
- A name git would refuse, or that is odd (not UTF-8, invisible or space characters, a
  component past 255 bytes), is refused for everyone. Names are compared case-folded and
  Unicode-normalised too, since `refs/Integrator/claims/x` is the same file as
  `refs/integrator/claims/x` on a case-insensitive server.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from integrator import refnames
from integrator.escape import visible
from integrator.limits import HOOK_INPUT_BYTES, MAX_IDENTITY_CHARS, MAX_UPDATES
from integrator.plumbing.signing import DEFAULT_MAX_AGE, OID, OPTION, Update, check_signature
from integrator.refnames import ODD_CATEGORIES, fold, ref_problem, refname_problem, shown

AUTHORITY = frozenset(
    {"queue", "claims", "claims-index", "policy", "held", "archived", "expansions", "archive"}
)
# The variables a server sets from the user it authenticated, in the order `auto` tries them
# (why each one cannot come from the client: docs/server-hook.md, "Who is pushing").
IDENTITY_SOURCES: dict[str, str] = {
    "GITEA_PUSHER_NAME": "Gitea or Forgejo",
    "GL_USERNAME": "GitLab",
    "GITHUB_USER_LOGIN": "GitHub Enterprise Server",
    "GL_USER": "gitolite",
    "REMOTE_USER": "the web server in front of git http-backend",
}
UNIX = "unix"  # the account the hook runs as (per-user ssh accounts with git-shell)
IDENTITY_CHOICES = ("auto", *IDENTITY_SOURCES, UNIX)


@dataclass(frozen=True)
class Settings:
    targets: tuple[str, ...] = ("main",)
    allow: tuple[str, ...] = ()
    key: bytes | None = None
    identity_from: str = "auto"
    max_age: int = DEFAULT_MAX_AGE
    require_identity: bool = False


@dataclass(frozen=True)
class Submitted:
    """What a pushed submission commit says about itself, read by the hook (run.py) before
    it decides: the contract's task and lease holder, or why they could not be read."""

    task: str | None = None
    holder: str | None = None
    problem: str | None = None


@dataclass(frozen=True)
class RefVerdict:
    ref: str  # as shown: escaped, safe on a terminal
    old: str
    new: str
    action: str  # create, update, delete
    rule: str  # target, authority, integrator, submit, branch, other, invalid
    accepted: bool
    reason: str


@dataclass(frozen=True)
class HookVerdict:
    accepted: bool
    identity: str | None
    identity_source: str | None
    integrator: bool  # the pusher acts as an integrator (allowed name or valid signature)
    signature: str  # "none", "valid", or why the option was not accepted
    problems: tuple[str, ...]  # what refuses the push as a whole
    refs: tuple[RefVerdict, ...] = ()
    nonce: tuple[int, str] | None = field(default=None, repr=False)  # (time, nonce) to record

    def refusals(self) -> list[str]:
        """One line per refused ref (and per problem of the push as a whole)."""
        lines = [f"integrator: refusing the push: {p}" for p in self.problems]
        lines += [f"integrator: refused {v.ref}: {v.reason}" for v in self.refs if not v.accepted]
        return lines

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document.pop("nonce")
        return document


def _submit_problem(ref: str) -> str | None:
    """Why `ref`, a name under refs/integrator/submit/, is not one a daemon could decide:
    exactly two components below it, a task id usable as one ref component (the contract's
    rule for `taskId`) and a submission id of the one shape integrator makes."""
    task, _, sid = ref.removeprefix(refnames.SUBMIT).partition("/")
    if refname_problem(task) is None and refnames.SUBMISSION_ID.fullmatch(sid):
        return None  # the id has no '/' (its pattern), so this is exactly <task>/<id>
    return (
        f"is not {refnames.SUBMIT}<task>/<submission id> with a usable task and an id as "
        "integrator submit makes them (YYYYMMDDTHHMMSSffffffZ-8 hex)"
    )


def classify(ref: str, targets: Sequence[str]) -> tuple[str, str]:
    """(rule, detail): which rule governs `ref`; the detail names the namespace or problem."""
    problem = ref_problem(ref)
    if problem:
        return "invalid", problem
    folded = fold(ref)
    for target in targets:
        head = fold(f"refs/heads/{target}")
        if folded == head or folded.startswith(head + "/"):
            return "target", target
    if folded == refnames.ROOT or folded.startswith(refnames.NAMESPACE):
        if ref.startswith(refnames.SUBMIT):
            # One that could never be decided is refused for everyone (else it would sit on
            # the intake, warned about at every daemon start), however many components.
            unusable = _submit_problem(ref)
            return ("invalid", unusable) if unusable else ("submit", "submit")
        namespace = folded.split("/")[2] if folded.count("/") >= 2 else ""
        return ("authority" if namespace in AUTHORITY else "integrator"), namespace
    if ref.startswith("refs/heads/"):
        return "branch", ""
    return "other", ""


def parse_updates(data: bytes) -> tuple[list[Update], list[str]]:
    """The pre-receive input as updates, and what is wrong with it as a whole."""
    if len(data) > HOOK_INPUT_BYTES:
        return [], [f"the update list is larger than {HOOK_INPUT_BYTES >> 20} MiB"]
    lines = data.rstrip(b"\n").split(b"\n") if data.strip(b"\n") else []
    if not lines:
        return [], ["no updates were given on standard input"]
    if len(lines) > MAX_UPDATES:
        return [], [f"{len(lines)} updates in one push; at most {MAX_UPDATES} are accepted"]
    updates: list[Update] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        parts = line.split(b" ", 2)
        if (
            len(parts) != 3
            or not OID.fullmatch(parts[0])
            or not OID.fullmatch(parts[1])
            or len(parts[0]) != len(parts[1])
            or parts[0] == parts[1]
        ):
            problems.append(f"input line {number} is not '<old> <new> <ref>'")
            continue
        update = Update(
            parts[0].decode(), parts[1].decode(), parts[2].decode("utf-8", "surrogateescape")
        )
        if update.ref in seen:
            problems.append(f"{shown(update.ref)} is updated twice")
        seen.add(update.ref)
        updates.append(update)
    return updates, problems


def push_options(env: Mapping[str, str]) -> list[str]:
    """The push options git passed to the hook (none when the server did not advertise them)."""
    try:
        count = int(env.get("GIT_PUSH_OPTION_COUNT", "0"))
    except ValueError:
        return []
    return [env.get(f"GIT_PUSH_OPTION_{i}", "") for i in range(max(0, min(count, 1000)))]


@dataclass(frozen=True)
class Identity:
    name: str | None
    source: str | None
    problem: str | None = None


def resolve_identity(
    env: Mapping[str, str], source: str = "auto", unix_user: str | None = None
) -> Identity:
    """The pusher the server authenticated. `auto` takes the first of `IDENTITY_SOURCES`
    that is set, and refuses when another one names someone else; a named source is the
    only one read."""
    if source == UNIX:
        found = [(UNIX, unix_user)] if unix_user else []
    elif source == "auto":
        found = [(var, env[var]) for var in IDENTITY_SOURCES if env.get(var)]
    elif source in IDENTITY_SOURCES:
        found = [(source, env[source])] if env.get(source) else []
    else:
        return Identity(
            None,
            None,
            f"integrator.hook.identity {source!r} is not one of {', '.join(IDENTITY_CHOICES)}",
        )
    if not found:
        return Identity(None, None)
    (var, name), others = found[0], found[1:]
    assert name is not None
    if (
        len(name) > MAX_IDENTITY_CHARS
        or name != name.strip()
        or any(unicodedata.category(ch) in ODD_CATEGORIES and ch != " " for ch in name)
    ):
        return Identity(
            None, var, f"the pusher's name in {var} is not a plain name: {visible(name[:80])!r}"
        )
    for other, value in others:
        if value != name:
            return Identity(
                None,
                var,
                f"{var} says {visible(name)!r} but {other} says {visible(value)!r}; "
                "name the variable to trust with integrator.hook.identity",
            )
    return Identity(name, var)


_VERB = {"create": "create", "update": "update", "delete": "delete"}
_ONLY = {
    "target": "only integrators may {verb} the target branch",
    "authority": f"only integrators may {{verb}} integrator authority refs ({refnames.NAMESPACE}{{detail}})",
    "integrator": f"only integrators may write under {refnames.NAMESPACE} (submissions go to "
    f"{refnames.SUBMIT}<taskId>/<submissionId>)",
    "other": "only integrators may write refs outside refs/heads/ (tags, notes, other namespaces)",
}


def _judge(  # noqa: PLR0911 — one return per rule
    update: Update,
    *,
    integrator: bool,
    targets: Sequence[str],
    symrefs: Mapping[str, str],
    who: str,
    pusher: str | None = None,
    submitted: Submitted | None = None,
) -> RefVerdict:
    rule, detail = classify(update.ref, targets)
    verb = _VERB[update.action]

    def verdict(accepted: bool, reason: str) -> RefVerdict:
        return RefVerdict(
            shown(update.ref), update.old, update.new, update.action, rule, accepted, reason
        )

    if rule == "invalid":
        if integrator and update.action == "delete" and update.ref.startswith(refnames.SUBMIT):
            return verdict(True, f"an unusable submission cleared; {who}")  # one made before
        return verdict(False, f"not a ref name this server accepts: it {detail}")
    if integrator:
        return verdict(True, who)
    if update.ref in symrefs:
        return verdict(
            False,
            f"is a symbolic ref on the server (to {shown(symrefs[update.ref])}); only integrators may push through it; {who}",
        )
    if rule == "branch":
        return verdict(True, "a branch other than the target")
    if rule == "submit":
        if update.action == "create":
            if pusher is None:
                return verdict(True, "a new submission (the pusher is not authenticated)")
            return _holder_verdict(update.ref, pusher, submitted, verdict)
        return verdict(
            False, f"a submission is written once: only integrators may {verb} it; {who}"
        )
    reason = _ONLY[rule].format(verb=verb, detail=detail)
    canonical = "refs/heads/" if rule == "target" else refnames.NAMESPACE
    if rule != "other" and not update.ref.startswith(canonical):
        reason += " (this spelling names the same file on case- or normalisation-insensitive file systems)"
    return verdict(False, f"{reason}; {who}")


def _holder_verdict(
    ref: str,
    pusher: str,
    submitted: Submitted | None,
    verdict: Callable[[bool, str], RefVerdict],
) -> RefVerdict:
    """A submission from an authenticated pusher: only the holder of the contract's lease
    may create it, and only under the contract's own task."""
    task = ref.removeprefix(refnames.SUBMIT).partition("/")[0]
    if submitted is None or submitted.problem is not None:
        why = submitted.problem if submitted is not None else "it was not read"
        return verdict(False, f"the submission's contract cannot be read ({why})")
    if submitted.task != task:
        return verdict(
            False,
            f"the submission's contract is of task {visible(str(submitted.task)[:80])!r}, "
            f"not of the task its ref names ({visible(task)!r})",
        )
    if submitted.holder != pusher:
        return verdict(
            False,
            f"pusher {visible(pusher)!r} does not hold the contract's lease (its holder is "
            f"{visible(str(submitted.holder)[:80])!r}): only the holder may submit under it",
        )
    return verdict(True, f"a new submission by its contract's holder {visible(pusher)!r}")


def decide(
    data: bytes,
    *,
    env: Mapping[str, str],
    settings: Settings,
    now: int,
    used_nonces: Collection[str] = frozenset(),
    symrefs: Mapping[str, str] | None = None,
    unix_user: str | None = None,
    submitted: Mapping[str, Submitted] | None = None,
) -> HookVerdict:
    """Accept or refuse one push: `data` is the hook's standard input, `env` its environment,
    `submitted` what each created submission ref's commit says (run.py reads it)."""
    updates, problems = parse_updates(data)
    identity = resolve_identity(env, settings.identity_from, unix_user)
    if identity.problem:
        problems.append(identity.problem)
    sig = check_signature(
        push_options(env),
        settings.key,
        updates,
        now=now,
        max_age=settings.max_age,
        used=used_nonces,
    )
    allowed = identity.name is not None and identity.name in settings.allow
    if (
        settings.require_identity
        and identity.name is None
        and not sig.valid
        and not identity.problem
    ):
        problems.append("this server requires an authenticated pusher, and git was given none")
    if identity.name is None:
        who = "the pusher is not authenticated"
    else:
        who = f"pusher {visible(identity.name)!r} ({identity.source})"
        who += " is an allowed integrator" if allowed else " is not in integrator.hook.allow"
    if sig.valid:
        who = "the push is signed with this server's key"
    elif sig.present:
        who += f"; the {OPTION} option was not accepted: {sig.status}"
    integrator = (allowed or sig.valid) and not problems
    if problems:
        refs = tuple(
            RefVerdict(
                shown(u.ref),
                u.old,
                u.new,
                u.action,
                classify(u.ref, settings.targets)[0],
                False,
                "the push as a whole is refused (see above)",
            )
            for u in updates
        )
    else:
        refs = tuple(
            _judge(
                u,
                integrator=integrator,
                targets=settings.targets,
                symrefs=symrefs or {},
                who=who,
                pusher=identity.name,
                submitted=(submitted or {}).get(u.ref),
            )
            for u in updates
        )
    accepted = not problems and all(v.accepted for v in refs)
    return HookVerdict(
        accepted=accepted,
        identity=identity.name,
        identity_source=identity.source,
        integrator=integrator,
        signature=sig.status,
        problems=tuple(problems),
        refs=refs,
        nonce=sig.nonce if accepted and sig.valid else None,
    )
