//! `partita web`: a browser view of the systems running on this machine and the operator's admin actions.
//!
//! The view never touches the real-time path: it reads the files each supervisor rewrites
//! (`<state dir>/<system>/state.json` once a second, `events.jsonl` as health events happen) and sends admin
//! requests through the supervisor's control socket, as `partita partition` and `partita plan switch` do.
//! One blocking HTTP/1.1 server (tiny_http), a thread per request, bounded.
pub mod auth;
pub mod monitors;
pub mod routes;
mod server;

pub use server::{serve, Options};
