//! Walks of forged JVM memory: the tables, threads, frames and names
//! a reader follows, and what it refuses.
