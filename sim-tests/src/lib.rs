//! Deterministic simulation of the WAL (see `docs/SIMULATION.md`).
