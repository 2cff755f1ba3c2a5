"""Ray backend: cluster discovery from custom resources and labels, placements as Ray Train jobs,
and a fake-GPU mode (a local Ray cluster whose nodes advertise fake GPU types)."""
