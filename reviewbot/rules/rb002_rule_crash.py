"""RB002 rule-crash."""

from reviewbot.rule import Rule


class RuleCrash(Rule):
    """A rule failed on this file.

    ## What it does
    When a rule raises an exception on a file, the engine reports it here, naming the
    rule and the exception, and goes on with the other rules and files. Always reported.

    ## Why is this bad?
    The crashed rule's findings for that file are missing. Please report it with the
    file (or a small file that reproduces it).

    ## Example
    Not applicable: this finding comes from reviewbot itself.

    ## Use instead
    Not applicable.

    ## Options
    None.

    ## Fix safety
    No automatic fix.
    """

    code = "RB002"
    name = "rule-crash"
    summary = "A rule failed on this file (reviewbot's bug, not yours)"
    severity = "error"
    internal = True
    kind = "internal"
