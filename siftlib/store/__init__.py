"""Storage of cached searches and credit counters: SQLite, Redis/Valkey, recent hits."""
