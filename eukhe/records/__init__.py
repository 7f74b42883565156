"""One vocabulary: the typed records of every value that crosses a boundary (daemon requests, answers and events;
CLI `--json`; Python API answers; settings; journal records; kernel frames). snake_case keys, strict decoding, JSON
schemas generated from the records (`eukhe schema`). docs/vocabulary.md lists the spec's camelCase names beside ours.
"""

from eukhe.records.base import Record, convert, decode_json, encode, snake
from eukhe.records.jobs import CallAnswer, CellError, Detached, JobDocument, JobList, JobRow, Rewound, Settled
from eukhe.records.output import OutputWindow
from eukhe.records.settings import Limits, SessionSettings, TruncationSetting, setting_of, truncation_of

__all__ = [
    "CallAnswer",
    "CellError",
    "Detached",
    "JobDocument",
    "JobList",
    "JobRow",
    "Limits",
    "OutputWindow",
    "Record",
    "Rewound",
    "SessionSettings",
    "Settled",
    "TruncationSetting",
    "convert",
    "decode_json",
    "encode",
    "setting_of",
    "snake",
    "truncation_of",
]
