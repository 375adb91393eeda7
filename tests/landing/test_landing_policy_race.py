"""A candidate evaluated under a policy newer than the one its landing read is planned
again, not fenced: evaluations are made while earlier candidates of the batch are planned,
so the policy ref may move between the landing's read and a later evaluation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from integrator import refnames
from integrator.documents.verdict import Code, Decision
from integrator.landing.batch import land_batch
from integrator.landing.engine import Integrator
from integrator.landing.evaluation import Complete
from tests.canon import make_canon
from tests.gitutil import git


def test_evaluation_under_a_newer_policy_is_planned_again(tmp_path: Path) -> None:
    canon = make_canon(tmp_path)
    first = canon.issue("billing", ["billing/**"])
    second = canon.issue("auth", ["auth/**"])
    c1 = canon.commit({"billing/invoice.py": "invoice = 2\n"})
    c2 = canon.commit({"auth/login.py": "login = 2\n"})
    old = canon.ref(refnames.POLICY)
    assert old is not None
    # The same policy text committed again: a new ref value, the same digest, so both
    # contracts stay valid and only the ref's movement is at stake.
    new = git("commit-tree", f"{old}^{{tree}}", "-p", old, "-m", "again", cwd=canon.path)
    with canon.open() as canonical:
        engine = Integrator(canonical)
        ev1 = engine.evaluate(first.to_json().encode(), c1)
        git("update-ref", refnames.POLICY, new, old, cwd=canon.path)
        ev2 = engine.evaluate(second.to_json().encode(), c2)
        git("update-ref", refnames.POLICY, old, new, cwd=canon.path)
        assert isinstance(ev1, Complete) and isinstance(ev2, Complete)
        assert (ev1.policy_oid, ev2.policy_oid) == (old, new)

        def evaluations() -> Iterator[Complete]:
            yield ev1  # the landing reads the policy ref (old) once this one is here
            git("update-ref", refnames.POLICY, new, old, cwd=canon.path)
            yield ev2  # made under the newer policy

        outcome = land_batch(engine.landing, evaluations())
        assert outcome.moved is not None and outcome.moved.ref == refnames.POLICY
        assert outcome.verdicts == [None, None]  # both planned again, neither fenced yet
        again = land_batch(engine.landing, [ev1, ev2])
    assert again.moved is None
    one, two = again.verdicts
    assert one is not None and two is not None
    assert one.decision is Decision.FENCED  # it was judged under the policy that moved
    assert Code.POLICY_CHANGED in [v.code for v in one.violations]
    assert two.decision is Decision.ACCEPTED
    assert canon.ref("refs/integrator/queue/main") == two.staging_commit
