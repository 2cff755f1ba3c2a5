"""Pipeline parallelism: the decoder split into stages on consecutive ranks, run by torch's 1F1B schedule
(torch.distributed.pipelining.Schedule1F1B), composed with data parallelism on a (pp, dp) device mesh.

Ranks: dp is the inner mesh dimension, so stage s holds ranks s*dp .. s*dp + dp - 1, and a stage's
data-parallel group (DDP or FSDP2, as the plan says) is consecutive ranks; each dp index is one pipeline.

The split is the simple one: every rank builds the whole model (seeded, so every rank builds the same
weights) and keeps only its stage's decoder layers, `memory.states.stage_layer_range`, which is the
split MARP plans with. The first stage keeps the embedding, the last the final norm and the LM head.
Kept layers keep their index in the ModuleList's names, so every parameter keeps the fully-qualified
name it has in the whole model: checkpoints (DCP) and exports do not depend on the layout.
With tied embeddings the last stage keeps the embedding module too (its head's weight *is* that
parameter, under the same name as without stages); the two copies get the sum of both stages'
gradients each step, so they stay equal.

The loss is the unpipelined worker's: the sum of token losses over the global batch divided by its
loss tokens (train.batches), so it does not depend on the layout. Each micro-batch's backward starts
from its token-loss sum times dp / (global loss tokens), as the worker scales (DP averages over dp).
"""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from frenzy.memory.states import stage_layer_range
from frenzy.train.batches import Batches, loss_tokens
from frenzy.train.config import WorkerConfig
from frenzy.train.optimization import gradient_square_sum


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    index: int
    count: int
    layers: range

    def __post_init__(self):
        if not 0 <= self.index < self.count:
            raise ValueError(f"stage {self.index} of {self.count}")

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def last(self) -> bool:
        return self.index == self.count - 1


class StageLayers(nn.ModuleList):
    """A stage's decoder layers under their whole-model indices (the names checkpoints use), indexed
    by position like any ModuleList (`layers[0]` is the stage's first)."""

    def __getitem__(self, idx):
        if isinstance(idx, int):
            return list(self._modules.values())[idx]
        return super().__getitem__(idx)


def device_mesh(cfg: WorkerConfig, device: str) -> DeviceMesh:
    """(pp, dp) mesh: consecutive ranks form a stage's data-parallel group."""
    if cfg.tp > 1:
        raise ValueError(f"pipeline stages run without tensor parallelism, not pp{cfg.pp} x tp{cfg.tp}")
    return init_device_mesh(device, (cfg.pp, cfg.dp), mesh_dim_names=("pp", "dp"))


def stage_of(mesh: DeviceMesh, model: nn.Module) -> Stage:
    """This rank's stage, from the whole model's layer count (before keep_stage)."""
    index, count = mesh["pp"].get_local_rank(), mesh["pp"].size()
    layers = _parts(model)[0].config.num_hidden_layers
    return Stage(index=index, count=count, layers=stage_layer_range(layers, count, index))


