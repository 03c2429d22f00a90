"""The filter language: SQL-like content filters and query expressions (DDS 1.4 Annex B).

Grammar (``_grammar``), parser (``_parse``), type check (``_types``) and
compiler (``_compile``) behind two public names.
"""

from dcps.sql._filter import ContentFilter, QueryExpression
from idl._public import show_as as _show_as

__all__ = ["ContentFilter", "QueryExpression"]

_show_as("dcps.sql", *(globals()[_name] for _name in __all__))
