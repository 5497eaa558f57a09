#!/usr/bin/env python3
"""Runs the README's command examples and checks (or rewrites) the output they show.

An example is a fenced block right after a marker comment:

    <!-- example: NAME [lines=N[,N...]] [grep=REGEX] [mask=REGEX] [needs=vulkan|truth] -->
    ```
    $ build/bin/gpusim predict models/resnet50.onnx --gpu nvidia-t4
    model    models/resnet50.onnx
    ...
    ```

Every line starting with "$ " is a command, run by bash in a scratch directory that holds `build/bin/gpusim`
(the program under test), `models/` and `gpu_profiles/` of this checkout, and `../shared` beside it. The lines after
a command, up to the next command, are the output it shows: its first N lines (`lines=`, one N per command; 0
shows none), of those matching `grep=` if given, then "..." when the output goes on. stdout and stderr are shown
merged. `mask=` is a regular expression for what differs from run to run (measured times): matches compare equal.
`needs=vulkan` skips the example where no Vulkan driver loads, `needs=truth` where ../shared/truth is absent. Every
command must succeed.

Usage:
    tools/readme_examples.py --gpusim build/bin/gpusim [--check | --update] [--only NAME] [README.md]

--check (default) exits 1 naming each example whose shown output differs from what the build prints now;
--update rewrites those blocks in place (the way to regenerate the README after a change to an output).
"""
import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!-- example: (?P<name>[\w.-]+)(?P<opts>.*?)-->\s*$")
OPTION = re.compile(r'(\w+)(?:=("[^"]*"|\S+))?')


def parse_options(text):
    opts = {}
    for m in OPTION.finditer(text):
        value = m.group(2)
        if value is not None and value.startswith('"'):
            value = value[1:-1]
        opts[m.group(1)] = True if value is None else value
    return opts


class Example:
    def __init__(self, name, opts, start, end, commands):
        self.name, self.opts, self.start, self.end, self.commands = name, opts, start, end, commands


def find_examples(lines, path):
    """Examples in README lines: (marker line index, fence end index, [(command, shown lines)])."""
    out = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            sys.exit(f"{path}:{i + 1}: example {m.group('name')}: the marker must be followed by a ``` fence")
        j = i + 2
        commands = []
        while j < len(lines) and not lines[j].startswith("```"):
            if lines[j].startswith("$ "):
                commands.append([lines[j][2:], []])
            elif commands:
                commands[-1][1].append(lines[j])
            else:
                sys.exit(f"{path}:{j + 1}: example {m.group('name')}: the block must start with a '$ ' command line")
            j += 1
        if j >= len(lines):
            sys.exit(f"{path}:{i + 1}: example {m.group('name')}: the fence is not closed")
        out.append(Example(m.group("name"), parse_options(m.group("opts")), i, j, commands))
        i = j + 1
    return out


