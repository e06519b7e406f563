"""ModelRunner: the only place that builds device tensors.

Turns a ScheduledBatch into a ForwardBatch (flat ragged tokens, positions, slot mapping, block
tables, cu_seqlens), runs the model, and returns logits only for the rows that are sampled.
Decode-only batches replay CUDA graphs captured for bucketed batch sizes.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from localllm.config import EngineConfig, ModelConfig
from localllm.device import (
    activation_dtype,
    device_name,
    gib,
    pick_backend,
    pick_device,
    set_cpu_threads,
)
from localllm.engine.cuda_graphs import MIXED_CHUNK, GraphRunner
from localllm.engine.kv_cache import KVPoolPlanner
from localllm.engine.progress import LoadProgress
from localllm.engine.scheduler import ScheduledBatch
from localllm.errors import LocalLLMError, OutOfMemoryError
from localllm.kernels.pdl import env_enabled as pdl_env_enabled
from localllm.kernels.pdl import pdl_enabled
from localllm.kernels.plan import long_context_step
from localllm.kernels.registry import Ops
from localllm.model.batch import ForwardBatch, KVCache
from localllm.model.registry import ARCHS
from localllm.model.rope import cos_sin_table
from localllm.model.weights import cache_dense, load_weights

if TYPE_CHECKING:
    from localllm.sources.base import Tensors

log = logging.getLogger("localllm")

CPU_DENSE_BUDGET = 4 << 30  # dequantize weights once on CPU when they fit in this


@dataclass
class StepOutput:
    logits: torch.Tensor  # [S, vocab] float32
    rows: list[
        tuple[int, int]
    ]  # per batch item: (first logits row, number of rows); (0, 0) if none
    greedy: torch.Tensor | None = None  # int64 [S]: argmax of each logits row (CUDA graphs)


class ModelRunner:
    def __init__(
        self,
        cfg: EngineConfig,
        tensors: Tensors,
        model_cfg: ModelConfig,
        progress: LoadProgress | None = None,
    ) -> None:
        progress = progress or LoadProgress()
        self.cfg = cfg
        self.model_cfg = model_cfg
        self.device = pick_device(cfg.device)
        try:  # a bad LOCALLLM_PDL is the user's one-line error, before anything loads
            pdl_env_enabled()
        except ValueError as e:
            raise LocalLLMError(str(e)) from None
        if self.device.type == "cuda":  # an earlier engine deleted without close()
            release_device_memory(self.device)
        self.backend = pick_backend(cfg.backend, self.device)
        self.dtype = activation_dtype(self.device, cfg.dtype)
        if self.device.type == "cpu":
            log.info("CPU threads: %d", set_cpu_threads(cfg.threads))
        self.pool = KVPoolPlanner(cfg, model_cfg, self.device)  # checks --kv-dtype early
        self.kv_dtype = self.pool.dtype_name
        self.block_size = cfg.block_size
        self.max_model_len = min(cfg.max_model_len or model_cfg.context_length, 1 << 20)
        self._load_model(tensors, progress)
        # the model's own context may shrink to what the pool holds
        progress(
            "warm-up forward to measure memory (the first run compiles the Triton kernels)"
            if self.device.type == "cuda"
            else "allocating the KV cache"
        )
        self.kv, self.max_model_len = self.pool.allocate(self.max_model_len, self._profile_forward)
        log.info(
            "KV cache: %d blocks of %d tokens (%s, %.0f MiB); context %d tokens",
            self.kv.num_blocks,
            self.block_size,
            self.kv_dtype,
            self.kv.num_blocks * self.pool.bytes_per_block / 2**20,
            self.max_model_len,
        )
        self.max_blocks_per_seq = -(-self.max_model_len // self.block_size)
        self.graphs: GraphRunner | None = None
        if self.device.type == "cuda" and cfg.cuda_graphs:
            self._capture_graphs(progress)

    def _load_model(self, tensors: Tensors, progress: LoadProgress) -> None:
        """Weights to the device (repacked for the kernels) and the forward module."""
        cfg, model_cfg = self.cfg, self.model_cfg
        mc = model_cfg
        log.info(
            "model: %s, %d layers, dim %d, vocab %d", mc.arch, mc.n_layers, mc.dim, mc.vocab_size
        )
        progress(
            f"loading weights ({tensors.nbytes / 2**20:.0f} MiB) on {device_name(self.device)}"
        )
        t0 = time.perf_counter()
        self._check_weights_fit(tensors)
        try:
            weights = load_weights(tensors, model_cfg, self.device, self.dtype)
        except torch.cuda.OutOfMemoryError:
            raise OutOfMemoryError(self._weights_oom_message(tensors)) from None
        if self.backend == "reference" and self.device.type == "cpu":
            cache_dense(weights, self.dtype, CPU_DENSE_BUDGET)
        self.load_seconds = time.perf_counter() - t0
        log.info(
            "weights loaded in %.1f s (%s kernels, %s activations)",
            self.load_seconds,
            self.backend,
            str(self.dtype).removeprefix("torch."),
        )
        cos_sin = cos_sin_table(model_cfg, self.max_model_len, self.device, weights.rope_freqs)
        int8_act = cfg.int8_activations and self.backend == "triton"
        self.model = ARCHS[model_cfg.arch].model_class(
            model_cfg, weights, Ops(self.backend), cos_sin, int8_act
        )
        self.weight_bytes = weights.nbytes

    def _capture_graphs(self, progress: LoadProgress) -> None:
        cfg = self.cfg
        progress("capturing CUDA graphs (and compiling the decode kernels)")
        t0 = time.perf_counter()
        chunk = min(cfg.decode_prefill_chunk or MIXED_CHUNK, MIXED_CHUNK)
        dev = self.device.type
        self.graphs = GraphRunner(
            self, max(1, cfg.max_num_seqs), chunk, cfg.spec_tokens_on(dev),
            cfg.spec_batch_cutoff, cfg.spec_tokens_ceiling(dev),
        )  # fmt: skip
        n = len(self.graphs.graphs)
        log.info("captured %d CUDA graphs in %.1f s", n, time.perf_counter() - t0)

    @property
    def launches_pdl(self) -> bool:
        """Whether decode kernels launch with programmatic dependent launch (kernels/pdl.py):
        as the CUDA graphs were captured, else as eager launches would."""
        if self.graphs is not None and self.graphs.enabled:
            return self.graphs.pdl
        return pdl_enabled(self.device)

    # ---- memory -------------------------------------------------------------------------
    def close(self) -> None:
        """Free the CUDA graphs, the KV pool and the weights (LLMEngine.close)."""
        if self.device.type == "cuda":  # a step launched ahead may still be running
            torch.cuda.synchronize(self.device)
        if self.graphs is not None:
            self.graphs.close()
            self.graphs = None
        for name in ("kv", "model"):
            if hasattr(self, name):
                delattr(self, name)
        release_device_memory(self.device)

    def _check_weights_fit(self, tensors: Tensors) -> None:
        if self.device.type != "cuda":
            return
        free, total = torch.cuda.mem_get_info(self.device)
        if tensors.nbytes > free * self.cfg.gpu_memory_utilization:
            raise OutOfMemoryError(self._weights_oom_message(tensors))

    def _weights_oom_message(self, tensors: Tensors) -> str:
        free, total = torch.cuda.mem_get_info(self.device)
        need = tensors.nbytes
        return (
            f"{tensors.path}: the model needs about {gib(need)} of GPU memory for its weights, but "
            f"{torch.cuda.get_device_name(self.device)} has {gib(free)} free of {gib(total)}"
        )

    def _profile_forward(self, kv: KVCache, n_tok: int, n_blocks: int) -> None:
        """One forward of n_tok dummy tokens over kv (KVPoolPlanner measures its peak memory)."""
        fb = self._build(
            input_ids=[0] * n_tok,
            positions=list(range(n_tok)),
            slots=list(range(n_tok)),
            tables=[list(range(n_blocks))],
            q_lens=[n_tok],
            seq_lens=[n_tok],
            logits_rows=list(range(min(n_tok, self.cfg.max_num_seqs))),
        )
        self.model.logits(self.model.forward(fb, kv))

    @property
    def num_kv_tokens(self) -> int:
        return self.kv.num_blocks * self.block_size

    # ---- batches ------------------------------------------------------------------------
    def _build(
        self,
        input_ids: Sequence[int],
        positions: Sequence[int] | np.ndarray,
        slots: Sequence[int] | np.ndarray,
        tables: list[list[int]],
        q_lens: list[int],
        seq_lens: list[int],
        logits_rows: list[int],
    ) -> ForwardBatch:
        dev = self.device
        width = max(1, max(len(t) for t in tables))
        bt = np.zeros((len(tables), width), dtype=np.int32)
        for i, t in enumerate(tables):
            bt[i, : len(t)] = t
        cu = np.zeros(len(q_lens) + 1, dtype=np.int32)
        np.cumsum(q_lens, out=cu[1:])
        longest = max(seq_lens)
        as_t = lambda a, dt: torch.as_tensor(np.asarray(a, dtype=dt)).to(dev, non_blocking=True)
        return ForwardBatch(
            input_ids=as_t(input_ids, np.int64),
            positions=as_t(positions, np.int64),
            slot_mapping=as_t(slots, np.int64),
            block_tables=torch.from_numpy(bt).to(dev, non_blocking=True),
            cu_seqlens_q=torch.from_numpy(cu).to(dev, non_blocking=True),
            seq_lens=as_t(seq_lens, np.int32),
            max_q_len=max(q_lens),
            max_seq_len=longest,
            logits_indices=as_t(logits_rows, np.int64),
            logits_all_rows=len(logits_rows) == len(input_ids),  # rows ascend: all of them
            long_context=long_context_step(longest),
        )

    def prepare(
        self, batch: ScheduledBatch, feed_ids: bool = True
    ) -> tuple[ForwardBatch, list[tuple[int, int]]]:
        """feed_ids=False: a chainable step (overlap.chainable) whose decode ids the caller
        puts in (one 0 per decode item; a prefill chunk's ids are fed)."""
        bs = self.block_size
        ids: list[int] = []
        tables: list[list[int]] = []
        q_lens: list[int] = []
        seq_lens: list[int] = []
        logits_rows: list[int] = []
        rows: list[tuple[int, int]] = []
        pos_chunks = []
        for it in batch.items:
            seq, start, n = it.seq, it.start, it.num_tokens
            known = n - len(it.draft_ids)
            fed = feed_ids or not it.is_decode
            ids += seq.token_ids[start : start + known] if fed else [0] * known
            ids += it.draft_ids
            pos_chunks.append(np.arange(start, start + n, dtype=np.int64))
            tables.append(seq.block_table)
            q_lens.append(n)
            seq_lens.append(start + n)
            if it.needs_logits:
                k = 1 + len(it.draft_ids)
                rows.append((len(logits_rows), k))
                end = len(ids)
                logits_rows += range(end - k, end)
            else:
                rows.append((0, 0))
        pos = np.concatenate(pos_chunks)
        slots = np.concatenate(
            [
                np.asarray(t, dtype=np.int64)[p // bs] * bs + p % bs
                for t, p in zip(tables, pos_chunks)
            ]
        )
        fb = self._build(ids, pos, slots, tables, q_lens, seq_lens, logits_rows)
        return fb, rows

    @torch.inference_mode()
    def load_slot_copy(self) -> None:
        """Load the slot copy's kernel now, not at the first prefix hit that ends inside a block
        (block_manager); the pool's blocks are all free, their slots hold nothing yet."""
        if self.kv.num_blocks > 1:
            for pool in self.kv.pools:
                self.model.ops.copy_slots(pool, 0, 1, 1)

    @torch.inference_mode()
    def execute(
        self, batch: ScheduledBatch, greedy: bool = False, ids_from: torch.Tensor | None = None
    ) -> StepOutput:
        """Run batch's forward without waiting for the device. greedy: also return the argmax
        of each logits row (replayed graphs always do). ids_from ([>= decodes] int64, on the
        device): the input ids of a chainable step's decodes (its first items), one each, from
        the step before, still in flight (engine/overlap.py); their own token_ids are not read."""
        for c in batch.kv_copies:  # prefix hits ending inside a block (block_manager)
            for pool in self.kv.pools:
                self.model.ops.copy_slots(pool, c.src, c.dst, c.num_tokens)
        graphs = self.graphs
        plan = graphs.plan(batch) if graphs is not None else None
        if graphs is not None and plan is not None:
            logits, argmax, rows = graphs.run(batch, plan, ids_from)
            return StepOutput(logits, rows, argmax)
        fb, rows = self.prepare(batch, ids_from is None)
        if ids_from is not None:  # decodes first, one row each; a chunk's rows after them
            n = batch.num_decode
            fb = replace(fb, input_ids=torch.cat((ids_from[:n], fb.input_ids[n:])))
        hidden = self.model.forward(fb, self.kv)
        if hidden.shape[0] == 0:
            return StepOutput(torch.empty(0, self.model_cfg.vocab_size, device=self.device), rows)
        logits = self.model.logits(hidden)
        return StepOutput(logits, rows, self.model.ops.argmax(logits) if greedy else None)


def release_device_memory(device: torch.device) -> None:
    """Collect unreachable objects (an engine's runner and graph runner refer to each other)
    and hand cached blocks back to the driver, so mem_get_info sees them as free."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
