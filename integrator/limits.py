"""Every limit on what an agent — or any submitter, pusher, reporter or web visitor — controls,
in one place (docs/security.md lists them all: value, and what happens when one is passed).

Each is checked before the work it bounds, and passing it is a verdict or an error that
names it, never a crash: below them, work grows at most n log n with the input. Tunables
that no input controls (timeouts, pool sizes, cache sizes) stay beside their code.
"""

from __future__ import annotations

# Trees (git accepts deeper and wider ones; `git fsck --strict` too).
MAX_TREE_DEPTH = 200  # folders on one path; the walks and the merge stay far from recursion limits
MAX_TREE_BYTES = 8 << 20  # one tree object (≈ 250,000 entries)
MAX_CHANGES = 100_000  # changed paths in one candidate (base → candidate)
DEFAULT_MAX_PATCH_BYTES = 10 << 20  # a contract's patch budget when the coordinator names none
MAX_HISTORY = 1000  # commits walked to verify a workspace or a candidate's edits

# Rename naming (renames only name changes in verdicts; coverage never depends on them).
# A line found in more deleted files than this identifies none of them.
COMMON_LINE = 16
CANDIDATES = 8  # deleted files fully scored against each added one (those with most clues)

# Documents.
# A real commit of git's own history touches 1,833 files: a contract must be able to name
# a few thousand paths one by one (literal paths are matched through a set, not one by one).
# These five are defaults: the policy's `[limits]` sets each (its key is the name in lower
# case) up to its ceiling in CEILINGS, for contracts and expansion requests.
CONTRACT_BYTES = 512 << 10  # an ownership contract document (fits a submission's 1 MiB)
MAX_GLOBS = 5000  # `paths` and `deny` of one contract, each
MAX_RESOURCES = 256  # `resources` of one contract
MAX_GLOB_LENGTH = 1024  # characters in one glob
EXPANSION_BYTES = 64 << 10  # an expansion request document
# The most `[limits]` may set, key by key. A contract at every ceiling, as `contract issue`
# writes it, still fits a submission (SUBMISSION_BYTES, fixed: the daemon reads it before
# any policy); a glob may name the longest path git checks out, its wildcards escaped.
CEILINGS = {
    "contract_bytes": 896 << 10,
    "max_globs": 20_000,
    "max_resources": 1024,
    "max_glob_length": 8192,
    "expansion_bytes": 896 << 10,
}
POLICY_BYTES = 1 << 20  # a policy document (the coordinator's)
TASK_FILE_BYTES = 256 << 10  # a task file
REASON_CHARS = 4000  # a review or revoke reason typed by a person
ACTOR_CHARS = 200  # the actor (or reporter) named by a review, pause, mark or report: one line
HOLDER_CHARS = 200  # a contract's lease holder and worktree id
INPUT_BYTES = 16 << 20  # any one input document a command reads (each has its own, lower, too)
SHADOW_REQUEST_BYTES = 4 << 20  # a shadow-decision request read by `integrator shadow`

# Submissions (the spool, an intake, a bundle).
SUBMISSION_BYTES = 1 << 20  # a submission.json: a contract and a few ids
MAX_NESTING = 32  # lists and objects nested in a submitted contract
SUBMITTER_USER_CHARS = 200  # the submitter's self-reported user name
SUBMITTER_HOST_CHARS = 255  # ... host name
SUBMITTER_REPO_CHARS = 4096  # ... repository path
MAX_ID_CHARS = 200  # a task, attempt or submission id (one ref name component)
SIGNATURE_FIELD_CHARS = 200  # the key or value of a submission's signature (both ≈ 90)
BUNDLE_BYTES = 256 << 20  # a submitted bundle, unless `serve --config` sets bundle-max-bytes
BUNDLE_HEADER_BYTES = 1 << 20  # a bundle's header (its ref list)
MAX_BUNDLE_REFS = 64  # refs named in one bundle
BUNDLE_NAME_CHARS = 100  # a submission's bundle file name, before `.bundle`
TASK_TYPE_CHARS = 100  # a task file's free-form `type`
MAX_CRASHES = 3  # unexpected failures on one submission before it is rejected with the error
MAX_DURATION_DAYS = 36_500  # a duration typed or sent (a lease, --until, --since): 100 years
VERDICT_BYTES = 16 << 20  # a verdict document read back (spool or intake); bigger is damage
VERDICT_SIGNATURE_BYTES = 1024  # a verdict.sig read from an intake (about 200 bytes)
VERDICT_COMMIT_BYTES = 64 * 1024  # a verdict commit read back from an intake (under 1 KiB)
VERDICT_TREE_BYTES = 4096  # its tree (verdict.json or rejection.json, and verdict.sig)
AUTHORITY_COMMIT_BYTES = 1024 * 1024  # a claim/policy/control commit checked for a signature
MAX_VERDICT_KEYS = 16  # verdict keys one attempt key file may carry
INTAKE_POLL_SUBMISSIONS = 64  # intake submission refs judged in one poll (the rest: next poll)
INTAKE_POLL_BYTES = 8 << 20  # submission.json bytes read from the intake in one poll

