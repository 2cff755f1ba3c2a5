"""MARP, the memory-aware resource predictor: per-GPU peak memory of a job under a plan."""
