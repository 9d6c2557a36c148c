"""The offline install recipe of python/README.md ("Install"): pip builds the
package with the setuptools and wheel already installed (Debian's python3-pip,
python3-setuptools and python3-wheel for /usr/bin/python3), with no index, into a
directory, and dcr imports from there with the libdcr.so.1 shipped inside it."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from conftest import PYDIR

import dcr

# find_spec, not import: importing setuptools after pip trips its distutils hack.
MISSING = [m for m in ("pip", "setuptools", "wheel") if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(MISSING), reason=f"no {', '.join(MISSING)} for {sys.executable} "
                    "(python3-pip, python3-setuptools, python3-wheel)")
def test_offline_install_into_a_directory(tmp_path):
    # A copy of the source, so that the build's build/ and dcr.egg-info/ stay out of
    # the tree; the library goes into dcr/ first, as python/README.md says to ship it.
    src = tmp_path / "src"
    shutil.copytree(PYDIR, src, ignore=shutil.ignore_patterns("tests", "tools", "build", "*.egg-info",
                                                              "__pycache__", "libdcr.so.*"))
    shutil.copy(dcr.library_path, src / "dcr" / "libdcr.so.1")
    target = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                        "--no-deps", "--disable-pip-version-check", "--target", str(target), str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("DCR_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    p = subprocess.run([sys.executable, "-c", "import dcr; print(dcr.__file__); print(dcr.library_path); "
                        "print(dcr.library_version())"], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    module, library, version = p.stdout.split("\n")[:3]
    assert module == str(target / "dcr" / "__init__.py")
    assert library == str(target / "dcr" / "libdcr.so.1")
    assert version == dcr.__version__
