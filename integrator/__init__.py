"""integrator: a fencing integration gate for repositories that many coding agents write at once."""

from __future__ import annotations

__version__ = "0.1.0"
