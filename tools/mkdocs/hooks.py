"""MkDocs hooks of the documentation site.

The benchmarks page includes benchmarks/RESULTS.md and the tutorials page
tutorials/README.md (pymdownx.snippets), whose figures are linked from
beside them (`figures/...`). This hook serves those figures under the same
paths beside the pages (benchmarks/figures/, tutorials/figures/), from
where they are in the repository, so that they are not copied into docs/.
"""

import pathlib

from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIGURES = ("benchmarks/figures", "tutorials/figures")


def on_files(files, config):
    for folder in FIGURES:
        for path in sorted((ROOT / folder).glob("*.png")):
            files.append(File(path.relative_to(ROOT).as_posix(), src_dir=str(ROOT),
                              dest_dir=config["site_dir"], use_directory_urls=config["use_directory_urls"]))
    return files
