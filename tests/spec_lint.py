#!/usr/bin/env python3
"""spec_lint.py - checks SPEC.md's own rules (SPEC.md §1, §12):

- every paragraph, list item or table row that says MUST (or MUST NOT) carries a
  requirement id: a tag **[R-AREA-n]**, or a reference (R-AREA-n) to a rule tagged
  elsewhere;
- every reference names a tagged id;
- every id is covered by a test vector (testvectors/index.json "covers") or listed,
  with its reason, in the index's "requirements_without_vectors", and every id listed
  there exists.

usage: tests/spec_lint.py [SPEC.md] [INDEX.json...]   (default testvectors/index.json;
       the indexes of later minor versions, e.g. testvectors/v1.2/index.json, and of
       companion formats, e.g. testvectors/journal-v1/index.json, count too)
Prints one line per problem and a summary; exits 1 on any problem.
"""
import json
import re
import sys

spec_path = sys.argv[1] if len(sys.argv) > 1 else "SPEC.md"
index_paths = sys.argv[2:] or ["testvectors/index.json"]
text = open(spec_path, encoding="utf-8").read()
problems = []

# Blocks: paragraphs and list items, outside code fences; a table row is a block.
blocks, current, fenced = [], [], False
for number, line in enumerate(text.split("\n"), 1):
    if line.startswith("```"):
        fenced = not fenced
        continue
    if fenced:
        continue
    starts = re.match(r"\s*([-*]|\d+\.)\s", line) or line.startswith("|") or line.startswith("#")
    if not line.strip() or starts:
        if current:
            blocks.append(current)
        current = [] if not line.strip() else [(number, line)]
        if line.startswith("|") or line.startswith("#"):
            blocks.append(current)
            current = []
    else:
        current.append((number, line))
if current:
    blocks.append(current)

TAG = re.compile(r"\[(R-[A-Z]+-\d+)\]")
REF = re.compile(r"\bR-[A-Z]+-\d+\b")
tags = {}
for block in blocks:  # a rule may span several tagged sentences
    body = " ".join(line for _, line in block)
    for tag in TAG.findall(body):
        tags.setdefault(tag, block[0][0])
for block in blocks:
    body = " ".join(line for _, line in block)
    if re.search(r"\bMUST\b", body) and not REF.search(body):
        problems.append("line %d: a MUST without a requirement id: %s" % (block[0][0], body.strip()[:100]))
    for ref in REF.findall(body):
        if ref not in tags:
            problems.append("line %d: %s is not tagged anywhere" % (block[0][0], ref))

covered, exempt = set(), {}
for index_path in index_paths:
    index = json.load(open(index_path, encoding="utf-8"))
    covered |= {c for v in index["vectors"] for c in v.get("covers", [])}
    exempt.update(index.get("requirements_without_vectors", {}))
for tag in sorted(tags):
    if tag not in covered and tag not in exempt:
        problems.append("%s (line %d) has no vector and no reason in requirements_without_vectors" % (tag, tags[tag]))
for tag, why in sorted(exempt.items()):
    if tag not in tags:
        problems.append("requirements_without_vectors names %s, which SPEC.md does not tag" % tag)
    if not why.strip():
        problems.append("requirements_without_vectors gives no reason for %s" % tag)

for p in problems:
    print("not ok - " + p)
print("spec lint: %d passed, %d failed" % (1 if not problems else 0, 1 if problems else 0))
sys.exit(1 if problems else 0)
