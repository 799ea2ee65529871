"""The contest's tracks and the definitions each one holds.

A track is what a contestant signs up for; a definition is what the kit benchmarks. People
often type the former where the latter belongs, so config validation uses this table to say
which definition names they meant. The table is read from the definition registry: a
definition belongs to the track its ``op_type`` names (through :data:`TRACK_ALIASES`), or to a
track named after its ``op_type`` when that names none.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from fib_core.dataset import registry


def tracks() -> dict[str, tuple[str, ...]]:
    """{track: its definitions} over every registered definition."""
    table: dict[str, list[str]] = {}
    for entry in registry.entries():
        op_type = str(entry.definition_json().get("op_type", entry.name))
        table.setdefault(track_of(op_type) or op_type, []).append(entry.name)
    return {track: tuple(names) for track, names in table.items()}


# Spellings people use for the same track (the contest site, op_type names, shorthand).
TRACK_ALIASES: dict[str, str] = {
    "moe": "fused_moe",
    "fused-moe": "fused_moe",
    "dsa": "sparse_attention",
    "dsa_paged": "sparse_attention",
    "sparse-attention": "sparse_attention",
    "gdn": "gated_delta_net",
    "gated-delta-net": "gated_delta_net",
}

DEFAULT_DEFINITION = "gdn_decode_qk4_v8_d128_k_last"


def track_of(name: str) -> str | None:
    """The canonical track name if ``name`` names a track (or an alias of one), else None.

    >>> track_of("gdn")
    'gated_delta_net'
    >>> track_of("gdn_decode_qk4_v8_d128_k_last") is None
    True
    """
    key = name.strip().lower()
    if key in CANONICAL_TRACKS:
        return key
    return TRACK_ALIASES.get(key)


class _Tracks(Mapping[str, tuple[str, ...]]):
    """:func:`tracks`, read on first use rather than at import: a broken definition folder of
    the user's (``FIB_DEFINITIONS_PATH``) then fails inside a script's error handling, as one
    line, instead of as a traceback while the script imports."""

    def __init__(self) -> None:
        self._table: dict[str, tuple[str, ...]] | None = None

    def _read(self) -> dict[str, tuple[str, ...]]:
        if self._table is None:
            self._table = tracks()
        return self._table

    def __getitem__(self, track: str) -> tuple[str, ...]:
        return self._read()[track]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


CANONICAL_TRACKS = frozenset(TRACK_ALIASES.values())
TRACKS: Mapping[str, tuple[str, ...]] = _Tracks()


def track_of_definition(definition: str) -> str | None:
    """The track that holds ``definition`` (``gated_delta_net`` for GDN decode), or None."""
    return next((t for t, defs in TRACKS.items() if definition in defs), None)
