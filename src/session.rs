//! Session orchestration.
