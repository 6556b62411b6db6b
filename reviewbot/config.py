"""The one configuration source: ``[tool.reviewbot]`` or ``.reviewbot.yml``, then flags.

Everything is validated before any file is checked; a mistake raises
:class:`~reviewbot.errors.ConfigError` naming the file, the key and what was expected.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pathspec

from reviewbot import registry
from reviewbot.errors import ConfigError
from reviewbot.rule import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAMES = (".reviewbot.yml", ".reviewbot.yaml", "pyproject.toml")

DEFAULT_EXCLUDE = (
    ".git/", ".hg/", ".svn/", ".venv/", "venv/", ".env/", "env/", ".tox/", ".nox/",
    "__pycache__/", "build/", "dist/", "site-packages/", "node_modules/", ".eggs/",
    "*.egg-info/", ".mypy_cache/", ".ruff_cache/", ".pytest_cache/", ".reviewbot_cache/",
)

DEFAULT_RULE_PACKS = ("pytorch", "inference-engines")
# Larger files are not parsed (one RB003 each): parsing costs about 300 bytes of memory
# per byte of source, so a 50 MB file would need some 14 GB.
DEFAULT_MAX_FILE_SIZE = 4 * 1024 * 1024
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000 ** 2, "mib": 1024 ** 2,
               "gb": 1000 ** 3, "gib": 1024 ** 3}

_KEYS: dict[str, str] = {
    "select": "a list of rule codes or prefixes",
    "extend-select": "a list of rule codes or prefixes",
    "ignore": "a list of rule codes or prefixes",
    "extend": "a path to another configuration file (relative to this one) to inherit",
    "per-file-ignores": "a table of gitignore-style pattern -> list of rule codes",
    "extend-per-file-ignores": "a table of gitignore-style pattern -> list of rule codes",
    "exclude": "a list of gitignore-style patterns",
    "extend-exclude": "a list of gitignore-style patterns",
    "respect-gitignore": "a boolean",
    "rule-packs": "a list of rule pack names or paths to YAML files",
    "engine-packs": "a boolean",
    "devices": "a table with default = \"unknown\" or \"cuda\"",
    "rules": "a table of rule code -> table of options",
    "max-file-size": "a size in bytes, or a string such as \"4MiB\"",
    "target-version": "a Python version such as \"py310\" (py38 to py314)",
    "rule-modules": "a list of dotted module names holding the project's own CstRules",
}
# The values of target-version, oldest first.
TARGET_VERSIONS = tuple(f"py3{minor}" for minor in range(8, 15))


@dataclass(frozen=True)
class Overrides:
    """What the command line sets; None means "keep the file's value"."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    options: tuple[tuple[str, str, Any], ...] = ()  # (code, key, value)
    # Whether `rule-modules` may be imported (off: --isolated, REVIEWBOT_NO_PROJECT_CODE,
    # and `review`'s configuration from the pull request's checkout).
    project_code: bool = True
    # Where `rule-modules` are imported from when not the configuration's own folder:
    # `review --base-rule-modules` imports the base commit's copies from a folder of its own.
    rule_modules_root: Path | None = None


