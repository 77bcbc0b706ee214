"""kvtier's stand-in for the `mooncake` package (opt-in: installed only on request, so it never
shadows a real Mooncake by accident). ``from mooncake.store import MooncakeDistributedStore``
then runs on kvtier; see docs/mooncake-migration.md."""

IS_KVTIER = True  # lets a caller tell this package from Mooncake's own
