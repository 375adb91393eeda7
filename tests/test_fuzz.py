"""The parsers of agent input, fed generated documents: no crash, every refusal our own error.

Each parser takes what an agent (or anyone with write access to a spool, a task folder or
a hook's stdin) controls: the ownership contract, a submission, a task file, a hook event,
Codex's patch text and the shell commands that carry it. For each, three kinds of input:
arbitrary bytes or text, JSON-shaped values, and a valid document with one part replaced
by something hostile (a wrong type, a huge or nested value, control characters, names
from the grammar in the wrong place). A parser must either return its document or raise
the one error its callers turn into a clear refusal (`ContractError`, `UsageError`,
`TaskFileError`, `GuardInputError`, `PatchError`, `ShellError`); any other exception —
a KeyError, a RecursionError, a UnicodeError — is a crash and fails the test.

`make test` runs a few hundred inputs per parser; `make fuzz` runs
INTEGRATOR_FUZZ_EXAMPLES (10,000 by default there) and prints how many each parser saw.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrator import jsontext
from integrator.documents import authority_key
from integrator.documents.attempt_key import AttemptKeyError, new_key, parse_key, signature_problem
from integrator.documents.contract import parse_contract
from integrator.documents.rules import rules_from_bytes
from integrator.documents.verdict_key import new_verdict_key, parse_verdict_key
from integrator.documents.verdict_key import signature_problem as verdict_signature_problem
from integrator.errors import ContractError, UsageError
from integrator.fleet.events import GuardInputError, parse_event
from integrator.fleet.patches import PatchError, parse_patch
from integrator.fleet.shell import ShellError, shell_patches
from integrator.fleet.tasks import TaskFileError, parse_task
from integrator.limits import VERDICT_SIGNATURE_BYTES as SIGNATURE_LIMIT
from integrator.plumbing.packs import commit_bytes
from integrator.store.spool import SUBMISSION_FILE, Spool
from tests.factories import contract_doc

EXAMPLES = int(os.environ.get("INTEGRATOR_FUZZ_EXAMPLES", "300"))
HERE = Path("/work/agent")

# -- strategies ---------------------------------------------------------------------------

hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
    st.sampled_from(
        ["", " ", "..", "../../etc/passwd", "/abs", ".git/config", "a\x00b", "\udcff",
         "*", "**", "!x", "\x1b[2J", "a" * 5000, "refs/heads/main", "${HOME}", "~", "\\"]
    ),
)  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=30,
)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


def deeply_nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    """A valid document with keys replaced, removed or added, or nested far too deep."""
    doc = json.loads(json.dumps(valid))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        action = draw(st.sampled_from(["replace", "drop", "add", "inner"]))
        key = draw(st.sampled_from(sorted(doc) or ["x"]))
        if action == "replace":
            doc[key] = draw(json_values)
        elif action == "drop":
            doc.pop(key, None)
        elif action == "add":
            doc[draw(st.text(max_size=12))] = draw(json_values)
        elif isinstance(doc.get(key), list):
            doc[key] = [*doc[key], draw(json_values)]
        elif isinstance(doc.get(key), dict):
            doc[key][draw(st.text(max_size=8))] = draw(json_values)
    return _dumps(doc)


def documents(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=300),
        json_values.map(_dumps),
        mutated(valid),
        mutated(valid),
        st.integers(min_value=1, max_value=100_000).map(deeply_nested),
    )


def run(strategy: st.SearchStrategy[Any], parse: Callable[[Any], object]) -> int:
    """Feed `strategy` to `parse` EXAMPLES times; returns how many inputs it took."""
    seen = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def body(data: Any) -> None:
        nonlocal seen
        seen += 1
        parse(data)

    body()
    return seen


def report(name: str, seen: int) -> None:
    assert seen >= EXAMPLES, f"{name}: only {seen} inputs ran"
    print(f"\nfuzz {name}: {seen:,} inputs, no crash", flush=True)  # shown by make fuzz (-s)


def refused_by(*errors: type[BaseException]) -> Callable[[Callable[[Any], object]], Any]:
    """`parse` may return or raise one of `errors`; anything else propagates (a crash)."""

    def wrap(parse: Callable[[Any], object]) -> Callable[[Any], object]:
        def inner(data: Any) -> object:
            try:
                return parse(data)
            except errors as err:
                refusal: BaseException = err
            assert str(refusal).strip(), f"{type(refusal).__name__} without a message"
            return refusal

        return inner

    return wrap


# -- the parsers --------------------------------------------------------------------------


def test_contract_parser() -> None:
    """`parse_contract` (the daemon and gate) and the guard's plain reading of it."""
    valid = contract_doc()
    assert parse_contract(_dumps(valid)).task_id == "task-1"
    report("contract", run(documents(valid), refused_by(ContractError)(parse_contract)))
    report(
        "contract rules (guard)", run(documents(valid), refused_by(ContractError)(rules_from_bytes))
    )


