"""Helpers with the module paths environments written for verifiers 0.1.x import.

`vfgym.compat.install_verifiers_alias()` maps `verifiers.utils.<name>` onto
`vfgym.utils.<name>`; each module here gives the names those environments use,
with the behaviour they were written against.
"""
