"""Paging: the guard rules, the pager's pure policy functions, and context assembly."""