@dataclass(frozen=True)
class Config:
    """The whole validated configuration of a run."""

    root: Path  # patterns are relative to this folder
    source: str | None  # the file it came from, for messages
    enabled: frozenset[str]  # rule codes that run (internal rules always do)
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    respect_gitignore: bool = True
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    rule_packs: tuple[str, ...] = DEFAULT_RULE_PACKS
    key_prefix: str = ""  # "tool.reviewbot." for pyproject.toml, for messages
    # Add the engine's own pack when the project is or imports a known engine.
    engine_packs: bool = True
    # What a tensor with no device evidence is taken to be (None: as the packs say).
    default_device: str | None = None
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes
    # The oldest Python the project supports ("py310"); None: not set. The checks do not
    # depend on it: it only says whether this interpreter can parse the project's syntax.
    target_version: str | None = None
    # The project's own rule modules as configured, and a digest of their files when they
    # were loaded ("" when not): part of the cache key.
    rule_modules: tuple[str, ...] = ()
    rule_modules_digest: str = ""

    def target_tuple(self) -> tuple[int, int] | None:
        """target-version as (3, minor), or None."""
        if self.target_version is None:
            return None
        return 3, int(self.target_version[3:])

    def exclude_spec(self) -> pathspec.GitIgnoreSpec:
        """The exclude patterns, compiled."""
        return pathspec.GitIgnoreSpec.from_lines(self.exclude)

    def per_file_ignore_specs(self) -> list[tuple[pathspec.GitIgnoreSpec, frozenset[str]]]:
        """Each per-file-ignores pattern, compiled, with its codes."""
        return [(pathspec.GitIgnoreSpec.from_lines([pat]), codes)
                for pat, codes in self.per_file_ignores]

    def fingerprint(self) -> str:
        """A stable text that changes whenever a setting that affects findings changes."""
        return repr((sorted(self.enabled), self.per_file_ignores, self.rule_packs,
                     self.engine_packs, self.default_device,
                     sorted((c, sorted(s.items(), key=repr)) for c, s in self.settings.items()),
                     self.rule_modules, self.rule_modules_digest))


def find_config_file(start: Path) -> Path | None:
    """The nearest configuration file at or above ``start``."""
    folder = start if start.is_dir() else start.parent
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        found = config_in(candidate)
        if found is not None:
            return found
    return None


def config_in(folder: Path) -> Path | None:
    """The configuration file that ``folder`` itself holds (in one folder, ``.reviewbot.yml``
    wins over ``pyproject.toml``; a ``pyproject.toml`` counts only with [tool.reviewbot])."""
    for name in CONFIG_NAMES:
        path = folder / name
        if not path.is_file():
            continue
        if name != "pyproject.toml" or _pyproject_has_section(path):
            return path
    return None


