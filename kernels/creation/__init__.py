"""Creation and random ops (full, arange, zeros_like, rand...): ``reference``; ``generic`` (any dtype) and ``generic_rand``."""
