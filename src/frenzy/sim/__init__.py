"""Trace-driven cluster simulator: the same planner, perf model and policies as the live system,
with a trace for the API, a simulated executor and a simulated clock."""
