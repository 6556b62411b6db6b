"""Configuration: discovery, validation (exit 2 naming file and key), overrides, options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewbot.config import Overrides, build_config, load_config, resolve_selection
from reviewbot.errors import ConfigError

UNDOCUMENTED = "def documented():\n    '''Yes.'''\n\ndef bare():\n    pass\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def rb301(result) -> list[dict]:
    return [f for f in json.loads(result.out) if f["code"] == "RB301"]


def test_per_rule_option_reaches_the_rule_from_pyproject(tmp_path, run_cli):
    write(tmp_path / "src" / "m.py", UNDOCUMENTED)  # 50% documented
    write(tmp_path / "pyproject.toml", "[tool.reviewbot.rules.RB301]\nthreshold = 40\n")
    passed = run_cli(["check", "src", "--no-cache", "--output-format", "json"], cwd=tmp_path)
    assert passed.code == 0 and rb301(passed) == []
    write(tmp_path / "pyproject.toml", "[tool.reviewbot.rules.RB301]\nthreshold = 60\n")
    failed = run_cli(["check", "src", "--no-cache", "--output-format", "json"], cwd=tmp_path)
    assert failed.code == 1
    assert "below the threshold of 60.00%" in rb301(failed)[0]["message"]


def test_boolean_option_reaches_the_rule_from_yaml(tmp_path, run_cli):
    write(tmp_path / "m.py", "def _private():\n    pass\n\ndef public():\n    '''Doc.'''\n")
    write(tmp_path / ".reviewbot.yml", "rules:\n  RB301:\n    threshold: 100\n")
    assert run_cli(["check", ".", "--no-cache"], cwd=tmp_path).code == 1
    write(tmp_path / ".reviewbot.yml",
          "rules:\n  RB301:\n    threshold: 100\n    ignore-private: true\n")
    assert run_cli(["check", ".", "--no-cache"], cwd=tmp_path).code == 0


def test_command_line_option_overrides_the_file(tmp_path, run_cli):
    write(tmp_path / "m.py", UNDOCUMENTED)
    write(tmp_path / "pyproject.toml", "[tool.reviewbot.rules.RB301]\nthreshold = 40\n")
    result = run_cli(["check", ".", "--no-cache", "--option", "RB301.threshold=90"],
                     cwd=tmp_path)
    assert result.code == 1 and "90.00%" in result.out


def test_config_found_by_walking_up_from_the_checked_path(tmp_path, run_cli):
    write(tmp_path / "proj" / "pkg" / "deep" / "m.py", UNDOCUMENTED)
    write(tmp_path / "proj" / "pyproject.toml", "[tool.reviewbot.rules.RB301]\nthreshold = 10\n")
    result = run_cli(["check", "proj/pkg/deep", "--no-cache"], cwd=tmp_path)
    assert result.code == 0, result.out


def test_pyproject_without_our_section_is_passed_over(tmp_path):
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    write(tmp_path / "sub" / "pyproject.toml", "[tool.black]\nline-length = 80\n")
    config = load_config([tmp_path / "sub"], None, cwd=tmp_path)
    assert config.source is None


def test_yaml_wins_over_pyproject_in_the_same_folder(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.reviewbot]\nignore = ['RB301']\n")
    write(tmp_path / ".reviewbot.yml", "extend-select: [RB302]\n")
    config = load_config([tmp_path], None, cwd=tmp_path)
    assert config.source.endswith(".reviewbot.yml")
    assert "RB302" in config.enabled and "RB301" in config.enabled


def test_explicit_config_file_overrides_discovery(tmp_path, run_cli):
    write(tmp_path / "m.py", UNDOCUMENTED)
    write(tmp_path / "pyproject.toml", "[tool.reviewbot.rules.RB301]\nthreshold = 90\n")
    write(tmp_path / "ci" / "lenient.yml", "rules:\n  RB301:\n    threshold: 10\n")
    assert run_cli(["check", ".", "--no-cache"], cwd=tmp_path).code == 1
    assert run_cli(["check", ".", "--no-cache", "--config", "ci/lenient.yml"],
                   cwd=tmp_path).code == 0


@pytest.mark.parametrize("text,key,expected", [
    ("[tool.reviewbot]\nselct = ['RB301']\n", "tool.reviewbot.selct", "did you mean 'select'"),
    ("[tool.reviewbot]\nselect = 'RB301'\n", "tool.reviewbot.select", "expected a list"),
    ("[tool.reviewbot]\nselect = ['RB999']\n", "tool.reviewbot.select", "unknown rule code"),
    ("[tool.reviewbot]\nignore = ['XYZ']\n", "tool.reviewbot.ignore", "unknown rule code"),
    ("[tool.reviewbot]\nrespect-gitignore = 'yes'\n", "tool.reviewbot.respect-gitignore",
     "expected a boolean"),
    ("[tool.reviewbot.rules.RB301]\nthreshold = 'high'\n", "tool.reviewbot.rules.RB301.threshold",
     "expected an integer or a number"),
    ("[tool.reviewbot.rules.RB301]\nthreshold = 180\n", "tool.reviewbot.rules.RB301.threshold",
     "from 0 to 100"),
    ("[tool.reviewbot.rules.RB301]\nthreshold = true\n", "tool.reviewbot.rules.RB301.threshold",
     "got a boolean"),
    ("[tool.reviewbot.rules.RB301]\nthresold = 80\n", "tool.reviewbot.rules.RB301.thresold",
     "unknown option for RB301"),
    ("[tool.reviewbot.rules.RB999]\nthreshold = 80\n", "tool.reviewbot.rules.RB999",
     "unknown rule code"),
    ("[tool.reviewbot.rules]\nRB301 = 80\n", "tool.reviewbot.rules.RB301", "expected a table"),
    ("[tool.reviewbot.per-file-ignores]\n'tests/*' = 'RB301'\n",
     "tool.reviewbot.per-file-ignores.tests/*", "expected a list"),
    ("[tool.reviewbot.per-file-ignores]\n'tests/*' = ['RB9']\n",
     "tool.reviewbot.per-file-ignores.tests/*", "unknown rule code"),
    ("[tool.reviewbot]\nexclude = [1, 2]\n", "tool.reviewbot.exclude", "expected a list"),
    ("[tool.reviewbot]\nrule-packs = ['no-such-pack']\n", "tool.reviewbot.rule-packs",
     "unknown rule pack"),
    ("[tool.reviewbot]\nrule-packs = ['missing.yml']\n", "tool.reviewbot.rule-packs",
     "no rule pack file"),
    ("[tool.reviewbot.rules.RB301]\nexclude = 'tests'\n", "tool.reviewbot.rules.RB301.exclude",
     "expected a list of strings"),
    ("[tool.reviewbot\nselect = []\n", "<file>", "invalid TOML"),
    ("[tool]\nreviewbot = 3\n", "tool.reviewbot", "expected a table"),
])
def test_bad_pyproject_exits_2_naming_file_and_key(tmp_path, run_cli, text, key, expected):
    write(tmp_path / "m.py", "x = 1\n")
    write(tmp_path / "pyproject.toml", text)
    result = run_cli(["check", ".", "--no-cache"], cwd=tmp_path)
    assert result.code == 2
    assert result.out == ""  # nothing was checked
    line = result.err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "pyproject.toml" in line and key in line and expected in line, line


@pytest.mark.parametrize("text,key,expected", [
    ("select: [RB301\n", "<file>", "invalid YAML"),
    ("- RB301\n", "<top level>", "expected a table"),
    ("rules:\n  RB301:\n    threshold: [80]\n", "rules.RB301.threshold", "got list"),
    ("per-file-ignores: [a, b]\n", "per-file-ignores", "expected a table"),
    ("unknown: 1\n", "unknown", "unknown key"),
])
def test_bad_yaml_exits_2_naming_file_and_key(tmp_path, run_cli, text, key, expected):
    write(tmp_path / "m.py", "x = 1\n")
    write(tmp_path / ".reviewbot.yml", text)
    result = run_cli(["check", ".", "--no-cache"], cwd=tmp_path)
    assert result.code == 2
    line = result.err.strip()
    assert ".reviewbot.yml" in line and key in line and expected in line, line


@pytest.mark.parametrize("args,expected", [
    (["--select", "RB999"], "--select"),
    (["--ignore", "nope"], "--ignore"),
    (["--option", "RB301.threshold=abc"], "--option RB301.threshold"),
    (["--option", "RB301.nothing=1"], "unknown option"),
    (["--option", "RB999.x=1"], "unknown rule code"),
    (["--option", "threshold"], "expected CODE.option=value"),
    (["--jobs", "0"], "expected at least 1"),
    (["--output-format", "xml"], "invalid choice"),
    (["--config", "missing.toml"], "configuration file not found"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, run_cli, args, expected):
    write(tmp_path / "m.py", "x = 1\n")
    result = run_cli(["check", ".", "--no-cache", *args], cwd=tmp_path)
    assert result.code == 2
    assert expected in result.err and "Traceback" not in result.err


def test_per_file_ignores_drop_files_from_the_count(tmp_path, run_cli):
    write(tmp_path / "src" / "m.py", "def f():\n    '''Doc.'''\n")
    write(tmp_path / "scripts" / "tool.py", "def a():\n    pass\n\ndef b():\n    pass\n")
    assert run_cli(["check", ".", "--no-cache"], cwd=tmp_path).code == 1
    write(tmp_path / "pyproject.toml",
          "[tool.reviewbot.per-file-ignores]\n'scripts/*' = ['RB301']\n")
    result = run_cli(["check", ".", "--no-cache"], cwd=tmp_path)
    assert result.code == 0, result.out


def test_tests_are_left_out_of_coverage_by_default(tmp_path, run_cli):
    write(tmp_path / "src" / "m.py", "def f():\n    '''Doc.'''\n")
    write(tmp_path / "tests" / "test_m.py", "def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    assert run_cli(["check", ".", "--no-cache"], cwd=tmp_path).code == 0
    write(tmp_path / ".reviewbot.yml", "rules:\n  RB301:\n    exclude: []\n")
    assert run_cli(["check", ".", "--no-cache"], cwd=tmp_path).code == 1


def test_selection_semantics():
    assert resolve_selection(None, [], []) >= {"RB301"}
    assert "RB302" not in resolve_selection(None, [], [])
    assert "RB302" in resolve_selection(None, ["RB302"], [])
    # A prefix turns on the rules under it that are on by default, a code any rule.
    assert "RB302" not in resolve_selection(["RB3"], [], [])
    assert {"RB301", "RB302"} <= resolve_selection(["ALL"], [], [])
    assert "RB301" not in resolve_selection(None, [], ["RB3"])
    # Internal findings (syntax errors, crashes) are always on.
    assert {"RB001", "RB002", "RB003"} <= resolve_selection(["RB302"], [], ["RB0"])


def test_command_line_selection_overrides_the_file(tmp_path):
    config = build_config({"select": ["RB302"]}, "f", "", tmp_path,
                          Overrides(select=("RB301",)))
    assert "RB301" in config.enabled and "RB302" not in config.enabled


def test_config_error_message_names_file_key_and_expectation():
    error = ConfigError("pyproject.toml", "tool.reviewbot.select", "expected a list")
    assert str(error) == "pyproject.toml: tool.reviewbot.select: expected a list"


@pytest.mark.parametrize("pack,key,expected", [
    ("name: mine\nhot-paths:\n  entry-points: step\n", "hot-paths.entry-points",
     "expected a list"),
    ("name: mine\nhotpaths: {}\n", "hotpaths", "unknown key"),
    ("hot-paths: {}\n", "name", "expected a string"),
    ("name: mine\nsize-bounds:\n  max_num_reqs:\n    names: [num_reqs]\n",
     "size-bounds.max_num_reqs.holds", "expected a string"),
    ("name: [\n", "<file>", "invalid YAML"),
])
def test_bad_user_rule_pack_exits_2_naming_the_pack_and_key(tmp_path, run_cli, pack, key,
                                                            expected):
    write(tmp_path / "m.py", "x = 1\n")
    write(tmp_path / "packs" / "mine.yml", pack)
    write(tmp_path / ".reviewbot.yml", "rule-packs: [inference-engines, packs/mine.yml]\n")
    result = run_cli(["check", ".", "--no-cache"], cwd=tmp_path)
    assert result.code == 2
    assert "mine.yml" in result.err and key in result.err and expected in result.err, result.err


def test_user_rule_pack_extends_the_shipped_one(tmp_path):
    from reviewbot.packs import load_packs

    write(tmp_path / "mine.yml", "name: mine\nhot-paths:\n  entry-points: [decode_step]\n"
          "size-bounds:\n  max_num_reqs:\n    holds: requests\n    names: [n_active]\n")
    packs = load_packs(["inference-engines", "mine.yml"], tmp_path, None)
    assert packs.names == ("inference-engines", "mine")
    assert "*ModelRunner.execute_model" in packs.hot_path_entry_points
    assert "decode_step" in packs.hot_path_entry_points
    assert {"num_reqs", "n_active"} <= set(packs.size_bounds["max_num_reqs"].names)


# extend, extend-per-file-ignores, REVIEWBOT_CACHE_DIR ---------------------------------------
def test_extend_inherits_the_other_file_relative_to_this_one(tmp_path, run_cli):
    write(tmp_path / "pyproject.toml",
          '[tool.reviewbot]\nignore = ["RB101"]\nextend-exclude = ["gen/"]\n'
          '[tool.reviewbot.rules.RB301]\nthreshold = 60\nignore-private = true\n')
    sub = tmp_path / "pkg"
    write(sub / ".reviewbot.yml", "extend: ../pyproject.toml\nrules:\n  RB301:\n"
                                  "    threshold: 40\n")
    config = load_config([sub], None)
    assert "RB101" not in config.enabled  # inherited
    assert config.settings["RB301"]["threshold"] == 40.0  # this file wins ...
    assert config.settings["RB301"]["ignore-private"] is True  # ... option by option
    assert "gen/" in config.exclude
    assert config.root == sub.resolve()  # patterns stay relative to the file found
    write(sub / "m.py", UNDOCUMENTED)
    result = run_cli(["check", ".", "--no-cache"], cwd=sub)
    assert result.code == 0, result.out  # 50% documented, threshold 40


def test_extend_layers_lists_as_ruff_does():
    from reviewbot.config import merge_tables

    base = {"ignore": ["RB101"], "extend-select": ["RB302"], "extend-exclude": ["a/"],
            "extend-per-file-ignores": {"t/*": ["RB301"]}, "max-file-size": 10}
    assert merge_tables(base, {"ignore": ["RB102"], "extend-exclude": ["b/"],
                               "extend-per-file-ignores": {"t/*": ["RB302"]}}) == {
        "ignore": ["RB101", "RB102"], "extend-select": ["RB302"], "extend-exclude": ["a/", "b/"],
        "extend-per-file-ignores": {"t/*": ["RB301", "RB302"]}, "max-file-size": 10}
    assert merge_tables(base, {"select": ["RB3"], "exclude": [], "per-file-ignores": {}}) == {
        "select": ["RB3"], "exclude": [], "per-file-ignores": {}, "max-file-size": 10}


@pytest.mark.parametrize("files,message", [
    ({"a.toml": 'extend = "missing.toml"\n'}, "extend: missing.toml: no such configuration file"),
    ({"a.toml": 'extend = "b.toml"\n', "b.toml": 'extend = "a.toml"\n'},
     "a cycle of extended configuration files"),
    ({"a.toml": 'extend = "a.toml"\n'}, "a cycle of extended configuration files"),
    ({"a.toml": "extend = 3\n"}, "expected a path to another configuration file"),
    ({"a.toml": 'extend = "b.toml"\n', "b.toml": 'selct = ["RB3"]\n'},
     "b.toml: selct: unknown key"),  # named where it is written
    ({"a.toml": 'extend = "m.py"\n', "m.py": "x = 1\n"}, "expected a pyproject.toml"),
])
def test_a_bad_extend_is_one_line_and_exit_2(tmp_path, run_cli, files, message):
    for name, text in files.items():
        write(tmp_path / name, text)
    write(tmp_path / "m.py", "x = 1\n")
    result = run_cli(["check", "m.py", "--no-cache", "--config", "a.toml"], cwd=tmp_path)
    assert result.code == 2
    assert result.err.startswith("reviewbot: error: ") and message in result.err, result.err
    assert len(result.err.splitlines()) == 1 and "Traceback" not in result.err


def test_a_long_chain_of_extends_is_refused(tmp_path, run_cli):
    for number in range(20):
        write(tmp_path / f"c{number}.toml", f'extend = "c{number + 1}.toml"\n')
    write(tmp_path / "c20.toml", "")
    write(tmp_path / "m.py", "x = 1\n")
    result = run_cli(["check", "m.py", "--config", "c0.toml"], cwd=tmp_path)
    assert result.code == 2 and "more than 16 configuration files" in result.err


def test_extend_per_file_ignores_adds_to_per_file_ignores(tmp_path, run_cli):
    write(tmp_path / "pyproject.toml", "[tool.reviewbot]\nextend = \"base.toml\"\n"
          '[tool.reviewbot.extend-per-file-ignores]\n"scripts/*" = ["RB301"]\n')
    write(tmp_path / "base.toml", '[per-file-ignores]\n"gen/*" = ["RB301"]\n')
    config = load_config([tmp_path], None)
    assert [p for p, _ in config.per_file_ignores] == ["gen/*", "scripts/*"]
    write(tmp_path / "scripts" / "a.py", UNDOCUMENTED)
    write(tmp_path / "gen" / "b.py", UNDOCUMENTED)
    assert run_cli(["check", ".", "--no-cache"], cwd=tmp_path).code == 0
    both = build_config({"per-file-ignores": {"a/*": ["RB3"]},
                         "extend-per-file-ignores": {"b/*": ["RB301"]}}, None, "", tmp_path)
    assert [p for p, _ in both.per_file_ignores] == ["a/*", "b/*"]
    with pytest.raises(ConfigError, match="extend-per-file-ignores: expected a table"):
        build_config({"extend-per-file-ignores": []}, None, "", tmp_path)


def test_the_cache_folder_from_the_environment(tmp_path, run_cli, monkeypatch):
    write(tmp_path / "m.py", UNDOCUMENTED)
    monkeypatch.setenv("REVIEWBOT_CACHE_DIR", str(tmp_path / "env-cache"))
    result = run_cli(["check", ".", "-v"], cwd=tmp_path)
    assert f"cache: {tmp_path / 'env-cache'}" in result.err
    assert (tmp_path / "env-cache").is_dir() and not (tmp_path / ".reviewbot_cache").exists()
    result = run_cli(["check", ".", "-v", "--cache-dir", "flag-cache"], cwd=tmp_path)
    assert "cache: " in result.err and "flag-cache" in result.err  # the flag wins
    assert (tmp_path / "flag-cache").is_dir()
    monkeypatch.setenv("REVIEWBOT_CACHE_DIR", "")  # empty: the default
    run_cli(["check", "."], cwd=tmp_path)
    assert (tmp_path / ".reviewbot_cache").is_dir()
