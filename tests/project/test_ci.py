""".ci/run: the README's test command, run in a virtual environment made for the run, so a dependency that no
requirements file names fails CI as it fails a new user; pytest's exit status is CI's."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from checkpointing.paths import REPO_ROOT

COMMAND_LINE = re.compile(r"^TEST_COMMAND='(.*)'$", flags=re.M)


def test_the_command_ci_runs_is_the_readme_test_command():
    command = COMMAND_LINE.search((REPO_ROOT / ".ci" / "run").read_text()).group(1)
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"```bash\n{command}\n```" in readme  # a block of its own, as a user copies it
    assert command.endswith("python -m pytest") and "pip install -q -r requirements-dev.txt -e ." in command


def test_ci_runs_the_command_in_a_fresh_environment_and_returns_its_status(tmp_path):
    """The script, with the README command replaced by a probe that reports where it runs and exits 7."""
    probe = 'python -c "import sys; print(sys.prefix)" && echo "$CI"; exit 7'
    script = COMMAND_LINE.sub(lambda _: f"TEST_COMMAND='{probe}'", (REPO_ROOT / ".ci" / "run").read_text())
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text(script)
    (tmp_path / "README.md").write_text(f"```bash\n{probe}\n```\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 7, result.stderr[-2000:]  # the command's own status, not 0 or 1
    prefix, ci = result.stdout.split()
    assert Path(prefix).resolve() != Path(sys.prefix).resolve()  # not the environment the tests run in
    assert Path(prefix).resolve().is_relative_to(tmp_path.resolve())  # a new one, in a temporary folder
    assert not Path(prefix).exists()  # removed after the run
    assert ci == "true"


def test_ci_refuses_a_readme_without_its_command(tmp_path):
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO_ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "README.md").write_text("# nothing to run\n")
    result = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "does not contain the test command" in result.stderr


def test_ci_makes_apt_wait_for_its_lock(tmp_path):
    """apt, run by the README command inside the script, sees a configuration that waits for the dpkg lock: the
    probe prints what apt-config reads (the setting, and that it is apt's own parser reading it)."""
    probe = 'apt-config dump DPkg::Lock::Timeout; exit 0'
    script = COMMAND_LINE.sub(lambda _: f"TEST_COMMAND='{probe}'", (REPO_ROOT / ".ci" / "run").read_text())
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text(script)
    (tmp_path / "README.md").write_text(f"```bash\n{probe}\n```\n")
    result = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert 'DPkg::Lock::Timeout "600";' in result.stdout
