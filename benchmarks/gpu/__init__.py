"""The device scripts: each exposes run(out_dir) -> dict; run_all.py runs them (README.md)."""
