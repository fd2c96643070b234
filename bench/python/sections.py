"""Replaces one `## ` section of BENCHMARKS.md (or appends it), for the scripts that write a
section of their own after report.py has written the file."""

import pathlib

PATH = pathlib.Path(__file__).resolve().parents[2] / "BENCHMARKS.md"


def replace(heading, body):
    """Puts `body` (which starts with `heading`) where the section `heading` is, or at the end."""
    text = PATH.read_text()
    if heading in text:
        start = text.index(heading)
        nxt = text.find("\n## ", start + len(heading))
        text = text[:start] + body + (text[nxt:] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + body
    PATH.write_text(text)
