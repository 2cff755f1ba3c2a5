"""Domain errors. Every message says what to change, not just what went wrong."""


class FrenzyError(Exception):
    """Base class: a problem with the user's input or the cluster that the user can act on."""


KNOWN_NAMES_LISTED = 30  # an error lists every known name only when there are at most this many


class UnknownNameError(FrenzyError, KeyError):
    """A catalog name (model, GPU type, cluster, policy) that does not exist; suggests the closest
    names, or, when none is close and the names are few, lists them all."""

    def __init__(self, kind: str, name: str, suggestions: list[str], known: list[str] | None = None,
                 listed_by: str | None = None):
        if suggestions:
            hint = f" Did you mean: {', '.join(suggestions)}?"
        elif known and len(known) <= KNOWN_NAMES_LISTED:
            hint = f" Known: {', '.join(sorted(known))}."
        elif listed_by:
            hint = f" `{listed_by}` lists them."
        else:
            hint = ""
        super().__init__(f"unknown {kind} '{name}'.{hint}")
        self.kind, self.name, self.suggestions = kind, name, suggestions

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


class InvalidConfigError(FrenzyError, ValueError):
    """A model config or training setting that cannot be used as given."""


class GpuCatalogError(FrenzyError, ValueError):
    """A GPU catalog file (bundled or the user's) that cannot be used; names every bad row."""


class NoFeasiblePlanError(FrenzyError):
    """No plan fits any allowed GPU type; the message names the smallest need and what would help."""