def test_submission_parser() -> None:
    """The daemon's reading of a submitter's folder: `submission.json` as bytes on disk."""
    valid = {
        "schema": "integrator.submission.v1",
        "contract": contract_doc(),
        "candidate": "a" * 40,
        "submitter": {"host": "h", "user": "u", "repo": "/r"},
        "signature": new_key("task-1", "a-1", 1, "sha256:" + "0" * 64).signature(
            "20260101T000000000000Z-0123abcd", "a" * 40
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        spool = Spool(Path(tmp) / "spool")
        folder = Path(tmp) / "submission"
        folder.mkdir()
        path = folder / SUBMISSION_FILE

        def load(data: bytes) -> object:
            path.write_bytes(data)
            return spool.load(folder)

        report("submission", run(documents(valid), refused_by(UsageError)(load)))


def test_attempt_key_and_signature_readers() -> None:
    """The attempt key file reader and the daemon's signature check: a mutated key document
    is refused with AttemptKeyError, and a mutated signature is a reason, never a crash
    (nor a pass: only the original verifies)."""
    key = new_key("task-1", "a-1", 1, "sha256:" + "0" * 64)
    report(
        "attempt key",
        run(documents(json.loads(key.to_bytes())), refused_by(AttemptKeyError)(parse_key)),
    )
    sid, candidate = "20260101T000000000000Z-0123abcd", "a" * 40
    valid = key.signature(sid, candidate)

    def check(data: bytes) -> object:
        try:
            signature = jsontext.loads(data)
        except ValueError:
            return None
        if not isinstance(signature, dict):
            return None
        problem = signature_problem(
            issued=key.public, signature=signature, sid=sid, task="task-1", attempt="a-1",
            generation=1, contract="sha256:" + "0" * 64, candidate=candidate,
        )  # fmt: skip
        fields = {k: signature.get(k) for k in ("submission", "key", "value")}
        assert (problem is None) == (fields == valid), signature
        return problem

    report("submission signature", run(documents(valid), check))


def test_verdict_key_and_verdict_signature_readers() -> None:
    """The verdict key file reader and a reader's check of a published verdict's
    `verdict.sig`: a mutated key document is refused with AttemptKeyError, a mutated
    signature is a reason, never a crash (nor a pass: only the original verifies), and an
    attempt key file's `verdictKeys` is checked like the rest of it."""
    vkey = new_verdict_key()
    report(
        "verdict key",
        run(documents(json.loads(vkey.to_bytes())), refused_by(AttemptKeyError)(parse_verdict_key)),
    )
    sid, document = "20260101T000000000000Z-0123abcd", b'{"decision": "FENCED"}\n'
    original = vkey.sign("task-1", sid, "verdict.json", document)

    def check(data: bytes) -> object:
        problem = verdict_signature_problem(
            frozenset({vkey.public}), data, task="task-1", submission=sid,
            name="verdict.json", document=document,
        )  # fmt: skip
        same = _signed_fields(data) == _signed_fields(original) and len(data) <= SIGNATURE_LIMIT
        assert (problem is None) == same, data
        return problem

    report("verdict signature", run(documents(json.loads(original)), check))
    carrying = new_key("task-1", "a-1", 1, "sha256:" + "0" * 64, verdict_keys=(vkey.public,))
    report(
        "attempt key with verdict keys",
        run(documents(json.loads(carrying.to_bytes())), refused_by(AttemptKeyError)(parse_key)),
    )


@st.composite
def edited(draw: st.DrawFn, original: bytes) -> bytes:
    """`original` with a few byte ranges replaced by random bytes."""
    data = bytearray(original)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(data)))
        cut = draw(st.integers(min_value=0, max_value=8))
        data[at : at + cut] = draw(st.binary(max_size=8))
    return bytes(data)


def _unsigned(raw: bytes) -> bytes:
    head, _, body = raw.partition(b"\n\n")
    lines = [line for line in head.split(b"\n") if not line.startswith(b"integrator-sig ")]
    return b"\n".join(lines) + b"\n\n" + body


