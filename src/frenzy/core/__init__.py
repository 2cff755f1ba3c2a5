"""Pure domain values: units, dtypes, model architectures, jobs, plans, GPU types, errors."""
