"""A fake of the parts of GitHub's REST API that `reviewbot review` uses, on loopback.

It serves one repository and one pull request (its files in pages, its review comments and
issue comments), takes reviews and comments, and records every request. Faults can be
queued per endpoint: a status (403, 422, 429 with Retry-After, 502) returned before the
real answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from werkzeug import Request, Response

OWNER, NAME, NUMBER, HEAD = "acme", "engine", 7, "0123456789abcdef0123456789abcdef01234567"


def split_patches(diff: str) -> dict[str, str]:
    """The per-file hunks of a git diff, as the files API gives them in `patch`."""
    patches: dict[str, str] = {}
    for block in re.split(r"^diff --git ", diff, flags=re.M)[1:]:
        path = re.search(r"^\+\+\+ b/(.+)$", block, flags=re.M).group(1)
        patches[path] = block[block.index("\n@@") + 1:].rstrip("\n")
    return patches


@dataclass
class Fault:
    """An error answer queued for the next matching request."""

    method: str
    path_suffix: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "fault"})


class FakeGitHub:
    """State and handlers of the fake API."""

    def __init__(self, server: Any, files: list[dict[str, Any]], per_page: int = 2) -> None:
        self.server = server
        self.base = server.url_for("").rstrip("/")
        self.files = files
        self.per_page = per_page
        self.review_comments: list[dict[str, Any]] = []
        self.issue_comments: list[dict[str, Any]] = []
        self.reviews: list[dict[str, Any]] = []
        self.check_runs: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, str]] = []  # method, path, authorization
        self.faults: list[Fault] = []
        # Who the token acts as: None answers GET /user with 403, as for the Actions token
        # (whose comments GitHub signs as github-actions[bot]).
        self.login: str | None = None
        self.contents: dict[tuple[str, str], str] = {}  # (path, ref) -> text
        self._next_id = 100
        server.expect_request(re.compile(".*")).respond_with_handler(self.handle)

    # helpers --------------------------------------------------------------------------
    @property
    def repo_url(self) -> str:
        return f"{self.base}/repos/{OWNER}/{NAME}"

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(json.dumps(data), status=status, headers=headers or {},
                        content_type="application/json")

    @property
    def author(self) -> dict[str, Any]:
        """The user object of what the token posts."""
        login = self.login or "github-actions[bot]"
        return {"login": login, "id": 41898282, "type": "Bot" if "[bot]" in login else "User"}

    def paths(self, method: str) -> list[str]:
        """The paths of the recorded requests with this method."""
        return [path for m, path, _ in self.requests if m == method]

    # the API --------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        path = request.path
        self.requests.append((request.method, path, request.headers.get("Authorization", "")))
        for fault in list(self.faults):
            if fault.method == request.method and path.endswith(fault.path_suffix):
                self.faults.remove(fault)
                return self._json(fault.body, fault.status, fault.headers)
        repo = f"/repos/{OWNER}/{NAME}"
        pull = f"{repo}/pulls/{NUMBER}"
        if request.method == "GET" and path == "/user":
            if self.login is None:
                return self._json({"message": "Resource not accessible by integration"}, 403)
            return self._json(self.author)
        if request.method == "GET" and path.startswith(f"{repo}/contents/"):
            import base64

            rel = path[len(f"{repo}/contents/"):]
            text = self.contents.get((rel, request.args.get("ref", "")))
            if text is None:
                return self._json({"message": "Not Found"}, 404)
            return self._json({"type": "file", "encoding": "base64", "path": rel,
                               "name": rel.rsplit("/", 1)[-1], "size": len(text),
                               "content": base64.b64encode(text.encode()).decode(),
                               "sha": "3" * 40})
        if request.method == "GET" and path == repo:
            return self._json({"id": 1, "name": NAME, "full_name": f"{OWNER}/{NAME}",
                               "url": self.repo_url, "owner": {"login": OWNER}})
        if request.method == "GET" and path == pull:
            return self._json({"id": 2, "number": NUMBER, "url": f"{self.repo_url}/pulls/{NUMBER}",
                               "issue_url": f"{self.repo_url}/issues/{NUMBER}",
                               "head": {"sha": HEAD, "ref": "feature"},
                               "base": {"sha": "f" * 40, "ref": "main"}, "state": "open"})
        if request.method == "GET" and path == f"{pull}/files":
            page = int(request.args.get("page", "1"))
            chunk = self.files[(page - 1) * self.per_page:page * self.per_page]
            headers = {}
            if page * self.per_page < len(self.files):
                headers["Link"] = (f'<{self.base}{path}?page={page + 1}>; rel="next", '
                                   f'<{self.base}{path}?page={-(-len(self.files) // self.per_page)}>'
                                   '; rel="last"')
            return self._json(chunk, headers=headers)
        if request.method == "GET" and path == f"{pull}/comments":
            return self._json(self.review_comments)
        if request.method == "POST" and path == f"{pull}/reviews":
            payload = request.get_json()
            review_id = self._id()
            self.reviews.append(payload)
            for comment in payload.get("comments", []):
                self.review_comments.append({
                    "id": self._id(), "path": comment["path"], "line": comment["line"],
                    "original_line": comment["line"], "body": comment["body"],
                    "pull_request_review_id": review_id, "user": self.author})
            return self._json({"id": review_id, "body": payload.get("body", ""),
                               "state": "COMMENTED", "commit_id": HEAD})
        if request.method == "GET" and path == f"{repo}/issues/{NUMBER}/comments":
            return self._json(self.issue_comments)
        if request.method == "POST" and path == f"{repo}/issues/{NUMBER}/comments":
            comment_id = self._id()
            comment = {"id": comment_id, "body": request.get_json()["body"],
                       "url": f"{self.repo_url}/issues/comments/{comment_id}",
                       "user": self.author}
            self.issue_comments.append(comment)
            return self._json(comment, 201)
        match = re.fullmatch(rf"{repo}/issues/comments/(\d+)", path)
        if request.method == "PATCH" and match:
            for comment in self.issue_comments:
                if comment["id"] == int(match.group(1)):
                    comment["body"] = request.get_json()["body"]
                    return self._json(comment)
        if request.method == "POST" and path == f"{repo}/check-runs":
            payload = request.get_json()
            self.check_runs.append(payload)
            return self._json({"id": self._id(), **payload}, 201)
        return self._json({"message": f"Not Found: {request.method} {path}"}, 404)
