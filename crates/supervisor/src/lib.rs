//! partita-supervisor (to be written)
