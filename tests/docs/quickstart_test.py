#!/usr/bin/env python3
"""Runs the commands of docs/quickstart.md in order, as a reader would, with short step counts.

The ```sh blocks run in one bash session (so an `export` carries over to later blocks); the
run stops at the first failing command and names its block. The working directory is a
scratch folder that stands in for the repository root without copying it: every top-level
entry of the checkout is a symlink, except `build`, which points at the build folder under
test, and the outputs (runs/, checkpoints/, exported weights) land in the scratch folder, as
does the config `accelerate config` writes (ACC_CONFIG_HOME).
Allowed changes: step-count-like options (STEP_OPTIONS) get small values; a block preceded by
`<!-- quickstart-test: skip (reason) -->` is not run, and the reason is printed.
Exit status: 0 pass, 1 fail, 77 skipped (no data/brown: scripts/fetch-data was never run).

Usage: quickstart_test.py --root SRC --build BUILD_DIR [--keep DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from markdown_fences import fenced_blocks, last_text_line_before

DOC = "docs/quickstart.md"
# Short enough for a test, long enough that checkpoints, validation and a resumable state exist.
STEP_OPTIONS = {"--steps": 4, "--save_every": 2, "--val-every": 2, "--val-batches": 2,
                "--sample-tokens": 8, "--warmup": 1}
STEP_RE = re.compile(r"(%s)([ =])(\d+)" % "|".join(map(re.escape, STEP_OPTIONS)))
SKIP_RE = re.compile(r"<!--\s*quickstart-test:\s*skip\s*(?:\((.*)\))?\s*-->")
NOT_RUN = {"build", "runs", "checkpoints"}   # the build under test, and the outputs


def sh_blocks(path):
    """[(first line, text, skip reason or None)] for each ```sh block."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks = []
    for language, fence, body in fenced_blocks(lines):
        if language not in ("sh", "bash"):
            continue
        prev = last_text_line_before(lines, fence)
        skip = SKIP_RE.search(lines[prev]) if prev >= 0 else None
        if skip and not (skip.group(1) or "").strip():
            sys.exit(f"{path}:{prev + 1}: a quickstart-test skip needs a reason: skip (why)")
        blocks.append((fence + 2, "\n".join(body), skip.group(1) if skip else None))
    return blocks


def shorten(text):
    return STEP_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{STEP_OPTIONS[m.group(1)]}", text)


def make_root(root, build, scratch):
    for entry in os.listdir(root):
        if entry not in NOT_RUN:
            os.symlink(root / entry, scratch / entry)
    os.symlink(build, scratch / "build")


def script(blocks):
    """One bash script: each block echoed as the test runs it, then run."""
    out = ["set -eo pipefail",
           "trap 'echo \"quickstart_test: FAILED at $__block (exit status $?)\" >&2' ERR"]
    for line, text, skip in blocks:
        if skip:
            out.append(f"echo 'quickstart_test: {DOC}:{line - 1}: skipped ({skip})'")
            continue
        text = shorten(text)
        shown = "\n".join("$ " + l for l in text.split("\n"))
        out += [f"__block='{DOC}:{line - 1}'",
                f"echo \"quickstart_test: running the block at $__block\"",
                f"cat <<'QUICKSTART_BLOCK'\n{shown}\nQUICKSTART_BLOCK", text]
    return "\n".join(out) + "\n"


def check_outputs(scratch, output):
    """What the guide says the run leaves behind; returns the problems."""
    problems = []
    if "FULL_SHARD on 2 ranks" not in output:
        problems.append("train_gpt2 did not report 'FULL_SHARD on 2 ranks'")
    metrics = scratch / "runs/train_gpt2/metrics.csv"
    rows = metrics.read_text().splitlines()[1:] if metrics.is_file() else []
    if not rows or rows[-1].split(",")[0] != str(STEP_OPTIONS["--steps"]):
        problems.append(f"{metrics} does not end at step {STEP_OPTIONS['--steps']}")
    for path in ["runs/train_gpt2/loss.png", "checkpoints/latest"]:
        if not (scratch / path).exists():
            problems.append(f"{path} was not written")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True, help="the repository root")
    p.add_argument("--build", required=True, help="the build folder whose binaries run")
    p.add_argument("--keep", help="use this (empty) folder as the scratch root and keep it")
    args = p.parse_args()
    root, build = Path(args.root).resolve(), Path(args.build).resolve()

    data = Path(os.environ.get("ACC_DATA_DIR", root / "data"))
    if not (data / "brown/train.bin").is_file():
        print(f"quickstart_test: skipped: no {data}/brown/train.bin (run scripts/fetch-data)")
        return 77
    blocks = sh_blocks(root / DOC)
    if not blocks:
        print(f"quickstart_test: no ```sh blocks in {DOC}")
        return 1

    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="acc_quickstart_")
    scratch = Path(args.keep or tmp.name)
    scratch.mkdir(parents=True, exist_ok=True)
    make_root(root, build, scratch)
    env = dict(os.environ, ACC_CONFIG_HOME=str(scratch / ".config-home"))
    (scratch / ".quickstart.sh").write_text(script(blocks))
    proc = subprocess.Popen(["bash", ".quickstart.sh"], cwd=scratch, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    output = []
    for line in proc.stdout:   # shown as it comes, kept for the checks
        sys.stdout.write(line)
        output.append(line)
    if proc.wait() != 0:
        print(f"quickstart_test: FAILED: a command of {DOC} failed (see above)")
        return 1
    problems = check_outputs(scratch, "".join(output))
    for problem in problems:
        print(f"quickstart_test: FAILED: {problem}")
    if not problems:
        print(f"quickstart_test: every command of {DOC} ran")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
