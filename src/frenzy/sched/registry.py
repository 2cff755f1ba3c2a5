"""The policy protocol and the registry: the only place a policy is looked up by name."""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from frenzy.core.errors import UnknownNameError
from frenzy.sched.types import ClusterState, Decision, QueuedJob


class Policy(Protocol):
    name: str

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        """Decisions for this instant. Jobs not mentioned keep waiting."""


POLICIES: dict[str, Callable[[], Policy]] = {}


def register(name: str):
    def wrap(factory):
        POLICIES[name] = factory
        return factory
    return wrap


def get_policy(name: str) -> Policy:
    _load_builtin_policies()
    if name not in POLICIES:
        import difflib
        raise UnknownNameError("policy", name, difflib.get_close_matches(name, list(POLICIES), n=3), list(POLICIES))
    return POLICIES[name]()


def _load_builtin_policies() -> None:
    """Import policies/ so their @register decorators run."""
    import importlib
    import pkgutil

    from frenzy.sched import policies

    for module in pkgutil.iter_modules(policies.__path__):
        importlib.import_module(f"{policies.__name__}.{module.name}")