def _parts(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """(the transformers CausalLM under any peft wrapper, its decoder)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base, base.get_decoder()


def tied(model: nn.Module) -> bool:
    base, _ = _parts(model)
    return bool(getattr(base.config, "tie_word_embeddings", False))


def keep_stage(model: nn.Module, stage: Stage, precision) -> None:
    """Drop what other stages hold and make the model's forward this stage's: token ids (first
    stage) or hidden states in, hidden states or logits (last stage) out, under `precision`."""
    base, decoder = _parts(model)
    kept = StageLayers()
    for i in stage.layers:  # under their whole-model index, so names stay fully qualified
        kept.add_module(str(i), decoder.layers[i])
    decoder.layers = kept
    if hasattr(decoder.config, "layer_types"):  # the decoder picks each layer's mask by position
        decoder.config = copy.copy(decoder.config)
        decoder.config.layer_types = [base.config.layer_types[i] for i in stage.layers]
    if not stage.first and not (stage.last and tied(model)):
        decoder.embed_tokens = None
    if not stage.last:
        decoder.norm = nn.Identity()
        base.lm_head = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with precision():
            given = {"input_ids": x} if stage.first else {"inputs_embeds": x}
            hidden = decoder(**given, use_cache=False).last_hidden_state
            return base.lm_head(hidden) if stage.last else hidden

    # An instance forward: DDP, FSDP2 and the pipeline stage call the model itself, whose parameters
    # keep the whole model's names (a wrapper module would prefix them).
    model.forward = types.MethodType(forward, model)


def wrap_data_parallel(model: nn.Module, cfg: WorkerConfig, mesh: DeviceMesh, device: torch.device) -> nn.Module:
    """A stage's data parallelism: FSDP2 as without stages (model.wrap_data_parallel) for ZeRO >= 1; for
    ZeRO 0 torch's FSDP2-based `replicate` (DDP semantics: whole gradients averaged over dp), which the
    pipeline schedule drives like FSDP2 (DDP's bucket rebuild assumes one backward per forward)."""
    from frenzy.train.model import wrap_data_parallel as wrap

    if cfg.dp == 1 or cfg.zero > 0:
        return wrap(model, cfg, mesh, device)
    from torch.distributed._composable.replicate_with_fsdp import replicate

    return replicate(model, mesh=mesh["dp"])


def token_loss_sum(model: nn.Module, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Sum of the token losses of a micro-batch, by the model's own causal-LM loss (fp32 logits,
    labels shifted by one, -100 ignored); its mean is what `model(labels=...).loss` returns."""
    base, _ = _parts(model)
    return base.loss_function(logits, labels, base.config.vocab_size, num_items_in_batch=1)


class PipelineStep:
    """One optimizer step of a pipelined, data-parallel stage (every rank of the mesh calls it)."""

    def __init__(self, cfg: WorkerConfig, model: nn.Module, inner: nn.Module, stage: Stage, mesh: DeviceMesh,
                 device: torch.device):
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B

        self.cfg, self.model, self.inner, self.mesh, self.device = cfg, model, inner, mesh, device
        self.stage = stage
        self.group = mesh["pp"].get_group()
        self.tied_group = _tied_group(inner, mesh)
        pipe_stage = PipelineStage(model, self.stage.index, cfg.pp, device, group=self.group)
        self.schedule = Schedule1F1B(pipe_stage, cfg.grad_accum, loss_fn=self._loss, scale_grads=False)
        self._scale = 0.0

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return token_loss_sum(self.inner, logits, labels) * self._scale

    def step(self, step: int, batches: Batches, optimizer: torch.optim.Optimizer) -> tuple[float, float | None]:
        """Returns the global batch's mean loss per loss token and the gradient norm (all stages)."""
        cfg = self.cfg
        total_tokens = batches.step_loss_tokens(step)
        ids, labels = (torch.cat(parts).to(self.device) for parts in
                       zip(*(batches.get(step, m) for m in range(cfg.grad_accum)), strict=True))
        self._scale = cfg.dp / total_tokens
        losses: list[torch.Tensor] = []  # each micro-batch's scaled loss, on the last stage
        if self.stage.first:
            self.schedule.step(ids)
        elif self.stage.last:
            # the merged logits of the whole step are not wanted: kept, they would stay alive all step
            self.schedule.step(target=labels, losses=losses, return_outputs=False)
        else:
            self.schedule.step()
        self._sum_tied_gradients()
        grad_norm = self._clip()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        if losses:
            loss_sum += torch.stack(losses).detach().double().sum() / self._scale
        dist.all_reduce(loss_sum)  # the last stage's dp ranks hold the global batch's sum
        return float(loss_sum) / total_tokens, grad_norm

    def _sum_tied_gradients(self) -> None:
        """A tied embedding's gradient is the first stage's (embedding) plus the last stage's (head)."""
        if self.tied_group is None:
            return
        weight = _parts(self.inner)[1].embed_tokens.weight
        if weight.grad is not None:
            dist.all_reduce(_local(weight.grad), group=self.tied_group)

    def _clip(self) -> float | None:
        """Clip by the global gradient norm over every stage (a tied weight counted once)."""
        if self.cfg.max_grad_norm is None:
            return None
        params = [p for p in self.model.parameters() if p.grad is not None]
        counted = params
        if self.tied_group is not None and self.stage.last:
            weight = _parts(self.inner)[1].embed_tokens.weight
            counted = [p for p in params if p is not weight]
        squares = gradient_square_sum(counted).to(self.device)
        dist.all_reduce(squares, group=self.group)
        total = squares.sqrt().cpu()
        torch.nn.utils.clip_grads_with_norm_(params, self.cfg.max_grad_norm, total.float(), foreach=False)
        return float(total)

    @torch.no_grad()
    def validation_loss(self, chunks) -> float | None:
        """The validation set's mean token loss, the chunks passed forward stage by stage."""
        was_training = self.model.training
        self.model.eval()
        total = torch.zeros(2, dtype=torch.float64, device=self.device)
        ranks = self.mesh["pp"].mesh.tolist()
        me = self.stage.index
        try:
            for ids, labels in chunks:
                x = ids.to(self.device) if self.stage.first else _receive(ranks[me - 1], self.device)
                out = self.model(x)
                if self.stage.last:
                    tokens = int(loss_tokens(labels).sum())
                    total[0] += token_loss_sum(self.inner, out, labels.to(self.device)).double()
                    total[1] += tokens
                else:
                    _send(out, ranks[me + 1])
        finally:
            self.model.train(was_training)
        dist.all_reduce(total)
        return float(total[0] / total[1]) if total[1] > 0 else None


def _send(tensor: torch.Tensor, dst: int) -> None:
    dist.send_object_list([(tuple(tensor.shape), tensor.dtype)], dst=dst)
    dist.send(tensor.contiguous(), dst=dst)


def _receive(src: int, device: torch.device) -> torch.Tensor:
    meta = [None]
    dist.recv_object_list(meta, src=src)
    shape, dtype = meta[0]
    tensor = torch.empty(shape, dtype=dtype, device=device)
    dist.recv(tensor, src=src)
    return tensor


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _tied_group(inner: nn.Module, mesh: DeviceMesh):
    """The group of this dp index's first- and last-stage ranks (None where there is no tied weight
    to keep equal, or this rank is on neither). Every rank creates every group, as new_group asks."""
    ranks = mesh.mesh.tolist()  # [stage][dp index] -> global rank
    if not tied(inner) or len(ranks) < 2:
        return None
    mine = None
    for d in range(len(ranks[0])):
        group = dist.new_group([ranks[0][d], ranks[-1][d]])
        if dist.get_rank() in (ranks[0][d], ranks[-1][d]):
            mine = group
    return mine


# ---------------------------------------------------------------- export from stages


def to_first_rank(stream, cfg: WorkerConfig):
    """Every stage's (key, CPU tensor) stream, one tensor at a time, yielded on global rank 0 in stage
    order; a key met again (a tied embedding the last stage holds too) is skipped. `stream(leader)`
    is this rank's stage stream, which yields on the stage's dp-rank 0 (the leader) only; the other
    leaders send theirs to rank 0 (collective: every rank calls this and exhausts it)."""
    rank = dist.get_rank()
    stage, dp_rank = divmod(rank, cfg.dp)  # the (pp, dp) mesh: dp inner
    group = _cpu_group()
    if rank != 0:
        for key, tensor in stream(dp_rank == 0):
            _send_named(key, tensor, group)
        if dp_rank == 0:
            dist.send_object_list([None], dst=0, group=group)
        return
    seen = set()
    for key, tensor in stream(True):
        seen.add(key)
        yield key, tensor
    for leader in range(cfg.dp, cfg.world_size, cfg.dp):
        while (item := _receive_named(leader, group)) is not None:
            if item[0] not in seen:
                seen.add(item[0])
                yield item


def _cpu_group():
    """Exported tensors travel on CPU: the default group where it is gloo, else a gloo group."""
    return None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")


def _send_named(key: str, tensor: torch.Tensor, group) -> None:
    dist.send_object_list([(key, tuple(tensor.shape), tensor.dtype)], dst=0, group=group)
    dist.send(tensor.contiguous(), dst=0, group=group)


def _receive_named(src: int, group) -> tuple[str, torch.Tensor] | None:
    meta = [None]
    dist.recv_object_list(meta, src=src, group=group)
    if meta[0] is None:
        return None
    key, shape, dtype = meta[0]
    tensor = torch.empty(shape, dtype=dtype)
    dist.recv(tensor, src=src, group=group)
    return key, tensor
