"""Pull-request review: changed lines, the review and summary, the GitHub API."""
