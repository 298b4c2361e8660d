"""Builders and helpers shared by several test modules (test modules never import each other)."""
