//! [`Dashboard`]: what every handler shares — the client, the configuration, the secret.

use std::sync::Arc;

use pgq_core::Client;
use tokio::sync::Semaphore;

use crate::config::DashboardConfig;
use crate::secret::Secret;

/// The router's state; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Dashboard {
    pub(crate) client: Client,
    pub(crate) config: Arc<DashboardConfig>,
    pub(crate) secret: Secret,
    /// Permits for the job pages' live streams.
    pub(crate) live_streams: Arc<Semaphore>,
}

/// How many job pages at once follow their job live. They share the client's one listening
/// connection, and each reads its job at each change and every half second; pages beyond this
/// many show the job as it was when loaded.
pub(crate) const MAX_LIVE_STREAMS: usize = 64;

impl Dashboard {
    pub(crate) fn new(client: Client, config: DashboardConfig) -> Self {
        Self {
            client,
            config: Arc::new(config),
            secret: Secret::random(),
            live_streams: Arc::new(Semaphore::new(MAX_LIVE_STREAMS)),
        }
    }

    /// The link to `path` (which starts with `/`) under the mount prefix. Under a prefix the
    /// dashboard's root is the prefix itself: a router nested at `/admin/jobs` answers
    /// `/admin/jobs`, while `/admin/jobs/` is left to the application around it.
    pub(crate) fn link(&self, path: &str) -> String {
        link(&self.config.prefix, path)
    }

    /// The path cookies are scoped to: the mount prefix, or the root.
    pub(crate) fn cookie_path(&self) -> &str {
        if self.config.prefix.is_empty() {
            "/"
        } else {
            &self.config.prefix
        }
    }
}

fn link(prefix: &str, path: &str) -> String {
    match path.strip_prefix('/') {
        Some(rest) if !prefix.is_empty() && (rest.is_empty() || rest.starts_with('?')) => {
            format!("{prefix}{rest}")
        }
        _ => format!("{prefix}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::link;

    #[test]
    fn links_stay_under_the_prefix_and_its_root_is_the_prefix_itself() {
        assert_eq!(link("", "/"), "/");
        assert_eq!(link("", "/jobs?queue=mail"), "/jobs?queue=mail");
        assert_eq!(link("/admin/jobs", "/"), "/admin/jobs");
        assert_eq!(link("/admin/jobs", "/?x=1"), "/admin/jobs?x=1");
        assert_eq!(link("/admin/jobs", "/jobs/7"), "/admin/jobs/jobs/7");
        assert_eq!(
            link("/admin/jobs", "/assets/dashboard.css"),
            "/admin/jobs/assets/dashboard.css"
        );
    }
}
