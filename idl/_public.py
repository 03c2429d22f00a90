"""Public names show under the package that exports them, not the private module defining them.

``repr``, tracebacks, pickles and generated docs use a class's (or function's)
``__module__``: after :func:`show_as`, ``qos.History`` prints as
``<class 'qos.History'>`` instead of ``qos._policies.History``. Objects another
distribution defines (e.g. ``cyclonedds`` annotations re-exported by ``idl``)
are left alone.
"""

from __future__ import annotations

import inspect

_OURS = ("idl.", "qos.", "dcps.")


def show_as(package: str, *objects: object) -> None:
    """Set ``__module__`` of each class or function of this project to ``package``."""
    for obj in objects:
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if obj.__module__.startswith(_OURS):
            obj.__module__ = package
