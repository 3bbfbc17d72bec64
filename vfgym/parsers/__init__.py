"""Parsers: turn a model's text into the answer a reward function compares."""

from vfgym.parsers.extract import extract_boxed_answer, extract_hash_answer
from vfgym.parsers.parser import Parser
from vfgym.parsers.think_parser import MaybeThinkParser, ThinkParser
from vfgym.parsers.xml_parser import XMLFields, XMLParser

__all__ = [
    "MaybeThinkParser",
    "Parser",
    "ThinkParser",
    "XMLFields",
    "XMLParser",
    "extract_boxed_answer",
    "extract_hash_answer",
]
