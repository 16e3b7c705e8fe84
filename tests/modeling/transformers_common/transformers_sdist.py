"""transformers' own common test suites, fetched from the package index: the sdist of the installed transformers ships
tests/test_modeling_common.py (ModelTesterMixin) and tests/test_configuration_common.py (ConfigTester).

It ships neither the modules those import from subfolders (tests/generation/test_utils.py with GenerationTesterMixin,
tests/exporters/test_export.py with ExportTesterMixin, tests/utils/test_configuration_utils.py), nor
tests/causal_lm_tester.py. Those are filled with empty stand-ins named for what they lack, so the shipped modules import;
the tests that need them are skipped by name, with that reason, in test_transformers_common.py, and our own suite covers generation
and export (tests/modeling/test_generation.py, tests/modeling/test_compile_export.py). ``parameterized``, which the suite imports, is
installed beside the sources (pip --target), never into the environment.
"""

import subprocess
import sys
import tarfile
from pathlib import Path

import transformers

from checkpointing.paths import data_dir

STAND_INS = {
    "generation/test_utils.py": "class GenerationTesterMixin:\n    '''Stand-in: the sdist lacks tests/generation/.'''\n",
    "exporters/test_export.py": "class ExportTesterMixin:\n    '''Stand-in: the sdist lacks tests/exporters/.'''\n",
    "utils/test_configuration_utils.py": "config_common_kwargs = None  # stand-in: the sdist lacks tests/utils/\n",
}


def _run(*command: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *command, "--quiet", "--disable-pip-version-check"], check=True)


def prepare(root: Path | None = None) -> Path:
    """Download (once) and unpack the suites of the installed transformers; put them on sys.path as ``transformers_tests``."""
    version = transformers.__version__
    root = root or data_dir() / "transformers-common" / version
    package = root / "transformers_tests"
    if not (package / "test_modeling_common.py").exists():
        root.mkdir(parents=True, exist_ok=True)
        _run("download", "--no-deps", "--no-binary", ":all:", f"transformers=={version}", "-d", str(root))
        _run("install", "--target", str(root / "site"), "parameterized")
        prefix = f"transformers-{version}/tests/"
        with tarfile.open(root / f"transformers-{version}.tar.gz") as archive:
            for member in archive.getmembers():
                if member.name.startswith(prefix) and member.name.endswith(".py") and member.isfile():
                    target = package / member.name[len(prefix):]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.extractfile(member).read())
        for relative, text in STAND_INS.items():
            (package / relative).parent.mkdir(parents=True, exist_ok=True)
            (package / relative).write_text(text)
        for folder in {package, *(p.parent for p in package.rglob("*.py"))}:
            (folder / "__init__.py").touch()
    for path in (str(root), str(root / "site")):
        if path not in sys.path:
            sys.path.insert(0, path)
    return package
