"""Runtime integration for users' own programs: ``import kernelopt; kernelopt.enable()``."""
