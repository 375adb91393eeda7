"""Ref names: every name integrator gives a ref, one component as integrator names refs after ids (`refname_problem`: a task,
attempt or submission id must be usable as one), and full names as a server should accept
them (`ref_problem`: git's check-ref-format rules, and stricter where a name would be odd —
not UTF-8, invisible or space characters, overlong), plus the folded form under which a
case- or normalisation-insensitive file system stores a name.

Every `refs/integrator/...` name is built here and nowhere else (docs/refs.md lists the
families, what each holds and who may write it; tests/test_names_and_limits.py keeps
other modules from spelling them).

Kept free of the contract models, so that the write guard and the server hook load fast.
"""

from __future__ import annotations

import re
import unicodedata

from integrator.escape import visible
from integrator.limits import MAX_COMPONENT_BYTES, MAX_ID_CHARS, MAX_REF_BYTES

ROOT = "refs/integrator"  # the namespace itself (a ref of that name is refused like any in it)
NAMESPACE = ROOT + "/"
# Fetches every ref of the namespace as it is (a mirror, a clone checking claims).
ALL_REFSPEC = f"+{NAMESPACE}*:{NAMESPACE}*"

# Authority: only integrators write these (the server hook's `authority` rule).
QUEUE = NAMESPACE + "queue/"  # QUEUE + <target>: the merge queue's head
CLAIMS = NAMESPACE + "claims/"  # CLAIMS + <task>: the claim chain of a task
CLAIMS_INDEX = NAMESPACE + "claims-index"  # moved by every write that makes a claim live
POLICY = NAMESPACE + "policy"  # policy.toml and its generation
HELD = NAMESPACE + "held/"  # HELD + <submission>: a held candidate's review chain
ARCHIVED = NAMESPACE + "archived/"  # ARCHIVED + <submission>: a review chain that ended
EXPANSIONS = NAMESPACE + "expansions/"  # EXPANSIONS + <task>/<id>: an expansion request
ARCHIVE = NAMESPACE + "archive/"  # ARCHIVE + <kind>: finished records folded into one ref

# Other records the integrators write (the hook's `integrator` rule: integrators only).
PAUSE = NAMESPACE + "pause"  # whether new claims are paused, and its history
QUEUE_CONTROL = NAMESPACE + "queue-control/"  # QUEUE_CONTROL + <target>: queue pauses
VALIDATIONS = NAMESPACE + "validations/"  # VALIDATIONS + <target>/<head>: validation results
PROMOTION = NAMESPACE + "promotion/"  # PROMOTION + <target>: promotions and ejections
EJECTED = NAMESPACE + "ejected/"  # EJECTED + <target>/<landing>: one ejection record
FALSE_POSITIVES = NAMESPACE + "false-positives/"  # FALSE_POSITIVES + <subject>: marks
PROBE = NAMESPACE + "probe/"  # PROBE + <host>: a daemon's last write probe of the server

# On an intake (possibly the canonical repository itself).
SUBMIT = NAMESPACE + "submit/"  # SUBMIT + <task>/<submission>: anyone may create one
VERDICTS = NAMESPACE + "verdicts/"  # VERDICTS + <task>/<submission>: its verdict
# The record kinds `refs archive` folds into ARCHIVE + <kind>, and the refs of each.
ARCHIVE_PREFIXES = {
    "claims": CLAIMS,
    "archived": ARCHIVED,
    "expansions": EXPANSIONS,
    "verdicts": VERDICTS,
}

# Local to one repository: never fetched by a mirror, never pushed.
QUARANTINE = NAMESPACE + "quarantine/"  # QUARANTINE + <submission>/: an imported bundle
OUTGOING = NAMESPACE + "outgoing/"  # OUTGOING + <bundle>: what a clone bundles to submit
INTAKE = NAMESPACE + "intake/"  # what was fetched from an intake:
INTAKE_SUBMIT = INTAKE + "submit/"  # ... submissions, in the daemon's mirror
INTAKE_VERDICTS = INTAKE + "verdicts/"  # ... verdicts, in an agent's repository
# ... and the canonical server's queue, target and ejection records, in an agent's repository
# (INTAKE_LANDING + the server's name without `refs/`: `intake/landing/heads/main`).
INTAKE_LANDING = INTAKE + "landing/"
SEEN = NAMESPACE + "seen/"  # what a mirror last saw:
SEEN_CLAIMS = SEEN + "claims/"  # ... SEEN_CLAIMS + <task>: the claim commit


