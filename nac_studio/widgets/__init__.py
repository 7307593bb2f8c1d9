"""Reusable painted widgets."""
