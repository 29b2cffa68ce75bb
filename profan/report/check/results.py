"""What ``profan check`` found: one ``CheckResult`` per gate (a budget's, or a comparison with a
baseline), printed as text, JUnit XML and GitHub Actions annotations."""

from __future__ import annotations

import os
from dataclasses import dataclass

from profan.escape import github_message, github_property, terminal, xml_attribute, xml_text


@dataclass(slots=True)
class CheckResult:
    name: str
    passed: bool
    message: str
    source: str | None = None  # file:line of the op concerned, for annotations


def summary_text(results: list[CheckResult]) -> str:
    failed = [r for r in results if not r.passed]
    # (names from the trace are data: a newline in one starts no line of its own)
    lines = [
        f"{'PASS' if r.passed else 'FAIL'}  {terminal(r.name)}: {terminal(r.message)}"
        for r in results
    ]
    lines.append(
        f"profan check: {len(results) - len(failed)} passed, {len(failed)} failed"
        if results
        else "profan check: no budgets to check"
    )
    return "\n".join(lines) + "\n"


def junit_xml(results: list[CheckResult], *, suite: str = "profan check") -> str:
    failed = sum(not r.passed for r in results)
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites><testsuite name={xml_attribute(suite)} tests="{len(results)}" '
        f'failures="{failed}" errors="0">',
    ]
    for r in results:
        parts.append(f'<testcase classname="profan.check" name={xml_attribute(r.name)}>')
        if not r.passed:
            message = xml_attribute(r.message)
            parts.append(f"<failure message={message}>{xml_text(r.message)}</failure>")
        parts.append("</testcase>")
    parts.append("</testsuite></testsuites>")
    return "\n".join(parts) + "\n"


def github_annotations(results: list[CheckResult]) -> str:
    """``::error file=…,line=…::message`` lines for failed checks (at the op's source line)."""
    lines = []
    for r in results:
        if r.passed:
            continue
        location = ""
        if r.source and ":" in r.source:
            file, _, line = r.source.rpartition(":")
            cwd = os.getcwd().rstrip("/") + "/"
            if file.startswith(cwd):  # GitHub wants paths relative to the checkout
                file = file[len(cwd) :]
            if line.isdigit():
                location = f" file={github_property(file)},line={line}"
        title = github_property(r.name)
        lines.append(
            f"::error{location}{',' if location else ' '}title={title}::"
            + github_message(r.message)
        )
    return "\n".join(lines) + ("\n" if lines else "")
