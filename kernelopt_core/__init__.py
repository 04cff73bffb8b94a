"""KernelOPT core: everything that is not protocol. Importing it never imports torch."""
