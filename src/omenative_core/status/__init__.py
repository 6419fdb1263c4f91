"""Instance status encodings: canonical index sets and the ColumnarV2 row columns."""

from omenative_core.status.columnar import (
    DECODE_REASONS,
    ColumnarDecodeError,
    ColumnarEncodeError,
    decode_columns,
    encode_columns,
)
from omenative_core.status.indexsets import (
    IndexSetError,
    format_index_set,
    index_set_size,
    parse_index_ranges,
    parse_index_set,
)

__all__ = [
    "DECODE_REASONS",
    "ColumnarDecodeError",
    "ColumnarEncodeError",
    "IndexSetError",
    "decode_columns",
    "encode_columns",
    "format_index_set",
    "index_set_size",
    "parse_index_ranges",
    "parse_index_set",
]
