"""Study runners, one module per study kind (``kind = ...`` in studies/<name>.toml)."""
