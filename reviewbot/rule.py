"""The base classes of every rule, their options and their tested examples.

A rule only reports: it never prints, writes or reads files. The engine gives it a
:class:`~reviewbot.context.FileContext` per file and collects what it reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

if TYPE_CHECKING:
    from reviewbot.context import FileContext, RunContext
    from reviewbot.finding import Finding, Severity

FixSafety = str  # "none" | "safe" | "unsafe" | "display" | "sometimes"


@dataclass(frozen=True)
class Option:
    """A per-rule option, set under ``[tool.reviewbot.rules.CODE]``."""

    name: str
    default: Any
    help: str
    # The accepted Python types (bool is never accepted where int/float is expected).
    types: tuple[type, ...]
    # Returns an error text for a value of the right type that is still wrong.
    check: Callable[[Any], str | None] | None = None

    def describe_type(self) -> str:
        """The expected type in words, for error messages."""
        names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
                 list: "a list of strings"}
        return " or ".join(names.get(t, t.__name__) for t in self.types)

    def validate(self, value: Any) -> str | None:
        """Return why ``value`` is not acceptable, or None."""
        if isinstance(value, bool) and bool not in self.types:
            return f"expected {self.describe_type()}, got a boolean"
        if not isinstance(value, self.types):
            return f"expected {self.describe_type()}, got {type(value).__name__}"
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            return "expected a list of strings"
        if self.check is not None:
            return self.check(value)
        return None


@dataclass(frozen=True)
class Valid:
    """Source that the rule must not report."""

    code: str
    options: Mapping[str, Any] = field(default_factory=dict)
    path: str = "example.py"
    # Entries of a `reviewbot trace` document to check the source against (RB108).
    trace: tuple[Mapping[str, Any], ...] | None = None


@dataclass(frozen=True)
class Invalid:
    """Source that the rule must report, at ``line`` when given; ``expected_fix``: the
    source once ``reviewbot fix`` has applied the rule's fixes (the test suite applies them
    and compares, and checks that a second run changes nothing)."""

    code: str
    line: int | None = None
    message_contains: str | None = None
    expected_fix: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    path: str = "example.py"
    # Entries of a `reviewbot trace` document to check the source against (RB108).
    trace: tuple[Mapping[str, Any], ...] | None = None


class Rule:
    """A rule: a stable code, a kebab-case name, its docs in the class docstring.

    Subclasses implement :meth:`check_file` (per file) and, for rules over the whole
    checked set, :meth:`finish`, which sees the facts every file recorded.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    severity: ClassVar["Severity"] = "warning"
    default_enabled: ClassVar[bool] = True
    fix_safety: ClassVar[FixSafety] = "none"
    options: ClassVar[tuple[Option, ...]] = ()
    # A file that contains none of these words cannot hold a finding of this rule,
    # so the rule (and any parse only it needs) is skipped. None: every file.
    triggers: ClassVar[tuple[str, ...] | None] = None
    # Reported by the engine itself (parse errors, crashes): always on, never run.
    internal: ClassVar[bool] = False
    # Reads facts of the whole project (hot paths linked across modules): runs after the
    # project index is linked, on the files that the link or the rule's own words admit.
    project_facts: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []
    # Which parser the rule reads, as `reviewbot rules` shows it: "cst" (a LibCST visitor),
    # "ast" (CPython's ast), "analysis" (what a `reviewbot trace` run records), or
    # "internal" (reported by the engine itself).
    kind: ClassVar[str] = "ast"

    def __init__(self, settings: Mapping[str, Any], ctx: "FileContext | None" = None) -> None:
        self.settings = settings
        self.ctx = ctx

    @classmethod
    def default_settings(cls) -> dict[str, Any]:
        """Every option at its default."""
        return {opt.name: opt.default for opt in cls.options}

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """Whether a file with this text can hold a finding of (or a fact for) this rule.

        Must never be False for a file where the rule would report: the engine skips
        the rule, and any parse only it needs, when it is.
        """
        return cls.triggers is None or any(word in text for word in cls.triggers)

    @classmethod
    def applies_to_linked(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """Like :meth:`applies_to`, for a file where the link phase found hot functions."""
        return cls.applies_to(text, settings, packs)

    def check_file(self, ctx: "FileContext") -> None:
        """Report the findings of one file through ``ctx``."""

    def finish(self, facts: Mapping[str, Any], run: "RunContext") -> list["Finding"]:
        """Report findings over the whole checked set from each file's facts."""
        return []

    @classmethod
    def docs(cls) -> str:
        """The rule's documentation, as ``reviewbot rules CODE`` prints it."""
        import inspect

        return inspect.cleandoc(cls.__doc__ or "")


class AstRule(Rule):
    """A rule over CPython's ``ast`` of the file (``ctx.ast_tree``, ``ctx.definitions``,
    ``ctx.gpu``): it implements :meth:`Rule.check_file`."""

    kind = "ast"


class CstRule(Rule):
    """A rule that visits the LibCST tree.

    Define ``visit_<Node>`` / ``leave_<Node>`` methods as on a
    ``libcst.BatchableCSTVisitor`` and list the metadata providers it reads in
    ``METADATA_DEPENDENCIES`` (``reviewbot.providers`` has the analysis's facts: devices,
    hot paths, sync-allowed blocks, spans); the engine parses the file once and resolves
    the union of all rules' metadata once, each analysis fact when a rule first reads it.

    ``CANDIDATES`` gates the parse: the names (calls, attributes, statements) the rule
    matches; a file whose text holds none of them is not parsed with LibCST for it. None:
    every file. ``HOT_ONLY``: the rule reports only inside hot functions, so a file with
    none (of its own or through the project's link) is skipped too, and so is the body of
    every function that is not hot. ``LOCAL_CANDIDATES``: the rule reports only inside a
    function whose own text holds a candidate (the node it matches spells it), so the
    other functions are not walked for it. ``NEEDS_CUDA``: the rule reports only on an
    expression the analysis labels a CUDA tensor, so (unless its ``include-unknown`` is
    on) a function where the analysis labels none is not parsed for it. ``cuda_sites``
    narrows that: given a node of CPython's tree of the function, the expressions the rule
    reads a CUDA label of to report at that node (the receiver of ``.tolist()``, the
    operands of an ``if``'s test); a function where the analysis labels none of them a
    CUDA tensor is not parsed or walked for the rule. None: a CUDA label anywhere in the
    function will do. ``host_sites`` narrows it further for a rule that reports a copy
    between the devices only where the other side is the host: given the node and the
    kind of the label the analysis gave an expression (None: no label), whether the node
    can still be reported (``.to(x)`` only where ``x`` is labelled the host). None: it can.
    """

    kind = "cst"
    METADATA_DEPENDENCIES: ClassVar[tuple[Any, ...]] = ()
    CANDIDATES: ClassVar[tuple[str, ...] | None] = None
    HOT_ONLY: ClassVar[bool] = False
    LOCAL_CANDIDATES: ClassVar[bool] = False
    NEEDS_CUDA: ClassVar[bool] = False
    cuda_sites: ClassVar[Callable[[Any], Sequence[Any]] | None] = None
    host_sites: ClassVar[Callable[[Any, Callable[[Any], str | None]], bool] | None] = None
    # The rule reads and reports nothing outside the functions it is active in (by
    # HOT_ONLY and LOCAL_CANDIDATES), and reads only reviewbot's providers: the engine may
    # parse those functions alone instead of the module.
    FUNCTION_LOCAL: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A rule that reads the project's facts (hot paths, other modules' devices) runs
        # after the link phase, unless it says otherwise.
        if "project_facts" not in cls.__dict__:
            cls.project_facts = cls.HOT_ONLY or any(
                getattr(p, "project_facts", False) for p in cls.METADATA_DEPENDENCIES)

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """A candidate name in the text (and, for ``HOT_ONLY``, an entry point's word)."""
        if cls.triggers is not None and not any(word in text for word in cls.triggers):
            return False
        if cls.CANDIDATES is not None and not any(word in text for word in cls.CANDIDATES):
            return False
        if cls.HOT_ONLY and packs is not None:
            from reviewbot.analysis.gpu import trigger_words

            # Every file with a hot function of its own spells an entry point's word.
            words = trigger_words(packs)
            return not words or any(word in text for word in words)
        return True

    @classmethod
    def applies_to_linked(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """In a file with functions hot through other modules: a candidate name."""
        if cls.triggers is not None and not any(word in text for word in cls.triggers):
            return False
        return cls.CANDIDATES is None or any(word in text for word in cls.CANDIDATES)
    # Filled by the engine: provider -> {node: value}, resolved once per file.
    metadata: Mapping[Any, Mapping[Any, Any]] = {}

    def get_metadata(self, provider: Any, node: Any, default: Any = None) -> Any:
        """The value ``provider`` computed for ``node`` (``default`` when it has none)."""
        value = self.metadata.get(provider, {}).get(node, default)
        if type(value).__name__ == "LazyValue":  # LibCST computes some providers on demand
            value = value()
        return value

    def report(self, node: Any, message: str, fix: Any = None) -> None:
        """Report ``node`` with ``message`` (and an optional fix)."""
        assert self.ctx is not None
        self.ctx.report_node(self, node, message, fix)
