"""The CUDA graphs' fixed-shape layouts (graph_layout.py), run eagerly on the CPU: a verify
step laid out in padded slots of w rows (and a mixed decode + chunk step) gives the same logits
rows as the ragged batch the runner builds without graphs."""

from __future__ import annotations

from typing import Any

import conftest
import pytest
import torch

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.engine.graph_layout import GraphKey, StepBuffers


@pytest.fixture(scope="module")
def eng() -> LLMEngine:
    path = conftest.testdata_path("models", "stories260K.gguf")
    return LLMEngine(EngineConfig(model=str(path), device="cpu", block_size=8, spec_tokens=0))


def _logits_by_layout(eng: LLMEngine, key: GraphKey, batch, decodes, chunk):
    r = eng.runner
    buf = StepBuffers.allocate(max(64, key.tokens), 8, r.max_blocks_per_seq, r.device)
    n, rows = buf.stage(key, decodes, chunk, r.block_size)
    buf.dev[:n].copy_(buf.host[:n])
    fb = buf.forward_batch(key, r.max_model_len)
    logits = r.model.logits(r.model.forward(fb, r.kv))
    return logits, rows


def _start(eng: LLMEngine, prompts: list[list[int]]) -> None:
    for p in prompts:
        eng.add_request(p, SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True))
    while any(s.in_prefill for s in eng.scheduler.running) or eng.scheduler.waiting:
        eng.step()


def test_verify_slots_match_the_ragged_batch(eng: LLMEngine) -> None:
    _start(eng, [[1] + list(range(20, 20 + n)) for n in (12, 30, 17)])
    seqs = eng.scheduler.running
    for s, drafts in zip(seqs, ([5, 6, 7, 8], [], [9])):
        s.draft_ids = list(drafts)
    batch = eng.scheduler.schedule()
    assert [len(it.draft_ids) for it in batch.items] == [4, 0, 1]
    eager = eng.runner.execute(batch)
    key = GraphKey(4, 0, 5)  # bucket 4 > 3 decodes: one empty slot
    logits, rows = _logits_by_layout(eng, key, batch, batch.items, None)
    assert logits.shape[0] == key.tokens
    for (e0, en), (g0, gn) in zip(eager.rows, rows):
        assert en == gn
        torch.testing.assert_close(logits[g0 : g0 + gn], eager.logits[e0 : e0 + en])
    eng.scheduler.update(batch, {it.seq.seq_id: [1] for it in batch.items})


def test_mixed_decode_and_chunk_layout(eng: LLMEngine) -> None:
    eng.scheduler.config.max_num_batched_tokens = 16
    eng.add_request([1] + list(range(100, 140)), SamplingParams(max_tokens=2, temperature=0.0))
    eng.step()  # the chunk's first part: the next one starts past the 24-row slot's padding
    batch = eng.scheduler.schedule()
    decodes = [it for it in batch.items if it.num_tokens == 1]
    chunk = next(it for it in batch.items if it.num_tokens > 1)
    eager = eng.runner.execute(batch)
    logits, rows = _logits_by_layout(eng, GraphKey(4, 24), batch, decodes, chunk)
    order = {id(it): r for it, r in zip(decodes + [chunk], rows)}
    for it, (e0, en) in zip(batch.items, eager.rows):
        g0, gn = order[id(it)]
        assert en == gn
        torch.testing.assert_close(logits[g0 : g0 + gn], eager.logits[e0 : e0 + en])


def test_prefill_graph_sizes_follow_the_step_budget() -> None:
    """Prefill graphs up to the step budget: the smaller sizes and the budget itself."""
    from localllm.engine.cuda_graphs import PREFILL_GRAPH_SIZES, prefill_graph_sizes

    assert prefill_graph_sizes(2048) == [128, 256, 512, 1024, 2048]
    assert prefill_graph_sizes(600) == [128, 256, 512, 600]
    assert prefill_graph_sizes(16) == [16]
    assert prefill_graph_sizes(10_000) == list(PREFILL_GRAPH_SIZES)  # no duplicate of the last


