from __future__ import annotations

from integrator.cli import main

raise SystemExit(main())
