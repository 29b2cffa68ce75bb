"""profan's version, in a module of its own: anything may import it without importing profan's
package ``__init__`` (which reaches the trace loader)."""

__version__ = "0.1.0"
