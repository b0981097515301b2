#!/usr/bin/env python3
"""The markdown of bench section "build" (bench/sections/build.sh), from its build trees.

usage: build_report.py WORK BASE T_MAKE T_BASE T_PCH T_NOW JOBS SLOWEST

WORK holds base/ and now/ (Ninja trees, with .ninja_log and their dependency logs),
headers.txt ("HEADER SECONDS" lines) and slowest.report (GCC's -ftime-report of the slowest
unit of base/).
"""
import collections
import datetime
import os
import re
import subprocess
import sys

work, base, t_make, t_base, t_pch, t_now, jobs, slowest, t_full = sys.argv[1:10]
t_make, t_base, t_pch, t_now, t_full = float(t_make), float(t_base), float(t_pch), float(t_now), float(t_full)


def ninja_log(tree):
    """{output: seconds} of one build, from .ninja_log (the last entry of each output)."""
    out = {}
    with open(os.path.join(work, tree, ".ninja_log")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 4 and not line.startswith("#"):
                out[p[3]] = (int(p[1]) - int(p[0])) / 1000
    return out


def per_library(log):
    """CPU seconds of compiling, per library or program (its CMake target's folder)."""
    acc = collections.Counter()
    for out, s in log.items():
        m = re.search(r"CMakeFiles/([^/]+)\.dir/", out)
        if m and out.endswith(".o"):
            acc[m.group(1)] += s
    return acc


def deps(tree):
    """{object: [headers]} from Ninja's dependency log."""
    text = subprocess.run(["ninja", "-C", os.path.join(work, tree), "-t", "deps"], capture_output=True,
                          text=True).stdout
    result, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current = line.split(":")[0]
            result[current] = []
        elif current and line.strip():
            result[current].append(line.strip())
    return result


def unit_name(out):
    """report/CMakeFiles/wanlab_report.dir/html.cpp.o -> report/html.cpp; a unity batch by its target."""
    m = re.match(r"(?:(.*)/)?CMakeFiles/([^/]+)\.dir/(Unity/unity_(\d+)_cxx\.cxx|.*)\.o$", out)
    if not m:
        return out
    if m.group(4) is not None:
        return f"{m.group(2)}, unity batch {m.group(4)}"
    return f"{m.group(1) + '/' if m.group(1) else ''}{m.group(3)}"


def emitted(tree, namespace):
    """Bytes of code of `namespace` functions that the objects of cli/ carry, and how many objects."""
    total, objects = 0, 0
    for dirpath, _, files in os.walk(os.path.join(work, tree, "cli")):
        for f in files:
            if not f.endswith(".o"):
                continue
            objects += 1
            nm = subprocess.run(["nm", "-S", "-C", os.path.join(dirpath, f)], capture_output=True, text=True).stdout
            for line in nm.splitlines():
                p = line.split(None, 3)
                if len(p) == 4 and p[2] in "TtWw" and namespace in p[3]:
                    total += int(p[1], 16)
    return total, objects


base_log, now_log = ninja_log("base"), ninja_log("now")
base_units = {o: s for o, s in base_log.items() if o.endswith(".o")}
now_units = {o: s for o, s in now_log.items() if o.endswith(".o")}
headers = [line.split() for line in open(os.path.join(work, "headers.txt")) if line.strip()]
base_deps = deps("base")

# How many of the tree-before's units include each header, and what that adds up to.
patterns = {"fmt/format.h": "/fmt/", "nlohmann/json.hpp": "/nlohmann/", "toml++/toml.h": "/toml++/",
            "CLI/CLI.hpp": "/CLI/", "catch2/catch.hpp": "/catch2/", "boost/process.hpp": "/boost/process",
            "filesystem": "/c++/12/filesystem", "string": "/c++/12/string"}
rows = []
for h, secs in headers:
    pat = patterns.get(h, h)
    n = sum(1 for o, hs in base_deps.items() if o in base_units and any(pat in x for x in hs))
    rows.append((h, float(secs), n))

phases = {}
for line in open(os.path.join(work, "slowest.report")):
    m = re.match(r"\s*(phase [a-z. ]+?|TOTAL)\s*:.*?([0-9.]+)\s*\(\s*\d+%\)\s+[0-9.]+K?M?\s*\(", line)
    m = re.match(r"\s*(phase [a-z. ]+?|TOTAL)\s*:\s*([0-9.]+)", line)
    if m:
        phases[m.group(1).strip()] = float(m.group(2))

def saving(what, before, after):
    """A sentence on what a change saved, that says so when it was within a few percent."""
    cut = 100 * (1 - after / before)
    if abs(cut) < 5:
        return f"{what} changes little ({-cut:+.0f}% time)"
    return f"{what} saves {cut:.0f}%" if cut > 0 else f"{what} costs {-cut:.0f}% more"


lib_base, lib_now = per_library(base_log), per_library(now_log)
day = datetime.date.today().isoformat()
ratio = t_now / t_base
print(f"""## Build: where a cold build's time goes

Run {day} by `bench/run build` on this machine ({jobs} cores, `-j{jobs}`, GCC 12, `RelWithDebInfo`):
the `wanlab` target from a new build tree, no ccache, {base} (before issue 37) against this
tree, one after the other in the same run.

| build of `wanlab` | wall time | against {base} with make |
|---|---|---|
| {base}, make (as its `scripts/build` did) | {t_make:.0f} s | 100% |
| {base}, Ninja | {t_base:.0f} s | {100 * t_base / t_make:.0f}% |
| this tree without unity batches: Ninja, one precompiled header, lld (line tables, `-g1`) | {t_pch:.0f} s | {100 * t_pch / t_make:.0f}% |
| this tree with full debug information (`-DWANLAB_DEBUG_INFO=full`: `-g`, as before issue 38) | {t_full:.0f} s | {100 * t_full / t_make:.0f}% |
| this tree: Ninja, one precompiled header, unity batches of 8, lld, line tables (`-g1`) | {t_now:.0f} s | **{100 * t_now / t_make:.0f}%** |

{saving("Ninja alone", t_make, t_base)}. {saving("Line tables instead of full debug information", t_full, t_now)} of this tree's build
(`WANLAB_DEBUG_INFO`, cmake/build_speed.cmake: backtraces, perf and ASan keep file and line). {saving("The precompiled header without unity batches", t_base, t_pch)},
for the reason below. {len(base_units)} units took {sum(base_units.values()):.0f} CPU seconds to compile before,
{len(now_units)} units {sum(now_units.values()):.0f} seconds now.

### Where it went before

What one header costs a unit that includes nothing else (`-O2 -g`, C++20), and how many of the
{len(base_units)} units of {base} include it:

| header | alone | units including it | parse time it adds up to |
|---|---|---|---|""")
for h, secs, n in sorted(rows, key=lambda r: -r[1] * r[2]):
    if n == 0:  # Catch2 is the tests', outside the `wanlab` target
        continue
    print(f"| `<{h}>` | {secs:.2f} s | {n} | {secs * n:.0f} s |")
total = phases.get("TOTAL", 0)
cli_base, cli_now = emitted("base", "CLI::"), emitted("now", "CLI::")
if total:
    parse = phases.get("phase parsing", 0) + phases.get("phase lang. deferred", 0)
    gen = phases.get("phase opt and generate", 0)
    print(f"""
Parsing those headers is not most of it. GCC's `-ftime-report` for the slowest unit
(`{slowest.split('/')[-1].replace('.o', '')}`, {total:.1f} s): parsing and template
instantiation {parse:.1f} s ({100 * parse / total:.0f}%), optimisation and code generation
{gen:.1f} s ({100 * gen / total:.0f}%). At `-O2 -g` every unit optimises and emits its own copy of each
inline function it uses, nlohmann/json's and CLI11's above all. CLI11 is header-only: the
{cli_base[1]} objects of cli/ carried {cli_base[0] / 1024:.0f} KB of `CLI::` code before, the {cli_now[1]} now
{cli_now[0] / 1024:.0f} KB. So the precompiled header alone saved only {100 * (1 - t_pch / t_base):.0f}% of the Ninja build; unity
batches, which compile up to 8 files of a library as one unit, emit those copies once a batch.""")
print("""
The slowest units before:

| unit | seconds |
|---|---|""")
for o, s in sorted(base_units.items(), key=lambda kv: -kv[1])[:10]:
    print(f"| `{unit_name(o)}` | {s:.1f} |")
print("""
CPU seconds of compiling, per library (the `wanlab` target), and the slowest units now:

| target | before | now |
|---|---|---|""")
for lib in sorted(set(lib_base) | set(lib_now), key=lambda l: -lib_base.get(l, 0)):
    print(f"| {lib} | {lib_base.get(lib, 0):.0f} | {lib_now.get(lib, 0):.0f} |")
print("""
| unit now | seconds |
|---|---|""")
for o, s in sorted(now_units.items(), key=lambda kv: -kv[1])[:6]:
    print(f"| `{unit_name(o)}` | {s:.1f} |")
print(f"""
What changed (`cmake/build_speed.cmake`): one precompiled header of the shared third-party set
(toml++, nlohmann/json, fmt, `<filesystem>` and the usual standard headers) built once and
reused by every library, one with CLI11 for cli/ and one with Catch2 for the test programs;
unity batches of 8 files for every library and the unit tests (files whose file-local names
clash compile alone, each named with its reason); lld as the linker. `WANLAB_UNITY=OFF`
compiles every file on its own, and the sanitizer and fuzzer trees of `scripts/test` do, so no
batch can hide what a file lacks; `WANLAB_PCH=OFF` parses every header in every file.""")
