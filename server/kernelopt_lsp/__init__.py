"""kernelopt-lsp: the KernelOPT language server. It never imports torch or triton."""

__version__ = "0.1.0"
