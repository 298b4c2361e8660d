"""The package version, in a leaf module: every writer that stamps it imports this, never the
package top (which holds the Python API)."""

__version__ = "0.1.0"
