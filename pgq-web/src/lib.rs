#![doc = include_str!("../README.md")]

mod access;
mod assets;
mod chart;
mod clock;
mod config;
mod cookie;
mod csrf;
mod dashboard;
mod form;
mod headers;
mod host;
mod page;
mod payload;
mod percent;
mod problem;
mod router;
mod secret;
mod view;

pub use config::{DashboardConfig, PayloadView};
pub use router::router;
