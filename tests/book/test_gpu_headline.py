"""The GPU headline (gpukit.measuring.benchmark_records.gpu_headline, headline_sentence) that intro.md shows through
``{gpu-headline}`` (_ext/gpu_headline.py) and lesson 01 glues: the newest GPU file's figures, every number from it."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import textwrap

from gpukit.measuring.benchmark_records import gpu_headline, headline_sentence, read_benchmark_folder
from tests.support.booktoc import ROOT

BOOK_FILES = read_benchmark_folder(ROOT / "data" / "benchmarks")
H100 = "linux-x86_64-cuda-cpu-h100-80gb-hbm3-2026-11-26.json"


def test_the_newest_gpu_file_gives_each_speed_up_over_its_own_cpu_and_where_the_cpu_won():
    headline = gpu_headline(BOOK_FILES)
    assert headline["file"] == H100 and headline["date"] == "2026-11-26"
    matmul, elementwise = headline["work"]
    times = {(r["benchmark"], r["device"], r["size"]): r["median"] for r in BOOK_FILES[H100]["results"]
             if r["dtype"] == "float32"}
    assert matmul["size"] == 4096  # the largest both ran (the GPU alone ran 8192)
    assert matmul["speedup"] == times["matmul", "cpu", 4096] / times["matmul", "cuda:0", 4096]
    assert elementwise["size"] == 67108864 and elementwise["cpu_faster_at"] == []
    assert matmul["cpu_faster_at"] == [128]  # 2.5e-5 s on the CPU, 3.3e-5 s on the GPU
    sentence = headline_sentence(headline)
    assert sentence.startswith("Measured on an NVIDIA H100 80GB HBM3 on 2026-11-26, against the same machine's CPU")
    assert f"ran {matmul['speedup']:.0f} times as fast" in sentence and "of 128 x 128." in sentence


def test_a_newer_gpu_file_takes_the_headline_and_a_book_without_one_says_so():
    newer = copy.deepcopy(BOOK_FILES[H100])
    newer["date"] = "2026-12-24"
    newer["devices"]["cuda:0"]["name"] = "cuda:0 (NVIDIA H200, 139.8 GiB)"
    for result in newer["results"]:
        if result["device"] == "cuda:0":
            result["median"] /= 2
    both = {**BOOK_FILES, "newer.json": newer}
    headline = gpu_headline(both)
    assert headline["file"] == "newer.json" and headline_sentence(headline).startswith("Measured on an NVIDIA H200")
    assert headline["work"][0]["speedup"] == 2 * gpu_headline(BOOK_FILES)["work"][0]["speedup"]
    cpu_only = {name: record for name, record in BOOK_FILES.items() if name != H100}
    assert gpu_headline(cpu_only) is None and headline_sentence(None).startswith("No GPU has been measured")


def test_intro_shows_the_headline_built_from_the_files_with_a_link_to_the_appendix(tmp_path):
    """A small Sphinx project with the book's extension and data: the page shows the sentence the files make."""
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "13-benchmarks.md").write_text("# Benchmarks\n\nEvery file.\n")
    (tmp_path / "index.md").write_text("# Book\n\n```{gpu-headline}\n```\n\n"
                                       "```{toctree}\nchapters/13-benchmarks\n```\n")
    shutil.copytree(ROOT / "data" / "benchmarks", tmp_path / "data" / "benchmarks")
    (tmp_path / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "_ext")!r})
        extensions = ["myst_parser", "gpu_headline"]
        exclude_patterns = ["_build", "data"]
        """))
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(tmp_path),
                           str(tmp_path / "_build")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    html = (tmp_path / "_build" / "index.html").read_text(encoding="utf-8")
    text = " ".join(html.replace("\n", " ").split())
    sentence = headline_sentence(gpu_headline(BOOK_FILES))
    shown = text.replace("&#8217;", "'").replace("’", "'").replace("&#215;", "x")
    assert sentence[:120] in shown and sentence.split(": ", 1)[1][:60] in shown, text[-3000:]
    assert 'href="chapters/13-benchmarks.html"' in html and 'class="gpu-headline' in html
    json.loads((tmp_path / "data" / "benchmarks" / H100).read_text())  # the page read the book's own file
