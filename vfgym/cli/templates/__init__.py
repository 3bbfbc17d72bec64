"""The files `vfgym init` fills in (`${...}` placeholders, read with importlib.resources)."""
