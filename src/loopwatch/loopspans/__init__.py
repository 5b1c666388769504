"""The loop spans: one ``loopwatch.loop {tool}`` span per loop, in the turn's own trace."""
