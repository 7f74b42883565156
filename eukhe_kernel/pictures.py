"""Rich displays in the kernel: the MIME bundle of a value (its images, Markdown and HTML), and matplotlib's figures.

A bundle is Jupyter's: `text/plain` always (the repr), an image as base64 (`image/png`, `image/jpeg`) or as text
(`image/svg+xml`), `text/markdown` and `text/html` as text. An object gives its image through `_repr_png_`,
`_repr_jpeg_` or `_repr_svg_` (the first that answers: a PIL image has the first two), a matplotlib figure through
`savefig` at its own size and dpi. The host bounds and saves the images and turns the HTML into text.

matplotlib is never imported here: a finder on `sys.meta_path` waits for a cell to import it, then sets the Agg
backend (no window, no display server) and makes `pyplot.show()` display the open figures and close them.
"""

from __future__ import annotations

import base64
import importlib.abc
import importlib.machinery
import io
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

IMAGE_METHODS = (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"), ("_repr_svg_", "image/svg+xml"))
"""The image representations, in the order they are asked for: the first that gives data is the image."""
TEXT_METHODS = (("_repr_markdown_", "text/markdown"), ("_repr_html_", "text/html"))
"""The text representations (every one that gives a string)."""


PLAIN_TYPES = frozenset({int, float, complex, bool, str, bytes, bytearray, type(None), list, tuple, dict, set, range})
"""Built-in types without a rich representation: a value of exactly one is its repr alone, with no lookup of the
five methods (most results are such values)."""


def bundle_of(obj: Any, plain: str | None = None) -> dict[str, Any]:
    """The MIME bundle of `obj`: its repr (or `plain`) and every rich representation it gives. A representation
    that raises or gives the wrong type is left out: the repr still shows."""
    bundle: dict[str, Any] = {"text/plain": repr(obj) if plain is None else plain}
    if type(obj) in PLAIN_TYPES:
        return bundle
    image = figure_png(obj)
    if image is not None:
        bundle["image/png"] = base64.b64encode(image).decode("ascii")
    else:
        for method, mime in IMAGE_METHODS:
            data = _call(obj, method)
            if isinstance(data, tuple) and data:  # (data, metadata), as IPython allows
                data = data[0]
            if mime == "image/svg+xml" and isinstance(data, bytes):
                data = data.decode("utf-8", "replace")
            if isinstance(data, bytes | bytearray) and data:
                bundle[mime] = base64.b64encode(bytes(data)).decode("ascii")
                break
            if isinstance(data, str) and data and mime == "image/svg+xml":
                bundle[mime] = data
                break
    for method, mime in TEXT_METHODS:
        text = _call(obj, method)
        if isinstance(text, str):
            bundle[mime] = text
    return bundle


def is_rich(bundle: dict[str, Any]) -> bool:
    """Whether a bundle has more than its repr."""
    return any(mime != "text/plain" for mime in bundle)


def _call(obj: Any, method: str) -> Any:
    """`obj.method()`, or None when it has no such method or it fails (a class, not an instance, has them too)."""
    if isinstance(obj, type):
        return None
    render = getattr(obj, method, None)
    if not callable(render):
        return None
    try:
        return render()
    except Exception:
        return None


# ---- matplotlib ---------------------------------------------------------------------------------------------------


def figure_png(obj: Any) -> bytes | None:
    """A matplotlib figure as PNG at its own size and dpi (None when `obj` is no figure); the figure is closed, so it
    shows once."""
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is None or not isinstance(obj, figure_module.Figure):
        return None
    buffer = io.BytesIO()
    obj.savefig(buffer, format="png")
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(obj)
    return buffer.getvalue()


def open_figures() -> list[Any]:
    """pyplot's open figures, oldest first (none when pyplot was not imported)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    return [pyplot.figure(number) for number in pyplot.get_fignums()]


class _AfterImport(importlib.abc.Loader):
    """A loader that runs the real one, then `after` on the module it made."""

    def __init__(self, loader: importlib.abc.Loader, after: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:  # is_package, get_resource_reader...: the real loader's
        return getattr(self._loader, name)


class MatplotlibHook(importlib.abc.MetaPathFinder):
    """Sets the Agg backend when a cell imports matplotlib, and makes `pyplot.show()` call `show`."""

    def __init__(self, show: Callable[[Sequence[Any]], None]) -> None:
        self._show = show

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        after = {"matplotlib": _use_agg, "matplotlib.pyplot": self._patch_show}.get(fullname)
        if after is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _AfterImport(spec.loader, after)
            return spec
        return None

    def _patch_show(self, pyplot: ModuleType) -> None:
        def show(*args: Any, **kwargs: Any) -> None:
            """Display every open figure in the cell's answer, then close it (the Agg backend shows no window)."""
            self._show(open_figures())

        show.__wrapped__ = pyplot.show  # type: ignore[attr-defined]
        pyplot.show = show  # type: ignore[attr-defined]


def _use_agg(matplotlib: ModuleType) -> None:
    matplotlib.use("Agg")


def install(show: Callable[[Sequence[Any]], None]) -> MatplotlibHook:
    """Put the matplotlib hook first on `sys.meta_path` (once)."""
    for finder in sys.meta_path:
        if isinstance(finder, MatplotlibHook):
            return finder
    hook = MatplotlibHook(show)
    sys.meta_path.insert(0, hook)
    return hook
