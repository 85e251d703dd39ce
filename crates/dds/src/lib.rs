//! partita-dds
