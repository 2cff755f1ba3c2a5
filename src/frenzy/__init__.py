"""Frenzy: memory-aware serverless LLM training for heterogeneous GPU clusters."""

__version__ = "0.1.0"
