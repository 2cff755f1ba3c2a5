"""Domain errors. Every message says what to change, not just what went wrong."""


class FrenzyError(Exception):
    """Base class: a problem with the user's input or the cluster that the user can act on."""


class UnknownNameError(FrenzyError, KeyError):
    """A catalog name (model, GPU type, cluster) that does not exist; suggests the closest names."""

    def __init__(self, kind: str, name: str, suggestions: list[str]):
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} '{name}'.{hint}")
        self.kind, self.name, self.suggestions = kind, name, suggestions

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


class InvalidConfigError(FrenzyError, ValueError):
    """A model config or training setting that cannot be used as given."""


class NoFeasiblePlanError(FrenzyError):
    """No plan fits any allowed GPU type; the message names the smallest need and what would help."""
