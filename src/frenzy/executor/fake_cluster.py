"""Fake-GPU mode: a local Ray cluster (ray.cluster_utils.Cluster, one raylet per node, all on
127.0.0.1) whose nodes advertise fake GPU types as custom resources and labels.

Each fake node can emulate a smaller card than its catalog type (like
`torch.cuda.set_per_process_memory_fraction` on a real GPU), so small models get the multi-GPU
plans a real cluster would give large ones. Workers run on CPU with the gloo backend.

No process outlives its server: the cluster is recorded in a state file, watched by a watchdog
that reaps it once the server is gone, and every start first reaps clusters of dead servers
(see `reaper`).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from frenzy.core import catalog
from frenzy.core.units import GiB
from frenzy.executor import ray_env, reaper
from frenzy.executor.resources import gpu_resource, node_labels

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeNode:
    name: str
    gpu_type: str  # canonical catalog name
    gpus: int
    memory_bytes: int  # per GPU, as emulated

    def __post_init__(self):
        if self.gpus < 1:
            raise ValueError(f"fake node {self.name}: gpus must be >= 1")


# The demo cluster: three GPU types, two of them without room for every job on one GPU.
PRESETS: dict[str, str] = {
    "demo": "A100-SXM-80G:2:6GiB,A10G-24G:4:3GiB,T4-16G:2:2GiB",
    "two-types": "A100-SXM-80G:2:6GiB,A10G-24G:2:3GiB",
}


def parse_nodes(text: str) -> list[FakeNode]:
    """`TYPE:GPUS[:MEMORY]` items, comma-separated (MEMORY like 3GiB or 1.5GiB), or a preset name."""
    text = PRESETS.get(text, text)
    nodes, seen = [], {}
    for item in (t.strip() for t in text.split(",") if t.strip()):
        parts = item.split(":")
        if len(parts) not in (2, 3) or not parts[1].isdigit():
            raise ValueError(f"fake node '{item}' is not TYPE:GPUS[:MEMORY], e.g. A10G-24G:4:3GiB; "
                             f"or use a preset: {', '.join(PRESETS)}")
        gpu = catalog.gpu_type(parts[0])
        memory = gpu.memory_bytes if len(parts) == 2 else _gib(parts[2])
        index = seen[gpu.name] = seen.get(gpu.name, -1) + 1
        slug = re.sub(r"[^a-z0-9]+", "-", gpu.name.lower()).strip("-")
        nodes.append(FakeNode(name=f"{slug}-{index}", gpu_type=gpu.name, gpus=int(parts[1]), memory_bytes=memory))
    if not nodes:
        raise ValueError("give at least one fake node")
    return nodes


def _gib(text: str) -> int:
    match = re.fullmatch(r"([0-9.]+)\s*GiB", text.strip(), re.I)
    if not match:
        raise ValueError(f"memory '{text}' must look like 3GiB or 1.5GiB")
    return int(float(match.group(1)) * GiB)


class FakeCluster:
    """Start with `start()`, stop with `stop()`: it kills exactly the Ray processes it started."""

    def __init__(self, nodes: list[FakeNode], cpus_per_gpu: int = 1,
                 state_dir: Path | str = reaper.DEFAULT_STATE_DIR, watchdog: bool = True):
        self.nodes = nodes
        self.cpus_per_gpu = cpus_per_gpu
        self.state_dir = Path(state_dir).expanduser()
        self.watchdog = watchdog
        self._cluster = None
        self._ray_nodes: dict[str, object] = {}  # fake node name -> ray._private.node.Node
        self._state: Path | None = None
        self._watchdog: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return self._cluster.address

    def start(self) -> str:
        ray_env.configure(fake_cluster=True)
        from ray.cluster_utils import Cluster

        reaped = reaper.reap(self.state_dir)
        if reaped:
            log.warning("reaped %d process(es) of fake clusters whose servers died", len(reaped))
        self._started_at = time.time()
        # The head hosts the Frenzy attempt runners and Ray Train controllers (0 CPUs each), no GPUs.
        self._cluster = Cluster(initialize_head=True, head_node_args=dict(
            num_cpus=2, include_dashboard=False, labels={"frenzy.io/node": "head"}))
        self._state = self.state_dir / f"{os.getpid()}-{os.path.basename(self.session_dir)}.json"
        self._record()  # at once: a server killed while nodes start leaves nothing either
        if self.watchdog:
            self._watchdog = reaper.start_watchdog(self._state)
        for node in self.nodes:
            self._ray_nodes[node.name] = self._cluster.add_node(
                num_cpus=node.gpus * self.cpus_per_gpu, resources={gpu_resource(node.gpu_type): node.gpus},
                labels=node_labels(node.name, node.gpu_type, node.memory_bytes))
            self._record()
        self._cluster.wait_for_nodes()
        self._record()
        log.info("fake Ray cluster at %s: %s", self.address,
                 ", ".join(f"{n.name} ({n.gpus}x {n.gpu_type})" for n in self.nodes))
        return self.address

    @property
    def session_dir(self) -> str:
        return self._cluster.head_node.get_session_dir_path()

    def processes(self) -> list[int]:
        """Pids of the Ray processes this cluster started, and of those its raylets started so far."""
        started = [self._cluster.head_node, *self._cluster.worker_nodes]
        pids = {info.process.pid for node in started for infos in node.all_processes.values() for info in infos}
        return sorted(pids | set(_children(pids)))

    def raylet_pid(self, node_name: str) -> int:
        """The pid of a fake node's raylet (the fault drills kill it)."""
        return self._ray_nodes[node_name].all_processes["raylet"][0].process.pid

    def _record(self) -> None:
        reaper.record(self._state, session_dir=self.session_dir, processes=self.processes(),
                      started_at=self._started_at)

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None
        if self._state is not None:  # anything Ray's shutdown left, then the record
            state = reaper.read_state(self._state)
            if state:
                reaper.kill(reaper.leftovers(state))
            self._state.unlink(missing_ok=True)
            self._state = None
        if self._watchdog is not None:  # it exits by itself once the state file is gone
            try:
                self._watchdog.wait(5)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
            self._watchdog = None

    def __enter__(self) -> FakeCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _children(parents: set[int]) -> list[int]:
    """Direct children of `parents` (the raylets' agents), from /proc; [] where there is none."""
    out = []
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return out
    for entry in entries:
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) in parents:
            out.append(int(entry))
    return out
