"""GPU types: one immutable record per type, loaded from catalog/gpus.yaml and a user's GPU catalog file."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S = 25e9  # 200 Gb/s per node (one HDR InfiniBand / 2x100 GbE NIC)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuType:
    name: str
    memory_bytes: int
    peak_flops: dict[str, float] = field(hash=False, compare=False)
    hbm_bandwidth_bytes_s: float
    intra_node_link: str
    intra_node_bandwidth_bytes_s: float
    gpus_per_node: int
    # The network between nodes of this type, which data-parallel and pipeline traffic crosses once a
    # plan spans nodes. The catalog's is a typical NIC; a cluster sets its own (frenzy.sim.cluster),
    # so that every prediction made for that cluster (plan ranking, schedulers) sees its network.
    inter_node_bandwidth_bytes_s: float = DEFAULT_INTER_NODE_BANDWIDTH_BYTES_S
    supports_bf16: bool
    price_per_gpu_hour_usd: float
    aliases: tuple[str, ...] = ()
    source: str = ""
    # A caveat about predictions for this type (e.g. a runtime term measured only on CUDA), shown
    # wherever the type is chosen, so that a less certain prediction is never silent.
    note: str = ""

    def __post_init__(self):
        if self.memory_bytes <= 0:
            raise ValueError(f"{self.name}: memory_bytes must be positive")
        if self.gpus_per_node < 1:
            raise ValueError(f"{self.name}: gpus_per_node must be >= 1")
        if not self.inter_node_bandwidth_bytes_s > 0:
            raise ValueError(f"{self.name}: inter_node_bandwidth_bytes_s must be positive")
        missing = {"bf16", "fp16", "tf32", "fp32"} - set(self.peak_flops)
        if missing:
            raise ValueError(f"{self.name}: peak_flops lacks {sorted(missing)}")

    def peak_flops_for(self, key: str) -> float:
        """Dense peak FLOP/s for a compute format; falls back to fp16 where bf16/tf32 is absent."""
        value = self.peak_flops.get(key, 0.0)
        if value:
            return value
        return self.peak_flops["fp16"] if key == "bf16" else self.peak_flops["fp32"]
