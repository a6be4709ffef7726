"""Tools around the single-file scripts in cleanrl/: running benchmarks (`python -m cleanrl_utils.benchmark`),
turning their TensorBoard logs into tables and learning curves (`python -m cleanrl_utils.report`), replaying a saved
model (`python -m cleanrl_utils.enjoy`) and the Hub upload. A script imports only the upload, and only under
--upload-model, so a script copied alone still trains, saves, evaluates and records video."""
