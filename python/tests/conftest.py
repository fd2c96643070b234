"""Shared helpers for the dlport package tests."""

import gc


def collect():
    """Runs the garbage collector twice (capsules and arrays in cycles go in the first pass)."""
    gc.collect()
    gc.collect()
