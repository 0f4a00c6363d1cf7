"""Leaves: errors, secrets kept out of text, credentials and SAS, connection strings, tracing, optional extras, compiled patterns."""
