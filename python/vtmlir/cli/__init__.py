"""Command-line entry points: `vtmlir` (demo, models) and `vt-opt`."""
