"""Sub-commands of `orin-avatar`; each module registers its parsers and runs them."""
