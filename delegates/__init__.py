"""delegates: filled by later issues."""
