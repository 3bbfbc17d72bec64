"""`convert_func_to_oai_tool` at the path verifiers 0.1.x kept it (`verifiers.utils.tool_utils`).

vfgym builds the schema from type hints and the docstring (`vfgym.tools`).
"""

from vfgym.tools import convert_func_to_oai_tool

__all__ = ["convert_func_to_oai_tool"]
