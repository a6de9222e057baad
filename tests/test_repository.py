"""Repository rules a reviewer would otherwise check by hand."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).parent.parent
INTERNALS = ROOT / "keras_relrec" / "utils" / "keras_internals.py"
# Keras' private modules, and the private attributes of Keras objects the
# package reads.
PRIVATE = re.compile(
    r"^\s*(from|import)\s+keras\.src|\._(flatten_layers|functional|keras_history|nodes_by_depth"
    r"|run_through_graph|call_has_training_arg|inbound_nodes|keras_mask)\b"
)


def python_files():
    for folder in ("keras_relrec", "tests", "tutorials", "benchmarks"):
        yield from (ROOT / folder).rglob("*.py")
    yield ROOT / "keras_relrec_cli.py"
    yield ROOT / "setup.py"


def test_keras_private_api_is_used_in_one_module_only():
    """Moving to the next Keras is then the work of keras_internals.py."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in python_files()
        if path != INTERNALS and path != pathlib.Path(__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not offenders, offenders


def test_layers_use_keras_ops_not_tensorflow():
    """Layer code runs on every backend; TensorFlow lives in export/ only."""
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("layers", "ops", "constraints", "utils", "models")
        for path in (ROOT / "keras_relrec" / folder).rglob("*.py")
        if re.search(r"^\s*(import tensorflow|from tensorflow)", path.read_text(), flags=re.M)
    ]
    assert not offenders, offenders


def test_constraints_pin_registry_releases_only():
    """Every line of constraints.txt is `name==version`: a local file or a
    URL installs on the machine that wrote it and nowhere else."""
    lines = [line.strip() for line in (ROOT / "constraints.txt").read_text().splitlines()]
    pins = [line for line in lines if line and not line.startswith("#")]
    offenders = [line for line in pins if not re.fullmatch(r"[A-Za-z0-9._-]+(\[[^\]]*\])?==[A-Za-z0-9.+!_-]+", line)]
    assert pins and not offenders, offenders


def fixture_setups_on_two_workers(tmp_path, scope, mark=""):
    """Runs eight tests using a `scope` fixture (each marked `mark`) and
    eight that do not, under `-n 2 --dist loadgroup` in `tmp_path`; the
    workers that set the fixture up, one line per setup."""
    (tmp_path / "test_setups.py").write_text(
        "import os, pytest\n"
        f"@pytest.fixture(scope={scope!r})\n"
        "def shared():\n"
        "    with open(os.environ['SETUPS'], 'a') as f:\n"
        "        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
        + mark
        + "@pytest.mark.parametrize('a', range(8))\n"
        "def test_shared(a, shared):\n"
        "    pass\n"
        "@pytest.mark.parametrize('a', range(8))\n"
        "def test_free(a):\n"
        "    pass\n"
    )
    setups = tmp_path / "setups.txt"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "test_setups.py"],
        cwd=tmp_path, env={**os.environ, "SETUPS": str(setups)}, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    return setups.read_text().split()


def test_xdist_groups_run_on_one_worker(tmp_path):
    """`make test` runs `--dist loadgroup` so that the tests of one
    `xdist_group` share a worker and its session fixture (the contract's
    other-backends results, minutes to compute) is computed once: with the
    installed pytest and pytest-xdist, a session fixture of a group is set
    up by one worker only."""
    setups = fixture_setups_on_two_workers(tmp_path, "session", "@pytest.mark.xdist_group('g')\n")
    assert len(setups) == 1, setups


def test_a_module_fixture_is_set_up_once(tmp_path):
    """With the suite's conftest, the tests that use a module-scoped fixture
    (a reference model loaded or converted) run on one worker, which sets
    it up once."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    setups = fixture_setups_on_two_workers(tmp_path, "module")
    assert len(setups) == 1, setups
