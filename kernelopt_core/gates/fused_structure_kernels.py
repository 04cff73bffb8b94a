"""The Triton kernels of :mod:`.fused_structure` (a module of their own: importing it imports triton).

Each program writes one row of :data:`.fused_structure.PARTIALS` over its elements that are finite in
every output compared: the count, the sum of ``d = c - o`` and its square sum centred on the program's
own mean, ``max |c - r|``, ``max |r|``, ``sum |r|``, ``sum (o - r)``, ``sum (c - r)``, ``sum |o - r|`` and
``max |o - r|``, in float64; ``r`` is the float64 reference, or ``o`` itself without one.
"""

import triton
import triton.language as tl


@triton.jit
def _partials(c, o, r, finite, out, index):
    c = tl.where(finite, c, 0.0)
    o = tl.where(finite, o, 0.0)
    r = tl.where(finite, r, 0.0)
    d = c - o
    n = tl.sum(finite.to(tl.float64))
    total = tl.sum(d)
    centred = tl.where(finite, d - total / tl.maximum(n, 1.0), 0.0)
    e_c = c - r
    e_o = o - r
    row = out + index * 10
    tl.store(row, n)
    tl.store(row + 1, total)
    tl.store(row + 2, tl.sum(centred * centred))
    tl.store(row + 3, tl.max(tl.abs(e_c)))
    tl.store(row + 4, tl.max(tl.abs(r)))
    tl.store(row + 5, tl.sum(tl.abs(r)))
    tl.store(row + 6, tl.sum(e_o))
    tl.store(row + 7, tl.sum(e_c))
    tl.store(row + 8, tl.sum(tl.abs(e_o)))
    tl.store(row + 9, tl.max(tl.abs(e_o)))


@triton.jit
def _finite(c, o, r):
    # NaN compares false; a float64 reference has its own infinities
    return (tl.abs(c) < float("inf")) & (tl.abs(o) < float("inf")) & (tl.abs(r) < float("inf"))


@triton.jit
def _load(c_ptr, o_ptr, r_ptr, offsets, inside, HAS_REF: tl.constexpr):
    """Both outputs and the reference (the original itself without one), widened to float64."""
    c = tl.load(c_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    o = tl.load(o_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    if HAS_REF:
        r = tl.load(r_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
    else:
        r = o
    return c, o, r


@triton.jit
def long_rows(c_ptr, o_ptr, r_ptr, out_ptr, group, pieces, HAS_REF: tl.constexpr, BLOCK: tl.constexpr):
    """One program per piece of BLOCK elements of one row (``pieces`` per row of ``group`` elements)."""
    pid = tl.program_id(0).to(tl.int64)
    row = pid // pieces
    within = (pid % pieces) * BLOCK + tl.arange(0, BLOCK)
    inside = within < group
    offsets = row * group + within
    c, o, r = _load(c_ptr, o_ptr, r_ptr, offsets, inside, HAS_REF)
    _partials(c, o, r, inside & _finite(c, o, r), out_ptr, pid)


@triton.jit
def short_rows(c_ptr, o_ptr, r_ptr, out_ptr, row_out_ptr, rows, group, HAS_REF: tl.constexpr, ROWS: tl.constexpr,
               WIDTH: tl.constexpr):
    """One program per ROWS whole rows of ``group`` (<= WIDTH) elements; each row's sum of d and count too."""
    pid = tl.program_id(0).to(tl.int64)
    row = pid * ROWS + tl.arange(0, ROWS)
    column = tl.arange(0, WIDTH)
    inside = (row < rows)[:, None] & (column < group)[None, :]
    offsets = row[:, None] * group + column[None, :]
    c, o, r = _load(c_ptr, o_ptr, r_ptr, offsets, inside, HAS_REF)
    finite = inside & _finite(c, o, r)
    d = tl.where(finite, c - o, 0.0)
    present = row < rows
    tl.store(row_out_ptr + row * 2, tl.sum(d, axis=1), mask=present)
    tl.store(row_out_ptr + row * 2 + 1, tl.sum(finite.to(tl.float64), axis=1), mask=present)
    _partials(tl.reshape(c, [ROWS * WIDTH]), tl.reshape(o, [ROWS * WIDTH]), tl.reshape(r, [ROWS * WIDTH]),
              tl.reshape(finite, [ROWS * WIDTH]), out_ptr, pid)
