"""Every limit on what an agent controls, in one place (docs/security.md lists them).

Each is checked before the work it bounds, and passing it is a verdict or an error that
names it, never a crash: below them, work grows at most n log n with the input.
"""

from __future__ import annotations

# Trees (git accepts deeper and wider ones; `git fsck --strict` too).
MAX_TREE_DEPTH = 200  # folders on one path; the walks and the merge stay far from recursion limits
MAX_TREE_BYTES = 8 << 20  # one tree object (≈ 250,000 entries)
MAX_CHANGES = 100_000  # changed paths in one candidate (base → candidate)

# Rename naming (renames only name changes in verdicts; coverage never depends on them).
# A line found in more deleted files than this identifies none of them.
COMMON_LINE = 16
CANDIDATES = 8  # deleted files fully scored against each added one (those with most clues)

# Documents.
CONTRACT_BYTES = 64 << 10  # an ownership contract document
MAX_GLOBS = 1000  # `paths` and `deny` of one contract, each
MAX_RESOURCES = 256  # `resources` of one contract
MAX_GLOB_LENGTH = 1024  # characters in one glob
EXPANSION_BYTES = 64 << 10  # an expansion request document
POLICY_BYTES = 1 << 20  # a policy document (the coordinator's)
TASK_FILE_BYTES = 256 << 10  # a task file
REASON_CHARS = 4000
MAX_HISTORY = 1000  # commits walked to verify a workspace or a candidate's edits  # a review or revoke reason typed by a person
MAX_REF_BYTES = 1024  # a full ref name a pusher sends
MAX_COMPONENT_BYTES = 255  # one component of a ref name (a file name on the server)
