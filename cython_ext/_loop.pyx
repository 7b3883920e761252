# cython: language_level=3, boundscheck=False, wraparound=False
"""The execute loop: a flat instruction array run with the GIL released.

Read in order: the instruction record, building the array, running it.
A compiled kernel is a C function ``int64 fn(int64* block)`` returning an
ExecuTorch error code; a Python instruction is run by re-acquiring the GIL
and calling ``callback(pc)``, which returns the next pc or -1.

A kernel split into parts (intra-op threads) is called three ways: once on its
``prep`` block (checks and output resize; at sizes too small to split, the whole call,
answered with SPLIT_WHOLE), then on each part's block, the parts
spread over a process-wide pool of worker threads with the caller doing its
share, then on its ``post`` block if it has one. The parts write disjoint
outputs, so the result does not depend on how many threads ran them. The pool
serves one loop at a time: a loop that finds it busy (another Python thread's
method) runs its parts one after another itself.
"""
cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

cnp.import_array()

ctypedef int64_t (*kernel_t)(int64_t*) noexcept nogil

cdef extern from *:
    """
    #include <pthread.h>
    #include <signal.h>
    #include <stdint.h>
    #include <unistd.h>

    typedef int64_t (*pr_kernel_t)(int64_t*);
    #define PR_MAX_WORKERS 255
    /* polls before a waiting thread sleeps: about 0.5 ms here (AMD EPYC); a futex wake per
       part instead costs MobileNetV2 most of its two-thread gain */
    static int pr_spin = 20000;

    static struct {
        pthread_mutex_t use;  /* held by the loop whose job the workers run */
        pthread_mutex_t mu;
        pthread_cond_t wake, idle;
        pthread_t th[PR_MAX_WORKERS];
        int nworkers;
        pid_t pid;
        /* the job, for every worker (each reports done, with or without a part: a job
           starts only when the last one is over): parts w, w + t, ... of blocks[0:n] */
        pr_kernel_t fn;
        int64_t **blocks;
        int64_t n, t;
        int64_t done, status;
        uint64_t gen, start_gen[PR_MAX_WORKERS + 1];
    } pr = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
            PTHREAD_COND_INITIALIZER};

    static inline void pr_pause(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #endif
    }

    static void pr_status(int64_t st) {
        int64_t zero = 0;
        if (st) __atomic_compare_exchange_n(&pr.status, &zero, st, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE);
    }

    static void *pr_worker(void *arg) {
        int64_t w = (int64_t)(intptr_t)arg, i;
        uint64_t seen = pr.start_gen[w];  /* the last job before this worker existed */
        for (;;) {
            int spin = 0;
            while (__atomic_load_n(&pr.gen, __ATOMIC_ACQUIRE) == seen && spin < pr_spin) {
                pr_pause();
                spin++;
            }
            if (__atomic_load_n(&pr.gen, __ATOMIC_ACQUIRE) == seen) {
                pthread_mutex_lock(&pr.mu);
                while (__atomic_load_n(&pr.gen, __ATOMIC_ACQUIRE) == seen)
                    pthread_cond_wait(&pr.wake, &pr.mu);
                pthread_mutex_unlock(&pr.mu);
            }
            seen++;  /* exactly one job: the next cannot start before this worker is done */
            for (i = w; i < pr.n; i += pr.t) pr_status(pr.fn(pr.blocks[i]));
            pthread_mutex_lock(&pr.mu);
            if (__atomic_add_fetch(&pr.done, 1, __ATOMIC_ACQ_REL) == pr.t - 1)
                pthread_cond_signal(&pr.idle);
            pthread_mutex_unlock(&pr.mu);
        }
        return NULL;
    }

    /* After fork() only the forking thread exists: start over with no workers. */
    static void pr_after_fork(void) {
        pthread_mutex_init(&pr.use, NULL);
        pthread_mutex_init(&pr.mu, NULL);
        pthread_cond_init(&pr.wake, NULL);
        pthread_cond_init(&pr.idle, NULL);
        pr.nworkers = 0;
        pr.pid = getpid();
    }

    /* Workers up to `threads` - 1 (the caller is the other thread); the number there is. */
    static int pr_ensure(int threads) {
        sigset_t all, old;
        if (pr.pid != getpid()) pr_after_fork();
        if (threads - 1 > PR_MAX_WORKERS) threads = PR_MAX_WORKERS + 1;
        pthread_mutex_lock(&pr.use);
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);  /* signals stay with Python's threads */
        while (pr.nworkers < threads - 1) {
            pr.start_gen[pr.nworkers + 1] = pr.gen;  /* no job runs while `use` is held */
            if (pthread_create(&pr.th[pr.nworkers], NULL, pr_worker,
                               (void *)(intptr_t)(pr.nworkers + 1)) != 0) break;
            pthread_detach(pr.th[pr.nworkers]);
            pr.nworkers++;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_mutex_unlock(&pr.use);
        return pr.nworkers + 1;
    }

    /* Run fn on every block: on the workers and this thread, or on this thread alone when
       another loop holds the pool. The first non-zero status, or 0. */
    static int64_t pr_run(pr_kernel_t fn, int64_t **blocks, int64_t n) {
        int64_t i, t, st = 0;
        int spin = 0;
        if (n <= 1 || pr.nworkers == 0 || pr.pid != getpid()
                || pthread_mutex_trylock(&pr.use) != 0) {
            for (i = 0; i < n; i++) {
                int64_t s = fn(blocks[i]);
                if (s && !st) st = s;
            }
            return st;
        }
        t = pr.nworkers + 1;  /* read under `use`: pr_ensure changes it under `use` */
        pr.fn = fn;
        pr.blocks = blocks;
        pr.n = n;
        pr.t = t;
        pr.status = 0;
        __atomic_store_n(&pr.done, 0, __ATOMIC_RELEASE);
        pthread_mutex_lock(&pr.mu);
        __atomic_add_fetch(&pr.gen, 1, __ATOMIC_ACQ_REL);
        pthread_cond_broadcast(&pr.wake);
        pthread_mutex_unlock(&pr.mu);
        for (i = 0; i < n; i += t) pr_status(fn(blocks[i]));
        while (__atomic_load_n(&pr.done, __ATOMIC_ACQUIRE) < t - 1 && spin < pr_spin) {
            pr_pause();
            spin++;
        }
        if (__atomic_load_n(&pr.done, __ATOMIC_ACQUIRE) < t - 1) {
            pthread_mutex_lock(&pr.mu);
            while (__atomic_load_n(&pr.done, __ATOMIC_ACQUIRE) < t - 1)
                pthread_cond_wait(&pr.idle, &pr.mu);
            pthread_mutex_unlock(&pr.mu);
        }
        st = __atomic_load_n(&pr.status, __ATOMIC_ACQUIRE);
        pthread_mutex_unlock(&pr.use);
        return st;
    }
    """
    int pr_spin
    int pr_ensure(int threads) nogil
    int64_t pr_run(kernel_t fn, int64_t** blocks, int64_t n) nogil


