//! The worker's own pools follow the client pool's connect options: an application that rotates
//! its credentials there (`PgPool::set_connect_options`, a cloud IAM token that expires) rotates
//! them for the worker's dispatch and upkeep connections too, each made with the new ones from
//! then on. The listening connections are made anew from the client pool at each attempt.

use std::time::Duration;

use sqlx::PgPool;

use crate::error::Result;
use crate::maintenance::Service;
use crate::worker::connections::OwnPool;

/// How often the client pool's options are looked at: a pointer compared per pool.
const INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct OptionsFollower {
    pub(crate) client_pool: PgPool,
    pub(crate) own: Vec<OwnPool>,
}

impl Service for OptionsFollower {
    const NAME: &'static str = "options";

    fn interval(&self) -> Duration {
        INTERVAL
    }

    async fn run_once(&mut self) -> Result<()> {
        for own in &mut self.own {
            own.follow(&self.client_pool);
        }
        Ok(())
    }
}
