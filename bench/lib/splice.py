#!/usr/bin/env python3
"""Replaces one section of docs/performance.md with new markdown.

usage: splice.py DOC NAME FILE

A section sits between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`. A section not yet in
DOC is appended, so bench/run can refresh one section without losing the others' numbers.
"""
import re
import sys

doc, name, path = sys.argv[1:4]
with open(path) as f:
    body = f.read().strip("\n")
try:
    with open(doc) as f:
        text = f.read()
except FileNotFoundError:
    text = ""
begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
block = f"{begin}\n{body}\n{end}"
pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
if pattern.search(text):
    text = pattern.sub(lambda _: block, text)
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
with open(doc, "w") as f:
    f.write(text)
