#!/usr/bin/python3
"""Writes docs/cli.md from the command line's own --help: the main help, then
each command's (and each `zoo` command's), as pipetrain prints them.

Usage: cli_docs.py PIPETRAIN [OUT]        writes OUT (default: docs/cli.md)
       cli_docs.py PIPETRAIN --check OUT  exits 1, with a diff, when OUT is stale
"""
import difflib
import os
import re
import subprocess
import sys

HEADER = """# Command-line reference

Generated from `pipetrain --help` and each command's `--help` by
`scripts/cli_docs.py build/cli/pipetrain`; the `cli_docs` test fails when this
page and the program disagree. Regenerate it after changing an option.
"""


def help_text(pipetrain, *command):
    # argv[0] "pipetrain": the usage lines name the program, not the build path.
    r = subprocess.run(["pipetrain", *command, "--help"], executable=pipetrain,
                       capture_output=True, text=True, check=True)
    return r.stdout.rstrip() + "\n"


def subcommands(text):
    """The names under a help text's 'Subcommands:' heading."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and line.startswith("  "):
            m = re.match(r"  (\S+)", line)
            if m:
                names.append(m.group(1))
        elif inside and line.strip():
            inside = False
    return names


def render(pipetrain):
    top = help_text(pipetrain)
    out = [HEADER, "## pipetrain\n", "```text\n" + top + "```\n"]
    for name in subcommands(top):
        text = help_text(pipetrain, name)
        out += [f"## pipetrain {name}\n", "```text\n" + text + "```\n"]
        for sub in subcommands(text):
            out += [f"### pipetrain {name} {sub}\n",
                    "```text\n" + help_text(pipetrain, name, sub) + "```\n"]
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    if not args or len(args) > 3:
        sys.exit(__doc__)
    pipetrain = args[0]
    text = render(pipetrain)
    if len(args) == 3 and args[1] == "--check":
        with open(args[2]) as f:
            current = f.read()
        if current != text:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), args[2], "pipetrain --help"))
            print(f"{args[2]} is stale: regenerate it with scripts/cli_docs.py {pipetrain}",
                  file=sys.stderr)
            sys.exit(1)
        print(f"{args[2]} matches the command line's --help")
        return
    out = args[1] if len(args) == 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "docs", "cli.md")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
