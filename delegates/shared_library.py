"""Finding a bridge's vendor shared library: the search and its cache, one for every
bridge that loads its vendor's library with ctypes (``qnn/library.py``,
``xnnpack/library.py``).

A bridge says where to look (its candidates) and how to load one (raising OSError when
a candidate is not usable); the rest is the same for all, so it is here: a location
given explicitly (an argument, or the bridge's environment variable) is the only one
tried, a wrong one is an error and not a fallback; otherwise the first candidate that
loads wins; why each one was rejected is kept for the NotFound message; and the result
(None included) is searched for once per value of the environment variables it reads.
"""
from __future__ import annotations

import importlib.util
import os
import sys

from pyruntime.delegates.memo import Memo


def package_dirs(name: str) -> list[str]:
    """The directories of top-level package ``name``, found without importing it (its
    import spec, and ``name`` under each ``sys.path`` entry): real paths, no repeats."""
    out = []
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        out += list(spec.submodule_search_locations or [])
        if spec.origin and spec.origin not in ("namespace", "built-in"):
            out.append(os.path.dirname(spec.origin))
    for p in sys.path:
        d = os.path.join(p, name) if p else ""
        if d and os.path.isdir(d):
            out.append(d)
    return list(dict.fromkeys(os.path.realpath(d) for d in out))


class LibrarySearch:
    """One bridge's search (see the module docstring): ``env`` names the environment
    variable of an explicit location, ``install_hint`` what to install when none loads.

    >>> search = LibrarySearch("PYRUNTIME_X_LIB", "install x")
    >>> def load(where, source):
    ...     raise OSError("not a library")
    >>> search.find(None, lambda: [("pip", "/no/libx.so")], load) is None
    True
    >>> search.unavailable_reason()
    'install x (tried: /no/libx.so (pip): not a library)'
    """

    def __init__(self, env: str, install_hint: str):
        self.env, self.install_hint = env, install_hint
        self.attempts: list[str] = []  # why each candidate of the last search was rejected
        self._found = Memo()

    def find(self, explicit, candidates, load):
        """The first library ``load(location, source)`` accepts: ``explicit`` (else the
        environment variable's value) alone when given, else each of ``candidates()``,
        ``(source, location)`` pairs, in order. None when none loads."""
        self.attempts.clear()
        given = explicit or os.environ.get(self.env)
        if given:
            try:
                return load(given, "argument" if explicit else self.env)
            except OSError as e:
                self.attempts.append(f"{given}: {e}")
                return None
        for source, where in candidates():
            try:
                return load(where, source)
            except OSError as e:
                self.attempts.append(f"{where} ({source}): {e}")
        return None

    def cached(self, key, find):
        """``find()``, called once per ``key`` (the environment values the search reads)
        until ``clear``."""
        return self._found.get(key, find)

    def clear(self) -> None:
        self._found.clear()

    def unavailable_reason(self) -> str:
        tried = "; ".join(self.attempts)
        return self.install_hint + (f" (tried: {tried})" if tried else "")
