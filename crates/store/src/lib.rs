//! SQLite persistence (placeholder until the store lands).
