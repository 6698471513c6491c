//! The dashboard, served against a real database and driven in headless Chromium.

mod access;
mod browser;
mod failed_job;
mod hostile;
mod http;
mod job_list;
mod live;
mod pages;
mod pause;
mod refusals;
mod schedules;
mod support;
