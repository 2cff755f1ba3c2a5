"""The `frenzy` command."""
