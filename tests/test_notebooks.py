"""The notebooks in notebooks/ run top to bottom in a fresh kernel, within a minute
each, and are committed without outputs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
KERNEL = "python3"


def test_there_are_notebooks_and_they_have_no_outputs() -> None:
    assert len(NOTEBOOKS) >= 2
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        assert book.metadata["kernelspec"]["name"] == KERNEL
        for cell in book.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.fixture(scope="session")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The python3 kernel of this interpreter; if no kernelspec is found (a bare
    environment), install one into a temporary prefix and point Jupyter at it."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(KERNEL)
        return KERNEL
    except NoSuchKernel:
        pass
    prefix = tmp_path_factory.mktemp("jupyter")
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix),
                    "--name", KERNEL], check=True, capture_output=True)
    share = str(prefix / "share" / "jupyter")
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = share if not old else os.pathsep.join([share, old])
    return KERNEL


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path, kernel: str, tmp_path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(book, kernel_name=kernel, timeout=120,
                                     resources={"metadata": {"path": str(tmp_path)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, with the cell and its traceback
    took = time.perf_counter() - start
    assert took < 120, f"{path.name} took {took:.0f} s (meant to run in under a minute)"
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    assert not list(tmp_path.iterdir()), "a notebook wrote into its working directory"


@pytest.mark.slow
def test_a_notebook_reads_the_checkout_it_is_opened_in(kernel: str, tmp_path: Path) -> None:
    # a checkout of its own: results/ with a three-row table, the notebook in notebooks/
    source = next(p for p in NOTEBOOKS if p.stem == "rolloutpipe_figures")
    (tmp_path / "results").mkdir()
    (tmp_path / "notebooks").mkdir()
    rows = (source.parents[1] / "results" / "rolloutpipe.csv").read_text().splitlines()[:4]
    (tmp_path / "results" / "rolloutpipe.csv").write_text("\n".join(rows) + "\n")
    book = nbformat.read(source, as_version=4)
    first = next(i for i, c in enumerate(book.cells) if c.cell_type == "code")
    book.cells = book.cells[:first + 1]
    client = nbclient.NotebookClient(book, kernel_name=kernel, timeout=120, resources={
        "metadata": {"path": str(tmp_path / "notebooks")}})  # Jupyter's working folder
    client.execute()
    printed = "".join(o.get("text", "") for o in book.cells[first].outputs)
    assert printed.startswith("3 rows:"), printed
