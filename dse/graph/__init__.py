"""The operator graph: one description of a step that every tier reads (docs/architecture.md)."""
