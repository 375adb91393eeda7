# Every target makes its own virtual environment; nothing is installed globally.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed

.PHONY: venv test test-repeat lint typecheck demo drills drills-quick bench bench-quick bench-queue schema e2e screenshots soak soak-system fuzz demo-remote newcomer clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check integrator tests drills bench
	$(VENV)/bin/ruff format --check integrator tests drills bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: lint typecheck
	$(PY) -m pytest -n 2 -q

# The browser tests and the race tests, N runs in a row (one process each, no xdist),
# stopping at the first failure: a test that fails once in N is a flaky test to fix.
N ?= 5
REPEAT_TESTS = tests/web/test_web_browser.py tests/web/test_rollout_web.py \
	tests/records/test_claim_races.py tests/landing/test_race.py \
	tests/landing/test_landing_policy_race.py tests/promotion/test_promotion_race.py \
	tests/fleet/test_commit.py::test_concurrent_commits_are_serialised_and_keep_their_paths
test-repeat: $(STAMP)
	@for i in $$(seq 1 $(N)); do \
		echo "test-repeat: run $$i of $(N)"; \
		$(PY) -m pytest -q -n 0 -x -p no:cacheprovider $(REPEAT_TESTS) || exit 1; \
	done

# End-to-end checks with real third-party clients (pinned, fetched into .e2e/).
e2e: $(STAMP)
	bash tests/e2e/install.sh
	$(PY) -m pytest -q -m e2e tests/e2e

# The parsers of agent input on 10,000 generated inputs each (prints the count per parser).
fuzz: $(STAMP)
	INTEGRATOR_FUZZ_EXAMPLES=$${INTEGRATOR_FUZZ_EXAMPLES:-10000} $(PY) -m pytest -q -n 0 -s tests/test_fuzz.py

# Heavier race runs: 20 trials of eight coordinators per claim operation.
soak: $(STAMP)
	INTEGRATOR_RACE_TRIALS=20 $(PY) -m pytest -q -n 0 tests/records/test_claim_races.py

# The review page's screenshots in docs/review/, taken by its browser tests.
screenshots: $(STAMP)
	INTEGRATOR_SCREENSHOTS=docs/review $(PY) -m pytest -q -n 0 tests/web/test_web_browser.py

# A newcomer's first day from a freshly built wheel in a new virtual environment.
newcomer: $(STAMP)
	INTEGRATOR_NEWCOMER=1 $(PY) -m pytest -q -n 0 tests/test_newcomer.py

demo: $(STAMP)
	$(PY) -m integrator.demo

# The remote act: a git daemon on 127.0.0.1, two integrators, agents through an intake.
demo-remote: $(STAMP)
	$(PY) -m integrator.demo.remote

drills: $(STAMP)
	$(PY) -m drills --full

drills-quick: $(STAMP)
	$(PY) -m drills

# The system soak: the team drill's workload for DURATION (seconds, or 30m) with random
# faults, then its invariants, memory and refs (docs/drills.md, "The system soak").
DURATION ?= 120
soak-system: $(STAMP)
	SOAK_DURATION=$(DURATION) $(PY) -m drills --only soak-system

bench: $(STAMP)
	$(PY) -m bench --full

bench-quick: $(STAMP)
	$(PY) -m bench

bench-queue: $(STAMP)
	$(PY) -m bench.queue_run

schema: $(STAMP)
	$(VENV)/bin/integrator schema export contracts/

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .e2e
