"""What the viewer's site is made of: its static files, robots.txt and security headers.

Shared by the live server and the bundle, and free of the HTTP server's
imports so that `import vitals_engine` stays light.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ASSETS",
    "CONTENT_SECURITY_POLICY",
    "ROBOTS",
    "SECURITY_HEADERS",
    "STATIC_DIR",
    "STATIC_FILES",
]

STATIC_DIR = Path(__file__).parent / "static"
#: The page's scripts and styles: served as `assets/<name>` from `static/<name>`.
ASSETS = ("app.js", "compare.js", "transcript.js", "app.css")
#: The static files and their types: URL path -> (file in static/, content type).
STATIC_FILES = {
    "/": ("index.html", "text/html"),
    "/index.html": ("index.html", "text/html"),
    "/assets/app.js": ("app.js", "text/javascript"),
    "/assets/compare.js": ("compare.js", "text/javascript"),
    "/assets/transcript.js": ("transcript.js", "text/javascript"),
    "/assets/app.css": ("app.css", "text/css"),
}
ROBOTS = b"User-agent: *\nDisallow: /\n"

#: No inline scripts or styles, nothing from other origins; images also from data: URIs.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}
