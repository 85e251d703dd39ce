//! Schedule analysis for cyclic plans (docs/schedule.md).
//!
//! - [`windows`]: a plan's windows as the model sees them, and how a request path is served by them.
//! - [`predict`]: the response-time distribution a plan gives a path, from the plan's geometry and measured
//!   service times without a plan.
//! - [`optimise`]: a search over window layouts that keep every partition's CPU share.
//! - [`write`]: a chosen plan written into a system file.
#![forbid(unsafe_code)]

pub mod optimise;
pub mod predict;
pub mod svg;
pub mod system;
pub mod windows;
pub mod write;

pub use predict::{predict, Arrivals, Background, Model, Predicted};
pub use windows::{window_delay, PlanWindows, WindowDelay};
