"""The coding-agent CLIs' own log events (Claude Code, gemini-cli, Codex CLI) read into the same
records as spans: one reader per agent, chosen in :mod:`.read`."""
