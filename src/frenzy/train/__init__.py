"""The training worker that runs on every rank (imports torch; `config` alone does not)."""
