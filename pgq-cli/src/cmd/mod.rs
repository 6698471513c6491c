//! One module per command.

pub(crate) mod action;
pub(crate) mod jobs;
pub(crate) mod migrate;
pub(crate) mod queues;
pub(crate) mod schedules;
pub(crate) mod show;
pub(crate) mod stats;
pub(crate) mod web;
pub(crate) mod workers;
