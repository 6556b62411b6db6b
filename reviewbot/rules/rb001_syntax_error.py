"""RB001 syntax-error."""

from reviewbot.rule import Invalid, Rule, Valid


class SyntaxErrorRule(Rule):
    """The file does not parse as Python.

    ## What it does
    Reports a file that CPython's parser (or LibCST's, for rules that need it) rejects,
    at the position the parser gives. The file gets no other findings; the run goes on
    with the other files. Always reported, whatever `--select` says.

    ## Why is this bad?
    A file that does not parse cannot be checked, so every hazard in it goes unseen.

    ## Example
    ```python
    def execute_model(self, batch)
        return self.model(batch)
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        return self.model(batch)
    ```

    ## Options
    None.

    ## Fix safety
    No automatic fix.
    """

    code = "RB001"
    name = "syntax-error"
    summary = "The file does not parse as Python"
    severity = "error"
    internal = True
    kind = "internal"
    VALID = [Valid("x = 1\n")]
    INVALID = [Invalid("def f(:\n    pass\n", line=1), Invalid("x = (\n", line=1),
               Invalid("x = 1\n  y = 2\n", line=2)]
