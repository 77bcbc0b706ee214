"""kvtier's stand-in for the `mooncake` package (opt-in: installed only on request, so it never
shadows a real Mooncake by accident). ``from mooncake.store import MooncakeDistributedStore``
then runs on kvtier; see docs/mooncake-migration.md. ``mooncake.engine`` has the names of
Mooncake's transfer engine so that code importing it keeps importing; kvtier has no such engine,
so its calls report failure."""

IS_KVTIER = True  # lets a caller tell this package from Mooncake's own
