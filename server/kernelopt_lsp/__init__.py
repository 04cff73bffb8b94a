"""kernelopt-lsp: the KernelOPT language server. It never imports torch or triton."""
