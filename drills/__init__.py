"""Scenario drills for integrator: real processes, explicit faults, recorded history.

`python -m drills` runs them (see docs/drills.md). Each drill builds its own canonical
repository under `drills-out/<run>/<drill>/`, drives the `integrator` CLI and daemon as
processes, injects faults by name (SIGSTOP, SIGKILL at a step, a held ref lock, an
unavailable registry), waits for the spool to settle, and asserts on what git, the spool
and the logs recorded. `drills.gates` computes the quantitative gates from the same
records.
"""