def test_authority_key_and_commit_signature_readers() -> None:
    """The authority key file reader and the check of a signed claim commit: a mutated key
    document is refused with AttemptKeyError; an edited or random commit is a reason, never
    a crash, and passes only when what was signed is unchanged."""
    akey = authority_key.new_authority_key()
    report(
        "authority key",
        run(
            documents(json.loads(akey.to_bytes())),
            refused_by(AttemptKeyError)(authority_key.parse_authority_key),
        ),
    )
    sig = pygit2.Signature("integrator", "integrator@localhost", 1_700_000_000, 0)
    ref = "refs/integrator/claims/task-1"
    raw = commit_bytes(bytes(20), [bytes(range(20))], sig, sig, "issue: task-1\n")
    original = authority_key.sign_commit(raw, ref, akey)
    trusted = frozenset({akey.public})

    def check(data: bytes) -> object:
        problem = authority_key.signature_problem(trusted, data, ref)
        assert problem is not None or _unsigned(data) == _unsigned(original), data
        return problem

    assert check(original) is None
    report("authority commit signature",
           run(st.one_of(edited(original), st.binary(max_size=600)), check))  # fmt: skip


def _signed_fields(data: bytes) -> object:
    """What makes a verdict.sig the one signed: its schema, key and value (other members
    are ignored by the reader)."""
    try:
        doc = jsontext.loads(data)
    except ValueError:
        return None
    return {k: doc.get(k) for k in ("schema", "key", "value")} if isinstance(doc, dict) else None


front_lines = st.one_of(
    st.sampled_from(
        ["id: t1", "type: review", "owns: [src/**]", "owns:", "  - src/**", "blocked-by: [a, b]",
         "workspace: w", "blocking: [c]", "resources: [lockfile:a]", "requires_filesystem: true",
         "resources:", "- x", ":", "  :", "id: ../x", "owns: [/abs]", "owns: ['**']",
         'title: "unterminated', "owns: [a, [b]]", "key: 'it''s'", "# comment", "\t", "---"]
    ),
    hostile_text.map(lambda t: t.replace("\n", " ")),
    st.tuples(st.text(max_size=10), hostile_text).map(lambda kv: f"{kv[0]}: {kv[1]}"),
)  # fmt: skip


@st.composite
def task_files(draw: st.DrawFn) -> str:
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        return draw(st.text(max_size=300))
    lines = draw(st.lists(front_lines, max_size=12))
    body = draw(st.text(max_size=80))
    closing = draw(st.sampled_from(["---", "", "--- ", "----"]))
    return "\n".join(["---", *lines, closing, body])


def test_task_file_parser() -> None:
    """`parse_task`: the planner's and the task queue's reading of `.agents/tasks/*.md`."""
    ok = parse_task("---\nid: t1\nowns: [src/**]\n---\nbody\n")
    assert ok.meta.id == "t1"
    report("task file", run(task_files(), refused_by(TaskFileError)(parse_task)))


patch_lines = st.one_of(
    st.sampled_from(
        ["*** Begin Patch", "*** End Patch", "*** Add File: a.txt", "*** Delete File: b.txt",
         "*** Update File: src/x.py", "*** Move to: ../../etc/passwd", "*** End of File",
         "@@", "@@ def f():", "+added", "-removed", " context", "", "  *** Begin Patch ",
         "*** Add File: ", "*** Update File:/abs", "+", "-", "\r", "*** Add File: \x00"]
    ),
    hostile_text.map(lambda t: t.replace("\n", " ")),
)  # fmt: skip
patches = st.one_of(
    st.text(max_size=300),
    st.lists(patch_lines, max_size=20).map("\n".join),
    st.lists(patch_lines, max_size=20).map(
        lambda ls: "\n".join(["*** Begin Patch", *ls, "*** End Patch"])
    ),
)
shell_words = st.one_of(
    st.sampled_from(
        ["apply_patch", "applypatch", "cd", "src", "&&", "||", ";", "|", "<<'EOF'", "<<EOF",
         "EOF", "'", '"', "$(", ")", "`", "\\", "bash -lc", "sh -c", "git", "echo", ">", "&",
         "\n", "*** Begin Patch\n*** Add File: x\n+y\n*** End Patch", "#", "{", "}", "(", "<<-X"]
    ),
    hostile_text,
)  # fmt: skip
scripts = st.one_of(st.text(max_size=200), st.lists(shell_words, max_size=25).map(" ".join))


