"""The filter language: SQL-like content filters and query expressions (DDS 1.4 Annex B).

Grammar (``_grammar``), parser (``_parse``), type check (``_types``) and
compiler (``_compile``) behind two public names; JMS message selectors
(``_selector_grammar``, ``_selector``) share the syntax tree's fields and
literals, the field types and the error reporting, behind ``MessageSelector``.
"""

from dcps.sql._filter import ContentFilter, QueryExpression
from dcps.sql._selector import MessageSelector
from idl._public import show_as as _show_as

__all__ = ["ContentFilter", "MessageSelector", "QueryExpression"]

_show_as("dcps.sql", *(globals()[_name] for _name in __all__))
