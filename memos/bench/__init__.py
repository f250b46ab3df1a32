"""Benchmarks of memos against the strategies people use instead (``memos bench``)."""
