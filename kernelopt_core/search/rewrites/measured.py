"""What the H200 measured for the rewrite families' configurations: the prior that orders their variants.

Each :class:`Measured` is one configuration timed against Inductor's max-autotune kernel on one
shape (``xnumel`` rows of ``r0_numel`` for reductions, the output elements and rows for windows), in
one *experiment* (the configurations timed together, on the same inputs). Two kinds:

* the hand-written prototypes of ``benchmarks/explore/explore_reductions.py`` and ``explore_windows.py``
  (``benchmarks/results/h200/explore/``), in the family's own parameters: ``coop_g{G}_w{W}`` is
  ``chunk`` = the row over G, rounded up to a power of two, at W warps; ``single_w{W}`` one row per
  program, ``rows{R}_w{W}`` R rows; ``split_s{S}`` S chunks per row;
* the families' own launchers timed outside the gates (``benchmarks/results/h200/families/``) and the
  windowed spot checks of ``docs/optimizer.md``.

``tests/test_variant_order.py`` reads every figure back from its ``source`` file: no drift from the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXPLORE_REDUCTIONS = "benchmarks/results/h200/explore/explore_reductions.json"
EXPLORE_WINDOWS = "benchmarks/results/h200/explore/explore_windows.json"
FAMILIES_SOFTMAX = "benchmarks/results/h200/families/families_check_softmax_instance_norm.json"
FAMILIES_CROSS_ENTROPY = "benchmarks/results/h200/families/families_check_cross_entropy_l2_norm.json"
OPTIMIZER_DOC = "docs/optimizer.md"


@dataclass(frozen=True)
class Measured:
    family: str
    experiment: str  # configurations measured together: their ratios are what the order uses
    shape: tuple[tuple[str, int], ...]
    params: tuple[tuple[str, Any], ...]
    speedup: float  # over Inductor's max-autotune kernel on the same inputs
    source: str  # the file holding the figure, and the entry in it ("file#pattern/variant")
    own_code: bool = False  # the family's own launcher (True), or a hand-written prototype

    @property
    def shape_dict(self) -> dict[str, int]:
        return dict(self.shape)

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


def _reduction(family: str, pattern: str, rows: int, row: int, variant: str, params: dict[str, Any],
               speedup: float, source: str = EXPLORE_REDUCTIONS, own_code: bool = False) -> Measured:
    return Measured(family, f"{source}#{pattern}", (("xnumel", rows), ("r0_numel", row)),
                    tuple(sorted(params.items())), speedup, f"{source}#{pattern}/{variant}", own_code)


def _coop(pattern: str, rows: int, row: int, group: int, warps: int, speedup: float) -> Measured:
    chunk = 1 << max(0, (-(-row // group) - 1).bit_length())  # the row over G, up to a power of two
    return _reduction("cooperative_rows", pattern, rows, row, f"coop_g{group}_w{warps}",
                      {"chunk": chunk, "num_warps": warps}, speedup)


def _single(pattern: str, rows: int, row: int, variant: str, xblock: int, warps: int, speedup: float) -> Measured:
    return _reduction("single_read", pattern, rows, row, variant, {"blocks.XBLOCK": xblock, "num_warps": warps},
                      speedup)


def _split(pattern: str, rows: int, row: int, chunks: int, speedup: float) -> Measured:
    return _reduction("split_programs", pattern, rows, row, f"split_s{chunks}", {"chunks": chunks}, speedup)


def _window(experiment: str, outputs: int, rows: int, method: str, block: int, out_rows: int, warps: int,
            speedup: float, source: str, own_code: bool) -> Measured:
    return Measured("windowed", experiment, (("xnumel", outputs), ("out_h", rows)),
                    tuple(sorted({"method": method, "block": block, "rows": out_rows, "num_warps": warps}.items())),
                    speedup, source, own_code)


def _own_coop(pattern: str, rows: int, row: int, group: int, chunk: int, warps: int, speedup: float,
              source: str) -> Measured:
    """The cooperative_rows family's own launcher, timed outside the gates."""
    return _reduction("cooperative_rows", pattern, rows, row, f"G={group}, chunk={chunk}",
                      {"chunk": chunk, "num_warps": warps}, speedup, source, True)


def _own_single(pattern: str, rows: int, row: int, xblock: int, warps: int, speedup: float, source: str) -> Measured:
    """The single_read family's own kernel, timed outside the gates."""
    return _reduction("single_read", pattern, rows, row, f"XBLOCK={xblock}, num_warps={warps}",
                      {"blocks.XBLOCK": xblock, "num_warps": warps}, speedup, source, True)


def _explored_window(pattern: str, outputs: int, rows: int, method: str, block: int, out_rows: int, warps: int,
                     speedup: float) -> Measured:
    """A prototype of explore_windows; its block is BQ for a blockscan, BW for a shifted row op."""
    experiment = f"{EXPLORE_WINDOWS}#{pattern}"
    block_name = "BQ" if method == "blockscan" else "BW"
    return _window(experiment, outputs, rows, method, block, out_rows, warps, speedup,
                   f"{experiment}/{method} {block_name}={block} num_warps={warps}", False)


