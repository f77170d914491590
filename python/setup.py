"""Builds cumulus._core with the project's CMake (the folder above this one).

CUMULUS_BUILD_DIR: the absolute path of an already configured CMake build folder of the project
to build the extension in (scripts/examples.sh passes its own, so nothing is compiled twice); by
default a fresh one under build/ here, configured with the tests and benchmarks off.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent


def project_version() -> str:
    text = (PROJECT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(cumulus\s+VERSION\s+([0-9.]+)", text)
    if match is None:
        raise RuntimeError(f"no project(cumulus VERSION ...) in {PROJECT / 'CMakeLists.txt'}")
    return match.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if not (PROJECT / "src" / "core").is_dir():
            raise RuntimeError(f"{PROJECT} is not a cumulus checkout: build from the repository")
        build_dir = os.environ.get("CUMULUS_BUILD_DIR")
        if build_dir:
            build_dir = Path(build_dir)
            if not build_dir.is_absolute():  # pip runs this from python/, not from the caller's folder
                raise RuntimeError(f"CUMULUS_BUILD_DIR must be an absolute path, not {build_dir}")
        else:
            build_dir = Path(self.build_temp).resolve() / "cmake"
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.run(["cmake", "-S", str(PROJECT), "-B", str(build_dir), *generator,
                            "-DCMAKE_BUILD_TYPE=Release", "-DCUMULUS_BUILD_TESTS=OFF",
                            "-DCUMULUS_BUILD_BENCH=OFF", "-DCUMULUS_BUILD_PYTHON=ON",
                            f"-DPython_EXECUTABLE={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "cumulus_python"],
                       check=True)
        built = list((build_dir / "python" / "cumulus").glob("_core.*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one _core.*.so in {build_dir}/python/cumulus, found {built}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    version=project_version(),
    ext_modules=[Extension("cumulus._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
