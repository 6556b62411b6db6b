"""RB003 unreadable-file."""

from reviewbot.rule import Rule


class UnreadableFile(Rule):
    """The file could not be read or decoded, so it was skipped.

    ## What it does
    Reports a file that cannot be opened (permissions, a dangling link, deleted during
    the run), holds NUL bytes (binary), or cannot be decoded with its PEP 263 coding
    cookie (UTF-8 without one). The run goes on with the other files. Always reported.

    ## Why is this bad?
    A skipped file is not checked; Python itself would refuse to import it.

    ## Example
    A `.py` file saved as latin-1 with bytes above 127 and no coding cookie.

    ## Use instead
    Save it as UTF-8, or declare its encoding on the first or second line:
    ```python
    # -*- coding: latin-1 -*-
    ```

    ## Options
    None.

    ## Fix safety
    No automatic fix.
    """

    code = "RB003"
    name = "unreadable-file"
    summary = "The file could not be read or decoded and was skipped"
    severity = "error"
    internal = True
    kind = "internal"
