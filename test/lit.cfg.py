# lit configuration for vtmlir's FileCheck tests (test/Dialect, test/Transforms, test/Conversion, ...).
#
# Tools: `vt-opt` is the installed console script next to this Python (or on PATH); from a source
# tree without an install, tools/vt-opt runs with this Python. `filecheck` / `FileCheck` is the Python
# `filecheck` package. `not` is lit's builtin.

import os
import shutil
import sys

import lit.formats

config.name = "vtmlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["lit.cfg.py", "Inputs", "python", "Output", "fuzz"]
config.test_source_root = os.path.dirname(__file__)
_repo = os.path.dirname(config.test_source_root)
config.test_exec_root = os.environ.get("VTMLIR_LIT_EXEC_ROOT", os.path.join(_repo, "build", "lit"))

# Keep the environment the tools need (pyenv, virtualenvs, HOME for caches).
for var in ("HOME", "PYENV_VERSION", "PYENV_ROOT", "VIRTUAL_ENV", "PYTHONPATH", "VTMLIR_DEBUG", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def _tool(name, fallback_args):
    """The console script `name` of this Python's environment, else on PATH, else the fallback."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which(name)
    if found:
        return found
    return " ".join(fallback_args)


_vt_opt = _tool("vt-opt", [sys.executable, os.path.join(_repo, "tools", "vt-opt")])
_filecheck = _tool("filecheck", [sys.executable, "-m", "filecheck"])

# Whole-word substitutions (not inside paths such as test/Transforms/vt-opt-foo.mlir).
_word = r"(?<![\w/.%-]){}(?![\w/.-])"
config.substitutions.append((_word.format("vt-opt"), _vt_opt))
config.substitutions.append((_word.format("FileCheck"), _filecheck))
config.substitutions.append((_word.format("filecheck"), _filecheck))
config.substitutions.append(("%python", sys.executable))
