"""`reviewbot review` against a fake GitHub REST API on loopback, through real PyGithub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("github")
pytest.importorskip("pytest_httpserver")

from conftest import FIXTURES  # noqa: E402
from github_fake import HEAD, FakeGitHub, Fault, split_patches  # noqa: E402

PR = FIXTURES / "pr"
TOKEN = "ghs_" + "s3cr3t" * 6


def pr_files(extra: int = 4) -> list[dict]:
    """The seed-shaped PR's file, plus a few others (so that the files come in pages)."""
    patches = split_patches((PR / "pr.diff").read_text(encoding="utf-8"))
    files = [{"filename": path, "status": "modified", "patch": patch, "additions": 1,
              "deletions": 1, "changes": 2, "sha": "1" * 40} for path, patch in patches.items()]
    for index in range(extra):
        files.append({"filename": f"docs/note{index}.md", "status": "added",
                      "patch": "@@ -0,0 +1 @@\n+text", "sha": "2" * 40})
    return files


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """The PR's head checked out, and the Actions environment pointing at the fake."""
    root = tmp_path / "ws"
    (root / "runner").mkdir(parents=True)
    shutil.copy(PR / "after" / "model_runner.py", root / "runner" / "model_runner.py")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(PR / "event.json"))
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/engine")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step-summary.md"))
    monkeypatch.setenv("REVIEWBOT_RETRY_BACKOFF", "0")
    monkeypatch.setenv("REVIEWBOT_GITHUB_PACE", "0")
    return root


@pytest.fixture
def fake(httpserver, monkeypatch):
    fake = FakeGitHub(httpserver, pr_files())
    monkeypatch.setenv("GITHUB_API_URL", fake.base)
    return fake


def review(run_cli, workspace, *args):
    return run_cli(["review", *args], cwd=workspace)


def test_the_seed_pr_gets_the_buffer_suggestion_and_the_coverage_check(run_cli, workspace,
                                                                      fake):
    result = review(run_cli, workspace, "--docstring-threshold", "80")
    assert result.code == 1  # an error-severity finding, fail_level error
    (posted,) = fake.reviews
    assert posted["event"] == "COMMENT"
    (comment,) = posted["comments"]
    lines = (PR / "after" / "model_runner.py").read_text(encoding="utf-8").splitlines()
    assert lines[67 - 1].strip() == "(self.max_model_len, 1),"
    assert (comment["path"], comment["line"], comment["side"]) == \
        ("runner/model_runner.py", 67, "RIGHT")
    assert "start_line" not in comment
    body = comment["body"]
    assert body.startswith("**RB201** [buffer-bound-mismatch](")
    assert "#rb201-buffer-bound-mismatch) (error)" in body
    assert "```suggestion\n            (self.max_num_reqs, 1),\n```" in body
    assert body.endswith("<!-- reviewbot:RB201 -->")
    (summary,) = fake.issue_comments
    text = summary["body"]
    assert text.startswith("<!-- reviewbot:summary -->")
    assert ("Docstring coverage: 33.33% of the changed definitions (1 of 3), threshold "
            "80.00%") in text
    assert "| Docstring coverage | warning |" in text
    assert "| `runner/model_runner.py` | modified |" in text
    assert "| RB201 buffer-bound-mismatch | 1 |" in text
    # The job summary and the annotations carry the same.
    step = Path(workspace.parent / "step-summary.md").read_text(encoding="utf-8")
    assert "Docstring coverage: 33.33%" in step
    assert result.out.startswith("::error file=runner/model_runner.py,line=66,")
    # The files came in pages, all of them were read.
    assert fake.paths("GET").count(f"/repos/acme/engine/pulls/7/files") == 3


def test_nothing_on_unchanged_lines(run_cli, workspace, fake):
    # An unchanged line of the runner holds a finding when hazards are searched everywhere:
    # `logits.max().item()` in profile_run is cold, so add one on an unchanged hot line.
    path = workspace / "runner" / "model_runner.py"
    text = path.read_text(encoding="utf-8")
    text = text.replace("        num_reqs = len(scheduler_output.req_ids)\n",
                        "        num_reqs = len(scheduler_output.req_ids)  # unchanged\n")
    path.write_text(text, encoding="utf-8")
    review(run_cli, workspace)
    lines = [c["line"] for r in fake.reviews for c in r.get("comments", [])]
    assert lines == [67]


def test_a_second_run_edits_the_summary_and_repeats_no_comment(run_cli, workspace, fake):
    review(run_cli, workspace)
    first = fake.issue_comments[0]["body"]
    review(run_cli, workspace)
    assert len(fake.issue_comments) == 1  # found by its marker, not created again
    assert len(fake.reviews) == 1  # nothing new to say on the lines
    assert len(fake.review_comments) == 1
    assert "1 findings were already commented by an earlier run." in \
        fake.issue_comments[0]["body"]
    assert fake.issue_comments[0]["body"] != first
    assert fake.paths("PATCH") == [f"/repos/acme/engine/issues/comments/"
                                   f"{fake.issue_comments[0]['id']}"]


