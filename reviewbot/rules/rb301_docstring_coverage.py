"""RB301 docstring-coverage."""

from __future__ import annotations

from typing import Any, Mapping

from reviewbot.context import FileContext, RunContext
from reviewbot.finding import Finding
from reviewbot.rule import Invalid, Option, Valid
from reviewbot.rules._docstring_options import DOCSTRING_OPTIONS, DocstringRule


def _check_threshold(value: float) -> str | None:
    if not 0 <= value <= 100:
        return f"expected a percentage from 0 to 100, got {value}"
    return None


def coverage_percent(documented: int, total: int) -> float:
    """The documented share in percent; a set with nothing to document is fully covered."""
    return 100.0 if total == 0 else 100.0 * documented / total


class DocstringCoverage(DocstringRule):
    """Docstring coverage of the checked files is below the threshold.

    ## What it does
    Counts the classes and functions in the checked files (by default leaving out
    `__init__`, magic methods, nested functions, `@overload` stubs, property setters,
    module docstrings and test files), and reports once per run when the share that
    has a docstring is below `threshold` percent. The message says "N of M definitions
    documented" and lists what is missing as `path:line name`. With the `per-file`
    option it is also reported for each file below the threshold.
    `--coverage-report` prints a table of every file's coverage beside the report; it
    never changes the findings or the exit status.

    The finding about the run names what was checked (a folder) as its path, and comes
    last in the text report. Viewers that need a file and a line (SARIF, GitHub code
    scanning) show it at `details.location`: the configuration file, at the line that
    names RB301 (where the threshold is set, and a line that stays put from run to run,
    so the alert keeps its identity), when that file is inside the repository; otherwise
    the checked file with the most undocumented definitions, at line 1 (where docstrings
    would help most).

    ## Why is this bad?
    The per-step code of an inference engine is read far more often than it is written:
    a helper such as `_to_list` that exists to avoid a cross-thread CUDA stall loses its
    reason the day someone "simplifies" it back to `.tolist()`. Pull-request checks
    such as "Docstring Coverage 33.33%, threshold 80.00%" fail for exactly this.

    ## Example
    ```python
    class Runner:
        def execute_model(self, batch):
            return self.model(batch)

        def _to_list(self, t):
            return t.tolist()
    ```

    ## Use instead
    ```python
    class Runner:
        \"\"\"Runs one model step per call.\"\"\"

        def execute_model(self, batch):
            \"\"\"Run the model on one batch and return the sampled token ids.\"\"\"
            return self.model(batch)

        def _to_list(self, t):
            \"\"\"Read `t` back without stalling other threads' CUDA calls.\"\"\"
            return t.tolist()
    ```

    ## Options
    - `threshold` (number, default 80): the lowest acceptable percentage.
    - `per-file` (boolean, default false): also report each file below the threshold.
    - `ignore-module`, `ignore-private`, `ignore-magic`, `ignore-init`, `ignore-nested`,
      `ignore-overload`, `ignore-setters` (booleans): what is left out of the count.
    - `exclude` (list of gitignore-style patterns, default the test files): files left out.
    - `per-file-ignores` with `RB301` also leaves those files out of the count.

    ## Fix safety
    No automatic fix: a docstring has to say something true.
    """

    code = "RB301"
    name = "docstring-coverage"
    summary = "Docstring coverage of the checked files is below the threshold"
    severity = "warning"
    options = (
        Option("threshold", 80.0, "The lowest acceptable coverage, in percent.", (int, float),
               _check_threshold),
        Option("per-file", False, "Also report each file below the threshold.", (bool,)),
        *DOCSTRING_OPTIONS,
    )
    VALID = [
        Valid('"""Mod."""\nclass A:\n    """Doc."""\n    def f(self):\n        """Doc."""\n'),
        Valid("def f():\n    pass\n", options={"threshold": 0}),
        Valid("def _f():\n    pass\n", options={"ignore-private": True}),
        Valid("def test_f():\n    pass\n", path="tests/test_example.py"),
        Valid("x = 1\n"),
    ]
    INVALID = [
        Invalid("class A:\n    def f(self):\n        pass\n", message_contains="0 of 2"),
        Invalid("def f():\n    pass\n", options={"per-file": True}, message_contains="0 of 1"),
        Invalid('def f():\n    """Doc."""\n\ndef g():\n    pass\n', options={"threshold": 60},
                message_contains="50.00%"),
        Invalid("def test_f():\n    pass\n", path="tests/test_example.py",
                options={"exclude": []}),
    ]

    def check_file(self, ctx: FileContext) -> None:
        """Record this file's counted definitions for :meth:`finish`."""
        defs = self.counted_definitions(ctx)
        if defs is not None:
            ctx.add_fact(self.code, [(d.kind, d.name, d.line, d.documented) for d in defs])

    def finish(self, facts: Mapping[str, Any], run: RunContext) -> list[Finding]:
        """Report the run's coverage, and each file's with the ``per-file`` option."""
        threshold = float(self.settings["threshold"])
        per_file = bool(self.settings.get("per-file", False))
        findings = []
        total = documented = 0
        missing: list[str] = []
        for path in sorted(facts):
            defs = facts[path]
            file_documented = sum(1 for d in defs if d[3])
            total += len(defs)
            documented += file_documented
            missing.extend(f"{path}:{d[2]} {d[1]}" for d in defs if not d[3])
            percent = coverage_percent(file_documented, len(defs))
            if per_file and round(percent, 2) < threshold:
                findings.append(self._finding(path, percent, file_documented, len(defs),
                                              threshold, [f"{path}:{d[2]} {d[1]}"
                                                          for d in defs if not d[3]]))
        percent = coverage_percent(documented, total)
        if round(percent, 2) < threshold:
            findings.insert(0, self._finding(run.root_display, percent, documented, total,
                                             threshold, missing, self._location(facts, run)))
        return findings

    def _location(self, facts: Mapping[str, Any], run: RunContext) -> dict[str, Any]:
        """Where a viewer that needs a file shows the run's finding: the configuration file
        at the line naming RB301 (where the threshold is set, and a place that stays put
        from run to run), else the file with the most undocumented definitions, at line 1
        (where docstrings would help most; the first by name among equals)."""
        if run.config_file is not None:
            return {"path": run.config_file, "line": run.config_line(self.code)}
        worst = max(sorted(facts), key=lambda path: sum(1 for d in facts[path] if not d[3]))
        return {"path": worst, "line": 1}

    def _finding(self, path: str, percent: float, documented: int, total: int,
                 threshold: float, missing: list[str],
                 location: dict[str, Any] | None = None) -> Finding:
        return Finding(
            code=self.code,
            name=self.name,
            message=(f"Docstring coverage is {percent:.2f}% ({documented} of {total} "
                     f"definitions documented), below the threshold of {threshold:.2f}%"),
            path=path,
            line=1,
            column=1,
            end_line=1,
            end_column=1,
            severity=self.severity,
            details=(("coverage", round(percent, 2)), ("documented", documented),
                     *((("location", location),) if location is not None else ()),
                     ("missing", missing), ("threshold", threshold), ("total", total)),
        )
