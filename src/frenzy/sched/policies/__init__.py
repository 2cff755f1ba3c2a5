"""Built-in scheduling policies; each module registers itself in frenzy.sched.registry."""