def test_a_fork_token_falls_back_to_annotations_and_the_job_summary(run_cli, workspace, fake):
    fake.faults.append(Fault("POST", "/pulls/7/reviews", 403,
                             body={"message": "Resource not accessible by integration"}))
    result = review(run_cli, workspace, "--fail-level", "none")
    assert result.code == 0  # the exit status follows fail_level, not the 403
    assert "the token may not comment on this pull request (403" in result.err
    assert fake.reviews == [] and fake.issue_comments == []
    assert result.out.startswith("::error file=runner/model_runner.py")
    step = Path(workspace.parent / "step-summary.md").read_text(encoding="utf-8")
    assert "RB201" in step


def test_rate_limits_and_server_errors_are_retried(run_cli, workspace, fake):
    fake.faults.append(Fault("GET", "/pulls/7", 429, headers={"Retry-After": "0"}))
    fake.faults.append(Fault("POST", "/pulls/7/reviews", 502))
    result = review(run_cli, workspace)
    assert result.code == 1 and len(fake.reviews) == 1
    assert fake.paths("GET").count("/repos/acme/engine/pulls/7") == 2
    assert fake.paths("POST").count("/repos/acme/engine/pulls/7/reviews") == 2


def test_retries_are_bounded_then_a_clear_failure(run_cli, workspace, fake):
    for _ in range(10):
        fake.faults.append(Fault("GET", "/pulls/7", 503))
    result = review(run_cli, workspace)
    assert result.code == 2
    assert result.err.startswith("reviewbot: error: cannot read pull request #7 of "
                                 "acme/engine: too many 503 error responses (after retries)")
    assert len(result.err.strip().splitlines()) == 1
    assert fake.paths("GET").count("/repos/acme/engine/pulls/7") == 6  # 1 + 5 retries


def test_a_422_moves_the_comment_into_the_summary(run_cli, workspace, fake):
    fake.faults.append(Fault("POST", "/pulls/7/reviews", 422, body={
        "message": "Unprocessable Entity",
        "errors": ["Pull request review thread line must be part of the diff"]}))
    review(run_cli, workspace)
    assert len(fake.reviews) == 1 and not fake.reviews[0].get("comments")
    text = fake.issue_comments[0]["body"]
    assert "### Findings not posted as line comments (1)" in text
    assert "`runner/model_runner.py:66` **RB201**" in text


def test_max_comments_keeps_the_most_severe_and_lists_the_rest(run_cli, workspace, fake):
    path = workspace / "runner" / "model_runner.py"
    text = path.read_text(encoding="utf-8").replace(
        "        num_reqs = len(scheduler_output.req_ids)\n",
        "        num_reqs = len(scheduler_output.req_ids)\n        done = torch.cuda.Event()\n")
    path.write_text(text, encoding="utf-8")
    result = review(run_cli, workspace, "--max-comments", "1", "--filter-mode", "nofilter",
                    "--fail-level", "warning")
    assert result.code == 1
    (posted,) = fake.reviews
    # The error (RB201) is commented; the warning (RB202, an unchanged line: nofilter) is
    # listed in the summary.
    assert [c["body"].split("**")[1] for c in posted["comments"]] == ["RB201"]
    summary = fake.issue_comments[0]["body"]
    assert "### Findings not posted as line comments (1)" in summary and "**RB202**" in summary


def test_the_token_never_appears_in_output(run_cli, workspace, fake):
    for _ in range(10):
        fake.faults.append(Fault("POST", "/pulls/7/reviews", 500,
                                 body={"message": f"echo {TOKEN}"}))
    result = review(run_cli, workspace)
    assert TOKEN not in result.out + result.err
    assert result.code == 2
    assert all(auth == f"token {TOKEN}" or auth == f"Bearer {TOKEN}"
               for _, _, auth in fake.requests)


@pytest.mark.parametrize("unset, message", [
    ("GITHUB_EVENT_PATH", "GITHUB_EVENT_PATH is not set"),
    ("GITHUB_TOKEN", "no token: set GITHUB_TOKEN"),
])
def test_missing_environment_is_exit_2(run_cli, workspace, fake, monkeypatch, unset, message):
    monkeypatch.delenv(unset)
    monkeypatch.delenv("INPUT_GITHUB_TOKEN", raising=False)
    result = review(run_cli, workspace)
    assert result.code == 2 and message in result.err


def test_check_run_reporter(run_cli, workspace, fake):
    result = review(run_cli, workspace, "--reporter", "github-check")
    assert result.code == 1
    (run,) = fake.check_runs
    assert run["head_sha"] == HEAD and run["conclusion"] == "failure"
    assert run["output"]["annotations"][0]["path"] == "runner/model_runner.py"


def test_untrusted_text_is_escaped():
    from reviewbot.github.markdown import code, escape

    assert escape("[x] @team <b>") == r"\[x\] `@team` \<b\>"
    assert escape("(http://e)") == "`(http://e)`"
    assert code("a`b") == "``a`b``"


def test_annotations_only_reporter_posts_nothing(run_cli, workspace, fake):
    result = review(run_cli, workspace, "--reporter", "annotations")
    assert fake.reviews == [] and fake.issue_comments == []
    assert "::error file=runner/model_runner.py" in result.out
    assert json.loads((PR / "event.json").read_text())["pull_request"]["number"] == 7


