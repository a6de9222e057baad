"""The README and the documentation site (docs/) say what runs, and the API
pages document every public name.

Every fenced ```python block of README.md and docs/**/*.md is one test: it
runs as written, alone, in a fresh namespace and an empty working folder,
so that a reader can paste it. The info string may carry a visible title
(pymdownx's `title="..."`, shown above the block on the site):

- `title="Not run: <reason>"` does not run the block (its reason, e.g. a
  package the suite does not install, written beside it): the block must
  still parse, and every name it imports from keras_relrec must exist;
- a title that starts with environment assignments and `python`, e.g.
  `title="KERAS_BACKEND=jax python train.py"`, runs the block as that
  command: in a child process with those variables (a JAX block there
  sees two host devices, as the distribution tests make them).

The blocks of the family pages (docs/layers/) build a layer or two and
run in `make test`; the others, and those of the family pages that train
or generate (`.fit(`, `.generate(`), train, export or search, and are
`make check` tests (marker `check`), as the README's quick start is. The checks
of the API pages and of the README's table run in `make test`.
"""

import ast
import importlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parent.parent
DOCS = ROOT / "docs"
# A fence at any indentation (a block inside a list item is indented), its
# info string, its body, and the closing fence at the same indentation.
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   flags=re.M | re.S)
TITLE = re.compile(r'title="([^"]*)"')
COMMAND = re.compile(r"^((?:[A-Z_][A-Z0-9_]*=\S+\s+)+)python\b")
# keras_relrec.ops is not among them: the layers' shared math, not an API
# (its docstring says so).
PACKAGES = ("layers", "constraints", "models", "export", "tuning", "datasets", "migrate")


def markdown_files():
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def python_blocks():
    """(path, line, title, source) of every fenced python block."""
    for path in markdown_files():
        text = path.read_text()
        for match in FENCE.finditer(text):
            title = TITLE.search(match["info"])
            source = textwrap.dedent("\n".join(line[len(match["indent"]):] if line.startswith(match["indent"])
                                               else line for line in match["body"].split("\n")))
            yield path, text.count("\n", 0, match.start()) + 1, title[1] if title else "", source


def block_params():
    params = []
    for path, line, title, source in python_blocks():
        where = f"{path.relative_to(ROOT).as_posix()}:{line}"
        marks = []
        if title.lower().startswith("not run"):
            # Only with the reason written beside it.
            assert re.fullmatch(r"Not run: \S.*", title), f"{where}: a block not run says why: {title!r}"
        if not path.is_relative_to(DOCS / "layers") or re.search(r"\.(fit|generate)\(", source):
            marks.append(pytest.mark.check)
        params.append(pytest.param(path, line, title, source, id=where, marks=marks))
    return params


