"""The pull_request event of an Actions job: the fields a review uses, each validated.

The event file and ``GITHUB_REPOSITORY`` come from the job, but a malformed or forged
event must not reach the API: a ``repository.full_name`` of ``../../user/repos?x=`` once
made an authenticated request to ``/user/repos``. Each field is checked for its shape and
a bad one is one line naming it, before any request.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from reviewbot.errors import ReviewbotError

MAX_EVENT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Event:
    """The fields of a pull_request event that a review uses, each checked."""

    repository: str  # owner/name
    number: int
    head_sha: str
    base_sha: str


_REPOSITORY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def _field(data: Any, dotted: str) -> Any:
    value = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ReviewbotError(f"GITHUB_EVENT_PATH: {dotted}: missing (is this a "
                                 "pull_request or pull_request_target event?)")
        value = value[part]
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def valid_repository(value: Any, where: str) -> str:
    """``owner/name`` as GitHub spells them, or a one-line error naming ``where``."""
    if not isinstance(value, str) or not _REPOSITORY.fullmatch(value) \
            or value.split("/")[1] in (".", ".."):
        raise ReviewbotError(f"{where}: expected owner/name, got {_shown(value)}")
    return value


def read_event() -> Event:
    """The event of ``GITHUB_EVENT_PATH`` (raises ReviewbotError naming the field)."""
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path:
        raise ReviewbotError("GITHUB_EVENT_PATH is not set: `reviewbot review` runs in a "
                             "GitHub Actions job on a pull_request event")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_EVENT_BYTES + 1)
        if len(raw) > MAX_EVENT_BYTES:
            raise ValueError("larger than 16 MiB")
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else \
            exc.__class__.__name__ if isinstance(exc, RecursionError) else str(exc)
        raise ReviewbotError(f"GITHUB_EVENT_PATH: cannot read the event file ({reason})") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("pull_request"), dict):
        raise ReviewbotError("GITHUB_EVENT_PATH: pull_request: missing; the event is not a "
                             "pull_request or pull_request_target event")
    number = _field(data, "pull_request.number")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 2 ** 31:
        raise ReviewbotError(f"GITHUB_EVENT_PATH: pull_request.number: expected a positive "
                             f"integer, got {_shown(number)}")
    shas = {}
    for key in ("pull_request.head.sha", "pull_request.base.sha"):
        sha = _field(data, key)
        if not isinstance(sha, str) or not _SHA.fullmatch(sha):
            raise ReviewbotError(f"GITHUB_EVENT_PATH: {key}: expected a commit SHA (40 hex "
                                 f"digits), got {_shown(sha)}")
        shas[key] = sha
    env_repository = os.environ.get("GITHUB_REPOSITORY")
    if env_repository:
        repository = valid_repository(env_repository, "GITHUB_REPOSITORY")
    else:
        repository = valid_repository(_field(data, "repository.full_name"),
                                      "GITHUB_EVENT_PATH: repository.full_name")
    return Event(repository, number, shas["pull_request.head.sha"],
                 shas["pull_request.base.sha"])
