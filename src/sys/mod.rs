//! OS calls that more than one stage needs: the one way to open a file
//! that a traced process names ([`open`]).

pub mod open;
