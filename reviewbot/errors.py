"""Errors that end a run with exit status 2 and a one-line message."""


class ReviewbotError(Exception):
    """A usage, configuration or input error: reported as one line, exit status 2."""


class ConfigError(ReviewbotError):
    """A configuration file or value is wrong; the message names the file and key."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{key}: {problem}")
