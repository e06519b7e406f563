"""CUDA graphs for decode-only batches: one graph per bucketed batch size, replayed each step.

At batch 1 on a fast GPU, kernel launch overhead is what separates us from the bandwidth
ceiling; a graph replays the whole forward (and the logits GEMV) with one launch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch

from localllm.model.batch import ForwardBatch

if TYPE_CHECKING:
    from localllm.runner import ModelRunner
    from localllm.scheduler import ScheduledBatch

log = logging.getLogger("localllm")

BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256)


class GraphRunner:
    def __init__(self, runner: ModelRunner, max_batch: int) -> None:
        self.runner = runner
        self.buckets = [b for b in BUCKETS if b < max_batch] + [max_batch]
        self.max_batch = max_batch
        dev, mb = runner.device, runner.max_blocks_per_seq
        self.ids = torch.zeros(max_batch, dtype=torch.int64, device=dev)  # [Bmax]
        self.pos = torch.zeros(max_batch, dtype=torch.int64, device=dev)
        self.slots = torch.full((max_batch,), -1, dtype=torch.int64, device=dev)
        self.seq_lens = torch.zeros(max_batch, dtype=torch.int32, device=dev)
        self.tables = torch.zeros((max_batch, mb), dtype=torch.int32, device=dev)  # [Bmax, max_blocks]
        self.cu = torch.arange(max_batch + 1, dtype=torch.int32, device=dev)
        self.rows = torch.arange(max_batch, dtype=torch.int64, device=dev)
        # one pinned host staging buffer per step: ids | pos | slots | seq_lens, then tables
        self.host = torch.zeros(4 * max_batch + max_batch * mb, dtype=torch.int64).pin_memory()
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.logits: dict[int, torch.Tensor] = {}
        self.enabled = True
        try:
            self._capture_all()
        except Exception as e:  # an op that cannot be captured: run eagerly, but say so
            log.warning("CUDA graph capture failed (%s); decoding without graphs", e)
            self.enabled = False
            self.graphs.clear()
            self.logits.clear()

    def _fb(self, b: int) -> ForwardBatch:
        return ForwardBatch(
            input_ids=self.ids[:b], positions=self.pos[:b], slot_mapping=self.slots[:b],
            block_tables=self.tables[:b], cu_seqlens_q=self.cu[: b + 1], seq_lens=self.seq_lens[:b],
            max_q_len=1, max_seq_len=self.runner.max_model_len, logits_indices=self.rows[:b],
        )

    def _capture_all(self) -> None:
        model, kv = self.runner.model, self.runner.kv
        pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(self.runner.device)
        for b in reversed(self.buckets):
            fb = self._fb(b)
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream), torch.inference_mode():
                for _ in range(2):  # warm up: triton compiles / autotunes outside the capture
                    model.logits(model.forward(fb, kv))
            torch.cuda.current_stream().wait_stream(stream)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool), torch.inference_mode():
                self.logits[b] = model.logits(model.forward(fb, kv))
            self.graphs[b] = g
        torch.cuda.synchronize(self.runner.device)

    def can_run(self, batch: ScheduledBatch) -> bool:
        if not self.enabled or not 0 < len(batch.items) <= self.max_batch:
            return False
        return all(it.num_tokens == 1 and it.needs_logits and not it.draft_ids for it in batch.items)

    def run(self, batch: ScheduledBatch) -> tuple[torch.Tensor, list[tuple[int, int]]]:
        n = len(batch.items)
        b = next(x for x in self.buckets if x >= n)
        bs, mb, M = self.runner.block_size, self.runner.max_blocks_per_seq, self.max_batch
        h = self.host.numpy()
        h[: 4 * M] = 0
        h[2 * M : 3 * M] = -1  # padding rows write no KV
        tables = h[4 * M :].reshape(M, mb)
        tables[:b] = 0
        for i, it in enumerate(batch.items):
            seq, p = it.seq, it.start
            h[i] = seq.token_ids[p]
            h[M + i] = p
            h[2 * M + i] = seq.block_table[p // bs] * bs + p % bs
            h[3 * M + i] = p + 1
            tables[i, : len(seq.block_table)] = seq.block_table
        dev = self.runner.device
        staged = self.host.to(dev, non_blocking=True)
        self.ids.copy_(staged[:M])
        self.pos.copy_(staged[M : 2 * M])
        self.slots.copy_(staged[2 * M : 3 * M])
        self.seq_lens.copy_(staged[3 * M : 4 * M])
        self.tables.copy_(staged[4 * M :].view(M, mb))
        self.graphs[b].replay()
        rows = [(i, 1) for i in range(n)]
        return self.logits[b][:n], rows


