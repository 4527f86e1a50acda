"""The built site's own assets: MathJax served by the site, and each script tag written once.

MathJax 3 comes from the pinned ``django-static-mathjax`` wheel (plain static files; it needs no Django).
Its ``es5`` folder is copied into ``_static/mathjax`` of the HTML output, and Sphinx is pointed at it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MATHJAX_SCRIPT = "mathjax/tex-chtml.js"


def mathjax_source() -> Path:
    import mathjax  # the django-static-mathjax distribution installs the package "mathjax"

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (source / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax files not found under {source}; reinstall with `make setup`")
    return source


def copy_mathjax(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        shutil.copytree(mathjax_source(), Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def point_sphinx_at_local_mathjax(app, config) -> None:
    mathjax_source()  # fail at the start of a build, not after it
    # A relative mathjax_path is resolved against the _static folder of the output.
    config.mathjax_path = MATHJAX_SCRIPT


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    """Write each script once per page.

    Inline scripts get registered twice, once with the file name ``None`` and once with ``""``, which Sphinx
    does not see as equal. For sphinx-thebe's configuration (``const THEBE_JS_URL = ...``) the second copy
    redeclares a ``const``: a JavaScript error on every page.
    """
    if "script_files" not in context:
        return
    unique = {}
    for script in context["script_files"]:
        key = (script.filename or "", script.priority, tuple(sorted(script.attributes.items())))
        unique.setdefault(key, script)
    context["script_files"] = list(unique.values())


def setup(app):
    # The note under a lesson's stamp that says whose run the page shows (gpu_runs.py, beside this file), set up
    # with the site's other parts: _config.yml's local_extensions may list it too (Sphinx sets an extension up once).
    app.setup_extension("gpu_runs")
    # {gpu-headline}: the newest GPU file's figures in two sentences (gpu_headline.py, beside this file).
    app.setup_extension("gpu_headline")
    app.connect("config-inited", point_sphinx_at_local_mathjax)
    app.connect("html-page-context", drop_duplicate_scripts)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