# External validation reports (CI) and run output.
DETAILS_BYTES = 256 << 10  # an external report's details file
LOG_TAIL_BYTES = 64 << 10  # a validation run's output kept in its record (the tail)
RECORD_TEXT_CHARS = 2000  # free text (reasons, URLs, runner names) in a record
# A validation run's output streamed to the promoter's log as it runs (the record keeps the
# tail, LOG_TAIL_BYTES, whatever these cut).
VALIDATION_LOG_LINE_BYTES = 2000  # one streamed line; the rest of a longer one is not streamed
VALIDATION_LOG_LINES = 5000  # lines streamed for one run
VALIDATION_LOG_BYTES = 1 << 20  # output bytes read for streaming, for one run

# The write guard (agents' hook events).
MAX_EVENT_BYTES = 16 << 20  # a tool call bigger than this is not read: denied

# The MCP server's tool arguments.
MCP_MAX_PATHS = 1000  # paths in one check_paths call
MCP_MAX_ADDITIONS = 100  # globs, and resources, one request_expansion call adds
MCP_ID_CHARS = 64  # the submission id read_verdict is given
MCP_WAIT_SECONDS = 600  # how long one read_verdict call may wait
OVERVIEW_ANSWER_BYTES = 16 << 20  # the overview document `status` reads from a daemon

# Ref names and pushes (the server hook, the transports).
MAX_REF_BYTES = 1024  # a full ref name
MAX_COMPONENT_BYTES = 255  # one component of a ref name (a file name on the server)
MAX_UPDATES = 100_000  # ref updates in one push
HOOK_INPUT_BYTES = 64 << 20  # the update list git hands the pre-receive hook
MAX_IDENTITY_CHARS = 256  # the pusher's name as the server's variable gives it
SYMREF_PATTERNS = 200  # refs of a push looked up as symbolic refs by name; more lists them all
MIN_KEY_BYTES = 32  # a shared signing key, at least
MAX_KEY_BYTES = 4096  # ... at most (the key file is read no further)

# The web interface.
FORM_BYTES = 16 << 10  # one form posted to the web interface
WEB_REASON_CHARS = 2000  # a reason typed into a web form
MAX_SESSIONS = 1024  # sessions kept; the oldest is dropped first
PAGE_PATCH_BYTES = 2 << 20  # blob bytes a page renders a patch for
RAW_PATCH_BYTES = 32 << 20  # blob bytes the raw patch is built from
DIFF_CHARS = 256 << 10  # characters of unified diff rendered on a page
DIFF_LINES = 6000  # lines of unified diff rendered on a page
HELD_PAGE_ROWS = 100  # held candidates the Held page lists per page (?page=N for the rest)
PAGE_FILES = 1000  # changed paths a Candidate page lists (those with violations first)
PAGE_VIOLATIONS = 1000  # violations a Candidate or result page lists
CHART_LANDINGS = 2000  # landings a Queue page chart is drawn from (the newest)
QUEUE_SCOPE_ROWS = 200  # waiting landings, and running heads, the Queue page lists per scope
