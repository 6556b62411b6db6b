"""The text of line comments and of the summary comment (GitHub Markdown).

Everything that comes from the pull request (file names, code, messages that quote code)
is escaped, so that it cannot close a code block, open a link or mention anyone.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from reviewbot.links import rule_anchor
from reviewbot.textsafe import printable

SUMMARY_MARKER = "<!-- reviewbot:summary -->"
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~@&])")
# At the start of a line these open a list, a heading or a thematic break.
_LEADING = re.compile(r"^([-+=]|\d+(?=[.)]))")
# Words a renderer or GitHub would turn into something (a mention, an issue reference, a
# link, an autolinked address): shown as code, where none of that happens.
_ACTIVE = re.compile(r"[@#]|://|\w\.\w|^www\.", re.IGNORECASE)


def escape(text: str, table: bool = False) -> str:
    """Plain text for Markdown: no formatting, links, HTML or mentions take effect.

    Control, bidirectional and zero-width characters are shown escaped (``\\n``,
    ``\\u202e``), so the text stays on its line and reads as it is stored.
    """
    words = re.split(r"(\s+)", printable(text))
    out = []
    for word in words:
        if not word or word.isspace():
            out.append(" " if word else "")
        elif _ACTIVE.search(word):
            out.append(code(word, table))
        else:
            out.append(_SPECIAL.sub(r"\\\1", word))
    return _LEADING.sub(lambda m: m.group(0) + "\\" if m.group(0)[0].isdigit()
                        else "\\" + m.group(0), "".join(out))


def code(text: str, table: bool = False) -> str:
    """Inline code that holds any text (backticks inside included); in a table cell its
    pipes are escaped too (GFM splits cells at a pipe even inside code)."""
    text = printable(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (
        text.startswith(" ") and text.endswith(" ") and text.strip()) else ""
    if table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def comment_marker(code_: str) -> str:
    """The hidden mark that lets a later run find this comment again."""
    return f"<!-- reviewbot:{code_} -->"


def message(text: str) -> str:
    """A finding's message as Markdown: its `code spans` kept as code, the rest plain text
    (no link, HTML, heading or mention)."""
    return _message(text)


def _message(text: str, table: bool = False) -> str:
    """A finding's message: its `code spans` kept as code, the rest escaped."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(code(p[1:-1], table) if p.startswith("`") and p.endswith("`") and len(p) > 1
                   else escape(p, table) for p in parts)


def comment_body(finding: Any, suggestion: str | None, docs_url: str) -> str:
    """A line comment: the rule, the reason, a link to the docs (reviewbot's own rules:
    a project's rules have no page there), maybe a suggestion."""
    from reviewbot.registry import BUILTIN

    if any(rule.code == finding.code for rule in BUILTIN):
        title = f"[{finding.name}]({docs_url}#{rule_anchor(finding)})"
    else:
        title = escape(finding.name)
    lines = [f"**{finding.code}** {title} ({finding.severity})", "", _message(finding.message)]
    if suggestion is not None:
        fence = "```"
        while fence in suggestion:
            fence += "`"
        safety = "" if finding.fix.applicability == "safe" else \
            " (unsafe: it changes behaviour; review it)"
        lines += ["", f"Suggested fix{safety}: {escape(finding.fix.message)}", "",
                  f"{fence}suggestion", suggestion.rstrip("\n"), fence]
    lines += ["", comment_marker(finding.code)]
    return "\n".join(lines)


def summary_markdown(outcome: Any, changed: Any, settings: Any, repository: str,
                     number: int) -> str:
    """The one summary comment: a walkthrough and the pre-merge checks."""
    files = list(changed.files.values())
    python = [f for f in files if f.path.endswith(".py") and f.status != "removed"]
    per_rule = Counter((f.code, f.name) for f in outcome.findings)
    errors = sum(1 for f in outcome.findings if f.severity == "error")
    lines = [SUMMARY_MARKER, f"## {escape(getattr(settings, 'tool_name', 'reviewbot'))}", "",
             f"Pull request #{number}: {len(files)} files changed, {len(python)} Python files "
             f"checked, {len(outcome.findings)} findings on the changed lines "
             f"(filter: {escape(settings.filter_mode)}).", "",
             "### Walkthrough", "", "| File | Status | Lines added | Findings |",
             "| --- | --- | --- | --- |"]
    by_file = Counter(f.path for f in outcome.findings)
    for change in files:
        lines.append(f"| {code(change.path, True)} | {escape(change.status, True)} | "
                     f"{len(change.added)} | "
                     f"{by_file.get(change.path, 0)} |")
    if per_rule:
        lines += ["", "| Rule | Findings |", "| --- | --- |"]
        for (rule, name), count in sorted(per_rule.items()):
            lines.append(f"| {escape(rule, True)} {escape(name, True)} | {count} |")
    lines += ["", "### Pre-merge checks", "", "| Check | Result | Details |",
              "| --- | --- | --- |"]
    sync = [f for f in outcome.findings if f.code.startswith("RB1")]
    buffers = [f for f in outcome.findings if f.code.startswith("RB2")]
    lines.append(f"| GPU->host syncs in hot paths | {'warning' if sync else 'pass'} | "
                 f"{len(sync)} on changed lines |")
    lines.append(f"| Host buffers | {'warning' if buffers else 'pass'} | "
                 f"{len(buffers)} on changed lines |")
    coverage = outcome.coverage
    if coverage is not None:
        result = "pass" if coverage["passed"] else "warning"
        detail = (f"Docstring coverage: {coverage['coverage']:.2f}% of the changed definitions "
                  f"({coverage['documented']} of {coverage['total']}), threshold "
                  f"{coverage['threshold']:.2f}%")
        if coverage["missing"]:
            detail += "; missing: " + ", ".join(code(m, True) for m in coverage["missing"][:10])
        lines.append(f"| Docstring coverage | {result} | {detail} |")
    lines.append(f"| Errors | {'warning' if errors else 'pass'} | {errors} findings of "
                 f"severity error |")
    added = list(getattr(outcome, "suppressions", []) or [])
    detail = f"{len(added)} on added lines"
    if added:
        detail += ": " + ", ".join(code(place, True) for place in added[:10]) + \
            (f" and {len(added) - 10} more" if len(added) > 10 else "")
    lines.append(f"| Suppression comments added | {'warning' if added else 'pass'} | "
                 f"{detail} |")
    note = getattr(outcome, "config_note", "")
    if note:
        lines += ["", escape(note)]
    if outcome.in_summary:
        lines += ["", f"### Findings not posted as line comments ({len(outcome.in_summary)})",
                  ""]
        for finding in outcome.in_summary:
            lines.append(f"- {code(f'{finding.path}:{finding.line}')} **{finding.code}** "
                         f"{_message(finding.message)}")
    if outcome.repeated:
        lines += ["", f"{outcome.repeated} findings were already commented by an earlier run."]
    for note in outcome.notes:
        lines += ["", f"> {escape(note)}"]
    return "\n".join(lines) + "\n"