def _pyproject_has_section(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        # A broken pyproject.toml is only our business if it names us.
        try:
            return "[tool.reviewbot" in path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    return isinstance(data.get("tool"), dict) and "reviewbot" in data["tool"]


def read_config_file(path: Path) -> tuple[dict[str, Any], str]:
    """The raw table of a configuration file and the prefix its keys are named with."""
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(shown, "<file>", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(shown, "<file>", f"cannot be read ({exc.__class__.__name__}: {exc})") from None
    return parse_config_text(text, path.name, shown)


def parse_config_text(text: str, name: str, shown: str) -> tuple[dict[str, Any], str]:
    """The raw table of a configuration file's text (``name``: its file name, which says
    its format) and the prefix its keys are named with."""
    if name.endswith(".toml"):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(shown, "<file>", f"invalid TOML: {exc}") from None
        tool = data.get("tool", {})
        if name == "pyproject.toml":
            if not isinstance(tool, dict) or "reviewbot" not in tool:
                return {}, "tool.reviewbot."
            table = tool["reviewbot"]
            prefix = "tool.reviewbot."
        else:  # a standalone reviewbot.toml holds the keys at the top
            table, prefix = data, ""
    else:
        from reviewbot import yaml_load

        table = yaml_load.load(text, shown)
        if table is None:
            table = {}
        prefix = ""
    if not isinstance(table, dict):
        raise ConfigError(shown, prefix.rstrip(".") or "<top level>",
                          f"expected a table of settings, got {_type_name(table)}")
    return table, prefix


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def _string_list(value: Any, source: str, key: str, expected: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list) or not all(
            isinstance(v, str) for v in value):
        raise ConfigError(source, key, f"expected {expected}, got {_type_name(value)}"
                          if not isinstance(value, list) else f"expected {expected}")
    return tuple(value)


def _check_selectors(codes: Iterable[str], source: str, key: str,
                     unloaded: bool = False) -> None:
    """Every selector selects a rule. ``unloaded``: the project's rule modules are named
    but not imported (``review``, ``--isolated``): a code outside reviewbot's RB family may
    be one of theirs, and selects nothing."""
    for code in codes:
        if unloaded and not code.strip().upper().startswith("RB"):
            continue
        if not registry.matching(code):
            known = [r.code for r in registry.RULES] + [r.name for r in registry.RULES]
            close = difflib.get_close_matches(code.upper(), [k.upper() for k in known], n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(source, key, f"unknown rule code or prefix {code!r}{hint}; "
                                           "expected a code such as RB301 or a prefix such as RB3")


def _check_patterns(patterns: Sequence[str], source: str, key: str) -> None:
    try:
        pathspec.GitIgnoreSpec.from_lines(patterns)
    except Exception as exc:  # pathspec raises several types for bad patterns
        raise ConfigError(source, key, f"invalid gitignore-style pattern ({exc})") from None


def _rule_settings(rule: type[Rule], given: Any, source: str, key: str,
                   base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    if not isinstance(given, dict):
        raise ConfigError(source, key, f"expected a table of options, got {_type_name(given)}")
    settings = dict(base) if base is not None else rule.default_settings()
    by_name = {opt.name: opt for opt in rule.options}
    for name, value in given.items():
        opt = by_name.get(str(name)) or by_name.get(str(name).replace("_", "-"))
        if opt is None:
            allowed = ", ".join(by_name) or "none"
            raise ConfigError(source, f"{key}.{name}",
                              f"unknown option for {rule.code}; expected one of: {allowed}")
        problem = opt.validate(value)
        if problem:
            raise ConfigError(source, f"{key}.{name}", problem)
        settings[opt.name] = float(value) if float in opt.types and isinstance(value, int) \
            else value
    return settings


def resolve_selection(select: Sequence[str] | None, extend_select: Sequence[str],
                      ignore: Sequence[str]) -> frozenset[str]:
    """Enabled codes: ``select`` (or the defaults), plus ``extend-select``, less ``ignore``.

    A prefix such as ``RB3`` turns on the rules under it that are on by default; a rule
    that is off by default is turned on by its own code (or ``ALL``).
    """

    def expand(selectors: Iterable[str], explicit_only: bool) -> set[str]:
        codes: set[str] = set()
        for sel in selectors:
            rules = registry.matching(sel)
            exact = len(rules) == 1 and (rules[0].code == sel.upper()
                                         or rules[0].name == sel.lower())
            for rule in rules:
                if rule.default_enabled or exact or sel.upper() == "ALL" or not explicit_only:
                    codes.add(rule.code)
        return codes

    if select is None:
        enabled = {r.code for r in registry.RULES if r.default_enabled}
    else:
        enabled = expand(select, explicit_only=True)
    enabled |= expand(extend_select, explicit_only=True)
    enabled -= expand(ignore, explicit_only=False)
    enabled |= {r.code for r in registry.RULES if r.internal}
    return frozenset(enabled)


def build_config(table: Mapping[str, Any], source: str | None, prefix: str, root: Path,
                 overrides: Overrides = Overrides(), *, role: str = "root") -> Config:
    """Validate a raw table, apply the command line's overrides, and freeze the result.

    ``role``: "root" (the project's configuration, which decides the project's own rules:
    those of its ``rule-modules`` when ``overrides.project_code`` allows them, else none),
    "folder" (a folder's own configuration, which may not name rule modules), or "extended"
    (a file another one extends, only validated).
    """
    src = source or "<command line>"
    for key in table:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), list(_KEYS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(src, f"{prefix}{key}",
                              f"unknown key{hint}; expected one of: {', '.join(_KEYS)}")

    def strings(key: str) -> tuple[str, ...] | None:
        if key not in table:
            return None
        return _string_list(table[key], src, prefix + key, _KEYS[key])

    rule_modules, rule_modules_digest = _project_rules(
        strings("rule-modules") or (), src, prefix + "rule-modules", root, overrides, role)

    select = strings("select")
    extend_select = strings("extend-select") or ()
    ignore = strings("ignore") or ()
    # Named but not imported (a folder's configuration goes by the project root's).
    unloaded = bool(rule_modules) and not rule_modules_digest if role == "root" \
        else registry.project_rules_unloaded()
    for key, codes in (("select", select or ()), ("extend-select", extend_select),
                       ("ignore", ignore)):
        _check_selectors(codes, src, prefix + key, unloaded)

    exclude = strings("exclude")
    extend_exclude = strings("extend-exclude") or ()
    for key, pats in (("exclude", exclude or ()), ("extend-exclude", extend_exclude)):
        _check_patterns(pats, src, prefix + key)

    respect_gitignore = table.get("respect-gitignore", True)
    if not isinstance(respect_gitignore, bool):
        raise ConfigError(src, prefix + "respect-gitignore",
                          f"expected a boolean, got {_type_name(respect_gitignore)}")

    engine_packs = table.get("engine-packs", True)
    if not isinstance(engine_packs, bool):
        raise ConfigError(src, prefix + "engine-packs",
                          f"expected a boolean, got {_type_name(engine_packs)}")
    default_device = None
    devices = table.get("devices", {})
    if not isinstance(devices, dict):
        raise ConfigError(src, prefix + "devices", f"expected {_KEYS['devices']}, "
                          f"got {_type_name(devices)}")
    for key, value in devices.items():
        if key != "default":
            raise ConfigError(src, f"{prefix}devices.{key}", "unknown key; expected: default")
        if value not in ("unknown", "cuda"):
            raise ConfigError(src, f"{prefix}devices.default",
                              "expected \"unknown\" or \"cuda\"")
        default_device = value

    if "extend" in table:  # load_config follows it; a table built elsewhere cannot
        raise ConfigError(src, prefix + "extend", "not followed here (only in a "
                          "configuration file read from the checkout)")
    per_file: list[tuple[str, frozenset[str]]] = []
    for pfi_key in ("per-file-ignores", "extend-per-file-ignores"):
        pfi = table.get(pfi_key, {})
        if not isinstance(pfi, dict):
            raise ConfigError(src, prefix + pfi_key,
                              f"expected {_KEYS[pfi_key]}, got {_type_name(pfi)}")
        for pattern, codes in pfi.items():
            key = f"{prefix}{pfi_key}.{pattern}"
            codes_t = _string_list(codes, src, key, "a list of rule codes or prefixes")
            _check_selectors(codes_t, src, key, unloaded)
            _check_patterns([str(pattern)], src, key)
            per_file.append((str(pattern), frozenset(
                r.code for c in codes_t for r in registry.matching(c))))

    target_version = table.get("target-version")
    if target_version is not None and target_version not in TARGET_VERSIONS:
        raise ConfigError(src, prefix + "target-version",
                          f"expected {_KEYS['target-version']}, got "
                          f"{target_version!r}" if isinstance(target_version, str) else
                          f"expected {_KEYS['target-version']}, got "
                          f"{_type_name(target_version)}")

    packs = strings("rule-packs")
    max_file_size = _size(table.get("max-file-size", DEFAULT_MAX_FILE_SIZE), src,
                          prefix + "max-file-size")
    rules_table = table.get("rules", {})
    if not isinstance(rules_table, dict):
        raise ConfigError(src, prefix + "rules",
                          f"expected {_KEYS['rules']}, got {_type_name(rules_table)}")
    settings: dict[str, dict[str, Any]] = {r.code: r.default_settings() for r in registry.RULES}
    for code, opts in rules_table.items():
        rule = registry.BY_CODE.get(str(code).upper())
        if rule is None and unloaded and not str(code).upper().startswith("RB"):
            continue  # the options of a project rule that is not loaded
        if rule is None:
            raise ConfigError(src, f"{prefix}rules.{code}",
                              "unknown rule code; expected a code such as RB301")
        settings[rule.code] = _rule_settings(rule, opts, src, f"{prefix}rules.{code}")

    # The command line overrides the file.
    if overrides.select is not None:
        _check_selectors(overrides.select, "<command line>", "--select")
        select = overrides.select
    _check_selectors(overrides.extend_select, "<command line>", "--extend-select")
    _check_selectors(overrides.ignore, "<command line>", "--ignore")
    extend_select = (*extend_select, *overrides.extend_select)
    ignore = (*ignore, *overrides.ignore)
    if overrides.exclude is not None:
        _check_patterns(overrides.exclude, "<command line>", "--exclude")
        exclude = overrides.exclude
    _check_patterns(overrides.extend_exclude, "<command line>", "--extend-exclude")
    for code, key, value in overrides.options:
        rule = registry.BY_CODE.get(code.upper())
        if rule is None:
            raise ConfigError("<command line>", f"--option {code}.{key}",
                              "unknown rule code; expected a code such as RB301")
        settings[rule.code] = _rule_settings(rule, {key: value}, "<command line>",
                                             f"--option {rule.code}", settings[rule.code])

    return Config(
        root=root,
        source=source,
        enabled=resolve_selection(select, extend_select, ignore),
        exclude=(*(exclude if exclude is not None else DEFAULT_EXCLUDE), *extend_exclude,
                 *overrides.extend_exclude),
        respect_gitignore=respect_gitignore,
        per_file_ignores=tuple(per_file),
        rule_packs=packs if packs is not None else DEFAULT_RULE_PACKS,
        key_prefix=prefix,
        settings={code: dict(s) for code, s in settings.items()},
        engine_packs=engine_packs,
        default_device=default_device,
        max_file_size=max_file_size,
        target_version=target_version,
        rule_modules=rule_modules,
        rule_modules_digest=rule_modules_digest,
    )


def _project_rules(names: tuple[str, ...], source: str, key: str, root: Path,
                   overrides: Overrides, role: str) -> tuple[tuple[str, ...], str]:
    """Validate the module names and, for a project root's configuration, register their
    rules (or none, when project code is off); returns the names and their files' digest."""
    from reviewbot.project_rules import load_rule_modules, module_name_problem

    for name in names:
        problem = module_name_problem(name)
        if problem is not None:
            raise ConfigError(source, key, problem)
    if role == "extended":
        return names, ""
    if role == "folder":
        if names:
            raise ConfigError(source, key, "set it in the project root's configuration (a "
                              "folder's own configuration chooses rules, not their code)")
        return names, ""
    if not names or not overrides.project_code:
        registry.set_project_rules((), unloaded=bool(names))
        return names, ""
    rules, digest = load_rule_modules(names, overrides.rule_modules_root or root, source, key)
    registry.set_project_rules(rules)
    return names, digest


def _size(value: Any, source: str, key: str) -> int:
    """A size in bytes from an integer or a string with a unit (``"4MiB"``)."""
    import re

    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (match := re.fullmatch(
            r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)) \
            and match.group(2).lower() in _SIZE_UNITS:
        size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])
    else:
        raise ConfigError(source, key, f"expected {_KEYS['max-file-size']}, got "
                          f"{_type_name(value)}")
    if size < 1:
        raise ConfigError(source, key, "expected a size of at least 1 byte")
    return size


def common_folder(paths: Sequence[Path], cwd: Path) -> Path:
    """The deepest folder holding every one of ``paths`` (``cwd`` without paths)."""
    folders = []
    for path in paths or [cwd]:
        absolute = Path(os.path.abspath(cwd / path))
        folders.append(str(absolute if absolute.is_dir() else absolute.parent))
    try:
        return Path(os.path.commonpath(folders))
    except ValueError:  # paths on different drives
        return Path(folders[0])


def load_config(paths: Sequence[Path], config_file: Path | None,
                overrides: Overrides = Overrides(), cwd: Path | None = None) -> Config:
    """Find (or take) the configuration file, read it and build the run's Config: the
    nearest configuration at or above the folder that holds every path (the project
    root's; :class:`Configs` finds each file's own)."""
    cwd = cwd or Path.cwd()
    if config_file is None:
        start = common_folder([p for p in paths if os.path.lexists(cwd / p)], cwd)
        config_file = find_config_file(start if start.exists() else cwd)
    if config_file is None:
        return build_config({}, None, "", cwd.resolve(), overrides)
    return _load_file(config_file, overrides)


def _load_file(config_file: Path, overrides: Overrides, role: str = "root") -> Config:
    table, prefix = read_config_file(config_file)
    table = with_extends(table, prefix, config_file)
    return build_config(table, str(config_file), prefix, config_file.resolve().parent, overrides,
                        role=role)


# What a file's own configuration decides; everything else (rule packs, devices, engine
# packs, excludes, max-file-size, target-version) is the project root's, since the run
# discovers its files and links its project index once.
PER_FILE_KEYS = ("select", "extend-select", "ignore", "per-file-ignores",
                 "extend-per-file-ignores", "rules")


class Configs:
    """The configuration of each checked file, as ruff finds it: the nearest configuration
    file at or above the file's folder, looked for no higher than the project root (the
    root configuration's folder). Rule selection, per-file-ignores and rule options come
    from that file; the rest is the root configuration's. With an explicit ``--config``
    every file has the root configuration.

    ``all`` lists the distinct configurations met so far, the root's first; a file's
    configuration is named by its index there (``index``)."""

    def __init__(self, root: Config, overrides: Overrides = Overrides(), *,
                 explicit: bool = False, top: Path | None = None) -> None:
        self.root = root
        self.overrides = overrides
        self.explicit = explicit
        # Where walks stop: the root configuration's folder, else the folder the search
        # for it started from (nothing above it holds one).
        self.top = (root.root if root.source is not None else top or root.root).resolve()
        self.all: list[Config] = [root]
        self._by_file: dict[Path, int] = {}
        if root.source is not None:
            self._by_file[Path(root.source).resolve()] = 0
        self._by_folder: dict[str, int] = {}
        self._by_path: dict[str, int] = {}

    def index(self, path: Path) -> int:
        """The index in ``all`` of the configuration of ``path`` (a file or a folder;
        raises ConfigError for a mistake in a configuration file it finds)."""
        if self.explicit:
            return 0
        key = os.fspath(path)
        known = self._by_path.get(key)
        if known is not None:  # each checked file is asked for more than once
            return known
        absolute = os.path.abspath(path)
        folder = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        known = self._by_folder.get(folder)
        if known is not None:
            self._by_path[key] = known
            return known
        try:
            resolved = Path(folder).resolve()
        except (OSError, RuntimeError):
            return 0
        if resolved != self.top and self.top not in resolved.parents:
            found = 0  # outside the project: the root's
        else:
            found = self._nearest(resolved)
        self._by_folder[folder] = found
        self._by_path[key] = found
        return found

    def for_path(self, path: Path) -> Config:
        """The configuration of ``path``."""
        return self.all[self.index(path)]

    def _nearest(self, folder: Path) -> int:
        seen: list[str] = []
        found = 0
        for candidate in (folder, *folder.parents):
            known = self._by_folder.get(str(candidate))
            if known is not None:
                found = known
                break
            seen.append(str(candidate))
            file = config_in(candidate)
            if file is not None:
                found = self._load(file)
                break
            if candidate == self.top:
                break
        for name in seen:  # every folder on the way has the same nearest configuration
            self._by_folder[name] = found
        return found

    def _load(self, file: Path) -> int:
        resolved = file.resolve()
        known = self._by_file.get(resolved)
        if known is not None:
            return known
        own = _load_file(file, self.overrides, role="folder")
        config = dataclasses.replace(
            self.root, root=own.root, source=own.source, key_prefix=own.key_prefix,
            enabled=own.enabled, per_file_ignores=own.per_file_ignores,
            settings=own.settings)
        self.all.append(config)
        self._by_file[resolved] = len(self.all) - 1
        return len(self.all) - 1

    def enabled(self) -> frozenset[str]:
        """Every code some configuration met so far enables."""
        return frozenset().union(*(c.enabled for c in self.all))


MAX_EXTENDS = 16  # files in one chain of `extend`


def with_extends(table: Mapping[str, Any], prefix: str, path: Path,
                 chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """``table`` merged over the configuration its ``extend`` names (followed to the
    end of the chain; a missing file, a cycle or a chain longer than MAX_EXTENDS is a
    ConfigError). The extending file wins key by key; see :func:`merge_tables`."""
    own = dict(table)
    if "extend" not in own:
        return own
    value = own.pop("extend")
    shown, key = str(path), prefix + "extend"
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(shown, key, f"expected {_KEYS['extend']}, got {_type_name(value)}")
    chain = (*chain, path.resolve())
    target = path.parent / value
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError):
        raise ConfigError(shown, key, f"{value}: cannot be resolved") from None
    if resolved in chain:
        names = " -> ".join(str(p) for p in (*chain, resolved))
        raise ConfigError(shown, key, f"a cycle of extended configuration files: {names}")
    if len(chain) >= MAX_EXTENDS:
        raise ConfigError(shown, key, f"more than {MAX_EXTENDS} configuration files "
                                      "extend one another")
    if not resolved.is_file():
        raise ConfigError(shown, key, f"{value}: no such configuration file")
    if not resolved.name.endswith((".toml", ".yml", ".yaml")):
        raise ConfigError(shown, key, f"{value}: expected a pyproject.toml, a .toml, "
                                      ".yml or .yaml file")
    base, base_prefix = read_config_file(target)
    base = with_extends(base, base_prefix, target, chain)
    # Each file is checked on its own, so that a mistake is reported where it is written.
    build_config(base, str(target), base_prefix, resolved.parent, role="extended")
    return merge_tables(base, own)


def merge_tables(base: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """An extending configuration over the one it extends, as ruff layers them: a key the
    extending file sets replaces the base's; ``ignore``, ``extend-select``,
    ``extend-exclude`` and ``extend-per-file-ignores`` add to the base's, unless the
    extending file also sets ``select`` (which drops the base's ``extend-select`` and
    ``ignore``), ``exclude`` or ``per-file-ignores``; ``rules`` merge option by option."""
    merged = dict(base)
    resets = {"select": ("extend-select", "ignore"), "exclude": ("extend-exclude",),
              "per-file-ignores": ("extend-per-file-ignores",)}
    for key, drops in resets.items():
        if key in own:
            for dropped in drops:
                merged.pop(dropped, None)
    for key, value in own.items():
        old = merged.get(key)
        if key in ("ignore", "extend-select", "extend-exclude") and isinstance(value, list) \
                and isinstance(old, list):
            merged[key] = [*old, *value]
        elif key == "extend-per-file-ignores" and isinstance(value, dict) \
                and isinstance(old, dict):
            combined = dict(old)
            for pattern, codes in value.items():
                before = combined.get(pattern)
                combined[pattern] = [*before, *codes] if isinstance(before, list) \
                    and isinstance(codes, list) else codes
            merged[key] = combined
        elif key == "rules" and isinstance(value, dict) and isinstance(old, dict):
            rules = dict(old)
            for code, options in value.items():
                earlier = rules.get(code)
                rules[code] = {**earlier, **options} if isinstance(earlier, dict) \
                    and isinstance(options, dict) else options
            merged[key] = rules
        else:
            merged[key] = value
    return merged
