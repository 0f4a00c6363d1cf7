"""Bulk loading: one engine (planner, gate, window, tally) for inserts and deletes, its thread driver, deleting and counting by filter."""
