"""What Inductor wrote, as data: graphs, kernels, launches, vendor calls, input specs."""

from .discover import DumpIndex, DumpProblem, discover, is_candidate_dump
from .model import (
    BufferAlloc,
    CompiledGraph,
    DumpError,
    ExternCall,
    InputSpec,
    Launch,
    SourceRange,
    TritonKernel,
    source_hash,
)
from .parse import parse_output_code, read_dump_text

__all__ = [
    "BufferAlloc", "CompiledGraph", "DumpError", "DumpIndex", "DumpProblem", "ExternCall",
    "InputSpec", "Launch", "SourceRange", "TritonKernel", "discover", "is_candidate_dump",
    "parse_output_code", "read_dump_text", "source_hash",
]
