"""Paging: the guard rules, the pager's pure policy, the compactor that applies it, the
assembly of the prompt section by section, pins, and the compaction journal."""
