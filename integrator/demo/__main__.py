"""`make demo` (`python -m integrator.demo`): the local acts, narrated."""

from __future__ import annotations

from integrator.demo.local import main

raise SystemExit(main())
