"""RB302 missing-docstring."""

from __future__ import annotations

from reviewbot.context import FileContext
from reviewbot.rule import Invalid, Valid
from reviewbot.rules._docstring_options import DocstringRule


class MissingDocstring(DocstringRule):
    """A public class or function has no docstring.

    ## What it does
    Reports each definition that RB301 counts and that has no docstring, at its own
    line, so that an editor or a pull-request review can point at it. Off by default
    (RB301 reports the overall share); select it with `--select RB302`.

    ## Why is this bad?
    A definition without a docstring leaves its reason to the next reader's guess. In
    per-step GPU code the reason is often a performance trap the code is avoiding.

    ## Example
    ```python
    def sample(logits):
        return logits.argmax(-1)
    ```

    ## Use instead
    ```python
    def sample(logits):
        \"\"\"Pick the most likely token of each row (greedy sampling).\"\"\"
        return logits.argmax(-1)
    ```

    ## Options
    The same as RB301's, set under `[tool.reviewbot.rules.RB302]`: `ignore-module`,
    `ignore-private`, `ignore-magic`, `ignore-init`, `ignore-nested`, `ignore-overload`,
    `ignore-setters`, `exclude`.

    ## Fix safety
    No automatic fix.
    """

    code = "RB302"
    name = "missing-docstring"
    summary = "A public class or function has no docstring"
    severity = "warning"
    default_enabled = False
    VALID = [
        Valid('def f():\n    """Doc."""\n'),
        Valid("def __repr__(self):\n    pass\n"),
        Valid("def _helper():\n    pass\n", options={"ignore-private": True}),
    ]
    INVALID = [
        Invalid("def f():\n    pass\n", line=1, message_contains="function `f`"),
        Invalid('class A:\n    """Doc."""\n\n    def run(self):\n        return 1\n', line=4,
                message_contains="method `A.run`"),
    ]

    def check_file(self, ctx: FileContext) -> None:
        """Report every counted definition of the file that has no docstring."""
        for d in self.counted_definitions(ctx) or []:
            if not d.documented:
                what = "module" if d.kind == "module" else f"{d.kind} `{d.name}`"
                ctx.report(self, f"Missing docstring in {what}", d.line, d.column)
