#!/usr/bin/env python3
"""Compiles every ```cpp block of README.md and docs/*.md, so the documented code stays true.

Blocks with `int main` are whole programs: each is its own translation unit, as written. Every
other block is a fragment. All fragments share one translation unit that includes
<acc/acc.h>, with each fragment's #include lines hoisted to the top and the fragment wrapped
in its own namespace. A fragment whose first code line declares something at namespace scope
(class, struct, template, namespace, using, enum, or a function definition) stays at namespace
scope; any other fragment is statements and goes into a function body. A fragment that uses
names it does not declare (`sharded`, `loader`, ...) gets them from an HTML comment right
before its fence, invisible on GitHub:
    <!-- snippet-context: std::shared_ptr<acc::ShardedModel> sharded; extern acc::data::DataLoader loader; -->
The comment's text is C++ placed verbatim before the block, in the same scope (it may span
lines and hold #include lines). `extern T name;` declares an object that is awkward to
construct. Blocks that are not meant to compile take another fence (```text, or none).
Code lines carry #line directives, so errors name the markdown file and line; a failing
block is reported by its fence line with the compiler's first errors. Since
fragments share includes, a fragment that forgets an #include may pass; whole programs don't.

Usage: compile_snippets.py --compiler CXX --root SRC [-I DIR]... [-D DEF]... [--keep DIR] [MD...]
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from markdown_fences import fenced_blocks, last_text_line_before

CONTEXT = re.compile(r"\s*<!--\s*snippet-context:(.*)-->\s*$", re.S)
INCLUDE = re.compile(r"^\s*#\s*include\b")
MAIN = re.compile(r"\bint\s+main\s*\(")
TOP_LEVEL = re.compile(r"(class|struct|union|enum|template|namespace|using|typedef)\b")
CONTROL = re.compile(r"(for|if|while|switch|do|return|else)\b")
FUNC_HEAD = re.compile(r"\)\s*(const|noexcept|override|final|\s)*$")


@dataclass
class Block:
    path: str            # relative to the root, as errors name it
    line: int            # line of the first code line in the markdown
    code: list           # code lines
    context: str = ""    # text of the snippet-context comment
    context_line: int = 0
    kind: str = ""       # "main", "top" or "statements"
    ident: str = ""      # the namespace it is wrapped in

    def where(self):
        return f"{self.path}:{self.line - 1}"   # the fence line


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def classify(code):
    """'main', 'top' (namespace-scope declarations) or 'statements'."""
    text = "\n".join(l for l in code if not INCLUDE.match(l))
    text = strip_comments(re.sub(r'"(\\.|[^"\\])*"', '""', text)).strip()
    if MAIN.search(text):
        return "main"
    if TOP_LEVEL.match(text):
        return "top"
    if CONTROL.match(text):
        return "statements"
    # A function definition: the first `{`, `;` or `=` outside brackets is a `{` after `)`.
    depth = 0
    for i, c in enumerate(text):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c in "{;=":
            return "top" if c == "{" and FUNC_HEAD.search(text[:i]) else "statements"
    return "statements"


def context_before(lines, fence):
    """(text, 1-based line) of a snippet-context comment ending just before lines[fence]."""
    end = last_text_line_before(lines, fence)
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return "", 0
    start = end
    while start > 0 and "<!--" not in lines[start]:
        start -= 1
    m = CONTEXT.match("\n".join(lines[start:end + 1]))
    return (m.group(1), start + 1) if m else ("", 0)


def extract(root, md):
    """The ```cpp blocks of one markdown file, with their snippet-context comments."""
    rel = os.path.relpath(md, root)
    lines = Path(md).read_text(encoding="utf-8").split("\n")
    blocks = []
    for language, fence, body in fenced_blocks(lines):
        if language == "cpp":
            block = Block(rel, fence + 2, body)
            block.context, block.context_line = context_before(lines, fence)
            block.kind = classify(block.code)
            blocks.append(block)
    return blocks


def split_includes(text):
    """(the #include lines, the text with each replaced by an empty line)."""
    lines = text.split("\n")
    includes = [l.strip() for l in lines if INCLUDE.match(l)]
    return includes, "\n".join("" if INCLUDE.match(l) else l for l in lines)


class Unit:
    """One generated translation unit; keeps its own line count for the #line directives."""

    def __init__(self, name):
        self.name, self.out = name, []

    def emit(self, text):
        self.out.extend(text.split("\n"))

    def resume(self):   # after a block: lines point back into this file
        self.out.append(f'#line {len(self.out) + 2} "{self.name}"')

    def text(self):
        return "\n".join(self.out) + "\n"


def main_unit(block, name):
    unit = Unit(name)
    unit.emit(f'#line {block.line} "{block.path}"')
    unit.emit("\n".join(block.code))
    return unit.text()


def fragment_unit(blocks, name):
    includes, bodies = ["#include <acc/acc.h>"], []
    for b in blocks:
        inc_c, ctx = split_includes(b.context)
        inc_b, code = split_includes("\n".join(b.code))
        includes += [i for i in inc_c + inc_b if i not in includes]
        bodies.append((b, ctx, code))
    unit = Unit(name)
    unit.emit("\n".join(includes))
    for b, ctx, code in bodies:
        unit.emit(f"\nnamespace {b.ident} {{  // {b.where()}")
        if b.kind == "statements":
            unit.emit("[[maybe_unused]] void snippet() {")
        if ctx.strip():
            unit.emit(f'#line {b.context_line} "{b.path}"')
            unit.emit(ctx)
        unit.emit(f'#line {b.line} "{b.path}"')
        unit.emit(code)
        unit.resume()
        if b.kind == "statements":
            unit.emit("}")
        unit.emit(f"}}  // namespace {b.ident}")
    return unit.text()


def compile_unit(args, source):
    """Runs the compiler from the root (so diagnostics can quote the markdown lines)."""
    cmd = [args.compiler, "-std=c++20", "-fsyntax-only", "-fdiagnostics-color=never"]
    cmd += [f"-I{d}" for d in args.include if d] + [f"-D{d}" for d in args.define if d]
    cmd.append(str(source))
    r = subprocess.run(cmd, cwd=args.root, capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


def mentioned(block, output):
    """Whether the compiler's errors point into the block or its context comment."""
    first = block.context_line or block.line
    last = block.line + len(block.code)
    for m in re.finditer(r"^(.+?):(\d+):\d+: (?:fatal )?error:", output, re.M):
        if m.group(1) == block.path and first <= int(m.group(2)) <= last:
            return True
    return False


def first_errors(output, limit=12):
    lines = output.splitlines()
    first = next((i for i, l in enumerate(lines) if ": error:" in l or "fatal error" in l), 0)
    return "\n".join("    " + l for l in lines[max(0, first - 2):first + limit])


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--compiler", required=True)
    p.add_argument("--root", required=True, help="the repository root")
    p.add_argument("-I", dest="include", action="append", default=[],
                   help="include folder; a ';'-separated list is split")
    p.add_argument("-D", dest="define", action="append", default=[],
                   help="preprocessor definition; a ';'-separated list is split")
    p.add_argument("--keep", help="write the generated sources here instead of a temporary folder")
    p.add_argument("markdown", nargs="*", help="default: README.md and docs/*.md")
    args = p.parse_args()
    # CMake hands over list properties as one ';'-separated argument.
    args.include = [d for a in args.include for d in a.split(";")]
    args.define = [d for a in args.define for d in a.split(";")]
    args.root = os.path.abspath(args.root)
    return args


def main():
    args = parse_args()
    files = args.markdown or [os.path.join(args.root, "README.md")] + sorted(
        str(p) for p in Path(args.root, "docs").glob("*.md"))
    blocks = [b for f in files for b in extract(args.root, os.path.abspath(f))]
    for b in blocks:
        b.ident = "snippet_" + re.sub(r"\W", "_", f"{b.path}_{b.line - 1}")
    programs = [b for b in blocks if b.kind == "main"]
    fragments = [b for b in blocks if b.kind != "main"]

    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="acc_snippets_")
    workdir = Path(args.keep or tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    units = {}   # source path -> the blocks it holds
    for b in programs:
        src = workdir / f"{b.ident}.cpp"
        src.write_text(main_unit(b, src.name))
        units[src] = [b]
    if fragments:
        src = workdir / "fragments.cpp"
        src.write_text(fragment_unit(fragments, src.name))
        units[src] = fragments

    jobs = max(1, min(os.cpu_count() or 1, 4))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = dict(zip(units, pool.map(lambda s: compile_unit(args, s), units)))
        failed = []   # (block, compiler output)
        for src, (ok, out) in results.items():
            if ok:
                continue
            if len(units[src]) == 1:
                failed.append((units[src][0], out))
                continue
            # The shared unit failed: compile the fragments its errors point at (or all of
            # them, if the errors point elsewhere) one by one to name the culprits.
            suspects = [b for b in units[src] if mentioned(b, out)] or units[src]
            alone = {}
            for b in suspects:
                one = workdir / f"{b.ident}.cpp"
                one.write_text(fragment_unit([b], one.name))
                alone[b.ident] = one
            solo = list(pool.map(lambda s: compile_unit(args, s), alone.values()))
            culprits = [(b, o) for b, (k, o) in zip(suspects, solo) if not k]
            failed += culprits or [(units[src][0], out)]

    print(f"compile_snippets: {len(blocks)} ```cpp blocks in {len(files)} files: "
          f"{len(programs)} programs, {len(fragments)} fragments in one unit; "
          f"{len(units)} compiler runs")
    for b, out in failed:
        print(f"\n{b.where()}: this ```cpp block does not compile ({b.kind}); first errors:")
        print(first_errors(out))
    if failed:
        print(f"\ncompile_snippets: {len(failed)} block(s) failed. Fix the code or the "
              "snippet-context comment before the block (see this script's header).")
        if args.keep:
            print(f"generated sources are in {workdir}")
        return 1
    print("compile_snippets: all blocks compile")
    return 0


if __name__ == "__main__":
    sys.exit(main())
