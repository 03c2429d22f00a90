"""Typed topics: IDL-like dataclasses on Cyclone DDS types."""
