#!/usr/bin/env python3
"""Issue 10's measure: the share of the client library's compiled code the simulator runs.

Text symbols (`nm -S --defined-only -C`, types T/t/W/w) of librsc_client.a whose demangled
names are also defined in rsc-sim, weighted by their sizes: a function the simulator links
is one the simulator runs as shipped (it has no copy of its own). Each name counts once
(inline and template functions are defined in several objects). Then, per object file of
the library, the bytes rsc-sim does not link, largest first: what is left out, and where.

  scripts/code-share.py [BUILD_DIR]     (default: build)
"""
import subprocess
import sys
from collections import defaultdict


def text_symbols(path):
    """{name: size} per object file ("" for an executable) of the text symbols of `path`."""
    out = subprocess.run(["nm", "-S", "--defined-only", "-C", path], check=True,
                         capture_output=True, text=True).stdout
    objects = defaultdict(dict)
    current = ""
    for line in out.splitlines():
        if line.endswith(":") and " " not in line.strip():
            current = line[:-1]
            continue
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] not in ("T", "t", "W", "w"):
            continue
        size, name = int(parts[1], 16), parts[3]
        objects[current][name] = max(size, objects[current].get(name, 0))
    return objects


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    lib = text_symbols(f"{build}/src/client/librsc_client.a")
    sim_names = set(text_symbols(f"{build}/sim/rsc-sim")[""])
    sizes = {}
    owner = {}
    for obj, symbols in sorted(lib.items()):
        for name, size in symbols.items():
            if size > sizes.get(name, -1):
                sizes[name] = size
                owner[name] = obj
    total = sum(sizes.values())
    linked = sum(size for name, size in sizes.items() if name in sim_names)
    print(f"librsc_client.a text: {total:,} bytes in {len(sizes):,} functions")
    print(f"also defined in rsc-sim: {linked:,} bytes = {100.0 * linked / total:.1f}%")
    left = defaultdict(int)
    for name, size in sizes.items():
        if name not in sim_names:
            left[owner[name]] += size
    print("left out, by object (bytes):")
    for obj, size in sorted(left.items(), key=lambda kv: -kv[1]):
        print(f"  {obj:40s} {size:>9,}")


if __name__ == "__main__":
    main()