def test_without_pygithub_review_says_what_to_install(run_cli, monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "github" else real(name, *a))
    result = run_cli(["review"], cwd=tmp_path)
    assert result.code == 2
    assert result.err == ("reviewbot: error: reviewbot review needs PyGithub: "
                          "pip install 'reviewbot[github]'\n")


def _write_baseline(run_cli, workspace):
    result = run_cli(["check", ".", "--no-cache", "--write-baseline", "ci/baseline.json"],
                     cwd=workspace)
    assert result.code == 0, result.err
    return (workspace / "ci" / "baseline.json").read_text(encoding="utf-8")


def test_a_baseline_leaves_out_the_known_findings(run_cli, workspace, fake):
    (workspace / "ci").mkdir()
    _write_baseline(run_cli, workspace)
    result = review(run_cli, workspace, "--baseline", "ci/baseline.json")
    assert result.code == 0, result.err  # the error-severity RB201 is known
    assert fake.reviews == []
    # The baseline knows both findings of the changed file (one is on an unchanged line).
    assert "0 findings on changed lines, 0 line comments posted, 2 known from the baseline" \
        in result.err
    summary = fake.issue_comments[-1]["body"]
    assert "> Not reported: 2 findings in the changed files that the baseline " \
           "`ci/baseline.json` knows." in summary
    # A finding the baseline does not know (its line changed) is still reviewed.
    path = workspace / "runner" / "model_runner.py"
    path.write_text(path.read_text(encoding="utf-8").replace(
        "self.sampled_token_ids_pinned_cpu = torch.empty(",
        "self.sampled_token_ids_pinned_cpu = torch.empty(  # host copy"), encoding="utf-8")
    result = review(run_cli, workspace, "--baseline", "ci/baseline.json")
    assert result.code == 1
    assert [c["line"] for r in fake.reviews for c in r.get("comments", [])] == [67]


def test_with_config_from_base_the_baseline_comes_from_the_base_commit(run_cli, workspace,
                                                                       fake):
    (workspace / "ci").mkdir()
    text = _write_baseline(run_cli, workspace)
    # The pull request's own baseline (it could add its findings to it) is not read.
    result = review(run_cli, workspace, "--baseline", "ci/baseline.json", "--config-from",
                    "base")
    assert result.code == 1
    assert [c["line"] for r in fake.reviews for c in r.get("comments", [])] == [67]
    assert "0 known from the baseline" in result.err
    fake.reviews.clear()
    fake.review_comments.clear()
    fake.contents[("ci/baseline.json", "f" * 40)] = text
    (workspace / "ci" / "baseline.json").write_text("not json", encoding="utf-8")
    result = review(run_cli, workspace, "--baseline", "ci/baseline.json", "--config-from",
                    "base")
    assert result.code == 0, result.err
    assert fake.reviews == []
    assert "Not reported: 2 findings in the changed files that the baseline " \
           "`ci/baseline.json` \\(base commit ffffffffffff\\) knows." in \
        fake.issue_comments[-1]["body"]


@pytest.mark.parametrize("config_from", ["head", "base"])
def test_a_malformed_baseline_stops_the_review(run_cli, workspace, fake, config_from):
    (workspace / "b.json").write_text('{"version": 1, "findings": [1]}', encoding="utf-8")
    fake.contents[("b.json", "f" * 40)] = '{"version": 1, "findings": [1]}'
    result = review(run_cli, workspace, "--baseline", "b.json", "--config-from", config_from)
    assert result.code == 2
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert "not a reviewbot baseline: findings[0] must be an object" in result.err
    assert fake.reviews == [] and fake.issue_comments == []


def test_a_baseline_path_out_of_the_repository_is_refused_for_the_base(run_cli, workspace,
                                                                       fake):
    result = review(run_cli, workspace, "--baseline", "../b.json", "--config-from", "base")
    assert result.code == 2
    assert "expected a path inside the repository" in result.err


def test_a_project_rules_comment_has_its_marker_and_no_link_to_reviewbots_docs():
    from reviewbot.finding import Finding
    from reviewbot.github.markdown import comment_body
    from reviewbot.github.review import DOCS_URL, _codes_in

    own = Finding("ENG101", "numpy-on-cuda-tensor", "m", "a.py", 3, 1, 3, 2, "warning")
    body = comment_body(own, None, DOCS_URL)
    assert body.startswith("**ENG101** numpy-on-cuda-tensor (warning)\n") and "](" not in body
    assert _codes_in(body) == ["ENG101"]  # found again by a later run: not repeated
    builtin = Finding("RB101", "tolist-on-cuda-tensor", "m", "a.py", 3, 1, 3, 2, "error")
    body = comment_body(builtin, None, DOCS_URL)
    assert body.startswith(f"**RB101** [tolist-on-cuda-tensor]({DOCS_URL}#rb101-")
    assert _codes_in(body) == ["RB101"]
    assert _codes_in("x\n<!-- reviewbot:eng101 -->") == []
