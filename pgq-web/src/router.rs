//! [`router`]: the dashboard as an axum `Router`.

use axum::Router;
use axum::middleware;
use axum::routing::{get, post};
use pgq_core::Client;

use crate::access;
use crate::assets;
use crate::config::DashboardConfig;
use crate::csrf;
use crate::dashboard::Dashboard;
use crate::headers;
use crate::host;
use crate::view;

/// The dashboard for `client`'s database, as a `Router` to serve or to nest in an application:
///
/// | path | what |
/// |---|---|
/// | `GET /` | the queues |
/// | `GET /jobs` | the job list, with filters and pages |
/// | `GET /jobs/{id}` | one job; `GET /jobs/{id}/live` streams its changes |
/// | `GET /workers` | the live workers |
/// | `GET /schedules` | the periodic schedules: last and next run, leader |
/// | `POST /jobs/action`, `POST /queues/{pause,resume}` | the actions |
///
/// Nest it under your own authentication middleware and tell it where it is mounted:
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> std::io::Result<()> {
/// use pgq_web::DashboardConfig;
///
/// let dashboard = pgq_web::router(client, DashboardConfig::new().mount_prefix("/admin/jobs"));
/// let app = axum::Router::new().nest("/admin/jobs", dashboard);
/// // .layer(your_authentication) …
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
pub fn router(client: Client, config: DashboardConfig) -> Router {
    let dashboard = Dashboard::new(client, config);
    Router::new()
        .route("/", get(view::queues::page))
        .route("/jobs", get(view::jobs::page))
        .route("/jobs/action", post(view::action::jobs))
        .route("/jobs/{id}", get(view::job::page))
        .route("/jobs/{id}/live", get(view::live::events))
        .route("/workers", get(view::workers::page))
        .route("/schedules", get(view::schedules::page))
        .route("/queues/{action}", post(view::action::queue))
        .route("/login", get(access::login_form).post(access::login))
        .route("/assets/dashboard.css", get(assets::css))
        .route("/assets/dashboard.js", get(assets::js))
        .method_not_allowed_fallback(view::fallback::wrong_method)
        .fallback(view::fallback::no_such_page)
        .layer(middleware::from_fn_with_state(
            dashboard.clone(),
            csrf::issue,
        ))
        .layer(middleware::from_fn_with_state(
            dashboard.clone(),
            access::require,
        ))
        .layer(middleware::from_fn_with_state(
            dashboard.clone(),
            host::addressed_to_this_host,
        ))
        .layer(middleware::map_response(headers::security))
        .with_state(dashboard)
}
