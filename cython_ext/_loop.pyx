# cython: language_level=3, boundscheck=False, wraparound=False
"""The execute loop: a flat instruction array run with the GIL released.

Read in order: the instruction record, building the array, running it.
A compiled kernel is a C function ``int64 fn(int64* block)`` returning an
ExecuTorch error code; a Python instruction is run by re-acquiring the GIL
and calling ``callback(pc)``, which returns the next pc or -1.
"""
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport calloc, free

ctypedef int64_t (*kernel_t)(int64_t*) noexcept nogil

cdef enum Kind:
    K_KERNEL = 0
    K_PYTHON = 1
    K_JUMP_FALSE_TENSOR = 2
    K_NOP = 3

cdef struct Instr:
    int kind
    kernel_t fn
    int64_t* block
    int64_t* cond_desc   # JUMP_FALSE_TENSOR: descriptor row of the Bool tensor
    int64_t dest         # JUMP_FALSE_TENSOR: absolute destination


cdef class Loop:
    """``Loop(n)``; ``set_kernel/set_python/set_jump``; ``run(callback, limit)``."""

    cdef Instr* instrs
    cdef readonly int n
    cdef readonly int64_t failed_pc
    cdef readonly int64_t failed_status

    def __cinit__(self, int n):
        self.n = n
        self.instrs = <Instr*>calloc(max(n, 1), sizeof(Instr))
        if self.instrs == NULL:
            raise MemoryError()
        for i in range(n):
            self.instrs[i].kind = K_PYTHON

    def __dealloc__(self):
        free(self.instrs)

    def set_kernel(self, int pc, size_t fn_addr, size_t block_addr):
        self.instrs[pc].kind = K_KERNEL
        self.instrs[pc].fn = <kernel_t>fn_addr
        self.instrs[pc].block = <int64_t*>block_addr

    def set_python(self, int pc):
        self.instrs[pc].kind = K_PYTHON

    def set_nop(self, int pc):
        self.instrs[pc].kind = K_NOP

    def set_jump_false_tensor(self, int pc, size_t desc_addr, int64_t dest):
        self.instrs[pc].kind = K_JUMP_FALSE_TENSOR
        self.instrs[pc].cond_desc = <int64_t*>desc_addr
        self.instrs[pc].dest = dest

    def kinds(self):
        return [self.instrs[i].kind for i in range(self.n)]

    def run(self, callback, int64_t limit):
        """Run to the end. Returns 0, or an error code with ``failed_pc`` set
        (compiled kernel failure), -2 when ``limit`` instructions ran, and
        re-raises a Python instruction's exception."""
        cdef int64_t pc = 0, count = 0, status = 0, nxt
        cdef int64_t n = self.n
        cdef Instr* ins
        self.failed_pc = -1
        self.failed_status = 0
        with nogil:
            while pc < n:
                count += 1
                if count > limit:
                    status = -2
                    break
                ins = &self.instrs[pc]
                if ins.kind == K_KERNEL:
                    status = ins.fn(ins.block)
                    if status != 0:
                        self.failed_pc = pc
                        self.failed_status = status
                        break
                    pc += 1
                elif ins.kind == K_NOP:
                    pc += 1
                elif ins.kind == K_JUMP_FALSE_TENSOR:
                    if _all_true(ins.cond_desc):
                        pc += 1
                    else:
                        pc = ins.dest
                else:
                    with gil:
                        nxt = callback(pc)
                    pc = pc + 1 if nxt < 0 else nxt
        return status


cdef inline bint _all_true(int64_t* desc) noexcept nogil:
    cdef uint8_t* data = <uint8_t*>desc[0]
    cdef int64_t i, numel = desc[3]
    for i in range(numel):
        if data[i] == 0:
            return False
    return True
