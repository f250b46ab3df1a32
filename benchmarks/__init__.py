"""Runnable benchmarks for memos; results are recorded under benchmarks/results/."""
