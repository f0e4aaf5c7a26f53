#!/usr/bin/env python3
"""The project's size rules, checked over the hand-written sources: no file over 800 lines, and no
function over 100 lines outside the kernels (src/kernels/) and the Jinja interpreter (src/jinja/).

C and C++ functions (test bodies and lambdas included) are found by Universal Ctags
(Debian's universal-ctags), Python functions by Python's own ast. Prints each file or function over
its limit, longest first, and exits 1 if there is one.

  scripts/check_sizes.py                 # src/, tests/, python/ of this checkout
  scripts/check_sizes.py --top 5         # and the five longest files and functions either way
"""
import argparse
import ast
import json
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ("src", "tests", "python")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100
SOURCE_SUFFIXES = {".cc", ".h", ".py", ".js", ".css", ".html"}
CPP_SUFFIXES = {".cc", ".h"}
# Not hand-written: fixtures, fuzz corpora, build trees.
SKIPPED = ("tests/data/", "tests/fuzz/corpus/", "python/build/")
# Where long functions are allowed: the kernels and the Jinja interpreter.
LONG_FUNCTIONS_ALLOWED = ("src/kernels/", "src/jinja/")


def sources(root):
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and path.suffix in SOURCE_SUFFIXES and \
                    not relative.startswith(SKIPPED):
                yield relative, path


def cpp_functions(root, paths):
    """(lines, "path:line name") of every C++ function in `paths`, by ctags."""
    if not paths:
        return []
    ctags = shutil.which("ctags")
    if not ctags:
        sys.exit("check_sizes: Universal Ctags is needed (apt install universal-ctags)")
    out = subprocess.run(
        [ctags, "--output-format=json", "--fields=+ne", "--kinds-C++=f", "--language-force=C++",
         "-o", "-", *paths], cwd=root, check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or "end" not in tag:
            continue
        name = tag["name"] if not tag["name"].startswith("__anon") else "(lambda)"
        if "scope" in tag and tag.get("scopeKind") in ("class", "struct"):
            name = tag["scope"].split("::")[-1] + "::" + name
        found.append((tag["end"] - tag["line"] + 1, f"{tag['path']}:{tag['line']} {name}"))
    return found


def python_functions(relative, path):
    try:
        tree = ast.parse(path.read_text(), filename=relative)
    except SyntaxError as e:
        sys.exit(f"check_sizes: {relative}: {e}")
    return [(node.end_lineno - node.lineno + 1, f"{relative}:{node.lineno} {node.name}")
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=0,
                        help="also print the N longest files and functions")
    args = parser.parse_args()

    files, functions, cpp = [], [], []
    for relative, path in sources(ROOT):
        with open(path, "rb") as f:
            files.append((sum(1 for _ in f), relative))
        if path.suffix in CPP_SUFFIXES:
            cpp.append(relative)
        elif path.suffix == ".py":
            functions += [f for f in python_functions(relative, path)
                          if not relative.startswith(LONG_FUNCTIONS_ALLOWED)]
    functions += [f for f in cpp_functions(ROOT, cpp)
                  if not f[1].startswith(LONG_FUNCTIONS_ALLOWED)]

    files.sort(reverse=True)
    functions.sort(reverse=True)
    long_files = [f for f in files if f[0] > MAX_FILE_LINES]
    long_functions = [f for f in functions if f[0] > MAX_FUNCTION_LINES]
    for lines, where in long_files:
        print(f"file over {MAX_FILE_LINES} lines: {where} ({lines})")
    for lines, where in long_functions:
        print(f"function over {MAX_FUNCTION_LINES} lines: {where} ({lines})")
    if args.top:
        print(f"longest files: " + ", ".join(f"{w} {n}" for n, w in files[:args.top]))
        print(f"longest functions (outside kernels and jinja): " +
              ", ".join(f"{w} {n}" for n, w in functions[:args.top]))
    print(f"check_sizes: {len(files)} files, {len(functions)} functions; "
          f"{len(long_files)} files and {len(long_functions)} functions over their limits")
    return 1 if long_files or long_functions else 0


if __name__ == "__main__":
    sys.exit(main())
