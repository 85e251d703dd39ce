//! partita-system (to be written)
