"""Fenced code blocks of a markdown file, for the docs tests (compile_snippets.py and
quickstart_test.py): one scanner, so both read fences the same way."""
import re

OPEN = re.compile(r"^\s*```+\s*([\w+-]*)")
CLOSE = re.compile(r"^\s*```+\s*$")


def fenced_blocks(lines):
    """Yields (language, index of the opening fence line, the lines between the fences) for each
    fenced block of `lines`; an unclosed block runs to the end."""
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not CLOSE.match(lines[end]):
            end += 1
        yield m.group(1), i, lines[i + 1:end]
        i = end + 1


def last_text_line_before(lines, index):
    """The index of the last non-blank line before lines[index], or -1."""
    prev = index - 1
    while prev >= 0 and not lines[prev].strip():
        prev -= 1
    return prev