MEASURED: tuple[Measured, ...] = (
    # explore_reductions, 2026-12-01 (coop = cooperative_rows, single = single_read, split = split_programs)
    _split("layernorm_16x4M", 16, 4194304, 64, 1.25), _split("layernorm_16x4M", 16, 4194304, 256, 1.302),
    _split("layernorm_16x4M", 16, 4194304, 1024, 1.276),
    _split("softmax_4096x393216", 4096, 393216, 16, 0.874), _split("softmax_4096x393216", 4096, 393216, 48, 0.832),
    _coop("softmax_4096x393216", 4096, 393216, 24, 8, 1.157), _coop("softmax_4096x393216", 4096, 393216, 48, 8, 1.036),
    _coop("softmax_4096x393216", 4096, 393216, 96, 4, 1.259), _coop("softmax_4096x393216", 4096, 393216, 48, 4, 1.132),
    _single("l1norm_32768x65535", 32768, 65535, "single_w32", 1, 32, 0.854),
    _coop("l1norm_32768x65535", 32768, 65535, 8, 8, 0.99), _coop("l1norm_32768x65535", 32768, 65535, 4, 16, 0.81),
    _split("groupnorm_16x64x512x512_g8", 128, 2097152, 16, 0.839),
    _split("groupnorm_16x64x512x512_g8", 128, 2097152, 64, 0.873),
    _coop("groupnorm_16x64x512x512_g8", 128, 2097152, 128, 8, 0.936),
    _single("softmax_4096x65536", 4096, 65536, "single_w32", 1, 32, 0.786),
    _coop("softmax_4096x65536", 4096, 65536, 8, 8, 1.112), _coop("softmax_4096x65536", 4096, 65536, 4, 16, 1.051),
    _split("instancenorm_32x64x512x512", 2048, 262144, 4, 0.937),
    _coop("instancenorm_32x64x512x512", 2048, 262144, 16, 8, 1.23),
    _coop("instancenorm_32x64x512x512", 2048, 262144, 32, 8, 1.255),
    _single("cross_entropy_32768x4096", 32768, 4096, "rows1_w4", 1, 4, 1.479),
    _single("cross_entropy_32768x4096", 32768, 4096, "rows4_w8", 4, 8, 1.494),
    _single("log_softmax_8192x32768", 8192, 32768, "single_w16", 1, 16, 1.245),
    _single("log_softmax_8192x32768", 8192, 32768, "single_w32", 1, 32, 1.249),
    _single("l2norm_32768x65535", 32768, 65535, "single_w32", 1, 32, 1.03),
    _coop("l2norm_32768x65535", 32768, 65535, 8, 8, 1.302),
    _single("softmax_32768x16384", 32768, 16384, "single_w8", 1, 8, 1.034),
    _single("softmax_32768x16384", 32768, 16384, "single_w16", 1, 16, 1.047),
    # the families' own launchers on the kbscale problems, timed outside the gates (2026-12-01)
    _own_coop("softmax_long_rows", 4096, 393216, 48, 8192, 8, 0.286, FAMILIES_SOFTMAX),
    _own_coop("softmax_long_rows", 4096, 393216, 96, 4096, 4, 0.595, FAMILIES_SOFTMAX),
    _own_coop("instance_norm", 2048, 262144, 32, 8192, 8, 0.931, FAMILIES_SOFTMAX),
    _own_coop("instance_norm", 2048, 262144, 64, 4096, 4, 0.963, FAMILIES_SOFTMAX),
    _own_coop("l2_norm", 16384, 65536, 8, 8192, 8, 1.029, FAMILIES_CROSS_ENTROPY),
    _own_coop("l2_norm", 16384, 65536, 16, 4096, 4, 1.159, FAMILIES_CROSS_ENTROPY),
    _own_single("cross_entropy", 131072, 8192, 1, 8, 0.797, FAMILIES_CROSS_ENTROPY),
    _own_single("cross_entropy", 131072, 8192, 2, 16, 0.755, FAMILIES_CROSS_ENTROPY),
    # windows: explore_windows' avg_pool1d k8 s1 p4 of (64, 128, 65536) (536,879,104 outputs)
    _explored_window("avgpool1d_k8s1p4", 536879104, 1, "blockscan", 128, 1, 4, 1.588),
    _explored_window("avgpool1d_k8s1p4", 536879104, 1, "blockscan", 256, 1, 8, 1.551),
    _explored_window("avgpool1d_k8s1p4", 536879104, 1, "shifted", 1024, 1, 4, 0.665),
    # the windowed family's own launchers, spot checks (docs/optimizer.md): avg_pool1d as above, against
    # Inductor's 1.63 ms; max_pool2d k4 s1 p1 of
    # (32, 64, 512, 512), 511 x 511 outputs per plane, against Inductor's 4.25 ms
    _window(f"{OPTIMIZER_DOC}#avg_pool1d", 536879104, 1, "blockscan", 128, 1, 4, round(1.63 / 1.24, 3),
            f"{OPTIMIZER_DOC}#avg_pool1d k8 s1 p4 of 64x128x65536, blockscan 1.24 ms", True),
    _window(f"{OPTIMIZER_DOC}#max_pool2d", 534775808, 511, "shifted", 256, 32, 4, round(4.25 / 1.52, 3),
            f"{OPTIMIZER_DOC}#shifted rows BW=256 ROWS=32: 1.52 ms against 4.25 ms", True),
    _window(f"{OPTIMIZER_DOC}#max_pool2d", 534775808, 511, "blockscan", 128, 32, 4, round(4.25 / 2.25, 3),
            f"{OPTIMIZER_DOC}#row block scans 2.25 ms against 4.25 ms", True),
)


def measured_for(family: str) -> list[Measured]:
    return [m for m in MEASURED if m.family == family]
