"""Where each token of a replayed step sits in the CUDA graphs' fixed-shape inputs.

A graph is captured for a key (b, c, w, long): b decode slots of w query rows each, then
(c > 0) one prefill chunk of up to c rows; `long` marks the plain decode graphs of long-context
steps (ForwardBatch.long_context), captured apart because attention takes another loop there.
A decode that verifies k drafts feeds 1 + k <= w tokens and sits in the last 1 + k rows of its
slot; a chunk of c' < c tokens sits in the last c' rows (left padding: each real query row's
position is seq_len - q_len + i, as the attention kernel assumes). Padding rows write no KV
(slot -1); padding sequences have length 0. In a prefill graph (b = 0) the chunk's query rows
start at its first real row (cu_seqlens_q[0] = c - c'), so attention skips the padding rows;
they had attended as the c - c' positions before the chunk (a 100-token turn in the 128-row
graph: 28 padding query rows beside 100 real ones, one row tile of eight for llama3-8b's GQA).
Their rows then carry whatever the attention output held through the rest of the forward, whose
kernels after attention all work row by row, into no logits and no KV. Decode slots and a mixed
graph's chunk keep their padding rows as queries (a slot starts where the one before it ends).
Plain decode graphs have w = 1; verify graphs (w = 1 + K) have no chunk; logits come from every
decode row (all b * w rows) and from the chunk's last row.

Pure layout: numpy staging into a host buffer whose used prefix is copied to the device in one
go, and the ForwardBatch of device views a graph is captured with. Testable on the CPU. Two
host buffers take turns: with step overlap (engine/overlap.py) the next step is staged while the
previous step's copy may still wait in the stream behind a running graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from localllm.device import current_stream
from localllm.model.batch import ForwardBatch

if TYPE_CHECKING:
    from localllm.engine.scheduler import ScheduledSeq


class GraphKey(NamedTuple):
    b: int  # decode slots
    c: int  # prefill chunk rows (0: none)
    w: int = 1  # query rows per decode slot (1 + the most drafts it verifies)
    long: bool = False  # plain decode of a long-context step (kernels/plan.py LONG_CONTEXT)

    @property
    def tokens(self) -> int:
        return self.b * self.w + self.c

    @property
    def seqs(self) -> int:
        return self.b + (1 if self.c else 0)


# name, dtype, shape of each graph input, in the order of the staging buffer (tables last: only
# the step's rows of it are copied); T tokens, M sequences, B = the most blocks of a sequence
_FIELDS = (("ids", torch.int64, "T"), ("pos", torch.int64, "T"), ("slots", torch.int64, "T"),
           ("rows", torch.int64, "T"), ("seq_lens", torch.int32, "M"), ("cu", torch.int32, "M+1"),
           ("tables", torch.int32, "M,B"))  # fmt: skip


@dataclass
class StepBuffers:
    """The graphs' inputs: views of one device buffer. A host buffer of the same layout (pinned
    on CUDA) is staged (host_np: numpy views of it) and its used prefix goes over in one copy
    (`upload`); then the other host buffer takes the next step."""

    ids: torch.Tensor  # [T] int64 token ids
    pos: torch.Tensor  # [T] int64 positions
    slots: torch.Tensor  # [T] int64 KV slot of each token, -1 = padding (no store)
    rows: torch.Tensor  # [T] int64 logits rows
    seq_lens: torch.Tensor  # [M] int32
    cu: torch.Tensor  # [M + 1] int32 cu_seqlens_q
    tables: torch.Tensor  # [M, B] int32 block tables
    dev: torch.Tensor  # uint8 [bytes] the device buffer the fields view
    hosts: tuple[torch.Tensor, ...]  # 2 x uint8 [bytes] staging buffers, used in turn
    host_nps: tuple[dict[str, np.ndarray], ...]  # per staging buffer: field name -> numpy view
    tables_offset: int  # byte offset of `tables`
    table_bytes: int  # bytes of one row of `tables`
    _turn: int = field(default=0, init=False)  # the staging buffer the next step fills
    # per staging buffer: an event after its last copy to the device (CUDA only)
    _copied: list[torch.cuda.Event | None] = field(default_factory=lambda: [None, None], init=False)
    # per graph key: its cu_seqlens_q and decode logits rows, which never change
    _cu_rows: dict[GraphKey, tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, init=False
    )
    # (staging buffer, bytes) -> (device, host) slices that `upload` copies
    _views: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, init=False
    )

    @property
    def host(self) -> torch.Tensor:
        """The staging buffer of the step being staged."""
        return self.hosts[self._turn]

    @property
    def host_np(self) -> dict[str, np.ndarray]:
        return self.host_nps[self._turn]

    @classmethod
    def allocate(cls, T: int, M: int, B: int, device: torch.device) -> StepBuffers:
        dims = {"T": (T,), "M": (M,), "M+1": (M + 1,), "M,B": (M, B)}
        offsets, size = [], 0
        for _, dtype, dim in _FIELDS:
            offsets.append(size)
            size += -(-math.prod(dims[dim]) * dtype.itemsize // 8) * 8  # 8-byte aligned fields
        hosts = [torch.zeros(size, dtype=torch.uint8) for _ in range(2)]
        hosts = [h.pin_memory() for h in hosts] if device.type == "cuda" else hosts
        dev = torch.zeros(size, dtype=torch.uint8, device=device)
        views: dict[str, torch.Tensor] = {}
        host_nps: list[dict[str, np.ndarray]] = [{}, {}]
        for (name, dtype, dim), off in zip(_FIELDS, offsets):
            shape, n = dims[dim], math.prod(dims[dim]) * dtype.itemsize
            views[name] = dev[off : off + n].view(dtype).view(shape)
            for host, host_np in zip(hosts, host_nps):
                host_np[name] = host[off : off + n].view(dtype).view(shape).numpy()
        return cls(**views, dev=dev, hosts=tuple(hosts), host_nps=tuple(host_nps),
                   tables_offset=offsets[-1], table_bytes=B * 4)  # fmt: skip

    def upload(self, n: int) -> None:
        """Copy the first n staged bytes to the device (in stream order, without waiting) and
        hand staging to the other host buffer."""
        views = self._views.get((self._turn, n))
        if views is None:  # one size per graph key: kept, as slicing costs a microsecond
            views = self._views[self._turn, n] = (self.dev[:n], self.host[:n])
        views[0].copy_(views[1], non_blocking=True)
        if self.dev.is_cuda:
            ev = self._copied[self._turn] or torch.cuda.Event()
            ev.record(current_stream(self.dev.device.index))
            self._copied[self._turn] = ev
        self._turn ^= 1

    def forward_batch(self, key: GraphKey, max_seq_len: int) -> ForwardBatch:
        """The ForwardBatch of device views that graph `key` is captured with."""
        T, n_seq = key.tokens, key.seqs
        n_rows = key.b * key.w + (1 if key.c else 0)
        return ForwardBatch(
            input_ids=self.ids[:T],
            positions=self.pos[:T],
            slot_mapping=self.slots[:T],
            block_tables=self.tables[:n_seq],
            cu_seqlens_q=self.cu[: n_seq + 1],
            seq_lens=self.seq_lens[:n_seq],
            max_q_len=max(1, key.c, key.w),
            max_seq_len=max_seq_len,
            logits_indices=self.rows[:n_rows],
            logits_all_rows=key.c == 0,  # decode rows 0..b*w-1
            long_context=key.long,
        )

    def reset(self, key: GraphKey) -> None:
        """Contents for warm-up/capture: all rows padding, the right cu_seqlens and rows."""
        self.stage(key, [], None, 0)
        self.dev.copy_(self.host)

    def stage(
        self,
        key: GraphKey,
        decodes: list[ScheduledSeq],
        chunk: ScheduledSeq | None,
        bs: int,
        feed_ids: bool = True,
    ) -> tuple[int, list[tuple[int, int]]]:
        """Fill the host buffer for graph `key` (bs: KV block size): (bytes of it to copy, each
        decode's then the chunk's (first logits row, rows)). feed_ids=False leaves the token ids
        0: a step launched ahead (engine/overlap.py) copies them on the device from the step
        before, whose tokens the host does not know yet.

        The decode rows are built as Python lists and written with one numpy assignment per
        field: a batch-1 verify step's staging is on the host's path between two steps, where
        each numpy call on a handful of elements costs about a microsecond."""
        done = self._copied[self._turn]
        if done is not None:  # this buffer's previous copy has left it (it almost always has)
            done.synchronize()
        h = self.host_np
        b, c, w = key.b, key.c, key.w
        n_seq, nd = key.seqs, b * w  # sequences; decode rows
        assert len(decodes) <= b, f"{len(decodes)} decodes staged in a graph of {b} slots"
        ids, pos, slots = [0] * nd, [0] * nd, [-1] * nd
        lens = [0] * n_seq
        tables = h["tables"][:n_seq]
        tables[:] = 0
        out = []
        for i, it in enumerate(decodes):
            n = 1 + len(it.draft_ids)
            r0, p, table = (i + 1) * w - n, it.start, it.seq.block_table
            if feed_ids:
                ids[r0 : r0 + n] = it.token_ids
            pos[r0 : r0 + n] = range(p, p + n)
            slots[r0 : r0 + n] = [table[q // bs] * bs + q % bs for q in range(p, p + n)]
            lens[i] = p + n
            tables[i, : len(table)] = table
            out.append((r0, n))
        h["ids"][:nd], h["pos"][:nd], h["slots"][:nd] = ids, pos, slots
        cu_rows = self._cu_rows.get(key)
        if cu_rows is None:
            cu_rows = self._cu_rows[key] = (np.arange(b + 1) * w, np.arange(nd))
        h["cu"][: b + 1], h["rows"][:nd] = cu_rows
        if c:
            T = nd + c
            h["ids"][nd:T], h["pos"][nd:T], h["slots"][nd:T] = 0, 0, -1
            h["cu"][b + 1] = T
            h["rows"][nd] = T - 1
            if chunk is not None:
                self._place(chunk, T - chunk.num_tokens, chunk.num_tokens, bs, b)
                lens[b] = chunk.start + chunk.num_tokens
                if not b:  # a prefill graph: the padding rows are nobody's queries
                    h["cu"][0] = T - chunk.num_tokens
                out.append((nd, 1) if chunk.needs_logits else (0, 0))
        h["seq_lens"][:n_seq] = lens
        return self.tables_offset + n_seq * self.table_bytes, out

    def _place(self, it: ScheduledSeq, r0: int, n: int, bs: int, s: int) -> None:
        """The tokens of prefill chunk `it` in rows r0..r0+n-1, as sequence s of the graph."""
        h, seq, p = self.host_np, it.seq, it.start
        h["ids"][r0 : r0 + n] = it.token_ids
        q = np.arange(p, p + n)
        h["pos"][r0 : r0 + n] = q
        table = np.asarray(seq.block_table, dtype=np.int64)
        h["slots"][r0 : r0 + n] = table[q // bs] * bs + q % bs
        h["tables"][s, : len(table)] = table
