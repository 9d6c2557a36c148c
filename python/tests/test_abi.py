"""The ctypes mirrors of include/dcr.h's structs have the C layout: the size and
the offset of every field, as a C compiler lays them out."""

import ctypes
import os
import subprocess

from conftest import ROOT

from dcr import _lib


def c_layout(tmp_path):
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "dcr.h"', "int main(void) {"]
    for cname, cls in _lib.STRUCTS.items():
        lines.append(f'  printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        for fname, _ in cls._fields_:
            lines.append(f'  printf("{cname} {fname} %zu\\n", offsetof({cname}, {fname}));')
    lines += ["  return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)], check=True)
    out = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        struct, field, value = line.split()
        out[(struct, field)] = int(value)
    return out


def test_every_struct_and_field_matches_c(tmp_path):
    c = c_layout(tmp_path)
    checked = 0
    for cname, cls in _lib.STRUCTS.items():
        assert ctypes.sizeof(cls) == c[(cname, "sizeof")], cname
        for fname, _ in cls._fields_:
            assert getattr(cls, fname).offset == c[(cname, fname)], f"{cname}.{fname}"
            checked += 1
    assert checked > 100


def test_mirrored_structs_are_the_headers():
    """Each mirrored name is a struct the header declares."""
    import re

    with open(os.path.join(ROOT, "include", "dcr.h")) as f:
        declared = set(re.findall(r"^\} (dcr_\w+);", f.read(), re.M))
    assert set(_lib.STRUCTS) <= declared


def test_history_and_squash_structs_are_mirrored():
    """The structs of the history archive and squash calls that the package binds
    (dcr.history, dcr.squash) are among those checked field by field above."""
    bound = {"dcr_history_options", "dcr_history_summary", "dcr_history_member", "dcr_squash_options",
             "dcr_http_options", "dcr_encode_stats", "dcr_meta", "dcr_limits", "dcr_detail"}
    assert bound <= set(_lib.STRUCTS)


def test_signing_structs_are_mirrored():
    """The structs of the signing calls (dcr.sign, Bundle.verify_signature) are among
    those checked field by field above, and the key id size is the header's."""
    import re

    assert {"dcr_sign_options", "dcr_signature_result"} <= set(_lib.STRUCTS)
    with open(os.path.join(ROOT, "include", "dcr.h")) as f:
        size = re.search(r"^#define DCR_KEY_ID_SIZE (\d+)", f.read(), re.M)
    assert size and int(size.group(1)) == _lib.KEY_ID_SIZE
