"""One sequence's grammar state: which tokens may come next, and the tokens taken so far.

The engine's cycle per step: `fill_bitmask` (before sampling; may run on a worker thread
while the forward runs, llguidance drops the GIL), sample from the masked logits, `accept`
the sampled token. A speculative draft is cut with `valid_prefix` before it is verified, and
after verification the accepted tokens go through `accept`. When the grammar is complete
the mask allows only the stop tokens; `finished` then tells the engine to end the sequence
(some grammars, such as a JSON object, admit no more text after their end).
"""

from __future__ import annotations

import llguidance as llg

from localllm.structured.compiler import CompiledGrammar, GrammarCompiler


class ConstraintBroken(RuntimeError):
    """The engine fed a token the mask did not allow (a bug, never a user error)."""


class Constraint:
    def __init__(self, compiler: GrammarCompiler, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.stop_ids = compiler.table.stop_ids
        self.vocab_size = compiler.table.vocab_size
        self._m = llg.LLMatcher(compiler.llg_tokenizer, compiled.grammar, log_level=0)
        self._check()
        self.num_accepted = 0

    @property
    def matcher(self) -> llg.LLMatcher:
        """The llguidance matcher (for batched mask filling)."""
        return self._m

    def _check(self) -> None:
        if self._m.is_error():
            raise ConstraintBroken(self._m.get_error())

    def fill_bitmask_ptr(self, ptr: int, nbytes: int) -> None:
        """Write the next-token mask (1 bit per id, little-endian int32 words) at `ptr`."""
        self._m.unsafe_compute_mask_ptr(ptr, nbytes)

    def allowed_ids(self) -> list[int]:
        """The ids the mask allows now (slow; for tests and debugging)."""
        bits = self._m.compute_bitmask()
        return [i for i in range(self.vocab_size) if bits[i >> 3] >> (i & 7) & 1]

    def accept(self, token_id: int) -> None:
        """Advance by a sampled token; it must be one the mask allowed."""
        if token_id in self.stop_ids and self._m.is_accepting():
            self._m.consume_token(token_id)
            self.num_accepted += 1
            return
        if not self._m.consume_token(token_id):
            raise ConstraintBroken(f"token {token_id} was not allowed: {self._m.get_error()}")
        self.num_accepted += 1

    def valid_prefix(self, draft: list[int]) -> int:
        """How many leading tokens of a draft the grammar accepts (the state is unchanged)."""
        if not draft:
            return 0
        return self._m.validate_tokens(draft)

    def rollback(self, num_tokens: int) -> None:
        """Undo the last accepted tokens (a verified draft that was partly rejected)."""
        if num_tokens:
            self._m.rollback(num_tokens)
            self.num_accepted -= num_tokens

    @property
    def accepting(self) -> bool:
        """The text so far is complete under the grammar (a stop token is allowed)."""
        return self._m.is_accepting()

    @property
    def finished(self) -> bool:
        """No more text is possible: the sequence should end now."""
        return self._m.is_stopped()