def spin_polls(n=None):
    """How many times a pool thread polls for work (or the caller for the parts' end)
    before it sleeps; ``n`` sets it. Returns the old value."""
    global pr_spin
    old = pr_spin
    if n is not None:
        pr_spin = max(0, int(n))
    return old


def ensure_threads(int threads):
    """Start pool workers so that ``threads`` threads can run a kernel's parts (the
    caller is one of them); returns how many can."""
    cdef int got
    with nogil:
        got = pr_ensure(threads)
    return got

# a prep call's answer: it did the whole call itself, the parts are skipped
# (kernels.fast.nb.SPLIT_WHOLE)
cdef enum:
    SPLIT_WHOLE = -1

cdef enum Kind:
    K_KERNEL = 0
    K_PYTHON = 1
    K_JUMP_FALSE_TENSOR = 2
    K_NOP = 3

cdef struct Instr:
    int kind
    kernel_t fn
    int64_t* block
    int64_t* prep        # a kernel split into parts: its prep block, parts, post block
    int64_t** parts
    int64_t nparts       # 0: not split (``block`` is the call)
    int64_t* post
    int64_t* cond_desc   # JUMP_FALSE_TENSOR: descriptor row of the Bool tensor
    int64_t dest         # JUMP_FALSE_TENSOR: absolute destination


cdef class Loop:
    """``Loop(n)``; ``set_kernel/set_python/set_jump``; ``run(callback, limit, observe)``.

    The one loop of a method, on both tiers: the reference tier leaves every
    instruction a Python callback; the fast plan binds compiled ones."""

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

    def set_kernel(self, int pc, size_t fn_addr, size_t block_addr, size_t prep=0,
                   size_t parts=0, int64_t nparts=0, size_t post=0):
        """A compiled call: ``fn(block)``, or with ``nparts`` > 0 ``fn(prep)``, then
        ``fn`` on each of the ``nparts`` block addresses at ``parts`` (on the pool),
        then ``fn(post)`` unless ``post`` is 0."""
        self.instrs[pc].kind = K_KERNEL
        self.instrs[pc].fn = <kernel_t>fn_addr
        self.instrs[pc].block = <int64_t*>block_addr
        self.instrs[pc].prep = <int64_t*>prep
        self.instrs[pc].parts = <int64_t**>parts
        self.instrs[pc].nparts = nparts if parts and prep else 0
        self.instrs[pc].post = <int64_t*>post

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

    def run(self, callback, int64_t limit, bint observe=False):
        """Run to the end. Returns 0, or an error code with ``failed_pc`` set
        (compiled kernel failure), -2 when ``limit`` instructions ran, and
        re-raises a Python instruction's exception. With ``observe`` every instruction
        is a ``callback(pc)`` (an observed run: the caller runs each one itself)."""
        return self._exec(callback, limit, observe)

    cdef int64_t _exec(self, object callback, int64_t limit, bint observe) except? -9:
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
                if observe:
                    with gil:
                        nxt = callback(pc)
                    pc = pc + 1 if nxt < 0 else nxt
                elif ins.kind == K_KERNEL:
                    if ins.nparts:
                        status = ins.fn(ins.prep)
                        if status == SPLIT_WHOLE:  # prep did the whole call (small sizes)
                            status = 0
                        elif status == 0:
                            status = pr_run(ins.fn, ins.parts, ins.nparts)
                            if status == 0 and ins.post != NULL:
                                status = ins.fn(ins.post)
                    else:
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


