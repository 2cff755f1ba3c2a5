"""The live control plane: HTTP API, durable job store, and the control loop that plans, schedules
and hands placements to an executor. Imports neither torch nor ray (the executor does)."""
