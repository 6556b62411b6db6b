"""YAML rule packs: the data users tune (hot-path entry points, size bounds), not code.

A pack is named (``inference-engines``, shipped in ``rules/`` and inside the wheel) or
a path to a YAML file, relative to the configuration's folder. Packs are validated
before anything is checked; later packs extend earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from reviewbot.errors import ConfigError

_LIST_KEYS = {
    "hot-paths": ("entry-points", "module-entry-points", "startup", "sync-allowed-contexts",
                  "loop-callees"),
    "devices": ("module-classes", "module-factories", "cuda-classes", "non-cuda-imports",
                "host-names"),
}
# What a tensor with no evidence of its device is taken to be: unknown (the generic
# pack), or on the GPU (the engine packs, where nearly every tensor of per-step code is).
DEFAULT_DEVICES = ("unknown", "cuda")
_TOP_KEYS = ("name", "description", "hot-paths", "devices", "size-bounds")
_BOUND_KEYS = ("holds", "names", "arrays", "aliases", "typical")


@dataclass(frozen=True)
class SizeBound:
    """A size bound (``max_num_reqs``): what it bounds, the names of things it bounds, and
    a typical value for messages."""

    holds: str
    names: tuple[str, ...]
    typical: int | None = None
    aliases: tuple[str, ...] = ()
    # Arrays with one row per item the bound counts (their length is limited by it).
    arrays: tuple[str, ...] = ()


@dataclass(frozen=True)
class PackData:
    """Every loaded pack, merged."""

    names: tuple[str, ...] = ()
    # Qualified-name patterns (fnmatch) of per-step functions: "execute_model", "*Scheduler.schedule".
    hot_path_entry_points: tuple[str, ...] = ()
    # Methods that are per-step when their class is an nn.Module ("forward").
    module_entry_points: tuple[str, ...] = ()
    # Patterns of start-up functions: never hot, whoever calls them.
    startup_functions: tuple[str, ...] = ()
    # Context managers whose block marks syncs as intended.
    sync_allowed_contexts: tuple[str, ...] = ()
    # Callees (qualified-name patterns) that make a function with a loop calling them hot.
    loop_callees: tuple[str, ...] = ()
    # Class-name patterns of nn.Module-like objects, and factories that return them.
    module_classes: tuple[str, ...] = ()
    module_factories: tuple[str, ...] = ()
    # Class-name patterns of code that runs on the GPU (its `device` is CUDA).
    cuda_classes: tuple[str, ...] = ()
    # Modules whose import marks a file as code for another accelerator (not CUDA).
    non_cuda_imports: tuple[str, ...] = ()
    # Name patterns of values kept on the host by convention (multimodal grid metadata).
    host_names: tuple[str, ...] = ()
    # bound attribute (e.g. "max_num_reqs") -> (what it bounds, names bounded by it)
    size_bounds: Mapping[str, "SizeBound"] = field(default_factory=dict)
    # A tensor with no evidence of its device: "unknown" or "cuda" (see DEFAULT_DEVICES).
    default_device: str = "unknown"


def builtin_pack_dirs() -> list[Path]:
    """Where named packs live: inside the installed wheel, or the source tree's rules/."""
    here = Path(__file__).resolve().parent
    folders = [here / "_packs"]
    if (here.parent / "pyproject.toml").is_file():  # a source checkout (editable install)
        folders.append(here.parent / "rules")
    return folders


def builtin_pack_names() -> list[str]:
    """The names of the packs that ship with reviewbot."""
    names: set[str] = set()
    for folder in builtin_pack_dirs():
        if folder.is_dir():
            names.update(p.stem for p in folder.glob("*.yml"))
    return sorted(names)


def _locate(spec: str, root: Path, source: str, key: str) -> Path:
    if spec.endswith((".yml", ".yaml")) or "/" in spec or "\\" in spec:
        # A pack of the project's own: a relative path that stays inside the project (a
        # pull request's configuration must not make reviewbot read files elsewhere).
        if Path(spec).is_absolute() or spec.startswith(("/", "\\")) or ":" in spec:
            raise ConfigError(source, key, f"rule pack {spec!r}: expected a pack name or a "
                              "path relative to the configuration's folder")
        project = root.resolve()
        path = root / spec
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            resolved = None
        if resolved is None or not (resolved == project or project in resolved.parents):
            raise ConfigError(source, key, f"rule pack {spec!r} is outside the project "
                              f"({project}); only packs inside it are read")
        if not path.is_file():
            raise ConfigError(source, key, f"no rule pack file {spec!r} (looked in {root})")
        return path
    if not spec.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(source, key, f"unknown rule pack {spec!r}; expected one of "
                          f"{', '.join(builtin_pack_names()) or 'none'} or a path to a .yml "
                          "file")
    for folder in builtin_pack_dirs():
        path = folder / f"{spec}.yml"
        if path.is_file():
            return path
    raise ConfigError(source, key, f"unknown rule pack {spec!r}; expected one of "
                      f"{', '.join(builtin_pack_names()) or 'none'} or a path to a .yml file")


