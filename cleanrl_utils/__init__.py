"""Tools around the single-file scripts in cleanrl/: running benchmarks (`python -m cleanrl_utils.benchmark`)
and turning their TensorBoard logs into tables and learning curves (`python -m cleanrl_utils.report`).
The scripts never import this package."""
