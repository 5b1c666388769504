"""Generators of the README's and docs' reference sections from the tables in the code: the
metrics tables (``python -m docs_gen.metrics``), the settings (``python -m docs_gen.settings``)
and the frameworks (``python -m docs_gen.frameworks``). Each has ``--check`` for drift."""
