"""exporter: filled by later issues."""