def vulkan_available():
    try:
        ctypes.CDLL("libvulkan.so.1")
    except OSError:
        return False
    return any(os.path.exists(d) and os.listdir(d) for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"))


def shown(output, n, grep):
    """The lines an example shows of `output`: the first n (of those matching grep), then '...' if it goes on."""
    lines = output.rstrip("\n").split("\n") if output.strip() else []
    if grep:
        lines = [l for l in lines if re.search(grep, l)]
    lines = [l.rstrip() for l in lines]
    if n is None or n >= len(lines):
        return lines
    return lines[:n] + (["..."] if n > 0 else [])


def scratch_dir(repo, gpusim):
    """A directory laid out like the checkout, with build/bin/gpusim the program under test."""
    root = tempfile.mkdtemp(prefix="gpusim-readme-")
    work = os.path.join(root, "repo")
    os.makedirs(os.path.join(work, "build", "bin"))
    os.symlink(os.path.abspath(gpusim), os.path.join(work, "build", "bin", "gpusim"))
    for d in ("models", "gpu_profiles", "runtimes", "tests"):
        os.symlink(os.path.join(repo, d), os.path.join(work, d))
    shared = os.path.join(os.path.dirname(repo), "shared")
    if os.path.isdir(shared):
        os.symlink(shared, os.path.join(root, "shared"))
    return root, work


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("readme", nargs="?", default=None)
    ap.add_argument("--gpusim", required=True, help="the gpusim program to run the examples with")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--update", action="store_true")
    ap.add_argument("--only", action="append", help="run only this example (repeatable)")
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readme = args.readme or os.path.join(repo, "README.md")
    if not os.access(args.gpusim, os.X_OK):
        sys.exit(f"--gpusim {args.gpusim}: not an executable program; build it first (cmake --build build)")
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    examples = find_examples(lines, readme)
    if not examples:
        sys.exit(f"{readme}: no <!-- example: ... --> markers")
    root, work = scratch_dir(repo, args.gpusim)
    env = dict(os.environ)
    # The same answers on every machine: no user profiles, no kernel cache carried between runs.
    env.update({"XDG_CONFIG_HOME": os.path.join(root, "config"), "XDG_CACHE_HOME": os.path.join(root, "cache"),
                "GPUSIM_KERNEL_CACHE_DIR": "off", "GPUSIM_PROFILE_PATH": "", "COLUMNS": "120"})
    failed, skipped, checked = [], [], 0
    replacements = []
    try:
        for ex in examples:
            if args.only and ex.name not in args.only:
                continue
            needs = ex.opts.get("needs")
            if needs == "vulkan" and not vulkan_available():
                skipped.append(f"{ex.name} (no Vulkan driver)")
                continue
            if needs == "truth" and not os.path.isdir(os.path.join(root, "shared", "truth")):
                skipped.append(f"{ex.name} (../shared/truth absent)")
                continue
            counts = ex.opts.get("lines")
            counts = [int(c) for c in str(counts).split(",")] if counts not in (None, True) else []
            grep, mask = ex.opts.get("grep"), ex.opts.get("mask")
            new_block, problems = [], []
            for k, (cmd, old) in enumerate(ex.commands):
                n = counts[k] if k < len(counts) else None
                r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace")
                if r.returncode != 0:
                    problems.append(f"`{cmd}` exited {r.returncode}:\n{r.stdout[-2000:]}")
                now = shown(r.stdout, n, grep)
                new_block.append("$ " + cmd)
                new_block.extend(now)
                norm = (lambda s: re.sub(mask, "~", s)) if mask else (lambda s: s)
                if [norm(l) for l in old] != [norm(l) for l in now]:
                    diff = [f"  README: {l}" for l in old[:40]] + [f"  now:    {l}" for l in now[:40]]
                    problems.append(f"`{cmd}` shows other output than it prints now:\n" + "\n".join(diff))
            checked += 1
            if problems:
                failed.append((ex, problems))
                replacements.append((ex, new_block))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.update and replacements:
        for ex, block in sorted(replacements, key=lambda e: -e[0].start):
            lines[ex.start + 2:ex.end] = block
        with open(readme, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"{readme}: rewrote {len(replacements)} example(s): {', '.join(e.name for e, _ in replacements)}")
    for s in skipped:
        print(f"skipped  {s}")
    if args.update:
        bad = [(ex, p) for ex, p in failed if any("exited" in x for x in p)]
        for ex, problems in bad:
            print(f"FAIL     {ex.name}:\n" + "\n".join(p for p in problems if "exited" in p))
        return 1 if bad else 0
    for ex, problems in failed:
        print(f"FAIL     {ex.name} ({readme}:{ex.start + 1}):")
        for p in problems:
            print("  " + p.replace("\n", "\n  "))
    print(f"{checked} example(s) run, {len(failed)} differ, {len(skipped)} skipped"
          + ("; regenerate with tools/readme_examples.py --update --gpusim BUILD/bin/gpusim" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
