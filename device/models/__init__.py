"""Model wrappers: domain inputs in, domain results out, a Runner underneath."""