def run_in_child(source, title, where, folder):
    """Runs the block as its title's command: its variables, a fresh process."""
    env = dict(os.environ)
    for assignment in COMMAND.match(title)[1].split():
        name, value = assignment.split("=", 1)
        env[name] = value
    if env.get("KERAS_BACKEND") == "jax":
        # As the distribution tests do: the flags of make's one-thread runs
        # (not all XLA's own) would keep the device count from applying.
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    script = folder / "block.py"
    script.write_text(source)
    result = subprocess.run([sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{where} failed as `{title}`:\n{result.stdout[-3000:]}{result.stderr[-6000:]}"


@pytest.mark.parametrize(("path", "line", "title", "source"), block_params())
def test_python_block_runs(path, line, title, source, tmp_path, monkeypatch):
    where = f"{path.relative_to(ROOT).as_posix()}:{line}"
    if title.lower().startswith("not run"):
        check_block_not_run(source, where)
        return
    monkeypatch.chdir(tmp_path)
    if "transfo-xl-checkpoint" in source:
        # The small HF checkpoint the golden script writes with HuggingFace.
        shutil.copytree(ROOT / "tests" / "goldens" / "transfo_xl_lm_wt103_checkpoint", "transfo-xl-checkpoint")
    if COMMAND.match(title):
        run_in_child(source, title, where, tmp_path)
        return
    import keras

    keras.backend.clear_session()
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(source, where, "exec"), namespace)
    finally:
        # What a block may set for the whole process.
        keras.config.set_dtype_policy("float32")
        keras.distribution.set_distribution(None)
    if "model_savedmodel" in source:
        check_quick_start(namespace)


def check_block_not_run(source, where):
    """What can be checked of a block without running it: it parses, and
    what it imports from keras_relrec is there."""
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "keras_relrec":
            module = importlib.import_module(node.module)
            missing = [alias.name for alias in node.names if not hasattr(module, alias.name)]
            assert not missing, f"{where} imports {missing} from {node.module}, which has no such name"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "keras_relrec":
                    importlib.import_module(alias.name)


def check_quick_start(namespace):
    """The README's quick start: its files are written, and the model it
    reloads answers as the one it saved."""
    assert os.path.isfile("model.keras")
    assert os.path.isfile(os.path.join("model_savedmodel", "saved_model.pb"))
    assert os.path.isfile("model.tflite") and os.path.isfile("model_step.tflite")
    x = namespace["x"]
    diff = abs(namespace["reloaded"].predict(x, verbose=0) - namespace["model"].predict(x, verbose=0))
    assert diff.max() <= 1e-5
    np.testing.assert_allclose(namespace["predictions"], namespace["model"].predict(x, verbose=0), atol=1e-4)


def test_blocks_are_found():
    """The pattern finds the blocks: the README's quick start, and blocks in
    the docs; no python fence is left unparsed."""
    found = list(python_blocks())
    assert any(path == ROOT / "README.md" for path, *_ in found)
    assert sum(path != ROOT / "README.md" for path, *_ in found) >= 10
    fences = sum(len(re.findall(r"^[ \t]*```python", path.read_text(), flags=re.M)) for path in markdown_files())
    assert fences == len(found)


def public_names(package):
    """{name: where it is defined} for the names a package's __init__ (or a
    module) imports, but the private ones: `module.name`, or for a module
    imported whole its own path."""
    path = ROOT / "keras_relrec" / package.replace(".", "/")
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return {name: source for name, source in names.items() if not name.startswith("_")}


def is_module(dotted):
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@pytest.mark.parametrize("package", [*PACKAGES, "export.micro"])
def test_every_public_name_is_in_the_api_reference(package):
    """Each public name of the package has a `::: keras_relrec.<package>.<name>`
    entry in docs/api/; a sub-module the package imports may have its entry
    under the path that defines it."""
    api = "\n".join(path.read_text() for path in (DOCS / "api").glob("*.md"))
    documented = set(re.findall(r"^::: (keras_relrec\.[\w.]+)", api, flags=re.M))
    names = public_names(package)
    assert names
    missing = [name for name, source in names.items()
               if f"keras_relrec.{package}.{name}" not in documented
               and not (is_module(source) and source in documented)]
    assert not missing, f"keras_relrec.{package}: no API entry for {missing}"


def test_every_public_layer_is_in_the_readme_table():
    """The README's table of layers lists every public layer, with a link."""
    readme = (ROOT / "README.md").read_text()
    rows = {match[1]: match[2] for match in re.finditer(r"^\| \[`(\w+)`\]\(([^)]+)\) \|", readme, flags=re.M)}
    missing = [name for name in public_names("layers") if name not in rows]
    assert not missing, missing
    for name, link in rows.items():
        assert (ROOT / link.split("#")[0]).is_file(), f"{name}: {link}"


def test_a_block_not_run_is_still_checked():
    """A block not run fails on a syntax error or a name keras_relrec lacks."""
    check_block_not_run("import torch\nfrom keras_relrec.layers import TransformerXL\n", "ok")
    with pytest.raises(SyntaxError):
        check_block_not_run("import torch\nx = (\n", "broken")
    with pytest.raises(AssertionError, match="NoSuchLayer"):
        check_block_not_run("from keras_relrec.layers import NoSuchLayer\n", "missing")
