"""Settings of the whole suite."""

from hypothesis import settings

# No per-example deadline for the property tests. Under pytest-xdist a unit test file runs beside the
# other worker's Spark JVM on the same two cores, so an example's wall time measures that load more than
# the code: a 200 ms example of `test_index_files.py` (Hypothesis' default deadline) took 282 ms once in
# CI, then under 1 ms when replayed (2026-12-04). What the examples assert is unchanged; pytest-timeout
# still bounds each test.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
