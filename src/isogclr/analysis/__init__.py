"""Analyses and report tables built from finished runs."""