@pytest.mark.parametrize("done_steps", [1, 3])
def test_lone_chunk_left_padded_in_a_prefill_graph(done_steps: int) -> None:
    """A prefill chunk that starts past the prompt's first tokens, laid out in the last 32 of
    a 128-row prefill graph's rows (96 padding rows before it), gives the logits of the ragged
    batch. Its query rows start at its first real row, so attention skips the padding rows:
    after 32 tokens they outnumber the sequence's earlier tokens, which the CPU reference
    refused while they were queries."""
    path = conftest.testdata_path("models", "stories260K.gguf")
    eng = LLMEngine(EngineConfig(model=str(path), device="cpu", block_size=8,
                                 max_num_batched_tokens=32, enable_prefix_caching=False))  # fmt: skip
    eng.add_request([1] + list(range(200, 339)), SamplingParams(max_tokens=1, temperature=0.0))
    for _ in range(done_steps):
        eng.step()  # tokens 0..32 * done_steps - 1
    batch = eng.scheduler.schedule()  # the next 32: a chunk that needs no logits yet
    [chunk] = batch.items
    assert (chunk.start, chunk.num_tokens) == (32 * done_steps, 32)
    r = eng.runner
    buf = StepBuffers.allocate(128, 8, r.max_blocks_per_seq, r.device)
    buf.stage(GraphKey(0, 128), [], chunk, r.block_size)
    assert buf.host_np["cu"][:2].tolist() == [96, 128]
    chunk.needs_logits = True  # compare its last row as a final chunk would give it
    eager = eng.runner.execute(batch)
    logits, [(g0, gn)] = _logits_by_layout(eng, GraphKey(0, 128), batch, [], chunk)
    (e0, en) = eager.rows[0]
    assert (gn, en) == (1, 1)
    torch.testing.assert_close(logits[g0], eager.logits[e0])


def test_prefill_chunks_take_the_smallest_captured_graph() -> None:
    """`GraphRunner._key` for a lone chunk: the smallest captured prefill size that holds it;
    a size whose capture ran out of memory is skipped; a chunk past the largest runs eagerly."""
    from types import SimpleNamespace

    from localllm.engine.cuda_graphs import GraphRunner

    gr = object.__new__(GraphRunner)  # the selection only: no capture (needs CUDA)
    gr.prefill_sizes = [128, 256, 512, 1024, 2048]
    gr.graphs = {GraphKey(0, c): None for c in (128, 256, 1024, 2048)}  # 512: no memory
    chunk = lambda n: SimpleNamespace(num_tokens=n)  # noqa: E731
    assert gr._key(0, chunk(100), 1) == GraphKey(0, 128)
    assert gr._key(0, chunk(129), 1) == GraphKey(0, 256)
    assert gr._key(0, chunk(300), 1) == GraphKey(0, 1024)
    assert gr._key(0, chunk(2048), 1) == GraphKey(0, 2048)
    assert gr._key(0, chunk(2049), 1) is None


def _bare_graph_runner(monkeypatch: pytest.MonkeyPatch, pdl_on: bool, fails_with_pdl: bool,
                       fails_without: bool) -> tuple[Any, list[bool]]:  # fmt: skip
    """A GraphRunner without a GPU whose `_capture_all` records whether PDL was forced off
    and fails as asked."""
    import contextlib
    import types

    from localllm.engine import cuda_graphs

    g = object.__new__(cuda_graphs.GraphRunner)
    g.runner = types.SimpleNamespace(device=torch.device("cuda"))
    g.graphs, g.logits, g.greedy, g.enabled = {}, {}, {}, True
    state = {"forced_off": False}
    calls: list[bool] = []

    @contextlib.contextmanager
    def forced(on: bool):
        assert on is False
        state["forced_off"] = True
        try:
            yield
        finally:
            state["forced_off"] = False

    def capture_all() -> None:
        calls.append(state["forced_off"])
        g.graphs[GraphKey(1, 0)] = object()  # a partial capture the fallback must drop
        with_pdl = pdl_on and not state["forced_off"]
        if (with_pdl and fails_with_pdl) or (not with_pdl and fails_without):
            raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(cuda_graphs, "pdl_forced", forced)
    monkeypatch.setattr(cuda_graphs, "pdl_enabled", lambda device: pdl_on)
    g._capture_all = capture_all
    return g, calls


