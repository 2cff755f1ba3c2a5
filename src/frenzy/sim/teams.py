"""Teams in the simulator: trace `user` -> team, quotas from a teams file or derived from the trace,
the quota scheduler around a policy, and the audit that counts quota violations.

Teams file (YAML or JSON):
    teams:
      red:
        quota: {A100-SXM-40G: 8, T4-16G: 8}   # GPU type (catalog name or alias) -> nominal GPUs
        users: [ee9e8c, 2869ce]                # trace users (Philly: the virtual cluster)
A user in no team, and a job with no user, is in the default pool (no quota, borrow only).
Without a file, `derive_teams` makes each distinct trace user a team and splits every GPU type
equally among them, rounded down: floor(C_g / k) GPUs of type g for each of k teams; the GPUs
the rounding leaves are in no quota (anyone may borrow them). Equal shares need no estimate of a
user's demand, which the trace would only give after the fact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from frenzy.core.names import YamlName
from frenzy.sched.quotas import DEFAULT_TEAM, QuotaScheduler, Teams, canonical_quota
from frenzy.sched.registry import Policy
from frenzy.sched.types import ClusterState, Decision, Place, Preempt, QueuedJob
from frenzy.sim.cluster import ClusterSpec, NodeGroup
from frenzy.sim.trace import TraceJob


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamsSpec:
    quotas: dict[str, dict[str, int]] = field(hash=False)  # team -> canonical GPU type -> nominal GPUs
    members: dict[str, str] = field(hash=False)  # trace user -> team

    def __post_init__(self):
        for user, team in self.members.items():
            if team not in self.quotas:
                raise ValueError(f"user {user} is in team '{team}', which has no quota; add it under teams:")

    def team_of(self, job: TraceJob) -> str:
        return self.members.get(job.user or "", DEFAULT_TEAM)

    def teams_for(self, jobs: Sequence[TraceJob]) -> Teams:
        return Teams(quotas=self.quotas, team_of={j.job_id: self.team_of(j) for j in jobs})


class _TeamEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    quota: dict[YamlName, object] = {}  # values checked by frenzy.sched.quotas.canonical_quota
    users: list[YamlName] = []


class _TeamsFile(BaseModel):
    """A teams file (see the module's docstring), the boundary where pydantic checks it."""

    model_config = ConfigDict(extra="forbid")
    teams: dict[YamlName, _TeamEntry] = Field(min_length=1)


def load_teams(path: str | Path) -> TeamsSpec:
    """A teams file (see the module's docstring); errors name the file, the team and what to change."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # json's errors are ValueErrors
        raise ValueError(f"cannot read the teams file {path}: {exc}") from None
    try:
        teams = _TeamsFile.model_validate(data).teams
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the file'}: {e['msg'].lower()}" for e in exc.errors())
        raise ValueError(f"{path}: {problems} (expected `teams:` mapping each team to its quota and users)") from None
    quotas, members = {}, {}
    for name, entry in teams.items():
        try:
            quotas[name] = canonical_quota(entry.quota)
        except (ValueError, KeyError) as exc:
            raise ValueError(f"{path}: team {name}: {exc}") from None
        for user in entry.users:
            if user in members:
                raise ValueError(f"{path}: user {user} is in teams {members[user]} and {name}; a user is in one")
            members[user] = name
    return TeamsSpec(quotas=quotas, members=members)


def derive_teams(jobs: Sequence[TraceJob], cluster: ClusterSpec) -> TeamsSpec:
    """Each distinct user a team with floor(C_g / k) GPUs of every type (see the module's docstring)."""
    users = sorted({j.user for j in jobs if j.user})
    if not users:
        return TeamsSpec(quotas={}, members={})
    share = {gpu: n // len(users) for gpu, n in cluster.gpus_by_type().items()}
    return TeamsSpec(quotas={u: dict(share) for u in users}, members={u: u for u in users})


def quota_cluster(cluster: ClusterSpec, quota: Mapping[str, int], name: str) -> ClusterSpec | None:
    """The part of `cluster` a quota names, as nodes of the cluster's own kinds: whole nodes, then
    one node with the rest (a team running alone on its quota). None for an empty quota."""
    groups = []
    for group in cluster.groups:
        gpus = quota.get(group.gpu_type, 0)
        gpus -= sum(g.gpus_per_node * g.count for g in groups if g.gpu_type == group.gpu_type)
        whole, rest = divmod(max(0, min(gpus, group.gpus_per_node * group.count)), group.gpus_per_node)
        for per_node, count in ((group.gpus_per_node, whole), (rest, 1 if rest else 0)):
            if count:
                groups.append(NodeGroup(gpu_type=group.gpu_type, gpus_per_node=per_node, count=count,
                                        host_memory_bytes=group.host_memory_bytes,
                                        inter_node_bandwidth_bytes_s=group.inter_node_bandwidth_bytes_s,
                                        stands_for=group.stands_for))
    return ClusterSpec(name=name, groups=tuple(groups)) if groups else None


class QuotaAudit:
    """A policy that watches another and counts quota violations: after each call, with its
    decisions applied, a job still waiting that borrowers keep from its team's quota waits at least
    one more scheduling round for GPUs its quota entitles it to. Counted on GPU totals,
    independently of the quota scheduler's own bookkeeping: a waiting job of team t is kept from
    its quota when one of its plans (g, n) fits the team's unused nominal quota
    (used_t,g + n <= nominal_t,g) and needs GPUs other teams hold beyond their own quotas: the free
    GPUs of g are fewer than n, the free plus those borrowed at least n. A job that could start on
    free GPUs within its quota and waits (the policy's patience, for a faster plan) is not kept by
    anyone; those are counted apart, in `waiting_by_choice`, when another team borrows its type."""

    def __init__(self, policy: Policy, teams: Teams):
        self.policy, self.teams = policy, teams
        self.name, self.round_s = policy.name, getattr(policy, "round_s", None)
        self.calls = self.violations = self.waiting_by_choice = 0
        self.violating_jobs: set[str] = set()

    def schedule(self, state: ClusterState, queue: Sequence[QueuedJob], now: float) -> list[Decision]:
        decisions = self.policy.schedule(state, queue, now)
        self.calls += 1
        used: dict[tuple[str, str], int] = {}
        free = state.free_by_type()
        running = {r.job_id: r for r in state.running}

        def add(job_id: str, gpu: str, gpus: int) -> None:
            key = (self.teams.of(job_id), gpu)
            used[key] = used.get(key, 0) + gpus
            free[gpu] -= gpus

        for run in state.running:
            used[(self.teams.of(run.job_id), run.choice.gpu.name)] = \
                used.get((self.teams.of(run.job_id), run.choice.gpu.name), 0) + run.choice.num_gpus
        for d in decisions:
            if isinstance(d, Preempt):
                add(d.job_id, running[d.job_id].choice.gpu.name, -running[d.job_id].choice.num_gpus)
        for d in decisions:
            if isinstance(d, Place):
                add(d.job_id, d.choice.gpu.name, d.choice.num_gpus)
        placed = {d.job_id for d in decisions if isinstance(d, Place)}
        kept, chose = self._kept(used, free, [j for j in queue if j.job_id not in placed])
        self.violations += len(kept)
        self.violating_jobs |= kept
        self.waiting_by_choice += len(chose)
        return decisions

    def _kept(self, used: dict, free: dict, waiting: Sequence[QueuedJob]) -> tuple[set[str], set[str]]:
        """(jobs borrowers keep from their quota, jobs that could start within it on free GPUs of a
        type another team borrows and wait)."""
        kept, chose = set(), set()
        for job in waiting:
            team = self.teams.of(job.job_id)
            if team == DEFAULT_TEAM:
                continue
            for c in job.plans:
                g, n = c.gpu.name, c.num_gpus
                if g in job.excluded_gpu_types or used.get((team, g), 0) + n > self.teams.nominal(team, g):
                    continue
                lent = sum(max(0, u - self.teams.nominal(t, gpu)) for (t, gpu), u in used.items()
                           if gpu == g and t != team)
                if lent > 0 and free.get(g, 0) >= n:
                    chose.add(job.job_id)
                elif lent > 0 and free.get(g, 0) + lent >= n:
                    kept.add(job.job_id)
                    break
        return kept, chose - kept


def quota_policy(policy: Policy, spec: TeamsSpec, jobs: Sequence[TraceJob]) -> QuotaAudit:
    """`policy` under the teams' quotas, audited."""
    teams = spec.teams_for(jobs)
    return QuotaAudit(QuotaScheduler(policy, teams), teams)
