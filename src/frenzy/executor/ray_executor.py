"""The Executor on Ray: discovery from node resources and labels, feasibility against the live
nodes, one detached AttemptRunner actor per attempt, and events polled from those actors.

An attempt's GPUs are free in Ray once `cancel()` returns, or once `poll()` has reported the
attempt finished: both remove the worker group's placement group (see `placement`) instead of
leaving it to Ray Train's cleaner. Groups whose controller died unnamed (a cancel during start-up,
a lost runner) are swept by `poll()` every few seconds. `free_gpus()` says what Ray itself has
free per node, so the loop never places on GPUs Ray holds for something else."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.exceptions import GetTimeoutError, RayError

from frenzy.control.ports import Event, Finished, Launch, LogLines, NodeInfo, Progress
from frenzy.control.states import AttemptOutcome
from frenzy.executor import placement, ray_env
from frenzy.executor.failures import classify
from frenzy.executor.resources import NAMESPACE, gpu_resource, node_info
from frenzy.executor.runner import AttemptRunner, actor_name

log = logging.getLogger(__name__)
POLL_TIMEOUT_S = 10
NODES_TTL_S = 1.0
SWEEP_EVERY_S = 5.0


@dataclass(slots=True)
class _Tracked:
    """An attempt this server collects events from."""

    handle: object  # the AttemptRunner actor
    cursor: int = 0  # events already collected
    placement_group: str | None = None  # hex id, once its workers have named it


class RayExecutor:
    def __init__(self, *, address: str, storage_root: Path, fake_cluster: bool):
        ray_env.configure(fake_cluster=fake_cluster)
        if not ray.is_initialized():
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
        self.storage_root = Path(storage_root).expanduser()
        self._active: dict[tuple[str, int], _Tracked] = {}
        self._nodes: tuple[float, list[NodeInfo]] = (0.0, [])
        self._node_ids: dict[str, str] = {}  # Frenzy node name -> Ray node id (hex)
        self._free: tuple[float, dict[str, int] | None] = (0.0, None)
        self._next_sweep = 0.0

    # ---- discovery ------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        stamp, cached = self._nodes
        if time.monotonic() - stamp < NODES_TTL_S:
            return cached
        nodes, ids = [], {}
        for entry in ray.nodes():
            try:
                info = node_info(entry)
            except ValueError as exc:  # one misconfigured node must not hide the others
                log.warning("ignoring a node until its Ray resources or labels are fixed: %s", exc)
                continue
            if info is not None:
                nodes.append(info)
                if info.alive:
                    ids[info.name] = entry.get("NodeID", "")
        self._nodes = (time.monotonic(), nodes)
        self._node_ids = ids
        return nodes

    def free_gpus(self) -> dict[str, int] | None:
        """Frenzy GPUs Ray has free per live node (not reserved by any placement group or task),
        from the GCS (no dashboard needed); None when Ray cannot say."""
        stamp, cached = self._free
        if time.monotonic() - stamp < NODES_TTL_S:
            return cached
        nodes = {n.name: n for n in self.nodes() if n.alive}
        try:
            from ray._private.state import available_resources_per_node

            available = available_resources_per_node()
        except Exception:  # a private API: without it the loop goes by its own bookkeeping
            log.exception("could not read Ray's available resources")
            available = None
        free = None
        if available is not None:
            free = {name: int(available.get(self._node_ids.get(name, ""), {}).get(gpu_resource(n.gpu_type.name), 0))
                    for name, n in nodes.items()}
        self._free = (time.monotonic(), free)
        return free

    def check_feasible(self, launch: Launch) -> str | None:
        live = {n.name: n for n in self.nodes() if n.alive}
        gpu_type = launch.choice["gpu_type"]
        for name, gpus in launch.allocation:
            node = live.get(name)
            if node is None:
                return f"node {name} is not alive in the Ray cluster"
            if node.gpu_type.name != gpu_type:
                return f"node {name} has {node.gpu_type.name}, the plan needs {gpu_type}"
            if node.gpus < gpus:
                return f"node {name} has {node.gpus} GPUs, the plan puts {gpus} there"
        return None

    # ---- attempts -------------------------------------------------------------------------

    def submit(self, launch: Launch) -> None:
        payload = {"job_id": launch.job_id, "attempt": launch.attempt, "choice": launch.choice,
                   "allocation": [list(p) for p in launch.allocation], "worker_config": launch.worker_config}
        handle = AttemptRunner.options(name=actor_name(launch.job_id, launch.attempt), namespace=NAMESPACE,
                                       lifetime="detached").remote(payload, str(self.storage_root / "ray"))
        self._active[(launch.job_id, launch.attempt)] = _Tracked(handle)

    def cancel(self, job_id: str, attempt: int) -> None:
        """Stop the attempt; its GPUs are free in Ray when this returns, except for an attempt whose
        workers are still starting (no named group yet): the runner is killed at once and the group
        its dead controller leaves is swept by the next polls (a second or so)."""
        tracked = self._active.pop((job_id, attempt), None)
        handle = tracked.handle if tracked else _find(job_id, attempt)
        if handle is None:
            return
        try:
            kill_now = ray.get(handle.cancel.remote(), timeout=POLL_TIMEOUT_S)
        except RayError:  # the runner cannot release (dead, stuck, killed for memory): do it from here
            try:
                ray.kill(handle, no_restart=True)
            except RayError:
                pass
            self._next_sweep = 0.0
            _release(tracked)
            return
        # Not yet named (workers still starting): killing the runner kills its Train controller,
        # which orphans the group; the next sweep removes it (seconds, not the runner's grace).
        ray.kill(handle, no_restart=True)
        if not kill_now:
            self._next_sweep = min(self._next_sweep, time.monotonic() + 1.0)

    def is_running(self, job_id: str, attempt: int) -> bool:
        handle = _find(job_id, attempt)
        if handle is None:
            return False
        try:  # a runner that already finished still holds its final event: adopt it to collect that
            ray.get(handle.poll.remote(0), timeout=POLL_TIMEOUT_S)
        except RayError:  # dead, unreachable, or killed by Ray's memory monitor
            return False
        return True

    def adopt(self, job_id: str, attempt: int) -> None:
        handle = _find(job_id, attempt)
        if handle is not None:
            self._active[(job_id, attempt)] = _Tracked(handle)

    def poll(self) -> list[Event]:
        out = self._poll_attempts()
        if time.monotonic() >= self._next_sweep:
            self._next_sweep = time.monotonic() + SWEEP_EVERY_S
            if placement.sweep():
                self._free = (0.0, None)
        return out

    def _poll_attempts(self) -> list[Event]:
        out: list[Event] = []
        for key, tracked in list(self._active.items()):
            try:
                events, tracked.cursor, _state = ray.get(tracked.handle.poll.remote(tracked.cursor),
                                                         timeout=POLL_TIMEOUT_S)
            except GetTimeoutError:
                continue  # busy; next step
            except Exception as exc:  # noqa: BLE001 - one attempt's error must not stop the loop
                lost = self._runner_lost(key, tracked, exc)
                if lost is not None:
                    out.append(lost)
                continue
            for event in events:
                if event["kind"] == "placement_group":
                    tracked.placement_group = event["id"]
                    continue
                if event["kind"] == "finished":  # Ray Train has removed the group; make sure of it first
                    self._active.pop(key, None)
                    ray.kill(tracked.handle, no_restart=True)
                    _release(tracked)
                out.extend(_convert(key, event))
        return out

    def _runner_lost(self, key: tuple[str, int], tracked: _Tracked, exc: Exception) -> Finished | None:
        """The runner died (killed, its node gone, or Ray's memory monitor: then even the poll
        answers OutOfMemoryError): the attempt is lost, and its Train controller died with it and
        left the group behind. Any other error: logged, polled again next step."""
        outcome, message = classify(exc)
        if outcome != "lost":
            log.warning("polling attempt %s-%s failed, will retry: %s", *key, message.splitlines()[-1][:300])
            return None
        self._active.pop(key, None)
        try:
            ray.kill(tracked.handle, no_restart=True)  # never let Ray bring back a half-dead runner
        except Exception:  # noqa: BLE001 - already gone
            pass
        _release(tracked)
        self._next_sweep = 0.0  # the group may be unnamed: sweep now
        return Finished(job_id=key[0], attempt=key[1], outcome=AttemptOutcome.LOST,
                        error=f"attempt runner died: {message}")

    def shutdown(self) -> None:
        """Disconnect; attempts keep running (detached) for the next server to adopt."""
        ray.shutdown()


def _release(tracked: _Tracked | None) -> None:
    if tracked is not None and tracked.placement_group is not None:
        placement.release(tracked.placement_group)


def _find(job_id: str, attempt: int):
    try:
        return ray.get_actor(actor_name(job_id, attempt), namespace=NAMESPACE)
    except ValueError:
        return None


def _convert(key: tuple[str, int], event: dict) -> list[Event]:
    from frenzy.train.memory import peak_from_error

    job_id, attempt = key
    if event["kind"] == "progress":
        ranks = sorted(event["ranks"], key=lambda m: m.get("rank", 0))
        if not ranks:
            return []
        head = ranks[0]
        metrics = {k: head[k] for k in ("loss", "eval_loss", "lr", "grad_norm", "tokens_per_s", "step_time_s",
                                        "total_steps", "checkpoint_step", "peak_source") if k in head}
        metrics["peak_bytes"] = [int(m.get("peak_bytes", 0)) for m in ranks]
        evaluated = f" eval_loss {head['eval_loss']}" if "eval_loss" in head else ""
        line = (f"step {head['step']}/{head.get('total_steps')} loss {head.get('loss')}{evaluated} "
                f"{head.get('tokens_per_s')} tok/s peak {max(metrics['peak_bytes']) / 2**30:.2f} GiB "
                f"({head.get('peak_source')})")
        return [Progress(job_id=job_id, attempt=attempt, step=int(head["step"]), metrics=metrics),
                LogLines(job_id=job_id, attempt=attempt, lines=(line,))]
    outcome = AttemptOutcome(event["outcome"])
    peak = peak_from_error(event["error"]) if outcome is AttemptOutcome.OOM else None
    return [Finished(job_id=job_id, attempt=attempt, outcome=outcome, error=event["error"],
                     peak_bytes=(peak,) if peak else (), peak_source="oom-error" if peak else "")]
