"""The TLS context our transports verify servers with, unless the user hands one over.

Making a context costs 60-90 ms (reading the system's certificates), so one is made per
setting of the variables that choose the certificates and shared by every transport of the
process.
"""

from __future__ import annotations

import os
import ssl

__all__ = ["default_tls"]

#: Default TLS contexts, by (SSL_CERT_FILE, SSL_CERT_DIR).
_CONTEXTS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}


def default_tls() -> ssl.SSLContext:
    """A context with the system's certificates, or those `SSL_CERT_FILE` / `SSL_CERT_DIR`
    name (read when the context is made); certifi's where the system has none (a slim
    container), as httpx does. It offers HTTP/1.1 by ALPN, the one version we speak."""
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _CONTEXTS.get(key)
    if context is None:
        context = ssl.create_default_context()
        if not context.cert_store_stats().get("x509_ca"):
            import certifi

            context.load_verify_locations(certifi.where())
        context.set_alpn_protocols(["http/1.1"])
        context = _CONTEXTS[key] = context
    return context
