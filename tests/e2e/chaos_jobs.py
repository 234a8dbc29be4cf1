"""The chaos job in the default registry: imported only by the chaos run's `jf worker` subprocesses."""

from __future__ import annotations

from tests.e2e.chaos_workload import register

apply = register()
