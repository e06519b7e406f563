"""CUDA graphs for decode steps: one graph per bucketed batch size, replayed each step.

At batch 1 on a fast GPU, kernel launch overhead is what separates us from the bandwidth
ceiling; a graph replays the whole forward (and the logits GEMV) with one launch.

Two kinds per bucket b:
- decode: b sequences with one query token each (rows 0..b-1);
- mixed: the same b decode rows plus one prefill chunk of up to C tokens (rows b..b+C-1,
  left-padded: a chunk of C' < C tokens sits in the last C' rows, so that each query row's
  position seq_len - C + i is right). With --decode-prefill-chunk <= C a long prompt is
  prefilled beside running streams without stalling them;
- prefill: b = 0, one chunk of up to PREFILL_GRAPH_TOKENS tokens, laid out the same way.
Padding rows write no KV (slot -1) and padding sequences have length 0.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from localllm.config import DECODE_PREFILL_CHUNK_GPU
from localllm.model.batch import ForwardBatch

if TYPE_CHECKING:
    from localllm.engine.runner import ModelRunner
    from localllm.engine.scheduler import ScheduledBatch, ScheduledSeq

log = logging.getLogger("localllm")

BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256)
# Prefill tokens in a mixed graph, and the most rows (decodes + chunk) one may have. The fused
# skinny GEMM costs about the same for 16 and 32 rows but about twice as much for 64 (H200,
# scripts/sweep_dequant.py), so a 24-token chunk beside up to 8 streams keeps those steps
# close to a plain decode step; bigger decode batches with a prefill chunk run eagerly.
MIXED_CHUNK = DECODE_PREFILL_CHUNK_GPU  # the default --decode-prefill-chunk on a GPU
MIXED_MAX_TOKENS = 32
# A lone prefill chunk of up to this many tokens (a new chat turn after a prefix-cache hit, an
# editor completion) replays one graph instead of launching ~450 kernels from Python.
PREFILL_GRAPH_TOKENS = 128

# name, dtype, shape of each graph input, in the order of the staging buffer (tables last: only
# the step's rows of it are copied); T tokens, M sequences, B = the most blocks of a sequence
_FIELDS = (("ids", torch.int64, "T"), ("pos", torch.int64, "T"), ("slots", torch.int64, "T"),
           ("rows", torch.int64, "M"), ("seq_lens", torch.int32, "M"), ("cu", torch.int32, "M+1"),
           ("tables", torch.int32, "M,B"))  # fmt: skip


@dataclass
class _StepBuffers:
    """The graphs' inputs: views of one device buffer. A pinned host buffer of the same layout
    is staged (host_np: numpy views of it) and its used prefix goes over in one copy per step."""

    ids: torch.Tensor  # [T] int64 token ids
    pos: torch.Tensor  # [T] int64 positions
    slots: torch.Tensor  # [T] int64 KV slot of each token, -1 = padding (no store)
    rows: torch.Tensor  # [M] int64 logits rows
    seq_lens: torch.Tensor  # [M] int32
    cu: torch.Tensor  # [M + 1] int32 cu_seqlens_q
    tables: torch.Tensor  # [M, B] int32 block tables
    dev: torch.Tensor  # uint8 [bytes] the device buffer the fields view
    host: torch.Tensor  # uint8 [bytes] pinned staging buffer
    host_np: dict[str, np.ndarray]  # field name -> numpy view of host
    tables_offset: int  # byte offset of `tables`

    @classmethod
    def allocate(cls, T: int, M: int, B: int, device: torch.device) -> _StepBuffers:
        dims = {"T": (T,), "M": (M,), "M+1": (M + 1,), "M,B": (M, B)}
        offsets, size = [], 0
        for _, dtype, dim in _FIELDS:
            offsets.append(size)
            size += -(-math.prod(dims[dim]) * dtype.itemsize // 8) * 8  # 8-byte aligned fields
        host = torch.zeros(size, dtype=torch.uint8).pin_memory()
        dev = torch.zeros(size, dtype=torch.uint8, device=device)
        views, host_np = {}, {}
        for (name, dtype, dim), off in zip(_FIELDS, offsets):
            shape, n = dims[dim], math.prod(dims[dim]) * dtype.itemsize
            views[name] = dev[off : off + n].view(dtype).view(shape)
            host_np[name] = host[off : off + n].view(dtype).view(shape).numpy()
        return cls(**views, dev=dev, host=host, host_np=host_np, tables_offset=offsets[-1])


# (graph key (decode bucket b, chunk c), decode items, the one prefill chunk or None)
ReplayPlan = tuple[tuple[int, int], list["ScheduledSeq"], "ScheduledSeq | None"]


class GraphRunner:
    def __init__(self, runner: ModelRunner, max_batch: int, mixed_chunk: int = MIXED_CHUNK) -> None:
        self.runner = runner
        self.buckets = [b for b in BUCKETS if b < max_batch] + [max_batch]
        self.max_batch = max_batch
        self.mixed_chunk = mixed_chunk
        limit = max(MIXED_MAX_TOKENS, mixed_chunk + 1)
        self.mixed_buckets = [b for b in self.buckets if b + mixed_chunk <= limit]
        dev, mb = runner.device, runner.max_blocks_per_seq
        M = max_batch + 1  # sequences
        T = max(max_batch + mixed_chunk, PREFILL_GRAPH_TOKENS)  # tokens
        self.buf = _StepBuffers.allocate(T, M, mb, dev)
        self.table_bytes = mb * 4
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}  # (b, chunk) -> graph
        self.logits: dict[tuple[int, int], torch.Tensor] = {}
        self.greedy: dict[tuple[int, int], torch.Tensor] = {}  # argmax of each logits row
        self.replays = {"decode": 0, "mixed": 0, "prefill": 0}
        self.enabled = True
        try:
            self._capture_all()
        except Exception as e:  # an op that cannot be captured: run eagerly, but say so
            log.warning("CUDA graph capture failed (%s); decoding without graphs", e)
            self.enabled = False
            self.graphs.clear()
            self.logits.clear()
            self.greedy.clear()

    # ---- capture ------------------------------------------------------------------------
    def _fb(self, b: int, c: int) -> ForwardBatch:
        n_seq = b + (1 if c else 0)
        return ForwardBatch(
            input_ids=self.buf.ids[: b + c],
            positions=self.buf.pos[: b + c],
            slot_mapping=self.buf.slots[: b + c],
            block_tables=self.buf.tables[:n_seq],
            cu_seqlens_q=self.buf.cu[: n_seq + 1],
            seq_lens=self.buf.seq_lens[:n_seq],
            max_q_len=max(1, c),
            max_seq_len=self.runner.max_model_len,
            logits_indices=self.buf.rows[:n_seq],
            logits_all_rows=c == 0,  # decode rows 0..b-1
        )

    def _reset(self, b: int, c: int) -> None:
        """Buffer contents for warm-up/capture: all rows padding, the right cu_seqlens."""
        self.buf.slots.fill_(-1)
        self.buf.seq_lens.zero_()
        cu = list(range(b + 1)) + ([b + c] if c else [])
        self.buf.cu[: len(cu)].copy_(torch.tensor(cu, dtype=torch.int32))
        rows = list(range(b)) + ([b + c - 1] if c else [])
        self.buf.rows[: len(rows)].copy_(torch.tensor(rows, dtype=torch.int64))

    def _capture(self, b: int, c: int, pool: Any, stream: torch.cuda.Stream) -> None:
        model, kv = self.runner.model, self.runner.kv
        fb = self._fb(b, c)
        self._reset(b, c)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.inference_mode():
            for _ in range(2):  # warm up: Triton compiles outside the capture
                model.ops.argmax(model.logits(model.forward(fb, kv)))
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool), torch.inference_mode():
            self.logits[b, c] = model.logits(model.forward(fb, kv))
            self.greedy[b, c] = model.ops.argmax(self.logits[b, c])
        self.graphs[b, c] = g

    def _capture_all(self) -> None:
        pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(self.runner.device)
        try:  # biggest first, so the pool's blocks get reused; optional: decoding works without it
            self._capture(0, PREFILL_GRAPH_TOKENS, pool, stream)
        except torch.cuda.OutOfMemoryError:
            log.warning("no memory for the prefill CUDA graph; short prefills run eagerly")
            self.graphs.pop((0, PREFILL_GRAPH_TOKENS), None)
            self.logits.pop((0, PREFILL_GRAPH_TOKENS), None)
            self.greedy.pop((0, PREFILL_GRAPH_TOKENS), None)
            torch.cuda.empty_cache()
        plan = [(b, 0) for b in self.buckets] + [(b, self.mixed_chunk) for b in self.mixed_buckets]
        for b, c in sorted(plan, key=lambda bc: -(bc[0] + bc[1])):
            self._capture(b, c, pool, stream)
        torch.cuda.synchronize(self.runner.device)

    # ---- replay -------------------------------------------------------------------------
    @staticmethod
    def _bucket(buckets: list[int], n: int) -> int | None:
        return next((x for x in buckets if x >= n), None)

    def plan(self, batch: ScheduledBatch) -> ReplayPlan | None:
        """(graph key (b, c), decode items, the one prefill chunk or None), or None when no
        captured graph runs this batch."""
        if not self.enabled:
            return None
        is_decode = lambda it: it.num_tokens == 1 and not it.draft_ids and it.needs_logits
        decodes = [it for it in batch.items if is_decode(it)]
        rest = [it for it in batch.items if not is_decode(it)]
        if len(rest) > 1 or (rest and rest[0].draft_ids):
            return None
        chunk = rest[0] if rest else None
        if chunk is None:
            b = self._bucket(self.buckets, len(decodes)) if decodes else None
            key = (b, 0)
        elif not decodes:
            key = (
                (0, PREFILL_GRAPH_TOKENS) if chunk.num_tokens <= PREFILL_GRAPH_TOKENS else (None, 0)
            )
        else:
            b = self._bucket(self.mixed_buckets, len(decodes))
            key = (b, self.mixed_chunk) if chunk.num_tokens <= self.mixed_chunk else (None, 0)
        if key[0] is None or key not in self.graphs:
            return None
        return (key[0], key[1]), decodes, chunk

    def _stage(
        self, decodes: list[ScheduledSeq], chunk: ScheduledSeq | None, b: int, c: int
    ) -> int:
        """Fill the host buffer for graph (b, c); returns how many bytes of it to copy."""
        bs = self.runner.block_size
        h = self.buf.host_np
        n_seq = b + (1 if chunk is not None else 0)
        ids, pos, slots, rows = h["ids"], h["pos"], h["slots"], h["rows"]
        lens, cu, tables = h["seq_lens"], h["cu"], h["tables"][:n_seq]
        ids[: b + c] = 0
        pos[: b + c] = 0
        slots[: b + c] = -1
        lens[:n_seq] = 0
        tables[:] = 0
        for i, it in enumerate(decodes):
            seq, p = it.seq, it.start
            ids[i], pos[i], lens[i] = seq.token_ids[p], p, p + 1
            slots[i] = seq.block_table[p // bs] * bs + p % bs
            tables[i, : len(seq.block_table)] = seq.block_table
        cu[: b + 1] = range(b + 1)
        rows[:b] = range(b)
        if chunk is not None:
            seq, p, n = chunk.seq, chunk.start, chunk.num_tokens
            r0 = b + c - n  # left padding
            ids[r0 : b + c] = seq.token_ids[p : p + n]
            q = np.arange(p, p + n)
            pos[r0 : b + c] = q
            slots[r0 : b + c] = np.asarray(seq.block_table, dtype=np.int64)[q // bs] * bs + q % bs
            lens[b] = p + n
            tables[b, : len(seq.block_table)] = seq.block_table
            cu[b + 1] = b + c
            rows[b] = b + c - 1
        return self.buf.tables_offset + n_seq * self.table_bytes

    def run(
        self, batch: ScheduledBatch, plan: ReplayPlan
    ) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
        """Replay the graph `plan` (from `plan(batch)`) chose for batch: (logits [S, V], their
        argmax [S], each item's (first row, rows))."""
        (b, c), decodes, chunk = plan
        n = self._stage(decodes, chunk, b, c)
        self.buf.dev[:n].copy_(self.buf.host[:n], non_blocking=True)
        self.graphs[b, c].replay()
        self.replays["decode" if not c else "mixed" if b else "prefill"] += 1
        row_of = {id(it): (i, 1) for i, it in enumerate(decodes)}
        if chunk is not None:
            row_of[id(chunk)] = (b, 1) if chunk.needs_logits else (0, 0)
        return self.logits[b, c], self.greedy[b, c], [row_of[id(it)] for it in batch.items]