def claim(task_id: str) -> str:
    """The claim ref of a task."""
    return CLAIMS + task_id


def queue(target: str) -> str:
    """The queue ref of a target branch."""
    return QUEUE + target


def intake_landing(ref: str) -> str:
    """Where an agent's repository keeps the server's `ref` it fetched to tell where a
    landing is (`refs/heads/main` → `refs/integrator/intake/landing/heads/main`)."""
    return INTAKE_LANDING + ref.removeprefix("refs/")


def archive(kind: str) -> str:
    """The archive ref of one kind of record (`claims`, `archived`, …)."""
    return ARCHIVE + kind


def family(prefix: str) -> str:
    """The name of a family below the namespace: `claims` for CLAIMS, `policy` for POLICY."""
    return prefix.removeprefix(NAMESPACE).rstrip("/")


# A submission id, 20260601T120000123456Z-0a1b2c3d: sorts by time, then by chance; a valid
# ref component. The spool names folders by it and the server hook refuses submit refs
# whose last component is not one (they could never be decided).
SUBMISSION_ID = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{8}$")
ODD_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp")


def shown(ref: str) -> str:
    """A ref name as it may be printed: undecodable bytes as `\\xNN`, controls spelled out."""
    return visible(ref.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))


def _component_problem(component: str) -> str | None:
    if not component:
        return "has an empty component (a leading, trailing or doubled '/')"
    if component.startswith("."):
        return "has a component starting with '.'"
    if component.endswith(".lock"):
        return "has a component ending with '.lock'"
    if len(component.encode("utf-8")) > MAX_COMPONENT_BYTES:
        return f"has a component longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def _character_problem(name: str) -> str | None:
    for ch in name:
        if ch in " ~^:?*[\\":
            return f"contains {ch!r}"
        if unicodedata.category(ch) in ODD_CATEGORIES:
            return f"contains the character U+{ord(ch):04X}"
    for sequence in ("..", "@{"):
        if sequence in name:
            return f"contains {sequence!r}"
    return None


def ref_problem(name: str) -> str | None:
    """Why `name` is not a full ref name to accept, or None. `name` is decoded with
    surrogateescape, so bytes that are not UTF-8 arrive here and are refused."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if size > MAX_REF_BYTES:
        return f"is longer than {MAX_REF_BYTES} bytes"
    if not name.startswith("refs/"):
        return "is not under refs/"
    if name.endswith("."):
        return "ends with '.'"
    if name == "refs/heads/HEAD":
        return "is the branch HEAD, which git reads as the symbolic HEAD"
    problem = _character_problem(name)
    for component in name.split("/"):
        problem = problem or _component_problem(component)
    return problem


def fold(name: str) -> str:
    """`name` as a case-insensitive, normalising file system sees it (macOS, Windows):
    compatibility-decomposed, combining marks and invisible characters dropped, case-folded."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Mn", "Cf"))
    return text.casefold()


def refname_problem(value: str) -> str | None:  # noqa: PLR0911 — one return per check-ref-format rule, naming it
    """Why `value` cannot be one git refname component (plus: no '/'), or None.

    Mirrors `git check-ref-format` for a single component.
    """
    if not value:
        return "is empty"
    if "/" in value:
        return "contains '/'"
    if value.startswith("."):
        return "starts with '.'"
    if value.endswith(".lock"):
        return "ends with '.lock'"
    if value.endswith("."):
        return "ends with '.'"
    if ".." in value:
        return "contains '..'"
    if "@{" in value:
        return "contains '@{'"
    if value == "@":
        return "is '@'"
    for ch in value:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return "contains a control character"
        if ch in " ~^:?*[\\":
            return f"contains {ch!r}"
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    return None
