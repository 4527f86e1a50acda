"""The page's ``{eval}`glued.<name>``` roles, read from the values the notebook glued.

A lesson's prose shows measured values with myst-nb's ``{eval}`` role, because JupyterLab's MyST renderer
(jupyterlab-myst) evaluates the same role in the attendee's kernel, where ``glued.<name>`` is what
:func:`gpukit.glue` recorded; it cannot render myst-nb's ``{glue:text}`` role. myst-nb evaluates ``{eval}``
only in its inline execution mode, with the kernel still running; the book executes through its cache, so
myst-nb's clients raise NotImplementedError. This extension gives those clients the answer the kernel would
have given: the value the notebook glued under ``<name>`` (``gpukit.glue`` glues it under the same name, already
formatted). Any other expression, or a name nothing glued, stays an error, which the strict build (-W) stops on.
"""

from __future__ import annotations

import re

from myst_nb.core.execute.base import EvalNameError, NotebookClientBase

PREFIX = "glued."


def eval_from_glue(client: NotebookClientBase, name: str):
    """The outputs ``{eval}`name``` shows: the glued value of ``glued.<key>``."""
    pattern = client.nb_config.eval_name_regex
    if not re.match(pattern, name):
        raise EvalNameError(name)
    key = name.removeprefix(PREFIX)
    if not name.startswith(PREFIX) or key not in client.glue_data:
        raise KeyError(f"{name!r}: the notebook glued no value {key!r} (gpukit.glue({key!r}, ...) before this prose)")
    return [client.glue_data[key]]


def setup(app):
    # Every client but the inline one (which has a live kernel and its own eval_variable) uses the base method.
    NotebookClientBase.eval_variable = eval_from_glue
    return {"parallel_read_safe": True, "parallel_write_safe": True}
