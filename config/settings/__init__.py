"""Settings split by environment: base, local (embedded default), test, production."""
