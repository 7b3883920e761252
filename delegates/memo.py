"""Values made once per key, shared by every thread of the process.

The bridges keep several such caches (the vendor library found per environment, each
compiled shader variant); they all want the same thing: a value made at most once per key,
by one thread while the others wait, and read without a lock once it is there.
"""
from __future__ import annotations

import threading


class Memo:
    """``get(key, make)``: the value stored under ``key``, or ``make()`` stored first.

    ``make`` runs under the memo's lock (two threads never make the same key twice); one
    that raises stores nothing, so the next ``get`` tries again. A stored None is a value.

    >>> m = Memo()
    >>> m.get("a", lambda: 1), m.get("a", lambda: 2)
    (1, 1)
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict = {}

    def get(self, key, make):
        try:
            return self._values[key]
        except KeyError:
            pass
        with self._lock:
            if key not in self._values:
                self._values[key] = make()
            return self._values[key]

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
