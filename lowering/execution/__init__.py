"""Execution: `FusionExecutor` (what `FusionDefinition.execute` runs), the compiled-fusion
cache and its key, call signatures and launch plans, the launches themselves, and the
checks read after them (gather host checks, in-kernel index errors)."""
