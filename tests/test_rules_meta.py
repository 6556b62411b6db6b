"""Every rule: unique code and name, documented in Ruff's sections, and its examples hold."""

from __future__ import annotations

import re

import pytest

from reviewbot import registry
from reviewbot.cli import rules_markdown
from reviewbot.rule import Rule

from conftest import REPO, check_source, fix_source

SECTIONS = ["## What it does", "## Why is this bad?", "## Example", "## Use instead",
            "## Options", "## Fix safety"]


def test_codes_are_unique():
    codes = [r.code for r in registry.RULES]
    assert len(codes) == len(set(codes)), f"two rules share a code: {codes}"


def test_names_are_unique_and_kebab_case():
    names = [r.name for r in registry.RULES]
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", name), name


def test_codes_follow_the_families():
    for rule in registry.RULES:
        assert re.fullmatch(r"RB[0-3][0-9]{2}", rule.code), rule.code
        assert rule.internal == rule.code.startswith("RB0")


def test_registry_detects_a_duplicate_code():
    # The uniqueness test above must be able to fail: a registry with a copy fails it.
    class Copy(Rule):
        code = registry.RULES[-1].code
        name = "copy"

    codes = [r.code for r in (*registry.RULES, Copy)]
    assert len(codes) != len(set(codes))


@pytest.mark.parametrize("rule", registry.RULES, ids=lambda r: r.code)
def test_docs_have_every_section_in_order(rule):
    docs = rule.docs()
    positions = [docs.find(section) for section in SECTIONS]
    assert all(p >= 0 for p in positions), f"{rule.code} lacks a section: {positions}"
    assert positions == sorted(positions)
    assert rule.summary and not rule.summary.endswith(".")


@pytest.mark.parametrize("rule", registry.RULES, ids=lambda r: r.code)
def test_option_defaults_are_valid(rule):
    for option in rule.options:
        assert option.validate(option.default) is None, option.name


def _examples(kind: str):
    for rule in registry.RULES:
        for i, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind.lower()}-{i}")


@pytest.mark.parametrize("rule,example", list(_examples("VALID")))
def test_valid_examples_are_not_reported(tmp_path, rule, example):
    findings = check_source(tmp_path, example.code, rule, example.options, example.path,
                            trace=example.trace)
    assert [f for f in findings if f.code == rule.code] == []
    assert [f for f in findings if f.code.startswith("RB0")] == []


@pytest.mark.parametrize("rule,example", list(_examples("INVALID")))
def test_invalid_examples_are_reported(tmp_path, rule, example):
    findings = [f for f in check_source(tmp_path, example.code, rule, example.options,
                                        example.path, trace=example.trace)
                if f.code == rule.code]
    assert findings, f"{rule.code} did not report:\n{example.code}"
    if example.line is not None:
        assert findings[0].line == example.line
    if example.message_contains is not None:
        assert example.message_contains in findings[0].message


def test_every_rule_has_examples():
    for rule in registry.RULES:
        if rule.code in ("RB002", "RB003"):  # engine faults: tested in test_engine/test_source
            continue
        assert rule.VALID and rule.INVALID, rule.code


def test_generated_rule_docs_are_current():
    # docs/rules.md is generated: `reviewbot rules --output-format markdown > docs/rules.md`
    assert (REPO / "docs" / "rules.md").read_text(encoding="utf-8") == rules_markdown()


def _fixed_examples():
    for rule in registry.RULES:
        for i, example in enumerate(rule.INVALID):
            if example.expected_fix is not None:
                yield pytest.param(rule, example, id=f"{rule.code}-invalid-{i}")


def test_every_rule_with_a_fix_states_its_fixed_code():
    fixing = {r.code for r in registry.RULES if r.fix_safety in ("safe", "sometimes", "unsafe")}
    stated = {r.code for r in registry.RULES if any(e.expected_fix for e in r.INVALID)}
    assert fixing <= stated, sorted(fixing - stated)


@pytest.mark.parametrize("rule,example", list(_fixed_examples()))
def test_invalid_examples_fix_to_their_expected_code(tmp_path, rule, example):
    fixed = fix_source(tmp_path, example.code, rule, example.options, example.path)
    assert fixed.error is None
    assert fixed.new == example.expected_fix
    compile(fixed.new, example.path, "exec")
    # The fix converges: the fixed code has nothing left to fix.
    again = fix_source(tmp_path, fixed.new, rule, example.options, example.path)
    assert again.error is None and again.new == fixed.new and not again.applied