def _strings(value: Any, shown: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(shown, key, "expected a list of non-empty strings")
    return tuple(value)


def load_pack(path: Path) -> dict[str, Any]:
    """Read and validate one pack file."""
    from reviewbot import yaml_load

    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(shown, "<file>", "cannot be read (not UTF-8)") from None
    except OSError as exc:
        raise ConfigError(shown, "<file>", f"cannot be read ({exc.strerror})") from None
    data = yaml_load.load(text, shown)
    if not isinstance(data, dict):
        raise ConfigError(shown, "<top level>", "expected a table with name, description, ...")
    for key in data:
        if key not in _TOP_KEYS:
            raise ConfigError(shown, str(key), f"unknown key; expected one of: {', '.join(_TOP_KEYS)}")
    if not isinstance(data.get("name"), str):
        raise ConfigError(shown, "name", "expected a string")
    pack: dict[str, Any] = {"name": data["name"]}
    for section, keys in _LIST_KEYS.items():
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(shown, section, f"expected a table with {', '.join(keys)}")
        for key, value in table.items():
            if section == "devices" and key == "default":
                if value not in DEFAULT_DEVICES:
                    raise ConfigError(shown, "devices.default",
                                      f"expected one of: {', '.join(DEFAULT_DEVICES)}")
                pack["default"] = value
                continue
            if key not in keys:
                raise ConfigError(shown, f"{section}.{key}",
                                  f"unknown key; expected one of: {', '.join(keys)}")
            pack[key] = _strings(value, shown, f"{section}.{key}")
    bounds = data.get("size-bounds", {})
    if not isinstance(bounds, dict):
        raise ConfigError(shown, "size-bounds", "expected a table of bound name -> {holds, names}")
    pack["size-bounds"] = {}
    for bound, spec in bounds.items():
        key = f"size-bounds.{bound}"
        if not isinstance(spec, dict):
            raise ConfigError(shown, key, "expected a table with holds and names")
        for sub in spec:
            if sub not in _BOUND_KEYS:
                raise ConfigError(shown, f"{key}.{sub}", "unknown key; expected holds, names, arrays, aliases or typical")
        if not isinstance(spec.get("holds"), str):
            raise ConfigError(shown, f"{key}.holds", "expected a string")
        typical = spec.get("typical")
        if typical is not None and (isinstance(typical, bool) or not isinstance(typical, int)
                                    or typical <= 0):
            raise ConfigError(shown, f"{key}.typical", "expected a positive integer")
        pack["size-bounds"][str(bound)] = SizeBound(
            spec["holds"], _strings(spec.get("names"), shown, f"{key}.names"), typical,
            _strings(spec.get("aliases", []), shown, f"{key}.aliases"),
            _strings(spec.get("arrays", []), shown, f"{key}.arrays"))
    return pack


def load_packs(specs: Sequence[str], root: Path, source: str | None,
               key: str = "rule-packs") -> PackData:
    """Load and merge the packs a configuration names."""
    names: list[str] = []
    lists: dict[str, list[str]] = {key: [] for keys in _LIST_KEYS.values() for key in keys}
    bounds: dict[str, SizeBound] = {}
    default_device = "unknown"
    for spec in specs:
        pack = load_pack(_locate(spec, root, source or "<defaults>", key))
        names.append(pack["name"])
        default_device = pack.get("default", default_device)
        for list_key, values in lists.items():
            values += pack.get(list_key, ())
        for bound, new in pack["size-bounds"].items():
            old = bounds.get(bound, SizeBound(new.holds, (), None))
            bounds[bound] = SizeBound(new.holds, tuple(dict.fromkeys((*old.names, *new.names))),
                                      new.typical if new.typical is not None else old.typical,
                                      tuple(dict.fromkeys((*old.aliases, *new.aliases))),
                                      tuple(dict.fromkeys((*old.arrays, *new.arrays))))

    def unique(list_key: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lists[list_key]))

    return PackData(
        names=tuple(names),
        hot_path_entry_points=unique("entry-points"),
        module_entry_points=unique("module-entry-points"),
        startup_functions=unique("startup"),
        sync_allowed_contexts=unique("sync-allowed-contexts"),
        loop_callees=unique("loop-callees"),
        module_classes=unique("module-classes"),
        module_factories=unique("module-factories"),
        cuda_classes=unique("cuda-classes"),
        non_cuda_imports=unique("non-cuda-imports"),
        host_names=unique("host-names"),
        size_bounds=bounds,
        default_device=default_device,
    )


def with_packs(packs: PackData, more: PackData) -> PackData:
    """``packs`` extended by ``more`` (as if listed after them)."""
    import dataclasses

    merged: dict[str, Any] = {}
    for item in dataclasses.fields(PackData):
        old, new = getattr(packs, item.name), getattr(more, item.name)
        if item.name == "size_bounds":
            merged[item.name] = {**old, **new}
        elif item.name == "default_device":
            merged[item.name] = new if new != "unknown" else old
        else:
            merged[item.name] = tuple(dict.fromkeys((*old, *new)))
    return PackData(**merged)
