"""pip install ./client/python: builds vaed_client (the pybind11 extension
vaed_client._core over the C++ client library) and installs the package.

Offline on Debian 12 with Debian's Python; needs the packages of
scripts/install-deps.sh that the client uses (cmake, ninja-build or make,
g++, pybind11-dev, python3-dev, libprotobuf-dev, protobuf-compiler,
libzmq3-dev, cppzmq-dev, libboost-dev, libssl-dev, libacl1-dev,
nlohmann-json3-dev, libspdlog-dev, libtomlplusplus-dev, libcli11-dev) and
python3-numpy at run time. No LibTorch: CMake configures the repository with
VAED_CLIENT_ONLY=ON.

  pip install --break-system-packages ./client/python      # Debian's system Python (PEP 668)
  python3 -m venv --system-site-packages venv && venv/bin/pip install ./client/python
  venv/bin/pip wheel --no-deps -w dist ./client/python     # a wheel to install elsewhere

A wheel carries the extension: it installs on the same Python version and
architecture, with the shared libraries it links (Debian 12: libprotobuf32,
libzmq5, libacl1) and python3-numpy present.

Environment:
  VAED_BUILD_DIR   reuse the extension of an existing CMake build of the
                   repository (<dir>/python/vaed_client/_core*.so) instead of
                   building one (e.g. VAED_BUILD_DIR=build after
                   `cmake --build --preset default`; a relative path is taken
                   from the repository root).
  VAED_CMAKE_ARGS  extra arguments for the CMake configure step.

The checkout stays clean: pip (since 21.3) builds in the source directory,
so setuptools' build/ and vaed_client.egg-info/ (and the CMake build of the
extension, under build/) go to a temporary directory that is removed when
setup.py exits. `--build-base`/`--egg-base` on the command line or in a
setup.cfg still choose other places. Editable installs (`pip install -e`,
`setup.py develop`) keep setuptools' defaults: they need the egg-info beside
the package.
"""

from __future__ import annotations

import atexit
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


class CMakeBuild(build_ext):
    """Builds vaed_client._core with the repository's CMake (client only), or
    copies it from VAED_BUILD_DIR."""

    def build_extension(self, ext: Extension) -> None:
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        prebuilt_dir = os.environ.get("VAED_BUILD_DIR")
        if prebuilt_dir:
            build_dir = Path(prebuilt_dir)
            if not build_dir.is_absolute():  # pip runs setup.py in client/python
                build_dir = REPO / build_dir
            built = self.find_core(build_dir / "python" / "vaed_client")
            print(f"vaed_client: using the extension built in {prebuilt_dir}: {built}")
        else:
            built = self.cmake_build()
        shutil.copyfile(built, target)

    def find_core(self, directory: Path) -> Path:
        found = sorted(glob.glob(str(directory / "_core*.so")))
        if not found:
            sys.exit(f"vaed_client: no _core*.so in {directory} (build target vaed_python first, "
                     "or unset VAED_BUILD_DIR to build it here)")
        return Path(found[0])

    def cmake_build(self) -> Path:
        if shutil.which("cmake") is None:
            sys.exit("vaed_client: cmake is needed to build the extension (apt-get install cmake)")
        build_dir = Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = ["cmake", "-S", str(REPO), "-B", str(build_dir), *generator,
                     "-DCMAKE_BUILD_TYPE=Release", "-DVAED_CLIENT_ONLY=ON",
                     "-DVAED_BUILD_PYTHON=ON", "-DVAED_BUILD_TESTS=OFF", "-DVAED_WERROR=OFF",
                     f"-DPython_EXECUTABLE={sys.executable}",
                     *shlex.split(os.environ.get("VAED_CMAKE_ARGS", ""))]
        print("vaed_client:", " ".join(configure), flush=True)
        subprocess.run(configure, check=True)
        jobs = str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "vaed_python_core",
                        "-j", jobs], check=True)
        return self.find_core(build_dir / "python" / "vaed_client")


def out_of_tree_options() -> dict:
    """Default options that send setuptools' build tree and egg-info to a
    temporary directory instead of client/python, so that an install leaves the source
    tree as it found it (no build/, no *.egg-info). They are
    defaults: command-line options and setup.cfg override them."""
    if {"develop", "editable_wheel"} & set(sys.argv[1:]):
        return {}
    scratch = tempfile.mkdtemp(prefix="vaed-client-setup-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return {"build": {"build_base": os.path.join(scratch, "build")},
            "egg_info": {"egg_base": scratch}}


setup(
    name="vaed-client",
    version="0.1.0",
    description="Python client of the vaed VAE-decode daemon (zero-copy over POSIX shared memory)",
    packages=["vaed_client", "vaed_client.integrations"],
    package_dir={"vaed_client": str(Path("vaed_client")),
                 "vaed_client.integrations": str(Path("vaed_client") / "integrations")},
    package_data={"vaed_client": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("vaed_client._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy>=1.22"],
    zip_safe=False,
    options=out_of_tree_options(),
)
