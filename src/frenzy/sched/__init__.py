"""Scheduling: cluster state, decisions, and the policies that turn a queue into placements.

Pure: no clock, no Ray, no database. The live control loop and the simulator call the same code.
"""

from frenzy.sched.types import ClusterState, Decision, NodeState, Place, Preempt, QueuedJob, RunningJob, Wait
from frenzy.sched.registry import POLICIES, Policy, get_policy

__all__ = ["ClusterState", "Decision", "NodeState", "Place", "Preempt", "QueuedJob", "RunningJob", "Wait",
           "POLICIES", "Policy", "get_policy"]
