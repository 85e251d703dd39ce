//! partita-bench (to be written)
