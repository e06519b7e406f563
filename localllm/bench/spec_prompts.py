"""Prompts for measuring n-gram speculation: input-grounded work (the answer repeats spans of
the prompt) and open-ended requests, for chat models, code models and TinyStories models.

Each prompt is (kind, text) with kind "grounded" or "open"; chat prompts are user messages
(render them with the model's chat template), the others are raw completions.
"""

from __future__ import annotations

PARAGRAPHS = [
    "The library opens at nine in the morning and closes at six in the evening. Visitors can "
    "borrow up to five books at a time, and each loan lasts three weeks. Late returns cost "
    "ten cents per day, and lost books must be replaced or paid for.",
    "Our team meets every Monday to plan the week. We review open tasks, assign owners and "
    "agree on deadlines. On Friday we check what was finished and write a short report for "
    "the rest of the company.",
    "To make the bread, mix the flour, water, salt and yeast in a large bowl. Knead the dough "
    "for ten minutes, let it rise for an hour, shape it into a loaf and bake it for forty "
    "minutes until the crust is golden.",
]
TYPOS = [("morning", "mornign"), ("borrow", "borow"), ("week", "weeek"), ("minutes", "minuts")]

CODE = [
    "def total_price(items):\n    x = 0\n    for item in items:\n        x += item.price * "
    "item.quantity\n    if x > 100:\n        x = x * 0.9\n    return x\n",
    "def count_words(text):\n    x = {}\n    for word in text.split():\n        word = "
    "word.lower()\n        x[word] = x.get(word, 0) + 1\n    return x\n",
]

OPEN_CHAT = [
    "Write a short poem about the sea.",
    "Give me three ideas for a birthday party.",
    "Why is the sky blue? Answer in two sentences.",
    "Tell me a short story about a robot who learns to paint.",
    "What should I pack for a weekend hiking trip?",
    "Explain what a computer network is to a child.",
]


def chat_prompts() -> list[tuple[str, str]]:
    out = []
    for p in PARAGRAPHS:
        out.append(("grounded", f"Repeat this paragraph exactly, word for word:\n\n{p}"))
        bad = p
        for good, typo in TYPOS:
            bad = bad.replace(good, typo)
        out.append(("grounded", f"Correct the spelling mistakes in this paragraph:\n\n{bad}"))
    for code in CODE:
        out.append(
            (
                "grounded",
                f"Rename the variable `x` to `result` in this code:\n\n```python\n{code}```",
            )
        )
    out += [("open", q) for q in OPEN_CHAT]
    return out


_CLASS = """class {name}:
    def __init__(self, {args}):
{assigns}

    def __repr__(self):
        return f"{name}({fields})"

    def __eq__(self, other):
        if not isinstance(other, {name}):
            return NotImplemented
        return {compare}


"""


def _class(name: str, fields: list[str]) -> str:
    return _CLASS.format(
        name=name,
        args=", ".join(fields),
        assigns="\n".join(f"        self.{f} = {f}" for f in fields),
        fields=", ".join(f"{{self.{f}}}" for f in fields),
        compare=" and ".join(f"self.{f} == other.{f}" for f in fields),
    )


def code_prompts() -> list[tuple[str, str]]:
    """Python files whose next lines repeat earlier code (grounded) and fresh starts (open)."""
    shapes = [
        ("Point", ["x", "y"], "Point3", ["x", "y", "z"]),
        ("User", ["name", "email"], "Admin", ["name", "email", "level"]),
        ("Range", ["start", "stop"], "Span", ["start", "stop", "step"]),
        ("Color", ["red", "green", "blue"], "Pixel", ["red", "green", "blue", "alpha"]),
    ]
    out = []
    for a, fa, b, _ in shapes:
        out.append(("grounded", _class(a, fa) + f"class {b}:\n    def __init__(self, "))
    tests = "".join(
        f"    def test_{op}(self):\n        self.assertEqual(calc.{op}(2, 3), {v})\n\n"
        for op, v in (("add", 5), ("sub", -1), ("mul", 6))
    )
    out.append(("grounded", f"import unittest\n\n\nclass TestCalc(unittest.TestCase):\n{tests}"))
    out += [
        ("open", "def fibonacci(n):\n"),
        ("open", "import os\nimport sys\n\n\ndef main():\n"),
        ("open", "class Stack:\n    def __init__(self):\n"),
        ("open", "def parse_args(argv):\n    "),
    ]
    return out


def story_prompts() -> list[tuple[str, str]]:
    """TinyStories-style text: repeated sentences (grounded) and story openings (open)."""
    names = ["Lily", "Tom", "Sam", "Mia", "Ben", "Sue"]
    things = ["a red ball", "a big dog", "a little bird", "a green tree", "a shiny car"]
    out = []
    for i, name in enumerate(names):
        thing = things[i % len(things)]
        s = f"{name} saw {thing}. {name} was happy. {name} played with {thing} all day. "
        out.append(("grounded", s * 2 + f"{name} saw"))
    out += [
        ("open", "Once upon a time"),
        ("open", "One day, a little girl"),
        ("open", "The sun was shining and"),
    ]
    return out
