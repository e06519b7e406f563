"""How a model writes tool calls, one entry per chat-template family.

| format  | a call looks like                                              | templates        |
| ------- | -------------------------------------------------------------- | ---------------- |
| hermes  | `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>` | Qwen2.5, Hermes  |
| mistral | `[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]`          | Mistral (v3)     |
| llama3  | the whole answer is `{"name": "f", "parameters": {...}}`       | Llama 3.1 - 3.3  |
| generic | like hermes; the tools are described by our own system prompt  | any other        |

A template is matched by what its source says (the first format whose markers all occur);
a template that never mentions `tools` gets the generic format. The generic format exists
so that tools work with every chat model: see docs/structured-output.md for its prompt.
"""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ToolFormat:
    name: str
    open: str  # text before each call ("" = the answer itself is the call)
    close: str  # text after each call
    separator: str  # between two calls in one answer
    list_open: str  # text opening the list of calls ("" = no list)
    list_close: str
    args_key: str  # the key the model writes the arguments under
    native: bool  # the model's own template renders `tools` (else our generic prompt)
    id_alphabet: str  # tool-call ids: "" = OpenAI style `call_<24 hex>`, else 9 of these
    markers: tuple[str, ...]  # all must occur in a template source to pick this format
    parallel: bool = True  # the format can hold several calls in one answer
    # also opens the list at the very start of an answer: the model's marker is a control
    # token, which the detokenizer drops from the text
    bare_start: str = ""

    def new_call_id(self) -> str:
        if not self.id_alphabet:
            return "call_" + secrets.token_hex(12)
        return "".join(secrets.choice(self.id_alphabet) for _ in range(9))

    @property
    def start(self) -> str:
        """Text that starts the tool-call part of an answer ("" = at the very start)."""
        return self.list_open or self.open


HERMES = ToolFormat(
    "hermes",
    open="<tool_call>\n",
    close="\n</tool_call>",
    separator="\n",
    list_open="",
    list_close="",
    args_key="arguments",
    native=True,
    id_alphabet="",
    markers=("<tool_call>",),
)
MISTRAL = ToolFormat(
    "mistral",
    open="",
    close="",
    separator=", ",
    list_open="[TOOL_CALLS][",
    list_close="]",
    args_key="arguments",
    native=True,
    id_alphabet=string.ascii_letters + string.digits,  # its template wants 9 alphanumerics
    markers=("[TOOL_CALLS]",),
    bare_start="[",
)
LLAMA3 = ToolFormat(
    "llama3",
    open="",
    close="",
    separator="",
    list_open="",
    list_close="",
    args_key="parameters",
    native=True,
    id_alphabet="",
    markers=("<|start_header_id|>", '"parameters"'),
    parallel=False,  # its template raises on more than one call per message
)
# Hermes's syntax, taught by our generic prompt to models whose template renders no tools
GENERIC = replace(HERMES, name="generic", native=False, markers=())
# tried in order on a template's source
NATIVE_FORMATS = (HERMES, MISTRAL, LLAMA3)
FORMATS = {f.name: f for f in (*NATIVE_FORMATS, GENERIC)}


def detect_format(template_source: str) -> ToolFormat:
    """The tool-call format a chat template speaks (GENERIC when it renders no tools)."""
    if "tools" not in template_source:
        return GENERIC
    for fmt in NATIVE_FORMATS:
        if all(m in template_source for m in fmt.markers):
            return fmt
    return GENERIC
