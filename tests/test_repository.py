"""Repository rules a reviewer would otherwise check by hand."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parent.parent
INTERNALS = ROOT / "keras_relrec" / "utils" / "keras_internals.py"
TF_INTERNALS = ROOT / "keras_relrec" / "export" / "tensorflow_internals.py"
# Keras' private modules, and the private attributes of Keras objects the
# package reads.
PRIVATE = re.compile(
    r"^\s*(from|import)\s+keras\.src|\._(flatten_layers|functional|keras_history|nodes_by_depth"
    r"|run_through_graph|call_has_training_arg|inbound_nodes|keras_mask)\b"
)
# TensorFlow's private modules and the converter's private settings.
TF_PRIVATE = re.compile(r"^\s*(from|import)\s+tensorflow\.(python|compiler|lite\.python)\b|\._experimental_")


def python_files():
    for folder in ("keras_relrec", "tests", "tutorials", "benchmarks"):
        yield from (ROOT / folder).rglob("*.py")
    yield ROOT / "keras_relrec_cli.py"
    yield ROOT / "setup.py"


@pytest.mark.parametrize(("fence", "private"), [(INTERNALS, PRIVATE), (TF_INTERNALS, TF_PRIVATE)],
                         ids=["keras", "tensorflow"])
def test_private_api_is_used_in_its_fence_module_only(fence, private):
    """Moving to the next Keras (TensorFlow) is then the work of
    keras_internals.py (tensorflow_internals.py)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in python_files()
        if path != fence and path != pathlib.Path(__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert not offenders, offenders
    assert any(private.search(line) for line in fence.read_text().splitlines()), "the pattern matches nothing"


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


@pytest.fixture(scope="module")
def module_resource():
    """A module-scoped fixture, so that the check below has a test using one
    (itself) whatever the session collected."""
    return object()


def test_tests_sharing_a_module_fixture_share_an_xdist_group(request, module_resource):
    """`make test` and `make check` run `--dist loadgroup`, which runs the tests of one
    `xdist_group` on one worker. tests/conftest.py groups the tests of a
    module that use a module-scoped fixture (a reference model loaded or
    converted), and the users of one of the suite's session fixtures mark
    one group, so that one worker sets the fixture up once: checked over
    this session's tests (the whole suite in make check). On a worker of
    `--dist loadgroup` the group is in the node id, where xdist's scheduler
    reads it (the conftest's hook ran before xdist's)."""
    loadgroup = getattr(request.config.option, "loadgroup", False)
    groups = {}  # (module, fixture): the groups of the tests using it
    for item in request.session.items:
        fixtures = item._fixtureinfo.name2fixturedefs if hasattr(item, "_fixtureinfo") else {}
        # The last definition of a name is the one the test gets.
        shared = [name for name, defs in fixtures.items() if defs and defs[-1].scope == "module"]
        # The suite's own session fixtures (a file converted once per
        # session): every user in one group, whatever its module.
        session = [name for name, defs in fixtures.items()
                   if defs and defs[-1].scope == "session" and defs[-1].func.__module__.startswith("tests.")]
        if not shared + session:
            continue
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        assert names, f"{item.nodeid} uses the fixtures {shared + session} but has no xdist_group"
        if loadgroup:
            assert item.nodeid.endswith("@" + "_".join(names)), item.nodeid
        for name in shared:
            groups.setdefault((item.nodeid.split("::")[0], name), set()).add(tuple(names))
        for name in session:
            groups.setdefault(("session", name), set()).add(tuple(names))
    assert (pathlib.Path(__file__).relative_to(ROOT).as_posix(), "module_resource") in groups
    split = {key: names for key, names in groups.items() if len(names) > 1}
    assert not split, split


def test_a_slow_test_of_make_test_fails_and_the_limit_scales_with_the_machine(monkeypatch):
    """tests/time_limit.py: over the limit a test fails, naming itself, its
    seconds and what to do; the limit is 10 s times the machine's scale,
    which is never below 1 and can be given."""
    from tests import time_limit

    assert time_limit.over_limit("t", 9.9, 10.0) is None
    message = time_limit.over_limit("tests/x.py::test_y", 12.3, 10.0)
    assert "tests/x.py::test_y took 12.3 s" in message and "limit of 10.0 s" in message
    assert "@pytest.mark.check" in message
    reference = time_limit.REFERENCE_S
    assert time_limit.scale_for(reference / 2) == 1.0
    assert time_limit.scale_for(reference * 2.7) == pytest.approx(2.7)
    monkeypatch.setenv("KERAS_RELREC_TEST_TIME_SCALE", "2.5")
    assert time_limit.machine_scale() == 2.5