def test_graph_capture_retries_without_pdl(monkeypatch, caplog) -> None:
    """A capture that fails with programmatic dependent launch is redone without it (graphs
    kept, one warning); one that fails both ways, or without PDL in play, decodes eagerly."""
    g, calls = _bare_graph_runner(monkeypatch, True, True, False)
    g._capture_or_fall_back()
    assert calls == [False, True] and g.enabled and len(g.graphs) == 1 and not g.pdl
    assert "capturing the graphs without it" in caplog.text
    g, calls = _bare_graph_runner(monkeypatch, True, True, True)
    g._capture_or_fall_back()
    assert calls == [False, True] and not g.enabled and not g.graphs
    g, calls = _bare_graph_runner(monkeypatch, False, True, True)
    g._capture_or_fall_back()
    assert calls == [False] and not g.enabled and not g.graphs
    g, calls = _bare_graph_runner(monkeypatch, True, False, True)
    g._capture_or_fall_back()
    assert calls == [False] and g.enabled and len(g.graphs) == 1 and g.pdl


def test_ids_taken_on_the_device_match_staged_ids(eng: LLMEngine) -> None:
    """A step launched ahead (engine/overlap.py) stages no token ids: they are copied into the
    graph's input on the device. The logits equal those of the same step staged with its ids."""
    _start(eng, [[1] + list(range(40, 40 + n)) for n in (5, 9)])
    batch = eng.scheduler.schedule()
    assert all(it.num_tokens == 1 for it in batch.items)
    ids = torch.tensor([it.token_ids[0] for it in batch.items], dtype=torch.int64)
    key = GraphKey(8, 0)  # the sequences of the tests before are still running
    assert len(batch.items) <= key.b
    r = eng.runner
    buf = StepBuffers.allocate(64, 8, r.max_blocks_per_seq, r.device)
    fb = buf.forward_batch(key, r.max_model_len)
    want = None
    for feed in (True, False):
        n, _ = buf.stage(key, batch.items, None, r.block_size, feed_ids=feed)
        buf.upload(n)
        if not feed:
            assert buf.ids[: len(ids)].tolist() == [0] * len(ids)
            buf.ids[: len(ids)].copy_(ids)
        logits = r.model.logits(r.model.forward(fb, r.kv))[: len(ids)]
        if want is None:
            want = logits
    torch.testing.assert_close(logits, want)
    eng.scheduler.update(batch, {it.seq.seq_id: [1] for it in batch.items})


class _Item:
    """A ScheduledSeq's fields that staging reads."""

    def __init__(self, tokens: list[int], table: list[int], start: int, n: int, drafts: list[int],
                 needs_logits: bool = True) -> None:  # fmt: skip
        self.seq = type("Seq", (), {"token_ids": tokens, "block_table": table})()
        self.start, self.num_tokens, self.draft_ids = start, n, drafts
        self.needs_logits = needs_logits

    @property
    def token_ids(self) -> list[int]:
        return (
            self.seq.token_ids[self.start : self.start + self.num_tokens - len(self.draft_ids)]
            + self.draft_ids
        )


