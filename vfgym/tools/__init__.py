"""Plain Python functions as OpenAI tools: the schema from type hints and docstring.

This sits beside `vfgym.types` at the bottom of the stack: environments (`ToolEnv`)
and rubrics (`ToolRubric`) both build on it.
"""

from vfgym.tools.schema import Tool, convert_func_to_oai_tool, tool_name

__all__ = ["Tool", "convert_func_to_oai_tool", "tool_name"]
