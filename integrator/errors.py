"""One error hierarchy; each class carries its exit code (README, "Exit codes").

Exit codes: 0 accepted/ok, 1 fenced, 3 needs review, 2 usage or configuration error,
4 infrastructure error (retryable).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FENCED = 1
EXIT_USAGE = 2
EXIT_REVIEW = 3
EXIT_INFRA = 4


class IntegratorError(Exception):
    """Base of every expected failure; `str(err)` is one line that says what to do."""

    exit_code = EXIT_USAGE


class UsageError(IntegratorError):
    """Bad command-line input or a bad input file."""


class ConfigurationError(IntegratorError):
    """The repository, spool or policy is not set up as the command needs."""


class WorkspaceConfigurationError(ConfigurationError):
    """A task that writes files has no workspace it may legitimately bind to."""


class ContractError(UsageError):
    """A contract document does not validate; `errors` lists every problem."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class ClaimConflictError(IntegratorError):
    """A claim operation was refused: overlap, wrong state or a lost compare-and-swap."""

    exit_code = EXIT_FENCED


class WorkspaceBusyError(ClaimConflictError):
    """The workspace is held by another task, or still carries an earlier task's changes."""


class ClaimsPausedError(ClaimConflictError):
    """New claims are paused (`integrator contract pause`); the message names the reason."""


class ReviewRequired(IntegratorError):
    """The operation cannot be decided automatically and was routed to review."""

    exit_code = EXIT_REVIEW


class InfrastructureError(IntegratorError):
    """Git, the filesystem or the mirror failed in a way worth retrying.

    `kind` says which part of the host failed where that is known (`disk`, `git-server`,
    `intake`), for the daemon's metrics; `other` where it is not."""

    exit_code = EXIT_INFRA

    def __init__(self, message: str = "", *, kind: str = "other") -> None:
        super().__init__(message)
        self.kind = kind


class QueuePausedError(InfrastructureError):
    """Landings on the target are paused (`integrator queue pause`): nothing is decided or
    lost, submissions wait; retry once the queue is resumed."""


class CheckedOutError(ConfigurationError):
    """A branch integrator would move is checked out in a work tree of the canonical
    repository, which did not ask for its checkouts to be kept in step
    (`integrator init --update-checkout`): the message names the work tree and the ways out."""


class CheckoutDirtyError(InfrastructureError):
    """A work tree kept in step with the target cannot take a move of it now (a local
    change the move would overwrite, an untracked file in the way, git's index lock held):
    nothing moved, nothing is decided or lost; retry once it can."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="checkout")


class GitError(InfrastructureError):
    """A git command or object lookup failed."""


class GitTimeoutError(GitError):
    """A git process ran past its time and was killed (a hung server, disk or lock)."""


class RefLockedError(InfrastructureError):
    """A `.lock` file blocks a ref; it is reported, never deleted while its owner may live."""

    def __init__(self, ref: str, lock_path: str) -> None:
        super().__init__(
            f"ref {ref} is locked by {lock_path}; if no git or integrator process is running, "
            f"remove that file and retry",
            kind="disk",
        )
        self.ref = ref
        self.lock_path = lock_path


class RefMovedError(IntegratorError):
    """A compare-and-swap lost: `ref` is not at the expected value any more."""

    exit_code = EXIT_FENCED

    def __init__(self, ref: str, actual: str | None, expected: str | None) -> None:
        super().__init__(f"ref {ref} is at {actual or 'nothing'}, expected {expected or 'nothing'}")
        self.ref = ref
        self.actual = actual
        self.expected = expected