def test_patch_and_shell_parsers() -> None:
    """Codex's patch grammar as it reads it, and the apply_patch calls inside a shell command."""
    assert parse_patch("*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n")
    report("patch text", run(patches, refused_by(PatchError)(parse_patch)))
    parse_script = refused_by(ShellError, PatchError)(lambda s: shell_patches(s, HERE))
    report("shell command", run(scripts, parse_script))


tool_names = st.sampled_from(
    ["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "Read", "apply_patch", "shell",
     "exec_command", "local_shell", "write_file", "replace", "run_shell_command", "mcp__x__y",
     ""]
)  # fmt: skip
tool_inputs = st.dictionaries(
    st.sampled_from(
        ["file_path", "notebook_path", "path", "filePath", "absolute_path", "target_file",
         "command", "workdir", "dir_path", "directory", "content", "edits"]
    ),
    st.one_of(json_values, patches, scripts, st.lists(scripts, max_size=4)),
    max_size=4,
)  # fmt: skip


@st.composite
def hook_events(draw: st.DrawFn) -> bytes:
    event: dict[str, Any] = {
        "hook_event_name": draw(st.sampled_from(["PreToolUse", "BeforeTool", "PostToolUse"])),
        "tool_name": draw(tool_names),
        "tool_input": draw(tool_inputs),
        "cwd": draw(st.one_of(st.just("/work/agent"), hostile_text)),
    }
    if draw(st.booleans()):
        event["turn_id"] = "t"  # Codex
    return draw(st.one_of(st.just(_dumps(event)), mutated(event)))


def test_hook_event_parser() -> None:
    """`parse_event`: what the guard reads on stdin before every write an agent makes."""
    claude = {"hook_event_name": "PreToolUse", "tool_name": "Write",
              "tool_input": {"file_path": "/work/agent/a.py"}}  # fmt: skip
    assert parse_event(_dumps(claude), default_cwd=HERE).targets
    events = st.one_of(hook_events(), documents({"hook_event_name": "PreToolUse"}))
    parse = refused_by(GuardInputError)(lambda d: parse_event(d, default_cwd=HERE))
    report("hook event", run(events, parse))


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deep_nesting_is_refused_not_crashed(depth: int) -> None:
    """JSON nested past Python's recursion limit is a refusal in every JSON-reading parser."""
    data = deeply_nested(depth)
    for parse, error in (
        (parse_contract, ContractError),
        (rules_from_bytes, ContractError),
        (lambda d: parse_event(d, default_cwd=HERE), GuardInputError),
    ):
        refused_by(error)(parse)(data)


def test_gate_refuses_a_deeply_nested_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate's legacy check read the contract with json.loads: a document nested past the
    recursion limit crashed `integrator gate` (exit 4, a traceback) instead of a verdict."""
    from integrator.cli import main
    from tests.gitutil import commit_files, make_repo

    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a"}, "base")
    contract = tmp_path / "deep.json"
    contract.write_bytes(deeply_nested(50_000))
    code = main(["gate", "--repo", str(repo), "--contract", str(contract), "--candidate", "HEAD",
                 "--json"])  # fmt: skip
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert code in (1, 2, 3)  # a verdict or a usage refusal, never host trouble (4)


@pytest.mark.parametrize(
    "event",
    [
        {"hook_event_name": []},
        {"hook_event_name": {"a": 1}},
        {"hook_event_name": 7},
        {"hook_event_name": "PreToolUse", "tool_name": ["Write"], "tool_input": {}},
        {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": []},
        {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"file_path": []}},
        {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": {}}},
        {"hook_event_name": "PreToolUse", "tool_name": "Bash",
         "tool_input": {"command": "ls", "workdir": ["x"]}},
        {"hook_event_name": "PreToolUse", "tool_name": "apply_patch", "tool_input": {"command": 1}},
    ],
)  # fmt: skip
def test_hook_fields_of_the_wrong_type_are_refused(event: dict[str, Any]) -> None:
    """A field of the wrong type is the event's refusal (GuardInputError), never a TypeError
    (a list as hook_event_name raised one: the guard denied, but as its own "internal
    error")."""
    with pytest.raises(GuardInputError):
        parse_event(_dumps({**event, "cwd": "/work/agent"}), default_cwd=HERE)
