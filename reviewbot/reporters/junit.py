"""JUnit XML (the Ant/Jenkins shape that GitLab, Jenkins and most CI test views read): one
``testsuite`` per file with a failed ``testcase`` per finding; a clean run is one suite
with one passing case.

Every value from a checked file (paths, messages) is shown with control characters
escaped before XML escaping, so the document is well-formed whatever the input (XML 1.0
cannot hold most control characters even escaped), and written in ASCII with character
references, whatever the output's encoding.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.textsafe import printable

# What XML 1.0 cannot hold at all (lone surrogates, U+FFFE, U+FFFF), beyond the control
# characters printable() escapes.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def xml_text(value: str) -> str:
    """``value`` as one line of characters XML can hold."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group(0)):04x}", printable(value))


def build(findings: Sequence[Finding]) -> ET.Element:
    """The ``testsuites`` element."""
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.path, []).append(f)
    root = ET.Element("testsuites", name="reviewbot", tests=str(max(len(findings), 1)),
                      failures=str(len(findings)), errors="0")
    if not findings:
        suite = ET.SubElement(root, "testsuite", name="reviewbot", tests="1", failures="0",
                              errors="0", skipped="0")
        ET.SubElement(suite, "testcase", name="no findings", classname="reviewbot")
        return root
    for path, group in by_file.items():
        shown = xml_text(path)
        suite = ET.SubElement(root, "testsuite", name=shown, tests=str(len(group)),
                              failures=str(len(group)), errors="0", skipped="0")
        for f in group:
            case = ET.SubElement(suite, "testcase",
                                 name=xml_text(f"{f.code} {f.name} ({f.line}:{f.column})"),
                                 classname=shown, file=shown, line=str(f.line))
            failure = ET.SubElement(case, "failure", message=xml_text(f.message),
                                    type=xml_text(f.code))
            failure.text = xml_text(f"{path}:{f.line}:{f.column}: {f.code} {f.message}")
    return root


def write(findings: Sequence[Finding], out: TextIO, color: bool) -> None:
    """Write the findings as a JUnit XML document."""
    root = build(findings)
    ET.indent(root)
    body = ET.tostring(root, encoding="us-ascii", xml_declaration=False).decode("ascii")
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n")
