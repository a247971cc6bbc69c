"""Providers: one module per wire format, behind one `Provider` interface."""
