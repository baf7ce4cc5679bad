"""TOML reading for the settings, the knowledge base and the bundled visit: tomllib on Python 3.11+,
its backport tomli on 3.10 (JetPack 6)."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

__all__ = ["tomllib"]
