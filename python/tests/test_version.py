"""Version agreement: the package's constants are include/dcr.h's, and importing
against a libdcr of another version fails with a clear ImportError."""

import os
import re
import subprocess
import sys

from conftest import PYDIR, ROOT

import dcr
from dcr import _lib


def header_defines():
    with open(os.path.join(ROOT, "include", "dcr.h")) as f:
        text = f.read()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define (DCR_\w+) (\d+)\s*$", text, re.M)}


def test_constants_match_the_header():
    h = header_defines()
    assert (_lib.VERSION_MAJOR, _lib.VERSION_MINOR, _lib.VERSION_PATCH) == (
        h["DCR_VERSION_MAJOR"], h["DCR_VERSION_MINOR"], h["DCR_VERSION_PATCH"])
    assert _lib.ABI_VERSION == h["DCR_ABI_VERSION"]
    assert (_lib.FORMAT_MAJOR, _lib.FORMAT_MINOR) == (h["DCR_FORMAT_MAJOR"], h["DCR_FORMAT_MINOR"])
    assert dcr.FORMAT_VERSION == (h["DCR_FORMAT_MAJOR"], h["DCR_FORMAT_MINOR"])


def test_pyproject_version_is_the_header_version():
    with open(os.path.join(PYDIR, "pyproject.toml")) as f:
        m = re.search(r'^version = "([^"]+)"', f.read(), re.M)
    assert m and m.group(1) == dcr.__version__


def test_loaded_library_is_this_version():
    assert dcr.library_version() == dcr.__version__
    assert _lib.lib.dcr_version_number() == _lib.VERSION_NUMBER


def test_error_codes_match_the_header():
    with open(os.path.join(ROOT, "include", "dcr.h")) as f:
        codes = re.findall(r"X\((\w+), (\d+),", f.read())
    assert len(codes) >= 26
    for name, num in codes:
        assert dcr.error_name(int(num)) == f"DCR_{name}"


def _import_with(env_lib, tmp_path):
    env = dict(os.environ, DCR_LIBRARY=env_lib, PYTHONPATH=PYDIR)
    return subprocess.run([sys.executable, "-c", "import dcr"], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path))


def test_wrong_library_version_is_refused(tmp_path):
    src = tmp_path / "fake.c"
    src.write_text("unsigned dcr_version_number(void) { return 9 * 10000 + 3 * 100 + 1; }\n")
    so = tmp_path / "libdcr.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    p = _import_with(str(so), tmp_path)
    assert p.returncode != 0
    assert "ImportError" in p.stderr
    assert "version 9.3.1" in p.stderr and f"written for libdcr {dcr.__version__}" in p.stderr


def test_missing_library_is_a_clear_import_error(tmp_path):
    p = _import_with(str(tmp_path / "nowhere" / "libdcr.so.1"), tmp_path)
    assert p.returncode != 0
    assert "cannot load libdcr" in p.stderr and "DCR_LIBRARY" in p.stderr


def test_not_libdcr_is_refused(tmp_path):
    src = tmp_path / "other.c"
    src.write_text("int something_else(void) { return 1; }\n")
    so = tmp_path / "libother.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    p = _import_with(str(so), tmp_path)
    assert p.returncode != 0 and "is not libdcr" in p.stderr
