"""How a printed log line names its speaker: the top package (``loopwatch``), where loggers are
named by module (``loopwatch.core.assembler``), which says where in the code, not who speaks."""

from __future__ import annotations

import logging


class PackageFormatter(logging.Formatter):
    """A formatter whose ``%(name)s`` is the logger's top package."""

    def format(self, record: logging.LogRecord) -> str:
        # a copy: the record may go on to other handlers, which keep the module's name
        shown = logging.makeLogRecord(record.__dict__)
        shown.name = record.name.partition(".")[0]
        return super().format(shown)
