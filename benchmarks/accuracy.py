"""Precision and recall of reviewbot's sync rules (RB1xx) on labelled lines of real releases.

The corpus (`benchmarks/corpus/<engine>-<release>.yml`, format in `corpus/FORMAT.md`) labels
lines of vLLM and SGLang wheels as `must_flag` (a blocking GPU->host sync that runs per step)
or `must_not_flag` (a sync-looking call on a host value, or in code that is not per step).
This script fetches each wheel (`trees.py`), runs `reviewbot check` on the whole tree, and
scores the findings on the labelled lines:

- TP: a must_flag line with an RB1xx finding; FN: one without; FP: a must_not_flag line
  with one. Precision = TP / (TP + FP), recall = TP / (TP + FN).
- A finding counts for a line when the line lies between its first and last line.
- Per engine, release and split (`test`: the newest releases, frozen; `tune`: the rest),
  per rule, with the engine packs on (reviewbot's defaults) and off (`--packs off`:
  `engine-packs = false`, the default packs without vllm's or sglang's own, which is what
  an engine without a pack gets), plus the number of RB1xx findings in each tree.

Precision over everything the tool reports, not only labelled lines:
`--sample N --seed S` draws N RB1xx findings per newest tree (`--sample-split tune`: per
tuning tree, to study false alarms without reading the test trees' findings) into
`corpus/samples/<engine>-<release>-seed<S>.yml` (unless it exists), each with an empty
`verdict` (`true` | `conditional` | `false`, defined at `VERDICTS`) and `reason` to fill
by reading the code; once filled, the same command prints the sampled precision, strict
(`true` only) and counting `conditional`.

    python benchmarks/accuracy.py                      # every release, packs on
    python benchmarks/accuracy.py --packs both --json benchmarks/results/accuracy.json
    python benchmarks/accuracy.py --release vllm-0.33.0 --misses   # list FN and FP lines
    python benchmarks/accuracy.py --findings-dir /tmp/run-a   # keep the findings to diff
    python benchmarks/accuracy.py --sample 100 --seed 1

Runs outside CI: the wheels are large and need PyPI.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import DATA, BenchError, tree_for  # noqa: E402

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
SAMPLES = CORPUS / "samples"
SYNC_PREFIX = "RB1"
LABELS = ("must_flag", "must_not_flag")


@dataclass
class Label:
    """One labelled line."""

    engine: str
    release: str
    split: str
    path: str
    line: int
    label: str
    op: str
    snippet: str
    chain: str = ""
    device: str = ""


@dataclass
class Score:
    """Counts for one group of labels."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    missed: list = field(default_factory=list)
    false_alarms: list = field(default_factory=list)

    def add(self, other: "Score") -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.tn += other.tn

    @property
    def precision(self) -> float | None:
        flagged = self.tp + self.fp
        return self.tp / flagged if flagged else None

    @property
    def recall(self) -> float | None:
        positives = self.tp + self.fn
        return self.tp / positives if positives else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None or p + r == 0:
            return None
        return 2 * p * r / (p + r)


class CorpusError(Exception):
    """The corpus is malformed; the message names the file and the entry."""


