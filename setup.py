"""pip install . — builds the Python package `nibble` with CMake.

Uses only what Debian ships (python3-pip, python3-setuptools, python3-wheel,
pybind11-dev and the C++ build dependencies in .ci/deps); nothing is fetched
from the Python package index. Example, in a virtual environment that sees
Debian's numpy (and torch, when installed):

    python3 -m venv --system-site-packages ~/.venvs/nibble
    ~/.venvs/nibble/bin/pip install .
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(nibble\s+VERSION\s+([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    """Configures and builds the CMake target nibble_python (the extension
    nibble._nibble, static nibble libraries inside)."""

    def build_extension(self, ext):
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve()
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        prebuilt = os.environ.get("NIBBLE_CMAKE_BUILD_DIR") or self._reusable_build()
        if prebuilt == "none":
            prebuilt = None
        if prebuilt:
            # An existing CMake build folder configured with
            # -DNIBBLE_BUILD_PYTHON=ON for this interpreter (the test suite
            # packages the module it has just built).
            subprocess.check_call(["cmake", "--build", prebuilt, "--target", "nibble_python",
                                   "-j", jobs])
            module_dir = pathlib.Path(prebuilt) / "python" / "nibble"
            self._copy_module(module_dir, target)
            return
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        module_dir = build / "module"
        build.mkdir(parents=True, exist_ok=True)
        subprocess.check_call([
            "cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
            "-DNIBBLE_BUILD_PYTHON=ON", "-DNIBBLE_BUILD_TESTS=OFF", "-DNIBBLE_BUILD_CLI=OFF",
            "-DNIBBLE_BUILD_BENCH=OFF", f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DNIBBLE_PYTHON_MODULE_DIR={module_dir}"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "nibble_python",
                               "-j", jobs])
        self._copy_module(module_dir, target)

    @staticmethod
    def _reusable_build():
        """The source tree's own build/ when it is configured with
        -DNIBBLE_BUILD_PYTHON=ON for this interpreter (the same real
        executable: a virtual environment's python is its base's), else
        None. NIBBLE_CMAKE_BUILD_DIR=none turns this off."""
        cache = ROOT / "build" / "CMakeCache.txt"
        if not cache.is_file():
            return None
        entries = {}
        for line in cache.read_text(errors="replace").splitlines():
            m = re.match(r"([A-Za-z0-9_]+):[A-Z]+=(.*)", line)
            if m:
                entries[m.group(1)] = m.group(2)
        py = entries.get("Python3_EXECUTABLE", "")
        if entries.get("NIBBLE_BUILD_PYTHON") != "ON" or not py:
            return None
        ours = {os.path.realpath(sys.executable),
                os.path.realpath(getattr(sys, "_base_executable", sys.executable))}
        if os.path.realpath(py) not in ours:
            print(f"nibble setup.py: not reusing {ROOT / 'build'}: configured for {py}, "
                  f"not {sys.executable}", file=sys.stderr)
            return None
        print(f"nibble setup.py: reusing the CMake build in {ROOT / 'build'} (same "
              "interpreter); NIBBLE_CMAKE_BUILD_DIR=none builds from scratch", file=sys.stderr)
        return str(ROOT / "build")

    @staticmethod
    def _copy_module(module_dir, target):
        built = list(module_dir.glob("_nibble*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one _nibble*.so in {module_dir}, found {built}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


# setuptools' scratch space, away from the CMake build folders.
(ROOT / "build-python").mkdir(exist_ok=True)

setup(
    name="nibble",
    version=version(),
    description="Exact, fast dequantization of grouped int4/int8 weights "
                "(GGUF, GPTQ, AWQ, compressed-tensors, bitsandbytes, ONNX, PMX)",
    long_description=(ROOT / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    install_requires=["numpy"],
    extras_require={"distributed": ["distributed"]},  # nibble.distributed (Dask)
    packages=["nibble"],
    package_dir={"": "tools/python"},
    package_data={"nibble": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("nibble._nibble", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-python"}, "egg_info": {"egg_base": "build-python"}},
    zip_safe=False,
)
