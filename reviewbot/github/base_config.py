"""The review's configuration as the pull request's base commit has it.

With ``config_from: base`` the configuration file and the rule packs it names by path are
read from the base commit through the contents API, so that a pull request cannot switch
its own review off (``ignore = ["ALL"]``) or point it at packs of its own. With
``--base-rule-modules`` the rule modules it names are read from there too, and imported
(reviewbot.github.base_rules).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from reviewbot.errors import ReviewbotError
from reviewbot.github.event import Event

MAX_CONFIG_BYTES = 1024 * 1024


def repository_path(rel: str, cwd: Path, what: str) -> str:
    """``rel`` (relative to the checkout) as a path inside the repository; ReviewbotError
    for an absolute one or one that climbs out."""
    import posixpath

    norm = posixpath.normpath(os.path.relpath(cwd / rel, cwd).replace("\\", "/"))
    if norm.startswith(("/", "../")) or norm == ".." or ":" in norm:
        raise ReviewbotError(f"{what} {rel!r}: expected a path inside the repository")
    return norm


def base_file(repo: Any, sha: str, rel: str, max_bytes: int,
              too_large: str | None = None) -> bytes | None:
    """The bytes of file ``rel`` at commit ``sha`` through the contents API (None when
    it has none); ReviewbotError past ``max_bytes``, and also for a file the API sends
    without its content (too large for it) when ``too_large`` gives the message."""
    from github import GithubException

    try:
        content = repo.get_contents(rel, ref=sha)
    except GithubException as exc:
        if exc.status == 404:
            return None
        raise
    if isinstance(content, list) or getattr(content, "type", "file") != "file":
        return None
    data = content.decoded_content
    if (data is None and too_large is not None) or (data is not None and len(data) > max_bytes):
        raise ReviewbotError(f"{rel} at the base commit: "
                             f"{too_large or f'larger than {max_bytes} bytes'}")
    return data


def _inside(rel: str, what: str) -> str:
    """``rel`` as a normalised repository path ("" for its root); ReviewbotError for one
    that leaves the repository."""
    import posixpath

    norm = posixpath.normpath(rel.replace("\\", "/"))
    if norm.startswith(("/", "../")) or norm == ".." or ":" in norm:
        raise ReviewbotError(f"{what} {rel!r}: expected a path inside the repository")
    return "" if norm == "." else norm


@dataclass
class BaseConfiguration:
    """The configuration and packs read from the base commit, not the pull request."""

    config: Any
    packs: Any
    note: str
    modules: Any = None  # the base commit's rule modules when imported (BaseRuleModules)

    def close(self) -> None:
        """Remove the rule modules' folder and what importing them changed (at the end
        of the run: worker processes import them by name until then)."""
        if self.modules is not None:
            self.modules.close()
            self.modules = None


def base_configuration(repo: Any, event: Event, config_path: str | None,
                       paths: Sequence[str], options: Any,
                       cwd: Path, rule_modules: bool = False) -> BaseConfiguration:
    """The configuration and rule packs as the base commit has them, read through the API:
    the pull request's own checkout cannot switch its review off. ``rule_modules``: import
    the configuration's ``rule-modules`` too, as the base commit has them (never the
    checkout's); the caller closes the result at the end of the run."""
    import posixpath

    from reviewbot.config import CONFIG_NAMES, Overrides, build_config, parse_config_text
    from reviewbot.packs import load_packs

    sha = event.base_sha
    # The command line's overrides, or only rule options (--docstring-threshold); never
    # the project's own rule modules (their files would be the pull request's).
    overrides = options if isinstance(options, Overrides) else Overrides(options=options)
    overrides = dataclasses.replace(overrides, project_code=False)

    inside = _inside

    def fetch(rel: str) -> str | None:
        data = base_file(repo, sha, rel, MAX_CONFIG_BYTES, "too large for a configuration")
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ReviewbotError(f"{rel} at the base commit: not UTF-8") from None

    if config_path:
        candidates = [inside(os.path.relpath(cwd / config_path, cwd), "config")]
    else:
        start = inside(os.path.relpath(cwd / (paths[0] if paths else "."),
                                       cwd), "path")
        folders = [start]
        while folders[-1]:
            folders.append(posixpath.dirname(folders[-1]))
        candidates = [posixpath.join(f, name) for f in folders for name in CONFIG_NAMES]
    for rel in candidates:
        text = fetch(rel)
        if text is None:
            if config_path:
                raise ReviewbotError(f"{config_path}: configuration file not found at "
                                     f"the base commit {sha[:12]}")
            continue
        name = posixpath.basename(rel)
        shown = f"{rel} (base commit {sha[:12]})"
        table, prefix = parse_config_text(text, name, shown)
        if name == "pyproject.toml" and not table and not config_path:
            try:
                import tomllib
            except ImportError:  # pragma: no cover
                import tomli as tomllib  # type: ignore[no-redef]
            if "reviewbot" not in (tomllib.loads(text).get("tool") or {}):
                continue
        folder = posixpath.dirname(rel)
        config = build_config(table, shown, prefix, (cwd / folder).resolve(), overrides)
        modules = None
        if rule_modules and config.rule_modules:
            from reviewbot.github.base_rules import fetch_rule_modules

            modules = fetch_rule_modules(repo, sha, folder, config.rule_modules, shown,
                                         prefix + "rule-modules", cwd)
        try:
            if modules is not None:
                modules.activate(cwd)
                config = build_config(table, shown, prefix, (cwd / folder).resolve(),
                                      dataclasses.replace(overrides, project_code=True,
                                                          rule_modules_root=modules.root))
                config = dataclasses.replace(config, rule_modules_digest=(
                    config.rule_modules_digest + modules.digest))
            packs = _base_packs(config, folder, fetch, shown, prefix)
        except BaseException:
            if modules is not None:
                modules.close()
            raise
        note = f"Configuration: {rel} from the base commit {sha[:12]}."
        if modules is not None:
            # No full stop: a module name is shown as code, and the stop would join it.
            note += f" Rule modules imported from the base commit: {', '.join(modules.names)}"
        return BaseConfiguration(config, packs, note, modules)
    config = build_config({}, None, "", cwd.resolve(), overrides)
    packs = load_packs(config.rule_packs, config.root, None)
    return BaseConfiguration(config, packs, f"Configuration: the defaults (the base commit "
                                            f"{sha[:12]} has none).")


def _base_packs(config: Any, folder: str, fetch: Any, shown: str, prefix: str) -> Any:
    """The configuration's rule packs, those given by path read from the base commit."""
    import posixpath
    import tempfile

    from reviewbot.packs import load_packs

    with tempfile.TemporaryDirectory(dir=os.environ.get("RUNNER_TEMP") or None) as temp:
        root = Path(temp) / folder
        root.mkdir(parents=True, exist_ok=True)
        for spec in config.rule_packs:
            if spec.endswith((".yml", ".yaml")) or "/" in spec or "\\" in spec:
                pack_rel = _inside(posixpath.join(folder, spec), "rule pack")
                pack_text = fetch(pack_rel)
                if pack_text is None:
                    raise ReviewbotError(f"{shown}: {prefix}rule-packs: no rule pack "
                                         f"file {spec!r} at the base commit")
                target = Path(temp) / pack_rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(pack_text, encoding="utf-8")
        return load_packs(config.rule_packs, root, shown, prefix + "rule-packs")
