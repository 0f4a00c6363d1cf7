"""Entities and values: EDM types and limits, entity classes, models, reading and writing payloads, the $filter expression tree."""