def load_corpus(only: set[str] | None = None) -> dict[tuple[str, str], list[Label]]:
    """Every corpus file's labels, keyed by (engine, release)."""
    out: dict[tuple[str, str], list[Label]] = {}
    for path in sorted(CORPUS.glob("*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("labels"), list):
            raise CorpusError(f"{path.name}: expected a mapping with a 'labels' list")
        engine, release, split = str(data["engine"]), str(data["release"]), str(data["split"])
        if only and f"{engine}-{release}" not in only:
            continue
        labels = []
        for n, entry in enumerate(data["labels"]):
            if entry.get("label") not in LABELS:
                raise CorpusError(f"{path.name}: label {n}: 'label' must be one of {LABELS}")
            labels.append(Label(engine, release, split, str(entry["path"]), int(entry["line"]),
                                entry["label"], str(entry.get("op", "other")),
                                str(entry.get("snippet", "")), str(entry.get("chain", "")),
                                str(entry.get("device", ""))))
        out[(engine, release)] = labels
    return out


def config_file(packs: str, engine_key: bool = True) -> Path:
    """A configuration with reviewbot's defaults (packs on), or without the engine's own
    pack (off: what an engine without a pack gets; ``engine_key``: False for versions that
    have no engine packs, where off is the same as on)."""
    DATA.mkdir(parents=True, exist_ok=True)
    target = DATA / f"accuracy-packs-{packs}.yml"
    lines = ["respect-gitignore: false\n", "select: [RB1]\n"]
    if packs == "off" and engine_key:  # the default packs, without vllm's or sglang's own
        lines.append("engine-packs: false\n")
    target.write_text("".join(lines), encoding="utf-8")
    return target


def reviewbot() -> str:
    """The console script next to this interpreter, else the one on PATH."""
    local = Path(sys.executable).with_name("reviewbot")
    found = str(local) if local.exists() else shutil.which("reviewbot")
    if not found:
        raise BenchError("reviewbot is not installed in this environment (pip install -e .)")
    return found


def mark_root(tree: Path) -> None:
    """Mark the unpacked wheel as a project root, as its repository's pyproject.toml would
    (else the project would be this repository, which holds the tree)."""
    marker = tree / "pyproject.toml"
    if not marker.exists():
        marker.write_text("# Written by benchmarks/accuracy.py: the root of this project.\n",
                          encoding="utf-8")


def run_check(tree: Path, packs: str, extra: list[str]) -> list[dict]:
    """`reviewbot check` on the whole tree; its RB1xx findings (paths relative to the tree)."""
    mark_root(tree)
    cmd = [reviewbot(), "check", ".", "--output-format", "json", "--exit-zero", "--no-cache",
           "--config", str(config_file(packs)), *extra]
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if proc.returncode == 2 and "engine-packs: unknown key" in proc.stderr:
        cmd[cmd.index("--config") + 1] = str(config_file(packs, engine_key=False))
        proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"reviewbot check failed on {tree.name} (exit {proc.returncode}): {last}")
    findings = json.loads(proc.stdout)
    for finding in findings:
        finding["path"] = Path(finding["path"]).as_posix().removeprefix("./")
    return [f for f in findings if f["code"].startswith(SYNC_PREFIX)]


def stale(labels: list[Label], tree: Path) -> list[str]:
    """Labels whose line no longer holds the name in their snippet (a wrong line number)."""
    problems = []
    for label in labels:
        file = tree / label.path
        try:
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            problems.append(f"{label.path}:{label.line}: no such file")
            continue
        if not 1 <= label.line <= len(lines):
            problems.append(f"{label.path}:{label.line}: past the end of the file")
            continue
        words = [w for w in _words(label.snippet) if len(w) > 2]
        text = lines[label.line - 1]
        if words and not any(w in text for w in words):
            problems.append(f"{label.path}:{label.line}: line does not hold {label.snippet!r}")
    return problems


def _words(text: str) -> list[str]:
    out, word = [], ""
    for ch in text:
        if ch.isalnum() or ch == "_":
            word += ch
        else:
            if word:
                out.append(word)
            word = ""
    if word:
        out.append(word)
    return out


def score(labels: list[Label], findings: list[dict]) -> tuple[Score, dict[str, Score], dict[str, Score]]:
    """The overall score, per rule (by the code of the finding on a line) and per op."""
    by_line: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for finding in findings:
        for line in range(finding["line"], finding.get("end_line", finding["line"]) + 1):
            by_line[(finding["path"], line)].append(finding)
    total, per_rule, per_op = Score(), defaultdict(Score), defaultdict(Score)
    for label in labels:
        hits = by_line.get((label.path, label.line), [])
        one = Score()
        if label.label == "must_flag":
            if hits:
                one.tp = 1
            else:
                one.fn = 1
                total.missed.append(label)
        else:
            if hits:
                one.fp = 1
                total.false_alarms.append((label, hits))
            else:
                one.tn = 1
        total.add(one)
        per_op[label.op].add(one)
        for code in {hit["code"] for hit in hits} or {"(none)"}:
            per_rule[code].add(one)
    return total, dict(per_rule), dict(per_op)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def row(name: str, s: Score, extra: str = "") -> str:
    return (f"| {name} | {s.tp} | {s.fp} | {s.fn} | {s.tn} | {fmt(s.precision)} | "
            f"{fmt(s.recall)} | {fmt(s.f1)} |{extra}")


# A sample's verdicts: `true` (a per-step GPU->host sync with the engine's default
# settings), `conditional` (a real per-step sync only with a non-default setting, an opt-in
# feature, a fallback the usual path does not take, or inside a block the project marks
# as allowing syncs), `false` (a host value, not a sync, another platform, debug-only,
# start-up or rare code, unreachable code).
VERDICTS = ("true", "conditional", "false")
HEADER = ("| release | TP | FP | FN | TN | precision | recall | F1 | RB1xx findings in tree |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def sample(findings: list[dict], tree: Path, key: str, n: int, seed: int) -> Path:
    """Draw (or reuse) the sample file of `n` findings of this tree."""
    SAMPLES.mkdir(parents=True, exist_ok=True)
    target = SAMPLES / f"{key}-seed{seed}.yml"
    if target.exists():
        return target
    rng = random.Random(seed)
    ordered = sorted(findings, key=lambda f: (f["path"], f["line"], f["code"]))
    drawn = rng.sample(ordered, min(n, len(ordered)))
    entries = [{"path": f["path"], "line": f["line"], "code": f["code"],
                "message": f["message"][:300], "verdict": "", "reason": ""}
               for f in sorted(drawn, key=lambda f: (f["path"], f["line"]))]
    target.write_text(yaml.safe_dump({"tree": key, "seed": seed, "findings": entries},
                                     sort_keys=False, allow_unicode=True, width=100),
                      encoding="utf-8")
    return target


def judged(path: Path, findings: list[dict] | None = None) -> dict[str, int]:
    """Counts of a sample file's verdicts (``true``, ``conditional``, ``false``, ``left``:
    not yet judged), and the same among the judged findings that ``findings`` (this run's)
    still holds (``kept_true``...): a sample is drawn from one commit, and a later one may
    drop some of its findings."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    now = {(f["path"], f["line"], f["code"]) for f in findings or ()}
    counts = Counter()
    for entry in data["findings"]:
        verdict = str(entry.get("verdict", "")).lower()
        if verdict not in VERDICTS:
            verdict = "left"
        counts[verdict] += 1
        if verdict != "left" and (entry["path"], entry["line"], entry["code"]) in now:
            counts[f"kept_{verdict}"] += 1
    return {key: counts[key] for key in (*VERDICTS, "left", *(f"kept_{v}" for v in VERDICTS))}


def precision_words(true: int, conditional: int, false: int) -> str:
    """"58% true of 100 judged", and with conditional verdicts the rate counting them too."""
    total = true + conditional + false
    if not total:
        return "not judged yet"
    words = f"{true / total:.0%} true of {total} judged"
    if conditional:
        words += f" ({(true + conditional) / total:.0%} counting the {conditional} conditional)"
    return words


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", action="append", help="engine-release, e.g. vllm-0.33.0 (repeatable)")
    parser.add_argument("--packs", choices=("on", "off", "both"), default="on")
    parser.add_argument("--misses", action="store_true", help="list missed and falsely flagged lines")
    parser.add_argument("--sample", type=int, default=0, help="draw N findings per newest tree")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sample-split", choices=("test", "tune", "all"), default="test",
                        help="which trees --sample draws from (default: the newest, test)")
    parser.add_argument("--json", type=Path, help="also write the scores as JSON here")
    parser.add_argument("--findings-dir", type=Path,
                        help="also write each tree's RB1xx findings here, as JSON "
                             "(<engine>-<release>-packs-<on|off>.json), to compare runs")
    parser.add_argument("--check-arg", action="append", default=[],
                        help="an extra argument for reviewbot check (repeatable)")
    args = parser.parse_args(argv)
    try:
        corpus = load_corpus(set(args.release) if args.release else None)
        if not corpus:
            raise CorpusError("no corpus files matched")
        variants = ("on", "off") if args.packs == "both" else (args.packs,)
        report: dict = {}
        for packs in variants:
            print(f"\n## Engine packs {packs}\n")
            print(HEADER)
            splits: dict[tuple[str, str], Score] = defaultdict(Score)
            rules: dict[str, Score] = defaultdict(Score)
            ops: dict[str, Score] = defaultdict(Score)
            problems: list[str] = []
            misses: list[str] = []
            for (engine, release), labels in sorted(corpus.items()):
                tree = tree_for(release, engine)
                problems += [f"{engine}-{release}: {p}" for p in stale(labels, tree)]
                findings = run_check(tree, packs, args.check_arg)
                if args.findings_dir is not None:
                    args.findings_dir.mkdir(parents=True, exist_ok=True)
                    (args.findings_dir / f"{engine}-{release}-packs-{packs}.json").write_text(
                        json.dumps(findings, indent=1, sort_keys=True), encoding="utf-8")
                total, per_rule, per_op = score(labels, findings)
                split = labels[0].split
                print(row(f"{engine} {release} ({split})", total, f" {len(findings)} |"))
                splits[(engine, split)].add(total)
                for code, s in per_rule.items():
                    rules[code].add(s)
                for op, s in per_op.items():
                    ops[op].add(s)
                report.setdefault(packs, {})[f"{engine}-{release}"] = {
                    "split": split, "tp": total.tp, "fp": total.fp, "fn": total.fn, "tn": total.tn,
                    "precision": total.precision, "recall": total.recall, "f1": total.f1,
                    "findings": len(findings)}
                for label in total.missed:
                    misses.append(f"FN {engine}-{release} {label.path}:{label.line} {label.op} "
                                  f"{label.snippet}")
                for label, hits in total.false_alarms:
                    codes = ",".join(sorted({h["code"] for h in hits}))
                    misses.append(f"FP {engine}-{release} {label.path}:{label.line} {codes} "
                                  f"{label.snippet}")
                if (args.sample and args.sample_split in (split, "all")
                        and packs == variants[0]):
                    target = sample(findings, tree, f"{engine}-{release}", args.sample, args.seed)
                    c = judged(target, findings)
                    verdict = precision_words(c["true"], c["conditional"], c["false"])
                    kept = c["kept_true"] + c["kept_conditional"] + c["kept_false"]
                    still = (f"; of the {kept} this run still reports, " + precision_words(
                        c["kept_true"], c["kept_conditional"], c["kept_false"])
                        if kept else "")
                    print(f"|   sample {target.relative_to(HERE)}: {verdict}{still}, "
                          f"{c['left']} left |")
                    report[packs][f"{engine}-{release}"]["sample"] = {
                        "file": str(target.relative_to(HERE)), "true": c["true"],
                        "conditional": c["conditional"], "false": c["false"],
                        "still_reported_true": c["kept_true"],
                        "still_reported_conditional": c["kept_conditional"],
                        "still_reported_false": c["kept_false"]}
            print("\n| engine, split | TP | FP | FN | TN | precision | recall | F1 |\n"
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for (engine, split), s in sorted(splits.items()):
                print(row(f"{engine} {split}", s))
                report[packs][f"{engine}-{split}"] = {
                    "tp": s.tp, "fp": s.fp, "fn": s.fn, "tn": s.tn,
                    "precision": s.precision, "recall": s.recall, "f1": s.f1}
            print("\n| rule on the line | TP | FP | FN | TN | precision | recall | F1 |\n"
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for code, s in sorted(rules.items()):
                print(row(code, s))
            print("\n| op | TP | FP | FN | TN | precision | recall | F1 |\n"
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for op, s in sorted(ops.items()):
                print(row(op, s))
            if problems:
                print("\nlabels whose line does not hold their snippet:")
                for p in problems:
                    print("  " + p)
            if args.misses:
                print()
                for m in misses:
                    print(m)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except (BenchError, CorpusError, OSError, KeyError, ValueError, yaml.YAMLError) as exc:
        print(f"accuracy: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
