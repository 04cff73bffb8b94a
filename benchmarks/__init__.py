"""Benchmarks: problem sets, the device scripts (gpu/) and the exploration prototypes (explore/)."""
