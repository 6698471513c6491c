//! The access token: with one configured, every request must carry it, as a bearer header or
//! as the session cookie the login form sets.

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::cookie;
use crate::csrf;
use crate::dashboard::Dashboard;
use crate::form;
use crate::page::{self, Section};

/// The cookie the login form sets.
const SESSION_COOKIE: &str = "pgq_session";
/// What a session cookie's signature is for.
const PURPOSE: &str = "session";

/// Lets a request through if no token is configured, it carries the token, or it is for the
/// login form or the stylesheet the form uses; answers the others with the login form.
pub(crate) async fn require(
    State(dashboard): State<Dashboard>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = dashboard.config.access_token.as_deref() else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    let open = path == "/login" || path.starts_with("/assets/");
    if open || carries(&dashboard, token, request.headers()) {
        return next.run(request).await;
    }
    if request.method() == Method::GET {
        login_page(&dashboard, StatusCode::UNAUTHORIZED, None)
    } else {
        page::problem(
            &dashboard,
            StatusCode::UNAUTHORIZED,
            "this dashboard needs its access token",
        )
    }
}

/// Whether the request carries the token: `Authorization: Bearer`, or a session cookie signed
/// for it.
fn carries(dashboard: &Dashboard, token: &str, headers: &HeaderMap) -> bool {
    let secret = &dashboard.secret;
    let expected = secret.sign(PURPOSE, token);
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        // The scheme's name is case-insensitive (RFC 9110).
        .and_then(|value| value.split_once(' '))
        .and_then(|(scheme, token)| scheme.eq_ignore_ascii_case("bearer").then_some(token));
    if let Some(bearer) = bearer {
        // The given token signed and compared with the expected signature in constant time.
        // An empty one is never the token: a token configured empty lets no one in.
        return !bearer.is_empty() && secret.verify(PURPOSE, bearer, &expected);
    }
    cookie::get(headers, SESSION_COOKIE)
        .is_some_and(|session| secret.verify(PURPOSE, token, session))
}

/// `GET /login`.
pub(crate) async fn login_form(State(dashboard): State<Dashboard>) -> Response {
    login_page(&dashboard, StatusCode::OK, None)
}

/// `POST /login`: the right token sets the session cookie and goes to the queues.
pub(crate) async fn login(State(dashboard): State<Dashboard>, request: Request) -> Response {
    let headers = request.headers().clone();
    let fields = match form::fields(request, &dashboard).await {
        Ok(fields) => fields,
        Err(problem) => return problem.page(&dashboard),
    };
    if let Err(refusal) = csrf::same_origin(&headers) {
        return page::problem(&dashboard, StatusCode::FORBIDDEN, refusal.message());
    }
    let Some(token) = dashboard.config.access_token.as_deref() else {
        return (StatusCode::SEE_OTHER, [(LOCATION, dashboard.link("/"))]).into_response();
    };
    let given = fields
        .iter()
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.as_str())
        .unwrap_or("");
    let expected = dashboard.secret.sign(PURPOSE, token);
    if given.is_empty() || !dashboard.secret.verify(PURPOSE, given, &expected) {
        return login_page(
            &dashboard,
            StatusCode::UNAUTHORIZED,
            Some("That is not the access token."),
        );
    }
    let cookie = cookie::set(SESSION_COOKIE, &expected, dashboard.cookie_path());
    let mut response = (StatusCode::SEE_OTHER, [(LOCATION, dashboard.link("/"))]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(SET_COOKIE, value);
    }
    response
}

fn login_page(dashboard: &Dashboard, status: StatusCode, error: Option<&str>) -> Response {
    let body = html! {
        section.login {
            h1 { "Sign in" }
            p { "This dashboard needs the access token it was started with." }
            @if let Some(error) = error {
                p.notice.bad { (error) }
            }
            form method="post" action=(dashboard.link("/login")) {
                label for="token" { "Access token" }
                input #token type="password" name="token" autocomplete="current-password" autofocus;
                button type="submit" { "Sign in" }
            }
        }
    };
    page::render(dashboard, status, Section::None, "Sign in", body)
}
