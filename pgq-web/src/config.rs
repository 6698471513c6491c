//! [`DashboardConfig`]: what the dashboard shows and allows.

use std::fmt;

/// How the dashboard shows job payloads, which may hold personal or secret data.
///
/// ```
/// use pgq_web::PayloadView;
///
/// let view = PayloadView::Masked(vec!["password".into(), "card_number".into()]);
/// assert_ne!(view, PayloadView::Shown);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PayloadView {
    /// Payloads are shown in full, pretty-printed.
    #[default]
    Shown,
    /// Payloads are never shown; the job page says they are hidden.
    Hidden,
    /// Payloads are shown with the values of these object keys, at any depth, replaced by
    /// `"•••"`.
    Masked(Vec<String>),
}

/// What the dashboard shows and allows, for [`router`](crate::router).
///
/// The defaults: actions allowed, payloads shown, mounted at the root, no access token (the
/// application mounting the router is expected to put its own authentication in front).
///
/// ```
/// use pgq_web::{DashboardConfig, PayloadView};
///
/// let config = DashboardConfig::new()
///     .mount_prefix("/admin/jobs")
///     .read_only(true)
///     .payloads(PayloadView::Masked(vec!["email".into()]));
/// assert!(config.is_read_only());
/// ```
#[derive(Clone, Default)]
pub struct DashboardConfig {
    pub(crate) prefix: String,
    pub(crate) read_only: bool,
    pub(crate) payloads: PayloadView,
    pub(crate) access_token: Option<String>,
    pub(crate) loopback_only: bool,
}

/// Never the token: a configuration printed to a log must not let its reader in.
impl fmt::Debug for DashboardConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashboardConfig")
            .field("prefix", &self.prefix)
            .field("read_only", &self.read_only)
            .field("payloads", &self.payloads)
            .field("access_token", &self.access_token.as_ref().map(|_| ".."))
            .field("loopback_only", &self.loopback_only)
            .finish()
    }
}

impl DashboardConfig {
    /// The defaults: see the type's documentation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The path the router is nested under (`Router::nest("/admin/jobs", ..)`), so that the
    /// dashboard's links and cookies point there. A trailing `/` is dropped; the default is the
    /// root.
    ///
    /// ```
    /// let config = pgq_web::DashboardConfig::new().mount_prefix("/admin/jobs/");
    /// ```
    pub fn mount_prefix(mut self, prefix: &str) -> Self {
        let prefix = prefix.trim_end_matches('/');
        self.prefix = if prefix.is_empty() || prefix.starts_with('/') {
            prefix.to_owned()
        } else {
            format!("/{prefix}")
        };
        self
    }

    /// Whether every action (retry, cancel, delete, run now, pause, resume) is refused: the
    /// pages show no buttons, and a POST answers 403.
    ///
    /// ```
    /// let config = pgq_web::DashboardConfig::new().read_only(true);
    /// ```
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// How job payloads are shown (default: in full).
    ///
    /// ```
    /// let config = pgq_web::DashboardConfig::new().payloads(pgq_web::PayloadView::Hidden);
    /// ```
    pub fn payloads(mut self, view: PayloadView) -> Self {
        self.payloads = view;
        self
    }

    /// Requires this token of every request: sent as `Authorization: Bearer <token>`, or typed
    /// once into the dashboard's login form, which keeps an HttpOnly, `SameSite=Strict` cookie.
    /// `pgq web` sets it; an application that mounts the router behind its own authentication
    /// need not. An empty token is never accepted: configured empty, it lets no one in.
    ///
    /// ```
    /// let config = pgq_web::DashboardConfig::new().access_token("s3cret-from-the-environment");
    /// ```
    pub fn access_token(mut self, token: impl Into<String>) -> Self {
        self.access_token = Some(token.into());
        self
    }

    /// Whether only requests addressed to this host by a loopback name or address (`localhost`
    /// in any case, `127.0.0.0/8`, `[::1]`, in their `Host`) are answered; others get 421 Misdirected Request.
    /// For a dashboard served without a token on a loopback address, as `pgq web` serves one: a
    /// web page whose name is made to resolve to that address (DNS rebinding) names its own host,
    /// and cannot read or act on the dashboard. Off by default.
    ///
    /// ```
    /// let config = pgq_web::DashboardConfig::new().loopback_only(true);
    /// ```
    pub fn loopback_only(mut self, loopback_only: bool) -> Self {
        self.loopback_only = loopback_only;
        self
    }

    /// Whether actions are refused.
    ///
    /// ```
    /// assert!(!pgq_web::DashboardConfig::new().is_read_only());
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}