def _decode(ctx: int, drafts: list[int], first_block: int) -> _Item:
    table = list(range(first_block, first_block + (ctx + len(drafts)) // 16 + 1))
    return _Item(list(range(1000, 1000 + ctx)), table, ctx - 1, 1 + len(drafts), drafts)


@pytest.mark.parametrize(
    "key, decodes, chunk",
    [
        (GraphKey(1, 0, 5), [_decode(700, [1, 2, 3, 4], 3)], None),
        (GraphKey(1, 0, 1), [_decode(70, [], 3)], None),
        (
            GraphKey(4, 0, 5),
            [_decode(70, [1, 2, 3, 4], 3), _decode(50, [], 9), _decode(60, [7], 20)],
            None,
        ),
        (GraphKey(8, 0, 1), [_decode(30 + i, [], 10 * i) for i in range(5)], None),
        (
            GraphKey(2, 32, 1),
            [_decode(30, [], 1)],
            _Item(list(range(90)), list(range(40, 46)), 64, 20, []),
        ),
        (GraphKey(0, 32, 1), [], _Item(list(range(90)), list(range(40, 46)), 32, 32, [], False)),
    ],
)
def test_staged_inputs_follow_the_layout(key: GraphKey, decodes: list, chunk: Any) -> None:
    """Each field of a staged step, row by row, against the layout the module describes:
    decode i's tokens in the last rows of its slot of w, the chunk in the last rows after the
    slots, padding rows id 0 / position 0 / slot -1, padding sequences length 0, stale contents
    of the host buffer overwritten; with feed_ids=False no decode id is written."""
    bs, M, B = 16, 8, 64
    buf = StepBuffers.allocate(128, M, B, torch.device("cpu"))
    for feed in (True, False):
        buf.host.fill_(0x5A)  # stale bytes from an earlier step
        h = buf.host_np
        n, rows = buf.stage(key, decodes, chunk, bs, feed_ids=feed)
        b, c, w = key.b, key.c, key.w
        T, S = key.tokens, key.seqs
        ids, pos, slots, lens = [0] * T, [0] * T, [-1] * T, [0] * S
        tables = [[0] * B for _ in range(S)]
        want_rows = []
        items = [(i, (i + 1) * w - it.num_tokens, it) for i, it in enumerate(decodes)]
        if chunk is not None:
            items.append((b, b * w + c - chunk.num_tokens, chunk))
        for s, r0, it in items:
            for j in range(it.num_tokens):
                q = it.start + j
                fed = feed or it is chunk
                ids[r0 + j] = it.token_ids[j] if fed else 0
                pos[r0 + j] = q
                slots[r0 + j] = it.seq.block_table[q // bs] * bs + q % bs
            lens[s] = it.start + it.num_tokens
            tables[s][: len(it.seq.block_table)] = it.seq.block_table
            if it is chunk:
                want_rows.append((b * w, 1) if it.needs_logits else (0, 0))
            else:
                want_rows.append((r0, it.num_tokens))
        assert rows == want_rows
        assert n == buf.tables_offset + S * B * 4
        assert h["ids"][:T].tolist() == ids
        assert h["pos"][:T].tolist() == pos
        assert h["slots"][:T].tolist() == slots
        assert h["seq_lens"][:S].tolist() == lens
        assert h["tables"][:S].tolist() == tables
        assert h["cu"][: b + 1].tolist() == [i * w for i in range(b + 1)]
        assert h["rows"][: b * w].tolist() == list(range(b * w))
        if c:
            assert h["cu"][b + 1] == T and h["rows"][b * w] == T - 1
        buf.upload(n)


def _long_graph_runner(monkeypatch: pytest.MonkeyPatch, kv_dtype: torch.dtype, n_kv_heads: int,
                       kv_tokens: int, max_model_len: int = 32768) -> Any:  # fmt: skip
    """A GraphRunner without a GPU (no capture) over a llama2-like runner: 32 heads of 128."""
    import types

    from localllm.engine import cuda_graphs

    g = object.__new__(cuda_graphs.GraphRunner)
    g.runner = types.SimpleNamespace(
        kv=types.SimpleNamespace(k=[torch.empty(0, dtype=kv_dtype)]), dtype=torch.float16,
        model_cfg=types.SimpleNamespace(n_heads=32, n_kv_heads=n_kv_heads, head_dim=128),
        num_kv_tokens=kv_tokens, max_model_len=max_model_len,
    )  # fmt: skip
    g.max_batch = 64
    g.buckets = [b for b in cuda_graphs.BUCKETS if b < 64] + [64]
    g.verify_buckets, g.verify_widths, g.mixed_buckets, g.mixed_chunk = [], [], [], 0
    g.enabled = True
    g.long_buckets = g._long_buckets()
    return g


def test_long_context_decode_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    """MHA over int8 KV gets a long-context decode graph per bucket up to the most sequences of
    LONG_CONTEXT tokens the pool holds; a plain decode step whose longest sequence reaches
    LONG_CONTEXT takes it, a shorter one (or a bucket without one) the plain graph; grouped
    heads, float KV or a shorter context get none. The graph's batch says which it is."""
    from localllm.kernels.plan import LONG_CONTEXT

    g = _long_graph_runner(monkeypatch, torch.int8, 32, kv_tokens=3 * LONG_CONTEXT + 5)
    assert g.long_buckets == [1, 2, 4]  # 3 long sequences fit: buckets 1, 2 and the one of 3
    assert _long_graph_runner(monkeypatch, torch.int8, 8, 10**6).long_buckets == []  # GQA
    assert _long_graph_runner(monkeypatch, torch.float16, 32, 10**6).long_buckets == []
    assert _long_graph_runner(monkeypatch, torch.int8, 32, 10**6, 4096).long_buckets == []
    assert _long_graph_runner(monkeypatch, torch.int8, 32, LONG_CONTEXT - 1).long_buckets == []
    from localllm.kernels import plan

    with monkeypatch.context() as m:  # the threshold has one owner, read when it is used
        m.setattr(plan, "LONG_CONTEXT", 256)
        assert _long_graph_runner(m, torch.int8, 32, 1000, 1024).long_buckets == [1, 2, 4]
    g.graphs = {GraphKey(b, 0): None for b in g.buckets}
    g.graphs.update({GraphKey(b, 0, 1, True): None for b in g.long_buckets})

    def step(*contexts: int):
        items = [_decode(ctx, [], 10 * i) for i, ctx in enumerate(contexts)]
        plan = g.plan(type("Batch", (), {"items": items})())
        return plan[0] if plan else None

    assert step(100) == GraphKey(1, 0)
    assert step(LONG_CONTEXT - 1) == GraphKey(1, 0)  # its step makes LONG_CONTEXT - 1 tokens
    assert step(LONG_CONTEXT) == GraphKey(1, 0, 1, True)
    assert step(100, LONG_CONTEXT + 7, 5) == GraphKey(4, 0, 1, True)
    assert step(*([LONG_CONTEXT] * 5)) == GraphKey(8, 0)  # no long graph for 8
    buf = StepBuffers.allocate(64, 9, 4, torch.device("cpu"))
    assert buf.forward_batch(GraphKey(4, 0, 1, True), 32768).long_context
    assert not buf.forward_batch(GraphKey(4, 0), 32768).long_context


def test_eager_steps_say_whether_they_are_long_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step run without graphs marks its batch a long-context step from its longest
    sequence (kernels/plan.py LONG_CONTEXT), prefill chunks included."""
    from localllm.kernels import plan

    path = conftest.testdata_path("models", "stories260K.gguf")
    eng = LLMEngine(EngineConfig(model=str(path), device="cpu", block_size=8))
    seen: list[tuple[int, bool]] = []
    forward = eng.runner.model.forward

    def spy(fb, kv):
        seen.append((fb.max_seq_len, fb.long_context))
        return forward(fb, kv)

    monkeypatch.setattr(eng.runner.model, "forward", spy)
    monkeypatch.setattr(plan, "LONG_CONTEXT", 24)
    eng.generate([[1] + list(range(50, 70))], SamplingParams(max_tokens=6, temperature=0.0))
    assert seen and all(long == (n >= 24) for n, long in seen)
    assert {long for _, long in seen} == {False, True}
