//! Cross-site request forgery: every POST carries a token bound to a cookie.
//!
//! A signed double submit: each browser gets a random nonce in an HttpOnly, `SameSite=Strict`
//! cookie, and every form a hidden `csrf` field holding the nonce signed with the router's
//! secret. A POST is refused unless the field is the signature of the cookie it came with, so
//! another site can neither read nor forge it. `Origin` and `Sec-Fetch-Site`, when the browser
//! sends them, must also say the request came from the dashboard's own pages.

use axum::extract::{Request, State};
use axum::http::header::{HOST, ORIGIN, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use crate::cookie;
use crate::dashboard::Dashboard;
use crate::secret::{hex, random_bytes};

/// The cookie holding the nonce.
const NONCE_COOKIE: &str = "pgq_csrf";
/// The form field holding the signed nonce.
pub(crate) const FIELD: &str = "csrf";
/// What the signature is for, so that no other signature of the secret passes as one.
const PURPOSE: &str = "csrf";

/// The token a page puts in its forms; handlers take it from the request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct CsrfToken(pub(crate) String);

/// Gives each request the token for its nonce, and a browser without a nonce a new one.
pub(crate) async fn issue(
    State(dashboard): State<Dashboard>,
    mut request: Request,
    next: Next,
) -> Response {
    host_from_authority(&mut request);
    let existing = cookie::get(request.headers(), NONCE_COOKIE)
        .filter(|nonce| nonce.len() == 64 && nonce.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned);
    let fresh = existing.is_none();
    let nonce = existing.unwrap_or_else(|| hex(&random_bytes()));
    let token = dashboard.secret.sign(PURPOSE, &nonce);
    request.extensions_mut().insert(CsrfToken(token));
    let mut response = next.run(request).await;
    if fresh {
        let value = cookie::set(NONCE_COOKIE, &nonce, dashboard.cookie_path());
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(SET_COOKIE, value);
        }
    }
    response
}

/// Over HTTP/2 the host travels in the request's `:authority`, not in a `Host` header: that
/// is the host an `Origin` is compared with.
fn host_from_authority(request: &mut Request) {
    if request.headers().contains_key(HOST) {
        return;
    }
    let authority = request.uri().authority().map(|a| a.as_str().to_owned());
    if let Some(host) = authority.and_then(|a| HeaderValue::from_str(&a).ok()) {
        request.headers_mut().insert(HOST, host);
    }
}

/// Why a POST was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The form's token is missing or does not match the cookie.
    Token,
    /// The browser says the request came from another site.
    CrossSite,
}

impl Refusal {
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::Token => {
                "refused: the form's CSRF token is missing or stale; reload the page and try again"
            }
            Refusal::CrossSite => "refused: the request came from another site",
        }
    }
}

/// Checks a POST: its `csrf` field against its cookie, and where it says it came from.
pub(crate) fn check(
    dashboard: &Dashboard,
    headers: &HeaderMap,
    fields: &[(String, String)],
) -> Result<(), Refusal> {
    same_origin(headers)?;
    let token = fields
        .iter()
        .find(|(name, _)| name == FIELD)
        .map(|(_, value)| value.as_str());
    let nonce = cookie::get(headers, NONCE_COOKIE);
    match (nonce, token) {
        (Some(nonce), Some(token)) if dashboard.secret.verify(PURPOSE, nonce, token) => Ok(()),
        _ => Err(Refusal::Token),
    }
}

/// Refuses a request the browser marks as coming from another site: `Sec-Fetch-Site` other
/// than `same-origin` or `none` (typed into the address bar), or an `Origin` whose host is
/// not the `Host` the request was sent to.
pub(crate) fn same_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return Err(Refusal::CrossSite);
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().map_err(|_| Refusal::CrossSite)?;
        let host = headers
            .get(HOST)
            .and_then(|host| host.to_str().ok())
            .ok_or(Refusal::CrossSite)?;
        let origin_host = origin
            .split_once("://")
            .map(|(_, rest)| rest)
            .ok_or(Refusal::CrossSite)?;
        if !origin_host.eq_ignore_ascii_case(host) {
            return Err(Refusal::CrossSite);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    use super::{Refusal, same_origin};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn requests_from_the_same_origin_pass() {
        assert_eq!(same_origin(&headers(&[])), Ok(()));
        let own = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(same_origin(&headers(&own)), Ok(()));
    }

    #[test]
    fn requests_from_another_site_are_refused() {
        let cross = [("sec-fetch-site", "cross-site")];
        assert_eq!(same_origin(&headers(&cross)), Err(Refusal::CrossSite));
        let other = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ];
        assert_eq!(same_origin(&headers(&other)), Err(Refusal::CrossSite));
        let opaque = [("host", "127.0.0.1:8080"), ("origin", "null")];
        assert_eq!(same_origin(&headers(&opaque)), Err(Refusal::CrossSite));
    }
}
