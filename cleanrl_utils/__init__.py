"""Tools around the single-file scripts in cleanrl/: running benchmarks (`python -m cleanrl_utils.benchmark`),
turning their TensorBoard logs into tables and learning curves (`python -m cleanrl_utils.report`), replaying a saved
model (`python -m cleanrl_utils.enjoy`), the Hub upload and checkpoints. A script imports the upload only under
--upload-model and the checkpoints only under --checkpoint-every or --resume, so a script copied alone still
trains, saves, evaluates and records video."""
