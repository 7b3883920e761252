"""Prim ops (symbolic sizes, ``executorch_prim::*``, ``et_view``, ``et_copy_index``): ``reference``; ``typed`` (the compiled records the fast plan binds)."""
