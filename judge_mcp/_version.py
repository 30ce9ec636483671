"""The installed distribution: its version, a leaf any module may import (the package face imports the Python API on
first use), and the commands that add one of its optional extras (`postgres`, `otel`), for the messages that say
one is missing. judge-mcp is not on PyPI yet, so `pip install 'judge-mcp[postgres]'` fails ("not found in the
package registry"): a hint names the extra's own packages instead, read from the installed package's metadata
(pyproject.toml's [project.optional-dependencies]), for pip and for a pipx install."""

from __future__ import annotations

__version__ = "0.1.0"
DISTRIBUTION = "judge-mcp"


def packages(extra: str) -> list[str]:
    """The requirements the extra adds (e.g. `psycopg[binary]>=3.2`), or [] when the metadata cannot be read."""
    # lazy: the metadata is read only on the error path that names a missing extra
    import re
    from importlib import metadata

    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(r"""\bextra\s*==\s*["']""" + re.escape(extra) + r"""["']""")
    found = []
    for requirement in requires:
        spec, _, condition = requirement.partition(";")
        if marker.search(condition):
            found.append(spec.replace(" ", ""))
    return found


def install_hint(extra: str) -> str:
    """`pip install 'a' 'b' (installed with pipx: pipx inject judge-mcp 'a' 'b')`, the extra's packages by name."""
    # lazy: only the error path that names a missing extra quotes its packages
    import shlex

    found = packages(extra)
    if not found:  # no metadata (a source tree on sys.path): the checkout's own form
        return f"pip install '/path/to/judge-mcp[{extra}]' (from a checkout of judge-mcp)"
    quoted = " ".join(shlex.quote(p) for p in found)
    return f"pip install {quoted} (installed with pipx: pipx inject {DISTRIBUTION} {quoted})"
