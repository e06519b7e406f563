"""CUDA graphs for decode steps: one graph per bucketed batch size, replayed each step.

At batch 1 on a fast GPU, kernel launch overhead is what separates us from the bandwidth
ceiling; a graph replays the whole forward (and the logits GEMV) with one launch.

Kinds per bucket b (the layout of each: graph_layout.py):
- decode: b sequences with one query token each (rows 0..b-1); where the model's attention
  has a long-context loop (kernels/plan.py `long_context_loop`: MHA over int8 KV), a second
  decode graph per bucket for steps whose longest sequence holds LONG_CONTEXT tokens or more,
  up to the most such sequences the KV pool holds;
- mixed: the same b decode rows plus one prefill chunk of up to C tokens. With
  --decode-prefill-chunk <= C a long prompt is prefilled beside running streams without
  stalling them;
- prefill: b = 0, one chunk of up to c tokens, for c in PREFILL_GRAPH_SIZES up to the step
  budget (a chunk pads to the smallest that holds it);
- verify (speculative decoding): b sequences with up to w = 1 + k query tokens each, for the
  widths in VERIFY_WIDTHS up to 1 + --spec-tokens and b up to the speculation batch cutoff
  (above it nobody drafts). Sequences without drafts ride along in a slot of their own.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from localllm.config import DECODE_PREFILL_CHUNK_GPU
from localllm.engine.graph_layout import GraphKey, StepBuffers
from localllm.kernels.pdl import forced as pdl_forced
from localllm.kernels.pdl import pdl_enabled
from localllm.kernels.plan import long_context_loop, long_context_sequences, long_context_step

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
# A lone prefill chunk (a new chat turn after a prefix-cache hit, an editor completion, a whole
# prompt) replays one graph instead of launching ~550 kernels from Python: eagerly, a 512-token
# prefill of an 8B model took 35-59 ms of wall time for 27.9 ms of GPU kernels (H200,
# scripts/probe_prefill.py), the host did not keep the GPU fed. A chunk pads to the smallest
# size that holds it (padding rows cost GEMM rows, not dequantization or launches).
PREFILL_GRAPH_SIZES = (128, 256, 512, 1024, 2048)


def prefill_graph_sizes(budget: int) -> list[int]:
    """The prefill graphs an engine whose longest chunk is `budget` tokens (its step budget or
    its context, the smaller) captures: the sizes below it and the budget itself (a bigger
    chunk never comes), at most the largest size."""
    return sorted(
        {c for c in PREFILL_GRAPH_SIZES if c < budget} | {min(budget, PREFILL_GRAPH_SIZES[-1])}
    )


# verify widths captured besides 1 + --spec-tokens: a short draft pads to the narrowest
# that holds it (the skinny GEMM costs about the same for all of these rows)
VERIFY_WIDTHS = (3, 5)

# (graph key, decode items, the one prefill chunk or None)
ReplayPlan = tuple[GraphKey, list["ScheduledSeq"], "ScheduledSeq | None"]


class GraphRunner:
    def __init__(
        self,
        runner: ModelRunner,
        max_batch: int,
        mixed_chunk: int = MIXED_CHUNK,
        spec_tokens: int = 0,
        spec_max_batch: int = 0,
        spec_tokens_max: int = 0,
    ) -> None:
        """spec_tokens: the engine's --spec-tokens (0: no verify graphs); spec_max_batch: the
        most decoding sequences that still speculate; spec_tokens_max: the most drafts the
        engine may raise its limit to later (`extend_verify`; the step buffers hold them)."""
        self.runner = runner
        self.buckets = [b for b in BUCKETS if b < max_batch] + [max_batch]
        self.max_batch = max_batch
        self.mixed_chunk = mixed_chunk
        limit = max(MIXED_MAX_TOKENS, mixed_chunk + 1)
        self.mixed_buckets = [b for b in self.buckets if b + mixed_chunk <= limit]
        top = 1 + spec_tokens
        self.verify_widths = (
            sorted({w for w in VERIFY_WIDTHS if w < top} | {top}) if spec_tokens else []
        )
        vmax = min(max_batch, spec_max_batch)
        self.verify_buckets = [b for b in self.buckets if b < vmax] + [vmax] if vmax else []
        self.long_buckets = self._long_buckets()
        # no chunk is longer than the step budget or the context
        longest = min(runner.cfg.max_num_batched_tokens, runner.max_model_len)
        self.prefill_sizes = prefill_graph_sizes(longest)
        M = max_batch + 1  # sequences
        self.verify_top = max(top, 1 + spec_tokens_max) if spec_tokens else 0  # widest verify
        T = max(max_batch + mixed_chunk, self.prefill_sizes[-1], vmax * self.verify_top)  # tokens
        self.buf = StepBuffers.allocate(T, M, runner.max_blocks_per_seq, runner.device)
        self.graphs: dict[GraphKey, torch.cuda.CUDAGraph] = {}
        self.logits: dict[GraphKey, torch.Tensor] = {}
        self.greedy: dict[GraphKey, torch.Tensor] = {}  # argmax of each logits row
        self.replays = {"decode": 0, "long": 0, "mixed": 0, "prefill": 0, "verify": 0}
        self.enabled = True
        self._capture_or_fall_back()

    def _long_buckets(self) -> list[int]:
        """The decode buckets that get a long-context graph: those up to the most sequences of
        LONG_CONTEXT tokens the KV pool holds, when the model's attention has such a loop and
        its context reaches it; else none."""
        r, mc = self.runner, self.runner.model_cfg
        loop = long_context_loop(r.kv.k[0].dtype, r.dtype, mc.n_heads // mc.n_kv_heads,
                                 mc.head_dim)  # fmt: skip
        most = min(self.max_batch, long_context_sequences(r.num_kv_tokens, r.max_model_len))
        if not loop or most < 1:
            return []
        # the buckets end with max_batch >= most: the first one that holds `most` closes the list
        return [b for b in self.buckets if b < most] + [next(b for b in self.buckets if b >= most)]

    def _capture_or_fall_back(self) -> None:
        """Capture every graph. If that fails while kernels launch with programmatic dependent
        launch (kernels/pdl.py: a driver that cannot capture such launches, say), capture them
        again without it; if capture still fails, decode eagerly. Each fallback is a warning."""
        self.pdl = pdl_enabled(self.runner.device)  # whether the graphs' kernels launch with PDL
        try:
            self._capture_all()
            return
        except Exception as e:
            self._drop_graphs()
            if not self.pdl:
                log.warning("CUDA graph capture failed (%s); decoding without graphs", e)
                self.enabled = False
                return
            log.warning("CUDA graph capture with programmatic dependent launch failed (%s); "
                        "capturing the graphs without it", e)  # fmt: skip
        self.pdl = False
        try:
            with pdl_forced(False):
                self._capture_all()
        except Exception as e:  # an op that cannot be captured: run eagerly, but say so
            log.warning("CUDA graph capture failed (%s); decoding without graphs", e)
            self._drop_graphs()
            self.enabled = False

    def _drop_graphs(self) -> None:
        self.graphs.clear()
        self.logits.clear()
        self.greedy.clear()

    def _drop(self, keys: list[GraphKey]) -> None:
        """Forget these graphs (a capture that failed part-way) and give their memory back."""
        for key in keys:
            self.graphs.pop(key, None)
            self.logits.pop(key, None)
            self.greedy.pop(key, None)
        torch.cuda.empty_cache()

    def close(self) -> None:
        """Drop every captured graph (their private memory pool goes with them)."""
        self.enabled = False
        self._drop_graphs()

    # ---- capture ------------------------------------------------------------------------
    def _capture(self, key: GraphKey, pool: Any, stream: torch.cuda.Stream) -> None:
        model, kv = self.runner.model, self.runner.kv
        fb = self.buf.forward_batch(key, self.runner.max_model_len)
        self.buf.reset(key)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.inference_mode():
            for _ in range(2):  # warm up: Triton compiles outside the capture
                model.ops.argmax(model.logits(model.forward(fb, kv)))
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool), torch.inference_mode():
            self.logits[key] = model.logits(model.forward(fb, kv))
            self.greedy[key] = model.ops.argmax(self.logits[key])
        self.graphs[key] = g

    def _capture_all(self) -> None:
        self._pool = pool = torch.cuda.graph_pool_handle()
        self._stream = stream = torch.cuda.Stream(self.runner.device)
        # biggest first, so the pool's blocks get reused; optional: prefill runs eagerly without
        for c in sorted(self.prefill_sizes, reverse=True):
            prefill = GraphKey(0, c)
            try:
                self._capture(prefill, pool, stream)
            except torch.cuda.OutOfMemoryError:
                log.warning("no memory for the %d-token prefill CUDA graph; such chunks run "
                            "eagerly", c)  # fmt: skip
                self._drop([prefill])
        plan = [GraphKey(b, 0) for b in self.buckets]
        plan += [GraphKey(b, 0, 1, True) for b in self.long_buckets]
        plan += [GraphKey(b, self.mixed_chunk) for b in self.mixed_buckets]
        plan += [GraphKey(b, 0, w) for b in self.verify_buckets for w in self.verify_widths]
        for key in sorted(plan, key=lambda k: -k.tokens):
            self._capture(key, pool, stream)
        torch.cuda.synchronize(self.runner.device)

    def extend_verify(self, spec_tokens: int) -> bool:
        """Capture the verify graphs of a draft limit raised after start-up (the engine's,
        from its measured price): width 1 + spec_tokens at every verify batch size, in the same
        memory pool. False, with a warning, when it cannot (no memory, a failed capture); the
        graphs captured before stay as they were."""
        top = 1 + spec_tokens
        if not self.enabled or not self.verify_buckets or top > self.verify_top:
            return False
        if top in self.verify_widths:
            return True
        keys = [GraphKey(b, 0, top) for b in sorted(self.verify_buckets, reverse=True)]
        try:
            with pdl_forced(self.pdl):  # as the graphs before were captured
                for key in keys:
                    self._capture(key, self._pool, self._stream)
            torch.cuda.synchronize(self.runner.device)
        except Exception as e:  # out of memory, or a capture that failed: keep the old limit
            log.warning("could not capture the %d-token verify CUDA graphs (%s); the draft "
                        "limit stays", top, e)  # fmt: skip
            self._drop(keys)
            return False
        self.verify_widths = sorted({*self.verify_widths, top})
        return True

    # ---- replay -------------------------------------------------------------------------
    @staticmethod
    def _bucket(buckets: list[int], n: int) -> int | None:
        return next((x for x in buckets if x >= n), None)

    def plan(self, batch: ScheduledBatch) -> ReplayPlan | None:
        """(graph key, decode items, the one prefill chunk or None), or None when no captured
        graph runs this batch."""
        if not self.enabled:
            return None
        is_decode = lambda it: it.needs_logits and it.num_tokens == 1 + len(it.draft_ids)
        decodes = [it for it in batch.items if is_decode(it)]
        rest = [it for it in batch.items if not is_decode(it)]
        if len(rest) > 1:
            return None
        chunk = rest[0] if rest else None
        width = max((it.num_tokens for it in decodes), default=1)
        # the longest context only matters where long-context graphs exist (most models: none)
        long = bool(self.long_buckets) and long_context_step(
            max((it.start + it.num_tokens for it in decodes), default=0)
        )
        key = self._key(len(decodes), chunk, width, long)
        if key is None or key not in self.graphs:
            return None
        return key, decodes, chunk

    def _key(self, n_dec: int, chunk: ScheduledSeq | None, width: int,
             long: bool = False) -> GraphKey | None:  # fmt: skip
        """The graph of a step of n_dec decodes (up to `width` query rows each) and `chunk`;
        `long`: a long-context step, which plain decode runs in its long-context graph where
        one was captured for the bucket."""
        if width > 1:  # speculative verification: decodes only
            w = self._bucket(self.verify_widths, width)
            b = self._bucket(self.verify_buckets, n_dec)
            return GraphKey(b, 0, w) if chunk is None and b and w else None
        if chunk is None:
            b = self._bucket(self.buckets, n_dec) if n_dec else None
            return GraphKey(b, 0, 1, long and b in self.long_buckets) if b else None
        if not n_dec:  # the smallest captured prefill graph that holds the chunk
            sizes = [c for c in self.prefill_sizes if GraphKey(0, c) in self.graphs]
            c = self._bucket(sizes, chunk.num_tokens)
            return GraphKey(0, c) if c else None
        b = self._bucket(self.mixed_buckets, n_dec)
        fits = chunk.num_tokens <= self.mixed_chunk
        return GraphKey(b, self.mixed_chunk) if b and fits else None

    def run(
        self, batch: ScheduledBatch, plan: ReplayPlan, ids_from: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
        """Replay the graph `plan` (from `plan(batch)`) chose for batch: (logits [S, V], their
        argmax [S], each item's (first row, rows)). ids_from ([>= decodes] int64, on the device):
        the token ids of a chainable step's decodes, one each in order, taken there in stream
        order (a step launched ahead of its tokens, engine/overlap.py; a prefill chunk's ids
        are staged from the host)."""
        key, decodes, chunk = plan
        feed = ids_from is None
        n, rows = self.buf.stage(key, decodes, chunk, self.runner.block_size, feed_ids=feed)
        self.buf.upload(n)
        if ids_from is not None:
            assert key.w == 1, "only chainable steps (decodes, a chunk) take ids on the device"
            self.buf.ids[: len(decodes)].copy_(ids_from[: len(decodes)], non_blocking=True)
        self.graphs[key].replay()
        kind = "verify" if key.w > 1 else "long" if key.long else "decode" if not key.c else (
            "mixed" if key.b else "prefill")  # fmt: skip
        self.replays[kind] += 1
        items = decodes + ([chunk] if chunk is not None else [])
        row_of = {id(it): r for it, r in zip(items, rows)}
        return self.logits[key], self.greedy[key], [row_of[id(it)] for it in batch.items]