# ---- a whole execute in C: inputs copied in, the loop, outputs copied out --------------------
cdef struct Slot:
    char* addr  # the tensor's bytes in the method's memory
    int64_t nbytes
    int typenum  # numpy's type number of its dtype
    int ndim
    cnp.npy_intp dims[16]

cdef enum:
    BOUND_NOT_EXACT = -3  # Bound.run: an argument is not the exact case: the general path
    MAX_DIMS = 16

NOT_EXACT = BOUND_NOT_EXACT


cdef class Bound:
    """The inputs and outputs of a method whose tensors all have fixed places and shapes,
    bound once: ``run`` checks that every input (and ``out`` array) is a C-contiguous
    numpy array of exactly its dtype and shape (outputs also writeable), then, without
    the GIL, copies the inputs into the method's memory, runs the loop and copies the
    outputs out. It returns the loop's status, or -3 (NOT_EXACT) before touching anything
    when an argument is not that exact case (the caller's general path then binds,
    converts or explains). ``inputs``/``outputs``: lists of (address, bytes, dtype, shape).
    """

    cdef Slot* ins
    cdef Slot* outs
    cdef char** srcs
    cdef char** dsts
    cdef readonly int nin, nout

    def __cinit__(self, list inputs, list outputs):
        self.nin, self.nout = len(inputs), len(outputs)
        self.ins = <Slot*>calloc(max(self.nin, 1), sizeof(Slot))
        self.outs = <Slot*>calloc(max(self.nout, 1), sizeof(Slot))
        self.srcs = <char**>calloc(max(self.nin, 1), sizeof(char*))
        self.dsts = <char**>calloc(max(self.nout, 1), sizeof(char*))
        if not (self.ins and self.outs and self.srcs and self.dsts):
            raise MemoryError()
        for i, spec in enumerate(inputs):
            _fill(&self.ins[i], spec)
        for i, spec in enumerate(outputs):
            _fill(&self.outs[i], spec)

    def __dealloc__(self):
        free(self.ins)
        free(self.outs)
        free(self.srcs)
        free(self.dsts)

    def run(self, Loop loop, callback, int64_t limit, inputs, list outs):
        cdef int i
        cdef int64_t status
        cdef object seq = inputs
        if (type(seq) is not list and type(seq) is not tuple) or len(seq) != self.nin \
                or len(outs) != self.nout:
            return BOUND_NOT_EXACT
        for i in range(self.nin):
            if not _exact(&self.ins[i], seq[i], False):
                return BOUND_NOT_EXACT
            self.srcs[i] = <char*>cnp.PyArray_DATA(<cnp.ndarray>seq[i])
        for i in range(self.nout):
            if not _exact(&self.outs[i], outs[i], True):
                return BOUND_NOT_EXACT
            self.dsts[i] = <char*>cnp.PyArray_DATA(<cnp.ndarray>outs[i])
        with nogil:
            for i in range(self.nin):
                memcpy(self.ins[i].addr, self.srcs[i], self.ins[i].nbytes)
        status = loop._exec(callback, limit, False)
        if status == 0:
            with nogil:
                for i in range(self.nout):
                    memcpy(self.dsts[i], self.outs[i].addr, self.outs[i].nbytes)
        return status


cdef _fill(Slot* s, spec):
    addr, nbytes, dtype, shape = spec
    if len(shape) > MAX_DIMS:
        raise ValueError(f"rank {len(shape)} over {MAX_DIMS}")
    s.addr = <char*><size_t>addr
    s.nbytes = nbytes
    s.typenum = dtype.num
    s.ndim = len(shape)
    for d in range(s.ndim):
        s.dims[d] = shape[d]


cdef bint _exact(Slot* s, object a, bint writeable):
    cdef cnp.ndarray arr
    cdef int d, flags
    if type(a) is not cnp.ndarray:
        return False
    arr = <cnp.ndarray>a
    if cnp.PyArray_TYPE(arr) != s.typenum or cnp.PyArray_NDIM(arr) != s.ndim:
        return False
    flags = cnp.PyArray_FLAGS(arr)
    if not (flags & cnp.NPY_ARRAY_C_CONTIGUOUS) or not (flags & cnp.NPY_ARRAY_ALIGNED):
        return False
    if writeable and not (flags & cnp.NPY_ARRAY_WRITEABLE):
        return False
    for d in range(s.ndim):
        if cnp.PyArray_DIMS(arr)[d] != s.dims[d]:
            return False
    return cnp.PyArray_NBYTES(arr) == s.nbytes
