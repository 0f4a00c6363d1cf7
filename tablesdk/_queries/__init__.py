"""Queries: TableQuery, paging without I/O, continuation tokens, partition ranges, key helpers."""
